// The Memory window's view logic: block map rows and grouping, owner colours, share segments, turn buckets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "ui/memory_layout.h"

using namespace kvc::ui;

namespace {

kvc::kv::KvBlockView cell(int tier, int64_t owner, int64_t position) {
  kvc::kv::KvBlockView c;
  c.tier = static_cast<kvc::kv::Tier>(tier);
  c.owner_id = owner;
  c.n_owners = owner >= 0 ? 1 : 0;
  c.position = position;
  return c;
}

}  // namespace

TEST_CASE("block map: cells per row fill the width, at least one", "[ui]") {
  // 10 px cells with 2 px gaps: n cells take 12 n - 2 px.
  CHECK(block_map_cells_per_row(118.0f, 10.0f, 2.0f) == 10);
  CHECK(block_map_cells_per_row(117.9f, 10.0f, 2.0f) == 9);
  CHECK(block_map_cells_per_row(10.0f, 10.0f, 2.0f) == 1);
  CHECK(block_map_cells_per_row(3.0f, 10.0f, 2.0f) == 1);
  CHECK(block_map_cells_per_row(500.0f, 0.0f, 0.0f) == 1);
}

TEST_CASE("block map: grouped by tier, ordered by owner then position, rows rounded up", "[ui]") {
  const std::vector<kvc::kv::KvBlockView> blocks = {cell(1, 5, 32), cell(0, 7, 0), cell(0, 3, 16), cell(2, -1, 0),
                                                    cell(0, 3, 0),  cell(1, 5, 0), cell(0, 7, 16)};
  const BlockMapLayout l = layout_block_map(blocks, 12.0f * 3 - 2, 10.0f, 2.0f);  // 3 per row
  REQUIRE(l.cells_per_row == 3);
  CHECK(l.groups[0].cells == std::vector<size_t>{4, 2, 1, 6});  // owner 3 (pos 0, 16), owner 7 (0, 16)
  CHECK(l.groups[0].n_rows == 2);
  CHECK(l.groups[1].cells == std::vector<size_t>{5, 0});
  CHECK(l.groups[1].n_rows == 1);
  CHECK(l.groups[2].cells == std::vector<size_t>{3});
  size_t n = 0;
  for (const auto& g : l.groups) n += g.cells.size();
  CHECK(n == blocks.size());  // every block is drawn exactly once

  // A block written behind to disk shows on its tier and, as a copy, on T2.
  std::vector<kvc::kv::KvBlockView> with_copy = blocks;
  with_copy[1].on_cold = true;
  const BlockMapLayout l2 = layout_block_map(with_copy, 34.0f, 10.0f, 2.0f);
  CHECK(l2.groups[0].cells == l.groups[0].cells);
  CHECK(l2.groups[2].cells == std::vector<size_t>{3, 1});  // owner -1 first, then owner 7
}

TEST_CASE("owner colours: stable per id, distinct for nearby ids, grey for none", "[ui]") {
  CHECK(owner_color(4) == owner_color(4));
  std::set<uint32_t> seen;
  for (int64_t id = 20; id < 20 + k_owner_palette_size; ++id) seen.insert(owner_color(id));
  CHECK(seen.size() == static_cast<size_t>(k_owner_palette_size));
  CHECK(seen.count(owner_color(-1)) == 0);
  CHECK((owner_color(3) >> 24) == 0xFF);
  // Shading scales RGB and keeps alpha.
  const uint32_t c = owner_color(0);
  const uint32_t half = shade_color(c, 0.5f);
  CHECK((half >> 24) == 0xFF);
  CHECK((half & 0xFF) == static_cast<uint32_t>(std::lround((c & 0xFF) * 0.5)));
  CHECK(shade_color(c, 1.0f) == c);
}

