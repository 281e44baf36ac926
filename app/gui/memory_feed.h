// MemoryFeed: turns a KvView and the KV event stream into the Memory window's ui structs.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "core/kv/kv_events.h"
#include "core/kv/kv_metrics.h"
#include "core/kv/kv_view.h"
#include "ui/app_state.h"

namespace kvc::app {

// Not thread-safe: one thread (the controller's worker) feeds it; the event log it reads is
// safe to read from any thread.
class MemoryFeed {
 public:
  explicit MemoryFeed(const kv::KvEventLog& log) : log_(log) {}

  // out.kv from v; out.timelines from the events that arrived since the last call.
  void fill(const kv::KvView& v, ui::MemoryState& out);
  // Every event still held, oldest first (for the exports).
  std::vector<kv::KvEvent> all_events() const;

 private:
  void fill_picture(const kv::KvView& v, ui::KvPicture& p);
  void fill_group(const kv::KvView& v, ui::KvPicture& p);  // one KV group's part (no counter samples)
  void read_events(ui::KvTimelines& out);

  const kv::KvEventLog& log_;
  uint64_t cursor_ = 0;
  uint64_t n_read_ = 0, n_lost_ = 0;
  kv::TurnTimeline timeline_{256};
  kv::BandwidthMeter bandwidth_;
  std::vector<kv::KvEvent> read_buf_;
  int64_t t_start_us_ = 0;  // the first sample's time
  int64_t last_sample_us_ = 0;
  std::vector<ui::CounterSample> samples_;  // (k_max_samples) counter history
};

}  // namespace kvc::app
