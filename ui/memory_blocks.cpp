// The Memory window's tier share bars, block map and prefix tree.
#include <imgui.h>

#include <algorithm>
#include <cstdio>

#include "ui/format.h"
#include "ui/memory_draw.h"
#include "ui/memory_layout.h"
#include "ui/theme.h"

namespace kvc::ui {

namespace {

constexpr float k_cell = 9.0f;
constexpr float k_gap = 2.0f;
constexpr float k_label_w = 34.0f;  // room for "T0" left of each group
constexpr int k_max_tree_rows = 400;

const char* k_tier_names[k_n_kv_tiers] = {"T0 compute", "T1 host RAM", "T2 disk"};

}  // namespace

ImVec4 tier_color(int tier) {
  switch (tier) {
    case 0: return tier_colors::t0;
    case 1: return tier_colors::t1;
    default: return tier_colors::t2;
  }
}

const char* tier_label(int tier) {
  static const char* names[] = {"T0", "T1", "T2"};
  return names[std::clamp(tier, 0, k_n_kv_tiers - 1)];
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

void draw_tier_shares(const AppSnapshot& snap) {
  const KvPicture& kv = snap.memory.kv;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float bar_h = ImGui::GetTextLineHeight() + 4.0f;
  for (int t = 0; t < k_n_kv_tiers; ++t) {
    const auto ti = static_cast<size_t>(t);
    if (kv.capacity_bytes[ti] == 0 && t == 2) continue;  // no disk tier
    ImGui::TextColored(tier_color(t), "%s", k_tier_names[t]);
    ImGui::SameLine(100.0f);
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const float w = std::max(40.0f, ImGui::GetContentRegionAvail().x);
    dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + bar_h), IM_COL32(34, 37, 44, 255), 3.0f);
    const auto segs = share_segments(kv.shares, t, kv.used_bytes[ti], kv.capacity_bytes[ti]);
    for (const ShareSegment& s : segs) {
      const float x0 = p0.x + w * static_cast<float>(std::min(s.begin, 1.0));
      const float x1 = p0.x + w * static_cast<float>(std::min(s.end, 1.0));
      const uint32_t col = s.owner < 0 ? IM_COL32(90, 94, 104, 255) : owner_color(s.owner);
      dl->AddRectFilled(ImVec2(x0, p0.y), ImVec2(std::max(x1, x0 + 1.0f), p0.y + bar_h), col);
    }
    const std::string overlay = format_bytes(static_cast<double>(kv.used_bytes[ti])) + " / " +
                                format_bytes(static_cast<double>(kv.capacity_bytes[ti])) + "  ·  " +
                                std::to_string(kv.used_blocks[ti]) + " blocks";
    dl->AddText(ImVec2(p0.x + 6.0f, p0.y + 2.0f), IM_COL32(235, 237, 242, 255), overlay.c_str());
    ImGui::Dummy(ImVec2(w, bar_h));
    if (ImGui::IsItemHovered()) {
      const double f = static_cast<double>((ImGui::GetIO().MousePos.x - p0.x) / w);
      for (const ShareSegment& s : segs) {
        if (f >= s.begin && f < s.end) {
          ImGui::SetTooltip("%s: %s on %s", owner_name(snap, s.owner).c_str(),
                            format_bytes(static_cast<double>(s.bytes)).c_str(), tier_label(t));
        }
      }
    }
  }
  // Legend: one swatch per conversation holding bytes anywhere.
  int n_shown = 0;
  for (const OwnerShare& s : kv.shares) {
    if (s.bytes[0] + s.bytes[1] + s.bytes[2] == 0) continue;
    if (n_shown > 0) ImGui::SameLine();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float sz = ImGui::GetTextLineHeight() * 0.7f;
    dl->AddRectFilled(ImVec2(p.x, p.y + sz * 0.25f), ImVec2(p.x + sz, p.y + sz * 1.25f), owner_color(s.owner), 2.0f);
    ImGui::Dummy(ImVec2(sz + 2.0f, sz));
    ImGui::SameLine();
    std::string name = owner_name(snap, s.owner);
    if (name.size() > 18) name = name.substr(0, 17) + "…";
    ImGui::TextUnformatted(name.c_str());
    ++n_shown;
  }
}