TEST_CASE("recency shade: in use is brightest, the oldest the dimmest, monotone between", "[ui]") {
  CHECK(recency_shade(0, 100) == 1.0f);
  CHECK(recency_shade(100, 100) == Approx(k_min_recency_shade));
  CHECK(recency_shade(500, 100) == Approx(k_min_recency_shade));
  CHECK(recency_shade(10, 100) > recency_shade(50, 100));
  CHECK(recency_shade(7, 0) == 1.0f);
}

TEST_CASE("share segments: stacked in order, summing to used, unheld rest last", "[ui]") {
  std::vector<OwnerShare> shares(3);
  shares[0].owner = 1;
  shares[0].bytes = {300, 10, 0};
  shares[1].owner = 2;
  shares[1].bytes = {0, 0, 0};  // nothing on any tier: no segment
  shares[2].owner = 4;
  shares[2].bytes = {150, 0, 0};
  const auto s = share_segments(shares, 0, 600, 1000);
  REQUIRE(s.size() == 3);
  CHECK(s[0].owner == 1);
  CHECK(s[1].owner == 4);
  CHECK(s[2].owner == -1);
  CHECK(s[2].bytes == 150);
  size_t sum = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    sum += s[i].bytes;
    if (i > 0) CHECK(s[i].begin == s[i - 1].end);
  }
  CHECK(sum == 600);
  CHECK(s.front().begin == 0.0);
  CHECK(s.back().end == Approx(0.6));

  // Shares that overshoot used (a producer bug or a stale sample) are clipped, never drawn past it.
  const auto clipped = share_segments(shares, 0, 400, 1000);
  size_t sum2 = 0;
  for (const auto& g : clipped) sum2 += g.bytes;
  CHECK(sum2 == 400);
  CHECK(clipped.back().owner == 4);
  CHECK(share_segments(shares, 2, 0, 1000).empty());
}

TEST_CASE("turn buckets: at most max bars, totals kept, the newest bars full", "[ui]") {
  std::vector<TurnPhases> turns(23);
  int64_t want_cached = 0, want_computed = 0;
  double want_lookup = 0;
  for (size_t i = 0; i < turns.size(); ++i) {
    turns[i].request_id = static_cast<int64_t>(i) + 1;
    turns[i].n_cached = {static_cast<int64_t>(i), 2, 1};
    turns[i].n_computed = 10 + static_cast<int64_t>(i);
    turns[i].lookup_ms = static_cast<double>(i);
    want_cached += static_cast<int64_t>(i) + 3;
    want_computed += turns[i].n_computed;
    want_lookup += turns[i].lookup_ms;
  }
  const auto bars = bucket_turns(turns, 10);  // 3 per bar: 8 bars, the oldest holding 2
  REQUIRE(bars.size() == 8);
  CHECK(bars[0].n_turns == 2);
  int64_t cached = 0, computed = 0;
  double lookup = 0;
  size_t next = 0;
  for (const auto& b : bars) {
    CHECK(b.first_turn == next);
    next += b.n_turns;
    cached += b.sum.n_cached[0] + b.sum.n_cached[1] + b.sum.n_cached[2];
    computed += b.sum.n_computed;
    lookup += b.sum.lookup_ms * static_cast<double>(b.n_turns);
  }
  CHECK(next == turns.size());
  CHECK(cached == want_cached);
  CHECK(computed == want_computed);
  CHECK(lookup == Approx(want_lookup));
  CHECK(bars.back().n_turns == 3);
  CHECK(bars.back().sum.request_id == 23);

  // Fewer turns than bars: one bar per turn, unchanged.
  const auto one_each = bucket_turns(std::span<const TurnPhases>(turns).first(4), 10);
  REQUIRE(one_each.size() == 4);
  CHECK(one_each[2].sum.n_computed == turns[2].n_computed);
  CHECK(one_each[2].sum.lookup_ms == turns[2].lookup_ms);
  CHECK(bucket_turns({}, 10).empty());
}

