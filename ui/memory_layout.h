// The Memory window's view logic, free of ImGui: block map layout and cell size, owner colours, share segments, turn
// buckets, legend flow and the timelines grid.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ui/memory_state.h"

namespace kvc::ui {

// The block map: cells grouped by tier (T0, T1, T2), each group in rows of cells_per_row.
//
//   T0  ■■■■■■■■■■■■      group 0: rows 0..1
//       ■■■■■
//   T1  ■■■■■■■■■■■■      group 1: rows 0..0
//
// The T2 group holds every block with a copy on disk: those living there and those written
// behind while they stay on T0/T1 (drawn as copies), so a block can show in two groups. A block
// without data on any tier (a local KV group's key kept only to chain its successors) has no
// cell.
// Within a group, cells are ordered by owner, then position, so a conversation's blocks sit
// together and read left to right in token order.
struct BlockMapGroup {
  std::vector<size_t> cells;  // indices into the blocks
  int n_rows = 0;
};
struct BlockMapLayout {
  int cells_per_row = 1;
  std::array<BlockMapGroup, k_n_kv_tiers> groups;
};
// width: pixels available for cells; cell, gap: a cell's side and the space between cells.
// At least one cell per row.
int block_map_cells_per_row(float width, float cell, float gap);
BlockMapLayout layout_block_map(std::span<const kv::KvBlockView> blocks, float width, float cell, float gap);

// The largest cell side in [min_cell, max_cell] (whole pixels, gap = gap_ratio x cell, at least
// 1 px) at which every non-empty group fits `height` when each group takes group_pad plus its
// rows, or group_min_h (its label) if taller; min_cell when none does (the map then scrolls).
// Few blocks get big, legible cells.
struct BlockMapCell {
  float cell = 0;
  float gap = 0;
};
BlockMapCell fit_block_map_cell(std::span<const size_t> group_sizes, float width, float height, float min_cell,
                                float max_cell, float gap_ratio, float group_pad, float group_min_h = 0);
// Height of one group of n_rows at cell pitch `pitch`: as fit_block_map_cell counts it.
float block_map_group_height(int n_rows, float pitch, float group_pad, float group_min_h);

// Items of the given widths laid out left to right with `spacing` between them, wrapping
// when the next one would pass `width`: the line each item lands on (a line always holds at
// least one item). Legends use it so no swatch is cut off at the window's edge.
std::vector<int> flow_lines(std::span<const float> widths, float spacing, float width);
inline int n_flow_lines(std::span<const float> widths, float spacing, float width) {
  const std::vector<int> l = flow_lines(widths, spacing, width);
  return l.empty() ? 0 : l.back() + 1;
}

// The index of the first text variant (longest first) whose width fits `avail`; the last one
// when none does. Bar overlays use it to drop detail instead of running past the bar.
size_t first_fitting(std::span<const float> widths, float avail);

// The timelines' charts in a grid that fills the available height: one column while each chart
// gets at least min_chart_h, else two side by side when each column keeps min_col_w; never
// taller than max_chart_h, never shorter than min_chart_h (the panel then scrolls).
// header_h: a chart's title and legend above its plot in one column and in two (legends wrap
// more in a narrower column); pad: vertical space after each chart.
struct TimelineGrid {
  int n_cols = 1;
  float chart_h = 0;
};
TimelineGrid timeline_grid(int n_charts, float width, float height, std::array<float, 2> header_h, float pad,
                           float min_chart_h, float max_chart_h, float min_col_w);

// KV groups (docs/ARCHITECTURE.md §3.9). A group's heading: "global layers (4)", "local layers
// (22), window 512"; a model of one group: "all layers (5)".
std::string kv_group_label(const KvPicture& g, bool only_group);
// A group's line in the list of every KV group: "group 2 · shared, reads group 1 · 1 layer · 0 B
// per token", "group 1 · window 512 · 22 layers · 22.0 KiB per token".
std::string kv_group_line(size_t g, const KvGroupLine& line);
// Every group of the picture, group 0 (the picture itself) first.
std::vector<const KvPicture*> kv_groups(const KvPicture& kv);

// Where a group's blocks stand against the window of the conversation holding them. A block is
// behind the window when it ends at or before its owner's furthest block end minus the window
// (the next position attends to [end - window, end)); such a block of a local group has left the
// sequence's T0 table (retired) and leaves T0 itself when room is needed. Blocks no open
// conversation holds are measured against the furthest end of all. A group without a window
// has every block inside it. Keys without data (a local group's chain) count only for max_end.
struct WindowCounts {
  int64_t n_in_window = 0;
  int64_t n_behind = 0;
  int64_t n_behind_on_t0 = 0;  // retired, not yet demoted
  int64_t n_t0_tokens = 0;     // tokens of the blocks living on T0
  int64_t max_end = 0;         // the furthest block end: positions the group covers
};
// behind: when given, one flag per block (1: behind the window).
WindowCounts window_counts(std::span<const kv::KvBlockView> blocks, int64_t window,
                           std::vector<uint8_t>* behind = nullptr);

// Where the blocks of each node of a group's prefix tree live (KvPicture::nodes, by index): per
// data tier, and keys kept without data (a local group's chain behind its checkpoints). Blocks
// the view left out count nowhere. tier: where most of its blocks with data are, -1 for none.
struct NodeTiers {
  std::array<int32_t, k_n_kv_tiers> n_on{};
  int32_t n_keys_only = 0;
  int tier = -1;
};
std::vector<NodeTiers> node_tiers(const KvPicture& kv);

// A stable colour per owner (conversation id): the same id always gets the same colour, and
// ids that differ by less than the palette size get different ones. -1 (no owner) is grey.
// Packed as ImGui's IM_COL32: R | G << 8 | B << 16 | A << 24.
constexpr int k_owner_palette_size = 10;
uint32_t owner_color(int64_t owner);
// Scales a colour's RGB by `shade` in [0, 1] (alpha unchanged).
uint32_t shade_color(uint32_t rgba, float shade);
// Brightness for a block last used `age` ticks ago, when the oldest block shown is max_age:
// 1 for in use now, falling linearly to k_min_recency_shade for the oldest.
constexpr float k_min_recency_shade = 0.35f;
float recency_shade(uint64_t age, uint64_t max_age);

// One stacked segment of a tier bar: an owner's bytes, or (owner -1) cached blocks no open
// conversation holds. [begin, end) are fractions of the tier's capacity.
struct ShareSegment {
  int64_t owner = -1;
  size_t bytes = 0;
  double begin = 0;
  double end = 0;
};
// Segments of `tier`, in share order, then the unheld rest; empty owners are skipped. The
// segments' bytes sum to exactly used_bytes (shares beyond used are clipped).
std::vector<ShareSegment> share_segments(std::span<const OwnerShare> shares, int tier, size_t used_bytes,
                                         size_t capacity_bytes);

// Turns merged into at most max_bars bars of consecutive turns, for the stacked timelines:
// token counts are summed and phase times averaged, so the totals over bars equal those over
// turns. The most recent turns are never merged with older ones into a partial bar: the
// oldest bar takes the remainder.
struct TurnBar {
  size_t first_turn = 0;  // [first_turn, first_turn + n_turns)
  size_t n_turns = 0;
  TurnPhases sum;  // n_cached / n_computed summed; *_ms averaged
};
std::vector<TurnBar> bucket_turns(std::span<const TurnPhases> turns, size_t max_bars);

}  // namespace kvc::ui
