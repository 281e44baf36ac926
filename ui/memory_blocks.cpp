// The Memory window's tier share bars, block map and prefix tree.
#include <imgui.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "ui/format.h"
#include "ui/memory_draw.h"
#include "ui/memory_layout.h"
#include "ui/theme.h"
#include "ui/widgets.h"

namespace kvc::ui {

namespace {

// Block map cells relative to the font: never smaller than k_min_cell_em (nor k_min_cell_px),
// up to k_max_cell_em when there is room (a presenter's map stays legible from the back of a room).
constexpr float k_min_cell_em = 0.5f;
constexpr float k_min_cell_px = 9.0f;
constexpr float k_max_cell_em = 1.6f;
constexpr float k_gap_ratio = 0.22f;
constexpr int k_max_tree_rows = 400;

// A block behind its conversation's window (a local KV group's, retired): a dark diagonal.
void strike_cell(ImDrawList* dl, ImVec2 a, ImVec2 z, float line_w) {
  dl->AddLine(ImVec2(a.x + 1, z.y - 1), ImVec2(z.x - 1, a.y + 1), IM_COL32(20, 22, 26, 220), line_w);
}

}  // namespace

ImVec4 tier_color(int tier) {
  switch (tier) {
    case 0: return tier_colors::t0;
    case 1: return tier_colors::t1;
    default: return tier_colors::t2;
  }
}

float legend_spacing() { return std::round(ImGui::GetFontSize() * 0.9f); }
float legend_inner_spacing() { return std::round(ImGui::GetFontSize() * 0.3f); }

float label_column_width(std::initializer_list<const char*> labels) {
  float w = 0;
  for (const char* l : labels) w = std::max(w, ImGui::CalcTextSize(l).x);
  return w + ImGui::GetStyle().ItemSpacing.x * 2.0f;
}

void shadowed_text(ImDrawList* dl, ImVec2 p, ImU32 col, const char* text) {
  dl->AddText(ImVec2(p.x + 1.0f, p.y + 1.0f), IM_COL32(0, 0, 0, 200), text);
  dl->AddText(p, col, text);
}

void flow_legend(const std::vector<LegendItem>& items) {
  if (items.empty()) return;
  const float sz = std::round(ImGui::GetTextLineHeight() * 0.7f);
  const float inner = legend_inner_spacing();
  const float spacing = legend_spacing();
  std::vector<float> widths;
  for (const LegendItem& it : items) widths.push_back(sz + inner + ImGui::CalcTextSize(it.text.c_str()).x);
  const std::vector<int> lines = flow_lines(widths, spacing, ImGui::GetContentRegionAvail().x);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0 && lines[i] == lines[i - 1]) ImGui::SameLine(0, spacing);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float y = p.y + (ImGui::GetTextLineHeight() - sz) / 2.0f;
    dl->AddRectFilled(ImVec2(p.x, y), ImVec2(p.x + sz, y + sz), items[i].swatch, 2.0f);
    ImGui::Dummy(ImVec2(sz, ImGui::GetTextLineHeight()));
    ImGui::SameLine(0, inner);
    ImGui::TextColored(items[i].text_color, "%s", items[i].text.c_str());
  }
}

std::string owner_name(const AppSnapshot& snap, int64_t owner) {
  if (owner < 0) return "no open conversation";
  for (const ConversationSummary& c : snap.conversations) {
    if (c.id == owner) return c.title;
  }
  std::string name = "#";
  name += std::to_string(owner);
  return name;
}