void draw_block_map(const AppSnapshot& snap) {
  const KvPicture& kv = snap.memory.kv;
  const float avail = ImGui::GetContentRegionAvail().x - k_label_w;
  const BlockMapLayout l = layout_block_map(kv.blocks, avail, k_cell, k_gap);
  uint64_t max_age = 0;
  for (const BlockCell& b : kv.blocks) max_age = std::max(max_age, b.age);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float pitch = k_cell + k_gap;
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const BlockCell* hovered = nullptr;
  int hovered_group = 0;
  for (int g = 0; g < k_n_kv_tiers; ++g) {
    const BlockMapGroup& group = l.groups[static_cast<size_t>(g)];
    if (group.cells.empty()) continue;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    dl->AddText(p0, ImGui::GetColorU32(tier_color(g)), tier_label(g));
    const float x0 = p0.x + k_label_w;
    for (size_t i = 0; i < group.cells.size(); ++i) {
      const BlockCell& b = kv.blocks[group.cells[i]];
      const auto row = static_cast<int>(i) / l.cells_per_row;
      const auto col = static_cast<int>(i) % l.cells_per_row;
      const ImVec2 a(x0 + pitch * static_cast<float>(col), p0.y + 2.0f + pitch * static_cast<float>(row));
      const ImVec2 z(a.x + k_cell, a.y + k_cell);
      const uint32_t c = shade_color(owner_color(b.owner), recency_shade(b.age, max_age));
      const bool copy = g == 2 && b.tier != 2;  // written behind; the block lives on a faster tier
      if (copy) {
        dl->AddRect(a, z, c, 1.0f, 0, 1.5f);
      } else if (b.is_private) {
        dl->AddRectFilled(a, z, shade_color(c, 0.6f), 1.0f);  // a partial tail: dimmer, filled to its tokens
        const float fill = kv.block_tokens > 0 ? static_cast<float>(b.n_tokens) / static_cast<float>(kv.block_tokens) : 1.0f;
        dl->AddRectFilled(a, ImVec2(a.x + k_cell * fill, z.y), c, 1.0f);
      } else {
        dl->AddRectFilled(a, z, c, 1.0f);
      }
      if (b.is_shared()) {
        dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(z.x + 1, z.y + 1), IM_COL32(255, 255, 255, 230), 1.0f, 0, 1.2f);
        dl->AddCircleFilled(ImVec2((a.x + z.x) / 2, (a.y + z.y) / 2), 1.6f, IM_COL32(255, 255, 255, 255));
      }
      if (mouse.x >= a.x && mouse.x < a.x + pitch && mouse.y >= a.y && mouse.y < a.y + pitch) {
        hovered = &b;
        hovered_group = g;
      }
    }
    ImGui::Dummy(ImVec2(avail + k_label_w, 4.0f + pitch * static_cast<float>(std::max(group.n_rows, 1))));
  }
  if (kv.blocks.empty()) ImGui::TextDisabled("No KV blocks yet: send a message.");
  if (hovered && ImGui::IsWindowHovered()) {
    ImGui::BeginTooltip();
    if (hovered->is_private) {
      ImGui::TextUnformatted("private tail (not in the prefix index)");
    } else {
      ImGui::Text("key %s…", hovered->key_hex.c_str());
    }
    ImGui::Text("tokens %lld..%lld (%d)", static_cast<long long>(hovered->position),
                static_cast<long long>(hovered->position + hovered->n_tokens), hovered->n_tokens);
    ImGui::Text("tier %s%s, slot %d", tier_label(hovered->tier), hovered->on_disk && hovered->tier != 2 ? " (copy on T2)" : "",
                hovered->slot);
    if (hovered_group == 2 && hovered->tier != 2) ImGui::TextDisabled("the disk copy of a block living on %s", tier_label(hovered->tier));
    ImGui::Text("refcount %d  ·  hits %d  ·  last use %llu ticks ago", hovered->n_refs, hovered->n_hits,
                static_cast<unsigned long long>(hovered->age));
    ImGui::Text("%s%s", owner_name(snap, hovered->owner).c_str(),
                hovered->is_shared() ? ("  +" + std::to_string(hovered->n_owners - 1) + " more: shared prefix").c_str() : "");
    ImGui::EndTooltip();
  }
  if (kv.n_blocks_left_out > 0) {
    ImGui::TextColored(colors::warning, "+%lld blocks not shown", static_cast<long long>(kv.n_blocks_left_out));
  }
}

