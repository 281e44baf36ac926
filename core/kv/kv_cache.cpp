// KvCache: the tier store, the sequence table and the telemetry, wired together.
#include "core/kv/kv_cache.h"

namespace kvc::kv {

Result<std::unique_ptr<KvCache>> KvCache::create(const KvCacheConfig& config, backend::Backend& be, ColdStore* cold) {
  std::unique_ptr<KvCache> c(new KvCache());
  c->telemetry_ = std::make_unique<KvTelemetry>(cold, config.layout.block_bytes, config.layout.block_tokens);
  auto store = TierStore::create(config, be, cold, *c->telemetry_);
  if (!store.ok()) return store.error();
  c->store_ = std::move(*store);
  c->seqs_ = std::make_unique<SequenceTable>(*c->store_);
  return c;
}

PrefixInfo KvCache::prefetch(std::span<const int32_t> tokens, SeqId for_seq) {
  if (for_seq == 0) return store_->prefetch(tokens);
  std::vector<MovedUp> moved;
  const PrefixInfo info = store_->prefetch(tokens, &moved);
  seqs_->note_moved_up(for_seq, moved);
  return info;
}

int64_t KvCache::stage_cold(std::span<const BlockKey> keys, std::span<const ColdRead> results,
                            std::span<const uint8_t> payloads, SeqId for_seq) {
  if (for_seq == 0) return store_->stage_cold(keys, results, payloads);
  std::vector<MovedUp> moved;
  const int64_t n = store_->stage_cold(keys, results, payloads, &moved);
  seqs_->note_moved_up(for_seq, moved);
  return n;
}

}  // namespace kvc::kv
