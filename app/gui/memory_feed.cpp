// MemoryFeed: the cache's KvView and its event stream, converted to the Memory window's structs.
#include <algorithm>

#include "app/gui/memory_feed.h"

namespace kvc::app {

namespace {

constexpr size_t k_max_samples = 600;  // counter history: 10 minutes at 1 per second
constexpr int64_t k_sample_interval_us = 1'000'000;

}  // namespace

void MemoryFeed::fill(const kv::KvView& v, ui::MemoryState& out) {
  fill_picture(v, out.kv);
  read_events(out.timelines);
}

void MemoryFeed::fill_picture(const kv::KvView& v, ui::KvPicture& p) {
  fill_group(v, p);
  p.more_groups.resize(v.more_groups.size());
  for (size_t g = 0; g < v.more_groups.size(); ++g) fill_group(v.more_groups[g], p.more_groups[g]);

  const kv::KvCounters& k = v.metrics.counters;
  const int64_t now = kv::now_us();
  if (t_start_us_ == 0) t_start_us_ = now;
  if (samples_.empty() || now - last_sample_us_ >= k_sample_interval_us) {
    last_sample_us_ = now;
    if (samples_.size() == k_max_samples) samples_.erase(samples_.begin());
    samples_.push_back(ui::CounterSample{static_cast<double>(now - t_start_us_) / 1e6,
                                         k.n_evictions[0] + k.n_evictions[1] + k.n_evictions[2], p.n_wasted_tokens});
  }
}

void MemoryFeed::fill_group(const kv::KvView& v, ui::KvPicture& p) {
  p.valid = true;
  p.group = v.group;
  p.n_layers = v.n_layers;
  p.window = v.window;
  for (size_t t = 0; t < kv::k_n_data_tiers; ++t) {
    p.group_used_bytes[t] = static_cast<size_t>(v.group_tiers[t].used_bytes);
    p.group_capacity_bytes[t] = static_cast<size_t>(v.group_tiers[t].capacity_bytes);
    p.group_used_blocks[t] = v.group_tiers[t].used_blocks;
  }
  p.block_tokens = v.metrics.block_size;
  p.block_bytes = static_cast<size_t>(v.block_bytes);
  for (size_t t = 0; t < kv::k_n_data_tiers; ++t) {
    p.used_bytes[t] = static_cast<size_t>(v.metrics.tiers[t].used_bytes);
    p.capacity_bytes[t] = static_cast<size_t>(v.metrics.tiers[t].capacity_bytes);
    p.used_blocks[t] = v.metrics.tiers[t].used_blocks;
    p.n_blocks_on_tier[t] = v.n_blocks_on_tier[t];
  }
  p.tick = v.tick;
  p.blocks = v.blocks;  // kv's plain views, as the cache described them
  p.n_blocks_left_out = v.n_blocks_left_out;
  p.n_blocks_on_disk = v.n_blocks_on_cold;
  p.nodes = v.nodes;
  p.n_nodes_left_out = v.n_nodes_left_out;
  p.n_shared_blocks = v.n_shared_blocks;
  p.shares.clear();
  for (const kv::SequenceShare& s : v.metrics.shares) {
    ui::OwnerShare u;
    u.owner = s.seq_id;
    for (size_t t = 0; t < kv::k_n_data_tiers; ++t) u.bytes[t] = static_cast<size_t>(s.bytes[t]);
    p.shares.push_back(u);
  }
  const kv::KvCounters& k = v.metrics.counters;
  p.n_promotions = p.n_demotions = 0;
  for (size_t t = 0; t < kv::k_n_data_tiers; ++t) {
    p.n_hit_blocks[t] = k.n_hit_blocks[t];
    p.n_evictions[t] = k.n_evictions[t];
    for (size_t u = 0; u < kv::k_n_data_tiers; ++u) {
      p.n_promotions += k.n_promotions[t][u];
      p.n_demotions += k.n_demotions[t][u];
    }
  }
  p.n_copies_on_write = k.n_copies_on_write;
  p.n_wasted_tokens = v.metrics.fragmentation.n_wasted_tokens;
  p.wasted_bytes = static_cast<size_t>(v.metrics.fragmentation.wasted_bytes);
}

void MemoryFeed::read_events(ui::KvTimelines& out) {
  read_buf_.clear();
  const kv::EventReadResult r = log_.read_since(cursor_, read_buf_);
  cursor_ = r.cursor;
  n_read_ += r.n_read;
  n_lost_ += r.n_lost;
  timeline_.add(read_buf_);
  bandwidth_.add(read_buf_);

  out.turns.clear();
  for (const kv::RequestMetrics& m : timeline_.turns()) {
    ui::TurnPhases t;
    t.request_id = m.request_id;
    // The tier each block was found on, as the lookup recorded it; the sequence's own tail is on T0.
    for (size_t i = 0; i < kv::k_n_data_tiers; ++i) t.n_cached[i] = m.n_cached_tokens[i];
    t.n_cached[0] += m.n_tail_tokens();
    t.n_computed = m.n_computed_tokens;
    t.lookup_ms = m.lookup_ms();
    t.promote_ms = m.promote_ms();
    t.prefill_ms = m.prefill_ms();
    t.first_decode_ms = m.first_decode_ms();
    out.turns.push_back(t);
  }
  const int64_t now = kv::now_us();
  struct Move {
    ui::TierMove move;
    kv::Tier from, to;
  };
  const Move moves[] = {{ui::TierMove::t0_to_t1, kv::Tier::t0, kv::Tier::t1},
                        {ui::TierMove::t1_to_t0, kv::Tier::t1, kv::Tier::t0},
                        {ui::TierMove::to_t2, kv::Tier::t0, kv::Tier::t2},
                        {ui::TierMove::t2_to_t0, kv::Tier::t2, kv::Tier::t0}};
  std::vector<float> extra(bandwidth_.n_buckets());
  for (const Move& m : moves) {
    std::vector<float>& series = out.bytes_per_s[static_cast<size_t>(m.move)];
    series.assign(bandwidth_.n_buckets(), 0.0f);
    bandwidth_.series(m.from, m.to, now, series);
    if (m.move == ui::TierMove::to_t2) {  // T1 -> T2 demotions count with T0 -> T2 write-behind
      bandwidth_.series(kv::Tier::t1, kv::Tier::t2, now, extra);
      for (size_t i = 0; i < series.size(); ++i) series[i] += extra[i];
    }
  }
  out.samples = samples_;
  out.n_events = n_read_;
  out.n_events_lost = n_lost_;
}

std::vector<kv::KvEvent> MemoryFeed::all_events() const {
  std::vector<kv::KvEvent> all;
  log_.read_since(log_.oldest(), all);
  return all;
}

}  // namespace kvc::app