void draw_tier_shares(const AppSnapshot& snap, const KvPicture& kv, bool own, bool compact) {
  const auto& used_bytes = own ? kv.group_used_bytes : kv.used_bytes;
  const auto& capacity_bytes = own ? kv.group_capacity_bytes : kv.capacity_bytes;
  const auto& used_blocks = own ? kv.group_used_blocks : kv.used_blocks;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float bar_h = ImGui::GetTextLineHeight() + 4.0f;
  // One bar of width w at the cursor: the tier's share segments and the most detail that fits.
  auto bar = [&](int t, float w) {
    const auto ti = static_cast<size_t>(t);
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + bar_h), IM_COL32(34, 37, 44, 255), 3.0f);
    const auto segs = share_segments(kv.shares, t, used_bytes[ti], capacity_bytes[ti]);
    for (const ShareSegment& s : segs) {
      const float x0 = p0.x + w * static_cast<float>(std::min(s.begin, 1.0));
      const float x1 = p0.x + w * static_cast<float>(std::min(s.end, 1.0));
      const uint32_t col = s.owner < 0 ? IM_COL32(90, 94, 104, 255) : owner_color(s.owner);
      dl->AddRectFilled(ImVec2(x0, p0.y), ImVec2(std::max(x1, x0 + 1.0f), p0.y + bar_h), col);
    }
    // The most detail that fits the bar: used / capacity · blocks, used / capacity, used.
    const std::string used = format_bytes(static_cast<double>(used_bytes[ti]));
    const std::string of = used + " / " + format_bytes(static_cast<double>(capacity_bytes[ti]));
    const std::string variants[] = {of + "  ·  " + std::to_string(used_blocks[ti]) + " blocks", of, used};
    const float pad = 6.0f;
    float widths[3];
    for (size_t i = 0; i < 3; ++i) widths[i] = ImGui::CalcTextSize(variants[i].c_str()).x;
    const std::string& overlay = variants[first_fitting(widths, w - 2.0f * pad)];
    dl->PushClipRect(p0, ImVec2(p0.x + w, p0.y + bar_h), true);
    shadowed_text(dl, ImVec2(p0.x + pad, p0.y + 2.0f), IM_COL32(240, 242, 246, 255), overlay.c_str());
    dl->PopClipRect();
    ImGui::Dummy(ImVec2(w, bar_h));
    if (ImGui::IsItemHovered()) {
      const double f = static_cast<double>((ImGui::GetIO().MousePos.x - p0.x) / w);
      for (const ShareSegment& s : segs) {
        if (f >= s.begin && f < s.end) {
          ImGui::SetTooltip("%s: %s on %s", owner_name(snap, s.owner).c_str(),
                            format_bytes(static_cast<double>(s.bytes)).c_str(), tier_label(t));
        }
      }
      if (compact) ImGui::SetTooltip("%s: %s", tier_name(t), variants[0].c_str());
    }
  };
  const int n_tiers = capacity_bytes[2] == 0 ? 2 : 3;  // no disk tier: no T2 bar
  if (compact) {                                       // one row: "T0 [bar]  T1 [bar]  T2 [bar]"
    const float label_w = label_column_width({tier_label(0), tier_label(1), tier_label(2)});
    const float gap = ImGui::GetStyle().ItemSpacing.x * 2.0f;
    const float w = std::max(
        30.0f, (ImGui::GetContentRegionAvail().x - static_cast<float>(n_tiers) * label_w - gap * (n_tiers - 1)) /
                   static_cast<float>(n_tiers));
    for (int t = 0; t < n_tiers; ++t) {
      if (t > 0) ImGui::SameLine(0, gap);
      const float x = ImGui::GetCursorPosX();
      ImGui::TextColored(tier_color(t), "%s", tier_label(t));
      ImGui::SameLine(x + label_w);
      bar(t, w);
    }
    return;
  }
  const float label_w = label_column_width({tier_name(0), tier_name(1), tier_name(2)});
  for (int t = 0; t < n_tiers; ++t) {
    ImGui::TextColored(tier_color(t), "%s", tier_name(t));
    ImGui::SameLine(label_w);
    bar(t, std::max(40.0f, ImGui::GetContentRegionAvail().x));
  }
}

void draw_share_legend(const AppSnapshot& snap, const KvPicture& kv) {
  // One swatch per conversation holding bytes anywhere, names shortened so that two share a line.
  const float swatch_w = std::round(ImGui::GetTextLineHeight() * 0.7f) + legend_inner_spacing();
  const float max_name_w = std::max(ImGui::GetFontSize() * 4.0f,
                                    (ImGui::GetContentRegionAvail().x - legend_spacing()) / 2.0f - swatch_w - 1.0f);
  std::vector<LegendItem> items;
  for (const OwnerShare& s : kv.shares) {
    if (s.bytes[0] + s.bytes[1] + s.bytes[2] == 0) continue;
    items.push_back(LegendItem{ellipsize(owner_name(snap, s.owner), max_name_w), owner_color(s.owner),
                               ImGui::GetStyle().Colors[ImGuiCol_Text]});
  }
  flow_legend(items);
}

