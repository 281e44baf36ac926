// Block keys of token streams; the dead-minus-live set for releasing a deleted conversation.
#include "core/kv/stream_keys.h"

#include <unordered_set>

#include "core/util/assert.h"

namespace kvc::kv {

std::vector<BlockKey> stream_block_keys(const BlockKey& fingerprint, int32_t block_tokens,
                                        std::span<const int32_t> tokens) {
  KVC_ASSERT(block_tokens > 0);
  const auto B = static_cast<size_t>(block_tokens);
  std::vector<BlockKey> keys;
  keys.reserve(tokens.size() / B);
  BlockKey parent = fingerprint;
  for (size_t begin = 0; begin + B <= tokens.size(); begin += B) {
    parent = chain_key(parent, tokens.subspan(begin, B));
    keys.push_back(parent);
  }
  return keys;
}

std::vector<BlockKey> unshared_block_keys(const BlockKey& fingerprint, int32_t block_tokens,
                                          std::span<const std::vector<int32_t>> dead,
                                          std::span<const std::vector<int32_t>> live) {
  KVC_ASSERT(block_tokens > 0);
  std::unordered_set<BlockKey, BlockKeyHash> doomed;
  std::vector<BlockKey> order;  // first-seen order, for a deterministic result
  for (const auto& stream : dead) {
    for (const BlockKey& k : stream_block_keys(fingerprint, block_tokens, stream)) {
      if (doomed.insert(k).second) order.push_back(k);
    }
  }
  // A live stream can reach a dead key only through dead keys before it (each key chains its
  // parent's), so its hashing stops at the first block that is not doomed.
  const auto B = static_cast<size_t>(block_tokens);
  std::unordered_set<BlockKey, BlockKeyHash> kept;
  for (const auto& stream : live) {
    BlockKey parent = fingerprint;
    for (size_t begin = 0; begin + B <= stream.size(); begin += B) {
      parent = chain_key(parent, std::span(stream).subspan(begin, B));
      if (!doomed.count(parent)) break;
      kept.insert(parent);
    }
  }
  std::vector<BlockKey> out;
  for (const BlockKey& k : order) {
    if (!kept.count(k)) out.push_back(k);
  }
  return out;
}

}  // namespace kvc::kv