TEST_CASE("block map cell: the largest that fits the height, the minimum when none does", "[ui]") {
  // 100 px wide, gaps a fifth of a cell, 4 px above each group.
  const std::vector<size_t> few = {3, 0, 2};
  const BlockMapCell big = fit_block_map_cell(few, 100.0f, 200.0f, 8.0f, 24.0f, 0.2f, 4.0f);
  CHECK(big.cell == 24.0f);  // two groups of one row each fit easily
  CHECK(big.gap == 5.0f);

  // 40 cells in 100 px: at cell c (gap round(c / 5)) the map needs 4 + rows * pitch px.
  // Cross-check the chosen size against that count by hand, and that one pixel more would not fit.
  const std::vector<size_t> many = {40, 0, 0};
  const BlockMapCell fit = fit_block_map_cell(many, 100.0f, 80.0f, 6.0f, 30.0f, 0.2f, 4.0f);
  auto need = [](float cell) {
    const float gap = std::max(1.0f, std::round(cell * 0.2f));
    const int per_row = static_cast<int>(std::floor((100.0f + gap) / (cell + gap)));
    const int rows = (40 + per_row - 1) / per_row;
    return 4.0f + static_cast<float>(rows) * (cell + gap);
  };
  CHECK(need(fit.cell) <= 80.0f);
  CHECK(need(fit.cell + 1.0f) > 80.0f);
  CHECK(fit.cell > 6.0f);

  // Far too many for the height: the minimum, whole pixels, a gap of at least 1 px.
  const std::vector<size_t> lots = {5000, 5000, 5000};
  const BlockMapCell small = fit_block_map_cell(lots, 100.0f, 80.0f, 6.4f, 30.0f, 0.1f, 4.0f);
  CHECK(small.cell == 6.0f);
  CHECK(small.gap == 1.0f);
}

TEST_CASE("flow lines: items wrap when the next would pass the width, at least one per line", "[ui]") {
  const std::vector<float> w = {30, 30, 30, 50};
  // 30 + 5 + 30 = 65 fits 70; the third would end at 100.
  CHECK(flow_lines(w, 5.0f, 70.0f) == std::vector<int>{0, 0, 1, 2});
  CHECK(n_flow_lines(w, 5.0f, 70.0f) == 3);
  CHECK(flow_lines(w, 5.0f, 1000.0f) == std::vector<int>{0, 0, 0, 0});
  // An item wider than the line gets a line of its own rather than none.
  CHECK(flow_lines(w, 5.0f, 10.0f) == std::vector<int>{0, 1, 2, 3});
  CHECK(n_flow_lines({}, 5.0f, 10.0f) == 0);
}

TEST_CASE("timeline grid: fills the height, two columns when one is too short", "[ui]") {
  // Tall: one column, each chart the height left after 4 headers and pads, capped at max.
  const TimelineGrid tall = timeline_grid(4, 600.0f, 800.0f, {40.0f, 40.0f}, 10.0f, 60.0f, 140.0f, 250.0f);
  CHECK(tall.n_cols == 1);
  CHECK(tall.chart_h == 140.0f);
  const TimelineGrid fits = timeline_grid(4, 600.0f, 520.0f, {40.0f, 40.0f}, 10.0f, 60.0f, 140.0f, 250.0f);
  CHECK(fits.n_cols == 1);
  CHECK(fits.chart_h == Approx(80.0f));  // 4 * (40 + 80 + 10) = 520
  CHECK(4.0f * (40.0f + fits.chart_h + 10.0f) <= 520.0f + 1e-3f);

  // Short and wide: 2 x 2, and the two rows fill the height exactly.
  const TimelineGrid wide = timeline_grid(4, 600.0f, 300.0f, {40.0f, 40.0f}, 10.0f, 60.0f, 140.0f, 250.0f);
  CHECK(wide.n_cols == 2);
  CHECK(wide.chart_h == Approx(100.0f));  // 2 * (40 + 100 + 10) = 300
  // Legends that wrap to a second line in the narrower columns take it from the plots.
  const TimelineGrid wrapped = timeline_grid(4, 600.0f, 300.0f, {40.0f, 60.0f}, 10.0f, 60.0f, 140.0f, 250.0f);
  CHECK(wrapped.n_cols == 2);
  CHECK(wrapped.chart_h == Approx(80.0f));

  // Short and narrow: one column at the minimum (the panel scrolls).
  const TimelineGrid narrow = timeline_grid(4, 400.0f, 300.0f, {40.0f, 40.0f}, 10.0f, 60.0f, 140.0f, 250.0f);
  CHECK(narrow.n_cols == 1);
  CHECK(narrow.chart_h == 60.0f);
  CHECK(timeline_grid(0, 400.0f, 300.0f, {40.0f, 40.0f}, 10.0f, 60.0f, 140.0f, 250.0f).n_cols == 1);
}