void draw_block_map(const AppSnapshot& snap, const KvPicture& kv) {
  const float label_w = label_column_width({tier_label(0), tier_label(1), tier_label(2)});
  const float avail = std::max(1.0f, ImGui::GetContentRegionAvail().x - label_w);
  const float font = ImGui::GetFontSize();
  const float group_pad = std::round(font * 0.3f);
  const float label_h = ImGui::GetTextLineHeight();
  // Group sizes do not depend on the cell size: lay out once to count, then at the fitted size.
  const BlockMapLayout counted = layout_block_map(kv.blocks, avail, 1.0f, 0.0f);
  std::array<size_t, k_n_kv_tiers> sizes{};
  for (size_t g = 0; g < sizes.size(); ++g) sizes[g] = counted.groups[g].cells.size();
  const BlockMapCell fit =
      fit_block_map_cell(sizes, avail, ImGui::GetContentRegionAvail().y, std::max(k_min_cell_px, font * k_min_cell_em),
                         font * k_max_cell_em, k_gap_ratio, group_pad + ImGui::GetStyle().ItemSpacing.y,
                         label_h);  // each group is followed by item spacing
  const float cell = fit.cell;
  const BlockMapLayout l = layout_block_map(kv.blocks, avail, cell, fit.gap);
  uint64_t max_age = 0;
  for (const kv::KvBlockView& b : kv.blocks) max_age = std::max(max_age, kv.age(b));
  // A local group's blocks behind their conversation's window: struck through.
  std::vector<uint8_t> behind;
  if (kv.window > 0) window_counts(kv.blocks, kv.window, &behind);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float pitch = cell + fit.gap;
  const float line_w = std::max(1.5f, cell * 0.12f);
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const kv::KvBlockView* hovered = nullptr;
  int hovered_group = 0;
  for (int g = 0; g < k_n_kv_tiers; ++g) {
    const BlockMapGroup& group = l.groups[static_cast<size_t>(g)];
    if (group.cells.empty()) continue;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    // The label sits level with the group's first row.
    const float label_y = p0.y + 2.0f + std::max(0.0f, (cell - label_h) / 2.0f);
    dl->AddText(ImVec2(p0.x, label_y), ImGui::GetColorU32(tier_color(g)), tier_label(g));
    const float x0 = p0.x + label_w;
    for (size_t i = 0; i < group.cells.size(); ++i) {
      const kv::KvBlockView& b = kv.blocks[group.cells[i]];
      const bool retired = !behind.empty() && behind[group.cells[i]] != 0;
      const auto row = static_cast<int>(i) / l.cells_per_row;
      const auto col = static_cast<int>(i) % l.cells_per_row;
      const ImVec2 a(x0 + pitch * static_cast<float>(col), p0.y + 2.0f + pitch * static_cast<float>(row));
      const ImVec2 z(a.x + cell, a.y + cell);
      const uint32_t c = shade_color(owner_color(b.owner_id), recency_shade(kv.age(b), max_age));
      const bool copy = g == 2 && b.tier != kv::Tier::t2;  // written behind; the block lives on a faster tier
      if (copy) {
        dl->AddRect(a, z, c, 1.0f, 0, line_w);
      } else if (b.is_private) {
        dl->AddRectFilled(a, z, shade_color(c, 0.6f), 1.0f);  // a partial tail: dimmer, filled to its tokens
        const float fill =
            kv.block_tokens > 0 ? static_cast<float>(b.n_tokens) / static_cast<float>(kv.block_tokens) : 1.0f;
        dl->AddRectFilled(a, ImVec2(a.x + cell * fill, z.y), c, 1.0f);
      } else {
        dl->AddRectFilled(a, z, c, 1.0f);
      }
      if (b.is_shared()) {
        dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(z.x + 1, z.y + 1), IM_COL32(255, 255, 255, 230), 1.0f, 0,
                    line_w * 0.8f);
        dl->AddCircleFilled(ImVec2((a.x + z.x) / 2, (a.y + z.y) / 2), std::max(1.6f, cell * 0.16f),
                            IM_COL32(255, 255, 255, 255));
      }
      if (retired) strike_cell(dl, a, z, line_w);
      if (mouse.x >= a.x && mouse.x < a.x + pitch && mouse.y >= a.y && mouse.y < a.y + pitch) {
        hovered = &b;
        hovered_group = g;
      }
    }
    ImGui::Dummy(ImVec2(avail + label_w, block_map_group_height(group.n_rows, pitch, group_pad, label_h)));
  }
  if (kv.blocks.empty()) ImGui::TextDisabled("No KV blocks yet: send a message.");
  if (hovered && ImGui::IsWindowHovered()) {
    ImGui::BeginTooltip();
    if (hovered->is_private) {
      ImGui::TextUnformatted("private tail (not in the prefix index)");
    } else {
      ImGui::Text("key %s…", short_key(hovered->key).c_str());
    }
    ImGui::Text("tokens %lld..%lld (%d)", static_cast<long long>(hovered->position),
                static_cast<long long>(hovered->position + hovered->n_tokens), hovered->n_tokens);
    const int tier = tier_of(hovered->tier);
    ImGui::Text("tier %s%s, slot %d", tier_label(tier), hovered->on_cold && tier != 2 ? " (copy on T2)" : "",
                hovered->slot);
    if (hovered_group == 2 && tier != 2) ImGui::TextDisabled("the disk copy of a block living on %s", tier_label(tier));
    if (kv.window > 0 && !behind.empty() && behind[static_cast<size_t>(hovered - kv.blocks.data())] != 0) {
      ImGui::TextDisabled("behind the window of %lld positions: retired, kept for a branch or resume while room lasts",
                          static_cast<long long>(kv.window));
    }
    ImGui::Text("refcount %d  ·  hits %d  ·  last use %llu ticks ago", hovered->n_refs, hovered->n_hits,
                static_cast<unsigned long long>(kv.age(*hovered)));
    ImGui::Text(
        "%s%s", owner_name(snap, hovered->owner_id).c_str(),
        hovered->is_shared() ? ("  +" + std::to_string(hovered->n_owners - 1) + " more: shared prefix").c_str() : "");
    ImGui::EndTooltip();
  }
  if (kv.n_blocks_left_out > 0) {
    ImGui::TextColored(colors::warning, "+%lld blocks not shown", static_cast<long long>(kv.n_blocks_left_out));
  }
}

