// AnswerStore: the exact token ids of generated answers, found again by the text a client resends.
//
// An HTTP client resends a conversation as text. Tokenizing an earlier answer afresh can give
// other ids than the ones the engine sampled ("▁hel" "lo" vs "▁hello"), and then the KV cache,
// keyed by ids, misses from that answer on. The server remembers each answer under
//
//   key = XXH3-128(answer text, seeded with XXH3-128 of the prompt ids that preceded it)
//
// so an answer maps back to its ids only after the same prompt: the ids the engine produced
// in that very context. A bounded LRU in memory (entries and total ids), written through to
// SQLite when a file is given, so that answers survive a restart of the server.
#pragma once

#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/kv/block_key.h"
#include "core/util/result.h"
#include "storage/database.h"

namespace kvc::storage {

struct AnswerStoreOptions {
  int64_t max_answers = 8192;             // entries kept (least recently used go first)
  int64_t max_tokens = int64_t{1} << 22;  // ids kept over all entries (16 MiB)
};

// Thread-safe. Invariants (check_invariants()): the LRU list and the map hold the same keys;
// n_tokens_ is the sum of their ids' sizes; both bounds hold after every call.
class AnswerStore {
 public:
  // `file` empty: in memory only. A file that cannot be opened is an error (the caller may
  // then run in memory, saying so).
  static Result<std::unique_ptr<AnswerStore>> open(const std::filesystem::path& file, const AnswerStoreOptions& o = {});
  ~AnswerStore();
  AnswerStore(const AnswerStore&) = delete;
  AnswerStore& operator=(const AnswerStore&) = delete;

  // The key of an answer `text` that followed the prompt `context`.
  static kv::BlockKey key_of(std::span<const int32_t> context, std::string_view text);

  // Remembers (or refreshes) ids under key. An answer longer than max_tokens is not kept.
  void remember(const kv::BlockKey& key, std::span<const int32_t> ids);
  // The ids remembered under key (and marks them recently used), or nothing.
  std::optional<std::vector<int32_t>> recall(const kv::BlockKey& key);

  int64_t size() const;
  bool persistent() const { return db_.has_value(); }
  // Why the last write to the file failed ("" when none did); the store keeps working in memory.
  std::string warning() const;
  Status check_invariants() const;

 private:
  struct Entry {
    kv::BlockKey key;
    std::vector<int32_t> ids;
  };
  using Lru = std::list<Entry>;  // most recently used first

  AnswerStore(const AnswerStoreOptions& o) : options_(o) {}
  Status load();
  void evict_locked();
  void write_locked(const Entry& e);
  void note_write_error(const Error& e);

  const AnswerStoreOptions options_;
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<kv::BlockKey, Lru::iterator, kv::BlockKeyHash> map_;
  int64_t n_tokens_ = 0;
  uint64_t clock_ = 0;  // last_use of the newest entry
  std::optional<Database> db_;
  std::string warning_;
};

}  // namespace kvc::storage
