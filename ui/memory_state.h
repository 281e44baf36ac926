// What the Memory window draws of the paged KV cache: blocks, the prefix tree, shares and timelines.
//
// Blocks and tree nodes are core's plain kv::KvBlockView / kv::KvNodeView (core/kv/kv_view.h),
// copied whole from the engine's published KvView; the totals and timelines below are summed
// from its metrics and events in app/gui (MemoryFeed). ui/ never includes the engine. Tiers are
// indices 0 (T0 compute), 1 (T1 host RAM), 2 (T2 disk).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/kv/kv_events.h"
#include "core/kv/kv_view.h"

namespace kvc::ui {

constexpr int k_n_kv_tiers = 3;

// The tiers' names, written here only: "T0" and "T0 compute" (the block map, the tier bars, the
// remote server's tiers, the runner's TierView).
constexpr const char* k_tier_labels[k_n_kv_tiers] = {"T0", "T1", "T2"};
constexpr const char* k_tier_names[k_n_kv_tiers] = {"T0 compute", "T1 host RAM", "T2 disk"};
constexpr int clamp_tier(int tier) { return tier < 0 ? 0 : tier >= k_n_kv_tiers ? k_n_kv_tiers - 1 : tier; }
constexpr const char* tier_label(int tier) { return k_tier_labels[clamp_tier(tier)]; }
constexpr const char* tier_name(int tier) { return k_tier_names[clamp_tier(tier)]; }
// A block's or node's tier as an index (a listed block is always on a data tier).
constexpr int tier_of(kv::Tier t) { return kv::is_data_tier(t) ? kv::tier_index(t) : 0; }
// The first 16 hex digits of a key, as the views show it; empty for a null (private) key.
inline std::string short_key(const kv::BlockKey& key) {
  return key.is_null() ? std::string() : key.hex().substr(0, 16);
}

// A conversation's part of each tier (a block held by k conversations counts 1/k for each).
struct OwnerShare {
  int64_t owner = -1;
  std::array<size_t, k_n_kv_tiers> bytes{};
};

// One turn's TTFT split and where its prompt came from.
struct TurnPhases {
  int64_t request_id = -1;
  std::array<int64_t, k_n_kv_tiers> n_cached{};  // prompt tokens found on T0, T1, T2
  int64_t n_computed = 0;
  double lookup_ms = 0;
  double promote_ms = 0;
  double prefill_ms = 0;
  double first_decode_ms = 0;
  double ttft_ms() const { return lookup_ms + promote_ms + prefill_ms + first_decode_ms; }
};

// A sample of cumulative counters, taken at most once a second, for the over-time plots.
struct CounterSample {
  double t_s = 0;               // seconds since the app started sampling
  int64_t n_evictions = 0;      // cumulative, all tiers
  int64_t n_wasted_tokens = 0;  // internal fragmentation now
};

// Directions of the bandwidth plot.
enum class TierMove { t0_to_t1, t1_to_t0, to_t2, t2_to_t0 };
constexpr int k_n_tier_moves = 4;

// One KV group's picture (docs/ARCHITECTURE.md §3.9), or the whole cache's for a model of one
// group. A model of several groups: this is group 0's (the global layers) and more_groups holds
// the others (group 1: the local layers of window W), each drawn with its own block map and
// tier bars. The totals (used_bytes, capacity_bytes, used_blocks) add every group up; group_*
// are this group's own.
struct KvPicture {
  bool valid = false;  // false until the cache has been described once
  int32_t group = 0;
  int32_t n_layers = 0;
  int64_t window = 0;  // 0: its layers attend to every position
  std::array<size_t, k_n_kv_tiers> group_used_bytes{};
  std::array<size_t, k_n_kv_tiers> group_capacity_bytes{};
  std::array<int64_t, k_n_kv_tiers> group_used_blocks{};
  std::vector<KvPicture> more_groups;  // groups 1.. (empty for most models)
  int64_t block_tokens = 0;
  size_t block_bytes = 0;
  std::array<size_t, k_n_kv_tiers> used_bytes{};
  std::array<size_t, k_n_kv_tiers> capacity_bytes{};
  std::array<int64_t, k_n_kv_tiers> used_blocks{};       // as each tier counts them (T2: the disk store's)
  std::array<int64_t, k_n_kv_tiers> n_blocks_on_tier{};  // where blocks live, over all blocks
  int64_t n_blocks_on_disk = 0;                          // blocks with a copy on T2 (the T2 row of the block map)
  uint64_t tick = 0;                                     // the cache's clock: a block's age is tick - last_use
  std::vector<kv::KvBlockView> blocks;  // index blocks in tree order, then private blocks (KvView::blocks)
  int64_t n_blocks_left_out = 0;
  std::vector<kv::KvNodeView> nodes;  // KvView::nodes: pre-order, first_block indexes blocks
  int64_t n_nodes_left_out = 0;
  int64_t n_shared_blocks = 0;
  std::vector<OwnerShare> shares;  // one per conversation seen this run
  // Cumulative counters.
  std::array<int64_t, k_n_kv_tiers> n_hit_blocks{};
  std::array<int64_t, k_n_kv_tiers> n_evictions{};
  int64_t n_promotions = 0;
  int64_t n_demotions = 0;
  int64_t n_copies_on_write = 0;
  int64_t n_wasted_tokens = 0;
  size_t wasted_bytes = 0;