namespace {

// The block map's legend: counts, then a sample cell per marking, drawn as the map draws it.
enum class Sample { none, shared, partial, copy, dim, retired };
struct BlockLegendItem {
  std::string text;
  Sample sample = Sample::none;
};

// Counts over every KV group (one for most models).
std::vector<BlockLegendItem> block_legend_items(const MemoryState& m) {
  const KvPicture& kv = m.kv;
  size_t n_blocks = 0;
  int64_t n_shared = 0, n_on_disk = 0;
  std::array<int64_t, k_n_kv_tiers> n_hits{}, n_evictions{};
  bool windowed = false;
  for (const KvPicture* g : kv_groups(kv)) {
    for (const kv::KvBlockView& b : g->blocks) n_blocks += kv::is_data_tier(b.tier) ? 1 : 0;
    n_shared += g->n_shared_blocks;
    n_on_disk += g->n_blocks_on_disk;
    for (size_t t = 0; t < n_hits.size(); ++t) {
      n_hits[t] += g->n_hit_blocks[t];
      n_evictions[t] += g->n_evictions[t];
    }
    windowed = windowed || g->window > 0;
  }
  const auto sum = [](const std::array<int64_t, k_n_kv_tiers>& a) { return std::to_string(a[0] + a[1] + a[2]); };
  const std::string hits = sum(n_hits) + " block hits (T0 " + std::to_string(n_hits[0]) + ", T1 " +
                           std::to_string(n_hits[1]) + ", T2 " + std::to_string(n_hits[2]) + ")";
  std::vector<BlockLegendItem> items = {
      {std::to_string(n_blocks) + " blocks of " + std::to_string(kv.block_tokens) + " tokens", Sample::none},
      {std::to_string(n_shared) + " shared", Sample::none},
      {std::to_string(n_on_disk) + " on disk", Sample::none},
      {"shared", Sample::shared},
      {"partial", Sample::partial},
      {"disk copy", Sample::copy},
      {"least recent", Sample::dim}};
  if (windowed) items.push_back({"behind the window", Sample::retired});
  items.push_back({"weights " + format_bytes(static_cast<double>(m.weight_bytes)), Sample::none});
  items.push_back({hits, Sample::none});
  items.push_back({sum(n_evictions) + " evicted", Sample::none});
  return items;
}

std::vector<int> block_legend_lines(const std::vector<BlockLegendItem>& items, float sz) {
  std::vector<float> widths;
  for (const BlockLegendItem& it : items) {
    widths.push_back(ImGui::CalcTextSize(it.text.c_str()).x +
                     (it.sample != Sample::none ? sz + legend_inner_spacing() : 0));
  }
  return flow_lines(widths, legend_spacing(), ImGui::GetContentRegionAvail().x);
}

void draw_sample(ImDrawList* dl, ImVec2 a, float sz, Sample s) {
  const ImVec2 z(a.x + sz, a.y + sz);
  const uint32_t c = owner_color(0);
  const float line_w = std::max(1.5f, sz * 0.12f);
  switch (s) {
    case Sample::shared:
      dl->AddRectFilled(a, z, c, 1.0f);
      dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(z.x + 1, z.y + 1), IM_COL32(255, 255, 255, 230), 1.0f, 0,
                  line_w * 0.8f);
      dl->AddCircleFilled(ImVec2((a.x + z.x) / 2, (a.y + z.y) / 2), std::max(1.6f, sz * 0.16f),
                          IM_COL32(255, 255, 255, 255));
      break;
    case Sample::partial:
      dl->AddRectFilled(a, z, shade_color(c, 0.6f), 1.0f);
      dl->AddRectFilled(a, ImVec2(a.x + sz * 0.5f, z.y), c, 1.0f);
      break;
    case Sample::copy: dl->AddRect(a, z, c, 1.0f, 0, line_w); break;
    case Sample::dim: dl->AddRectFilled(a, z, shade_color(c, k_min_recency_shade), 1.0f); break;
    case Sample::retired:
      dl->AddRectFilled(a, z, c, 1.0f);
      strike_cell(dl, a, z, line_w);
      break;
    case Sample::none: break;
  }
}

}  // namespace