void draw_block_map_legend(const KvPicture& kv) {
  ImGui::PushStyleColor(ImGuiCol_Text, colors::muted);
  ImGui::TextWrapped("%zu blocks of %lld tokens  ·  %lld shared  ·  %lld on disk  ·  ▣ shared  ▬ partial  □ disk copy  "
                     "dim: least recent",
                     kv.blocks.size(), static_cast<long long>(kv.block_tokens), static_cast<long long>(kv.n_shared_blocks),
                     static_cast<long long>(kv.n_blocks_on_disk));
  ImGui::PopStyleColor();
}

void draw_prefix_tree(const KvPicture& kv) {
  if (kv.nodes.empty()) {
    ImGui::TextDisabled("The prefix index is empty: full blocks appear here once a prompt fills one.");
    return;
  }
  int n_branch = 0;
  for (const TreeNode& n : kv.nodes) n_branch += n.n_children >= 2;
  ImGui::TextDisabled("%zu nodes  ·  %d branch points%s", kv.nodes.size(), n_branch,
                      kv.n_nodes_left_out > 0 ? ("  ·  " + std::to_string(kv.n_nodes_left_out) + " not listed").c_str() : "");
  // Pre-order: a closed node's subtree is every following node of a deeper level.
  int n_rows = 0;
  int depth_open = 0;  // ImGui tree levels pushed
  size_t i = 0;
  while (i < kv.nodes.size()) {
    const TreeNode& n = kv.nodes[i];
    while (depth_open > n.level) {
      ImGui::TreePop();
      --depth_open;
    }
    if (n_rows >= k_max_tree_rows) {
      ImGui::TextDisabled("… %zu more nodes (clipped)", kv.nodes.size() - i);
      break;
    }
    ++n_rows;
    char label[160];
    if (n.is_root) {
      std::snprintf(label, sizeof label, "model  ·  %d %s", n.n_children, n.n_children == 1 ? "branch" : "branches");
    } else {
      std::snprintf(label, sizeof label, "%s  tokens %lld..%lld  ·  %d block%s  ·  %d hit%s%s", tier_label(n.tier),
                    static_cast<long long>(n.position),
                    static_cast<long long>(n.position + int64_t{n.n_blocks} * kv.block_tokens), n.n_blocks,
                    n.n_blocks == 1 ? "" : "s", n.n_hits, n.n_hits == 1 ? "" : "s",
                    n.n_children >= 2 ? "  ·  branch point" : "");
    }
    ImGuiTreeNodeFlags flags = ImGuiTreeNodeFlags_SpanAvailWidth;
    if (n.level < 4) flags |= ImGuiTreeNodeFlags_DefaultOpen;
    if (n.n_children == 0) flags |= ImGuiTreeNodeFlags_Leaf;
    ImGui::PushStyleColor(ImGuiCol_Text, n.is_root ? colors::muted : tier_color(n.tier));
    const std::string id = n.is_root ? "root" + std::to_string(i) : n.key_hex + std::to_string(n.level);
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
