// The Memory window's panels (tier shares, block map, prefix tree, timelines), drawn with ImGui.
#pragma once

#include <imgui.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "ui/app_state.h"

namespace kvc::ui {

// Tier colours, used for tier labels, tree rows and the hit/miss bars (computed is colors::computed).
namespace tier_colors {
inline const ImVec4 t0{0.30f, 0.78f, 0.50f, 1.0f};
inline const ImVec4 t1{0.36f, 0.62f, 0.98f, 1.0f};
inline const ImVec4 t2{0.72f, 0.52f, 0.95f, 1.0f};
}  // namespace tier_colors
ImVec4 tier_color(int tier);  // tier_label() and tier_name() are in memory_state.h

// The width of a label column holding any of `labels` in the current font, plus item spacing.
float label_column_width(std::initializer_list<const char*> labels);
// Text with a dark drop shadow, legible over any bar colour.
void shadowed_text(ImDrawList* dl, ImVec2 p, ImU32 col, const char* text);

// A legend: a swatch and a label per item, wrapping at the window's edge instead of running past it.
struct LegendItem {
  std::string text;
  ImU32 swatch = 0;
  ImVec4 text_color{1, 1, 1, 1};
};
void flow_legend(const std::vector<LegendItem>& items);
// Space between legend items, and between a swatch and its label, in the current font.
float legend_spacing();
float legend_inner_spacing();

// A conversation's name for legends and tooltips: its title when known, else "#id".
std::string owner_name(const AppSnapshot& snap, int64_t owner);

// Stacked T0 / T1 / T2 bars of one KV group's picture (or the whole cache's), each segment a
// conversation's share. own: the group's own pools (KvPicture::group_*), else the totals of
// every group. compact: the three bars side by side on one row (a group of several).
void draw_tier_shares(const AppSnapshot& snap, const KvPicture& kv, bool own, bool compact);
// The conversations holding bytes anywhere, a swatch each (the bars' and the block map's colours).
void draw_share_legend(const AppSnapshot& snap, const KvPicture& kv);
// Every block of one KV group a cell, grouped by tier; hover for details. A windowed group's
// blocks behind their conversation's window are struck through. The legend goes under it.
void draw_block_map(const AppSnapshot& snap, const KvPicture& kv);
// Counts (over every KV group), the cell markings, weights, hits and evictions.
void draw_block_map_legend(const MemoryState& m);
float block_map_legend_height(const MemoryState& m);  // as draw_block_map_legend lays it out now
// The radix index as a collapsible tree (clipped past a row budget).
void draw_prefix_tree(const KvPicture& kv);
// Hit/miss by tier, TTFT split, bandwidth, evictions and fragmentation.
void draw_timelines(const MemoryState& m);
// A remote server's cache in one line (memory_remote_view.cpp): "vLLM: KV 25.0 % in use, ..."
// or "this server reports no cache data".
std::string remote_cache_summary(const RemoteCacheView& r);

}  // namespace kvc::ui