float block_map_legend_height(const MemoryState& m) {
  const std::vector<int> lines =
      block_legend_lines(block_legend_items(m), std::round(ImGui::GetTextLineHeight() * 0.7f));
  const auto n = static_cast<float>(lines.empty() ? 0 : lines.back() + 1);
  return n * ImGui::GetTextLineHeightWithSpacing();
}

void draw_block_map_legend(const MemoryState& m) {
  const std::vector<BlockLegendItem> items = block_legend_items(m);
  const float sz = std::round(ImGui::GetTextLineHeight() * 0.7f);
  const std::vector<int> lines = block_legend_lines(items, sz);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImGui::PushStyleColor(ImGuiCol_Text, colors::muted);
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0 && lines[i] == lines[i - 1]) ImGui::SameLine(0, legend_spacing());
    if (items[i].sample != Sample::none) {
      const ImVec2 p = ImGui::GetCursorScreenPos();
      draw_sample(dl, ImVec2(p.x + 1.0f, p.y + (ImGui::GetTextLineHeight() - sz) / 2.0f), sz - 2.0f, items[i].sample);
      ImGui::Dummy(ImVec2(sz, ImGui::GetTextLineHeight()));
      ImGui::SameLine(0, legend_inner_spacing());
    }
    ImGui::TextUnformatted(items[i].text.c_str());
  }
  ImGui::PopStyleColor();
}