TEST_CASE("first fitting: the most detailed variant that fits, else the shortest", "[ui]") {
  const std::vector<float> w = {300, 200, 90};
  CHECK(first_fitting(w, 400.0f) == 0);
  CHECK(first_fitting(w, 250.0f) == 1);
  CHECK(first_fitting(w, 90.0f) == 2);
  CHECK(first_fitting(w, 10.0f) == 2);
  CHECK(first_fitting({}, 10.0f) == 0);
}

TEST_CASE("tier names: one list for labels and names, tiers outside it clamped", "[ui]") {
  CHECK(std::string(tier_label(0)) == "T0");
  CHECK(std::string(tier_name(1)) == "T1 host RAM");
  CHECK(std::string(tier_name(7)) == "T2 disk");
  CHECK(tier_of(kvc::kv::Tier::t2) == 2);
  CHECK(tier_of(kvc::kv::Tier::none) == 0);
  KvPicture p;
  p.tick = 10;
  kvc::kv::KvBlockView b;
  b.last_use = 4;
  CHECK(p.age(b) == 6);
  b.last_use = 12;  // used after the picture's tick: in use now
  CHECK(p.age(b) == 0);
  CHECK(short_key(kvc::kv::BlockKey{}).empty());
}

TEST_CASE("KV groups: headings name the layers and the window, and every group is listed, group 0 first", "[ui]") {
  KvPicture kv;
  kv.n_layers = 4;
  KvPicture local;
  local.group = 1;
  local.n_layers = 22;
  local.window = 512;
  kv.more_groups.push_back(local);
  CHECK(kv_group_label(kv, false) == "global layers (4)");
  CHECK(kv_group_label(kv.more_groups[0], false) == "local layers (22), window 512");
  KvPicture one;
  one.n_layers = 5;
  CHECK(kv_group_label(one, true) == "all layers (5)");
  const auto groups = kv_groups(kv);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0] == &kv);
  CHECK(groups[1]->window == 512);
  CHECK(kv_groups(one).size() == 1);
}

