// Content-addressed payload files of the cold KV tier: one file per block, named by its key.
//
//   DIR/kv_blocks/ab/ab12...ef.kvb     (fan-out by the first two hex digits of the key)
//
// A block key names its content (same key => same KV), so naming by key is naming by content.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <unordered_set>

#include "core/kv/block_key.h"
#include "core/util/result.h"

namespace kvc::storage {

class PayloadFiles {
 public:
  explicit PayloadFiles(std::filesystem::path root) : root_(std::move(root)) {}

  std::filesystem::path path_of(const kv::BlockKey& key) const;
  // Writes to a temporary name and renames, so a reader never sees half a file under the final
  // name (a crash can still leave a short file after a power loss: readers check the size).
  Status write(const kv::BlockKey& key, std::span<const uint8_t> payload);
  // Reads exactly out.size() bytes; false when the file is missing or has another size.
  bool read(const kv::BlockKey& key, std::span<uint8_t> out) const;
  void remove(const kv::BlockKey& key) const;
  // Deletes files that `keep` does not hold (left by a crash between write and commit).
  int64_t remove_orphans(const std::unordered_set<kv::BlockKey, kv::BlockKeyHash>& keep) const;

  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
};

}  // namespace kvc::storage