void draw_prefix_tree(const KvPicture& kv) {
  if (kv.nodes.empty()) {
    ImGui::TextDisabled("The prefix index is empty: full blocks appear here once a prompt fills one.");
    return;
  }
  int n_branch = 0;
  for (const kv::KvNodeView& n : kv.nodes) n_branch += n.n_children >= 2;
  ImGui::TextDisabled(
      "%zu nodes  ·  %d branch points%s", kv.nodes.size(), n_branch,
      kv.n_nodes_left_out > 0 ? ("  ·  " + std::to_string(kv.n_nodes_left_out) + " not listed").c_str() : "");
  const std::vector<NodeTiers> tiers = node_tiers(kv);
  // Pre-order: a closed node's subtree is every following node of a deeper level.
  int n_rows = 0;
  int depth_open = 0;  // ImGui tree levels pushed
  size_t i = 0;
  while (i < kv.nodes.size()) {
    const kv::KvNodeView& n = kv.nodes[i];
    while (depth_open > n.level) {
      ImGui::TreePop();
      --depth_open;
    }
    if (n_rows >= k_max_tree_rows) {
      ImGui::TextDisabled("… %zu more nodes (clipped)", kv.nodes.size() - i);
      break;
    }
    ++n_rows;
    char label[240];
    const NodeTiers& where = tiers[i];
    if (n.is_root) {
      std::snprintf(label, sizeof label, "model  ·  %d %s", n.n_children, n.n_children == 1 ? "branch" : "branches");
    } else {
      // One tier for the whole run: "T0 ... 60 blocks"; else where each part is, and the keys a
      // local group keeps without data: "T2 ... 60 blocks: 4 T0, 12 T2, 44 not kept".
      std::string split;
      int n_kinds = where.n_keys_only > 0 ? 1 : 0;
      for (int32_t c : where.n_on) n_kinds += c > 0 ? 1 : 0;
      if (n_kinds > 1) {
        for (int t = 0; t < k_n_kv_tiers; ++t) {
          const int32_t c = where.n_on[static_cast<size_t>(t)];
          if (c > 0) split += (split.empty() ? ": " : ", ") + std::to_string(c) + " " + tier_label(t);
        }
        if (where.n_keys_only > 0) split += ", " + std::to_string(where.n_keys_only) + " not kept";
      }
      std::snprintf(label, sizeof label, "%s  tokens %lld..%lld  ·  %d block%s%s  ·  %d hit%s%s",
                    where.tier >= 0 ? tier_label(where.tier) : "keys", static_cast<long long>(n.position),
                    static_cast<long long>(n.position + int64_t{n.n_blocks} * kv.block_tokens), n.n_blocks,
                    n.n_blocks == 1 ? "" : "s", split.c_str(), n.n_hits, n.n_hits == 1 ? "" : "s",
                    n.n_children >= 2 ? "  ·  branch point" : "");
    }
    ImGuiTreeNodeFlags flags = ImGuiTreeNodeFlags_SpanAvailWidth;
    if (n.level < 4) flags |= ImGuiTreeNodeFlags_DefaultOpen;
    if (n.n_children == 0) flags |= ImGuiTreeNodeFlags_Leaf;
    ImGui::PushStyleColor(ImGuiCol_Text, n.is_root || where.tier < 0 ? colors::muted : tier_color(where.tier));
    // Keyed by its first block's key, so that a node keeps its open state as the tree changes.
    const std::string key = n.first_block >= 0 ? short_key(kv.blocks[static_cast<size_t>(n.first_block)].key) : "";
    const std::string id = n.is_root ? "root" + std::to_string(i) : key + std::to_string(n.level);
    const bool open = ImGui::TreeNodeEx(id.c_str(), flags, "%s", label);
    ImGui::PopStyleColor();
    ++i;
    if (open) {
      ++depth_open;
    } else {
      while (i < kv.nodes.size() && kv.nodes[i].level > n.level) ++i;
    }
  }
  while (depth_open-- > 0) ImGui::TreePop();
}

}  // namespace kvc::ui