  // Cache ticks since the block's last use (0: in use now).
  uint64_t age(const kv::KvBlockView& b) const { return tick > b.last_use ? tick - b.last_use : 0; }
};

// What a remote server reports of its KV cache (its /metrics, Prometheus text) and what its
// answers' usage said. A value of -1 is "not reported". engine names whose metrics were found:
// "kvchat", "vLLM", "SGLang", "llama.cpp"; empty when none.
struct RemoteCacheView {
  bool active = false;  // the app chats through a remote server
  std::string url;
  std::string model;
  std::string engine;
  std::string metrics_error;  // /metrics could not be read (404, not Prometheus text, ...)
  int64_t n_metrics_reads = 0;
  int64_t n_samples = 0;        // samples on the last page read
  double kv_usage = -1;         // fraction of the server's KV cache in use, [0, 1]
  double prefix_hit_rate = -1;  // [0, 1], as reported or hits / queries
  double prefix_queries = -1;   // cumulative prompt tokens looked up in the prefix cache
  double prefix_hits = -1;      // of them, found
  double kv_used_tokens = -1;
  double kv_capacity_tokens = -1;
  double n_running = -1;  // requests being generated now
  double n_waiting = -1;
  std::array<double, k_n_kv_tiers> tier_used_bytes{-1, -1, -1};  // kvchat: T0, T1, T2
  std::array<double, k_n_kv_tiers> tier_capacity_bytes{-1, -1, -1};
  double prompt_tokens_total = -1;  // kvchat: cumulative prompt tokens and the cached part
  double cached_tokens_total = -1;
  // Per answer (usage.prompt_tokens_details.cached_tokens): the last answer's, -1 when not returned.
  int64_t last_prompt_tokens = -1;
  int64_t last_cached_tokens = -1;
  int64_t n_answers = 0;
  int64_t n_answers_with_cached = 0;  // answers whose usage carried cached_tokens
  // True when anything above says something about the cache (otherwise the view says so plainly).
  bool has_cache_data() const {
    return kv_usage >= 0 || prefix_hit_rate >= 0 || prefix_hits >= 0 || kv_used_tokens >= 0 ||
           tier_used_bytes[0] >= 0 || cached_tokens_total >= 0 || n_answers_with_cached > 0;
  }
};

struct KvTimelines {
  std::vector<TurnPhases> turns;  // oldest first
  // Bytes per second for each TierMove over the last n seconds, oldest first (the last still filling).
  std::array<std::vector<float>, k_n_tier_moves> bytes_per_s;
  std::vector<CounterSample> samples;  // oldest first, bounded
  uint64_t n_events = 0;               // KV events read so far
  uint64_t n_events_lost = 0;          // overwritten before they were read
};

// One KV group of the loaded model as the Memory window lists it (docs/ARCHITECTURE.md §3.9).
struct KvGroupLine {
  std::string kind;  // kv::kv_group_kind_name: "full", "window", "shared", ...
  int64_t n_layers = 0;
  int64_t window = 0;          // kind window: the positions its layers attend to
  int32_t source = -1;         // kind shared: the group whose K/V its layers read
  double bytes_per_token = 0;  // 0: it stores nothing of its own
  // kind recurrent: one sequence's state, of which every block keeps a snapshot (bytes_per_token
  // is then that snapshot over the block's positions).
  double state_bytes = 0;
};

}  // namespace kvc::ui
