// The block keys of conversations' token streams, and which of them only deleted streams reach.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/kv/block_key.h"

namespace kvc::kv {

// Keys of the full blocks of `tokens`, in order, chained from `fingerprint` as the cache
// chains them (block_key.h); a partial last block has no key.
std::vector<BlockKey> stream_block_keys(const BlockKey& fingerprint, int32_t block_tokens,
                                        std::span<const int32_t> tokens);

// The keys reached by some stream of `dead` and by no stream of `live`: what a deleted
// conversation (every branch of it) used alone. A block shared with a remaining conversation
// (a common system prompt) is never among them. Each key appears once.
//
//   dead:  | sys0 | sys1 | a2 | a3 |        live:  | sys0 | sys1 | b2 |
//   result:               a2   a3
std::vector<BlockKey> unshared_block_keys(const BlockKey& fingerprint, int32_t block_tokens,
                                          std::span<const std::vector<int32_t>> dead,
                                          std::span<const std::vector<int32_t>> live);

}  // namespace kvc::kv