TEST_CASE("KV groups: blocks behind each conversation's window are counted apart, on T0 or not", "[ui]") {
  // Conversation 0 holds blocks [0, 160) of 16 tokens, conversation 1 [0, 48); window 32.
  std::vector<kvc::kv::KvBlockView> blocks;
  for (int64_t p = 0; p < 160; p += 16) blocks.push_back(cell(p < 64 ? 1 : 0, 0, p));
  for (int64_t p = 0; p < 48; p += 16) blocks.push_back(cell(0, 1, p));
  for (auto& b : blocks) b.n_tokens = 16;
  std::vector<uint8_t> behind;
  const WindowCounts c = window_counts(blocks, 32, &behind);
  // Conversation 0: blocks ending at or before 128 are behind (8 of 10), 4 of them on T0.
  // Conversation 1: the block ending at 16 is behind (end 48 - 32).
  CHECK(c.n_behind == 9);
  CHECK(c.n_in_window == 4);
  CHECK(c.n_behind_on_t0 == 5);
  CHECK(c.max_end == 160);
  CHECK(c.n_t0_tokens == 16 * (6 + 3));
  REQUIRE(behind.size() == blocks.size());
  CHECK(behind[7] == 1);   // [112, 128)
  CHECK(behind[8] == 0);   // [128, 144)
  CHECK(behind[10] == 1);  // conversation 1's [0, 16)
  CHECK(behind[11] == 0);
  // A key without data (the local group's chain behind its checkpoints) is no block: no cell either.
  std::vector<kvc::kv::KvBlockView> with_key = blocks;
  with_key.push_back(cell(3, 0, 160));  // Tier::none
  with_key.back().n_tokens = 16;
  const WindowCounts k = window_counts(with_key, 32);
  CHECK(k.n_behind == c.n_behind + 1);  // conversation 0 now ends at 176: [128, 144) falls behind
  CHECK(k.n_in_window == c.n_in_window - 1);
  CHECK(k.max_end == 176);
  const BlockMapLayout l = layout_block_map(with_key, 100.0f, 10.0f, 0.0f);
  CHECK(l.groups[0].cells.size() + l.groups[1].cells.size() == blocks.size());
  // No window: every block inside it.
  const WindowCounts all = window_counts(blocks, 0);
  CHECK(all.n_behind == 0);
  CHECK(all.n_in_window == static_cast<int64_t>(blocks.size()));
}

TEST_CASE("prefix tree: each node says where its blocks live, keys without data apart", "[ui]") {
  // Two nodes: the root's child (a local group's chain: 2 keys without data, 3 blocks on T2, 1 on
  // T0) and a leaf wholly on T1; a block the view left out of every node counts nowhere.
  KvPicture kv;
  kv.nodes.resize(3);
  kv.nodes[0].is_root = true;
  auto add = [&](int tier, int32_t node) {
    kv.blocks.push_back(cell(tier, 0, 16 * static_cast<int64_t>(kv.blocks.size())));
    kv.blocks.back().node = node;
  };
  for (int t : {3, 3, 2, 2, 2, 0}) add(t, 1);
  for (int k = 0; k < 4; ++k) add(1, 2);
  add(0, -1);
  const std::vector<NodeTiers> t = node_tiers(kv);
  REQUIRE(t.size() == 3);
  CHECK(t[0].tier == -1);
  CHECK(t[0].n_keys_only == 0);
  CHECK(t[1].n_keys_only == 2);
  CHECK(t[1].n_on == std::array<int32_t, 3>{1, 0, 3});
  CHECK(t[1].tier == 2);  // most of its data is on T2, though its first block has none
  CHECK(t[2].n_on == std::array<int32_t, 3>{0, 4, 0});
  CHECK(t[2].tier == 1);
}

TEST_CASE("KV groups: each group's line names its kind, window or source, layers and bytes per token", "[ui]") {
  CHECK(kv_group_line(0, KvGroupLine{"full", 1, 0, -1, 4096}) == "group 0  ·  full  ·  1 layer  ·  4.0 KiB per token");
  CHECK(kv_group_line(1, KvGroupLine{"window", 22, 512, -1, 22528}) ==
        "group 1  ·  window 512  ·  22 layers  ·  22.0 KiB per token");
  CHECK(kv_group_line(2, KvGroupLine{"shared", 3, 0, 1, 0}) ==
        "group 2  ·  shared, reads group 1  ·  3 layers  ·  0 B per token");
  // lfm2's conv layers: a state a sequence, its snapshot in every block of 16.
  CHECK(kv_group_line(1, KvGroupLine{"recurrent", 10, 0, -1, 10240, 163840}) ==
        "group 1  ·  recurrent  ·  10 layers  ·  state 160.0 KiB a sequence, a snapshot a block (10.0 KiB per token)");
}
