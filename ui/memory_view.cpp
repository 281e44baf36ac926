// The Memory window: tier bars with each conversation's share, the block map, the prefix tree,
// the timelines, and exports of the KV event stream. Panels live in memory_blocks.cpp and
// memory_timelines.cpp; their logic in memory_layout.cpp.
#include <imgui.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ui/format.h"
#include "ui/memory_draw.h"
#include "ui/memory_layout.h"
#include "ui/views.h"

namespace kvc::ui {

namespace {

// A labelled bar: used of capacity.
void usage_bar(const char* label, double used, double capacity, ImVec4 color) {
  ImGui::TextUnformatted(label);
  ImGui::SameLine(label_column_width({label}));
  const float frac = capacity > 0 ? static_cast<float>(std::clamp(used / capacity, 0.0, 1.0)) : 0.0f;
  ImGui::PushStyleColor(ImGuiCol_PlotHistogram, color);
  const std::string overlay = format_bytes(used) + " / " + format_bytes(capacity);
  ImGui::ProgressBar(frac, ImVec2(-1.0f, 0), overlay.c_str());
  ImGui::PopStyleColor();
}

// A tab a script can select by name ("memory.tab.blocks").
bool named_tab(ScriptHooks& hooks, const char* name, const char* label) {
  hooks.note_widget(name);
  const ImGuiTabItemFlags flags = hooks.take_click(name) ? ImGuiTabItemFlags_SetSelected : 0;
  return ImGui::BeginTabItem(label, nullptr, flags);
}

void export_row(ViewContext& ctx) {
  const MemoryState& m = ctx.snap.memory;
  if (named_button(ctx.hooks, "memory.export_trace", "Export trace (JSON)")) ctx.cmd.export_kv_trace();
  ImGui::SameLine();
  if (named_button(ctx.hooks, "memory.export_csv", "Export CSV")) ctx.cmd.export_kv_csv();
  if (!m.export_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::error);
    ImGui::TextWrapped("%s", m.export_error.c_str());
    ImGui::PopStyleColor();
  } else if (!m.export_path.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::muted);
    ImGui::TextWrapped("wrote %s", m.export_path.c_str());
    ImGui::PopStyleColor();
  }
}

// Before the paged cache reports anything: the session's KV buffer and per-turn reuse.
void session_summary(const MemoryState& m) {
  usage_bar("KV (session)", static_cast<double>(m.kv_used_bytes), static_cast<double>(m.kv_capacity_bytes),
            colors::accent);
  const std::string line = std::to_string(m.n_session_tokens) + " of " + std::to_string(m.n_ctx) +
                           " positions hold tokens  ·  " + format_bytes(m.kv_bytes_per_token) + " per token";
  text_disabled_wrapped(line.c_str());
}

// A model of several KV groups (Gemma's global and local layers): the conversations' legend
// once, then each group's heading, its own tier bars on one row and its block map, the height
// shared out evenly.
void draw_groups(const AppSnapshot& snap) {
  const MemoryState& m = snap.memory;
  const std::vector<const KvPicture*> groups = kv_groups(m.kv);
  const float spacing = ImGui::GetStyle().ItemSpacing.y;
  draw_share_legend(snap, m.kv);
  ImGui::BeginChild("memory.block_map", ImVec2(0, -(block_map_legend_height(m) + spacing)), false);
  const float total_h = ImGui::GetContentRegionAvail().y;
  for (size_t i = 0; i < groups.size(); ++i) {
    const KvPicture& g = *groups[i];
    const float y0 = ImGui::GetCursorPosY();
    const float group_h = std::max(ImGui::GetFrameHeight() * 5.0f, total_h / static_cast<float>(groups.size()));
    const double per_token =
        g.block_tokens > 0 ? static_cast<double>(g.block_bytes) / static_cast<double>(g.block_tokens) : 0;
    ImGui::TextColored(colors::accent, "%s", kv_group_label(g, false).c_str());
    ImGui::SameLine();
    const int64_t n_blocks = g.n_blocks_on_tier[0] + g.n_blocks_on_tier[1] + g.n_blocks_on_tier[2];
    ImGui::TextDisabled("%s per token  ·  %lld blocks", format_bytes(per_token).c_str(),
                        static_cast<long long>(n_blocks));
    draw_tier_shares(snap, g, true, true);
    const float used = ImGui::GetCursorPosY() - y0;
    ImGui::BeginChild(("memory.block_map.g" + std::to_string(i)).c_str(),
                      ImVec2(0, std::max(ImGui::GetFrameHeight() * 3.0f, group_h - used - spacing)), false);
    draw_block_map(snap, g);
    ImGui::EndChild();
  }
  ImGui::EndChild();
}

}  // namespace

void MemoryView::draw(ViewContext& ctx) {
  if (!ImGui::Begin(k_memory_window)) {
    ImGui::End();
    return;
  }
  ctx.hooks.note_window(k_memory_window);
  const MemoryState& m = ctx.snap.memory;
  if (ctx.snap.model.status != ModelStatus::ready) {
    ImGui::TextDisabled("No model loaded.");
    ImGui::End();
    return;
  }
  if (m.remote.active) {
    draw_remote(ctx);
    ImGui::End();
    return;
  }
  if (!m.tier_warning.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::warning);
    ImGui::TextWrapped("%s", m.tier_warning.c_str());
    ImGui::PopStyleColor();
  }
  if (!m.kv.valid) {
    session_summary(m);
    ImGui::End();
    return;
  }
  if (ImGui::BeginTabBar("memory.tabs")) {
    if (named_tab(ctx.hooks, "memory.tab.blocks", "Blocks")) {
      if (m.kv_groups.size() > 1) {  // every KV group with its kind, shared ones included
        for (size_t g = 0; g < m.kv_groups.size(); ++g) text_disabled_wrapped(kv_group_line(g, m.kv_groups[g]).c_str());
      }
      if (m.kv.more_groups.empty()) {
        draw_tier_shares(ctx.snap, m.kv, false, false);
        draw_share_legend(ctx.snap, m.kv);
        ImGui::Separator();
        ImGui::BeginChild("memory.block_map",
                          ImVec2(0, -(block_map_legend_height(m) + ImGui::GetStyle().ItemSpacing.y)), false);
        draw_block_map(ctx.snap, m.kv);
        ImGui::EndChild();
      } else {
        draw_groups(ctx.snap);
      }
      draw_block_map_legend(m);
      ImGui::EndTabItem();
    }
    if (named_tab(ctx.hooks, "memory.tab.tree", "Prefix tree")) {
      ImGui::BeginChild("memory.tree", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
      if (m.kv.more_groups.empty()) {
        draw_prefix_tree(m.kv);
      } else {
        // Each KV group indexes its own blocks: the local layers' tree holds what their window
        // and the turn checkpoints keep, so it is drawn under its own heading.
        const std::vector<const KvPicture*> groups = kv_groups(m.kv);
        for (size_t i = 0; i < groups.size(); ++i) {
          if (i > 0) ImGui::Spacing();
          ImGui::TextColored(colors::accent, "%s", kv_group_label(*groups[i], false).c_str());
          ImGui::PushID(static_cast<int>(i));
          draw_prefix_tree(*groups[i]);
          ImGui::PopID();
        }
      }
      ImGui::EndChild();
      ImGui::EndTabItem();
    }
    if (named_tab(ctx.hooks, "memory.tab.timelines", "Timelines")) {
      ImGui::BeginChild("memory.timelines", ImVec2(0, 0), false);
      draw_timelines(m);
      ImGui::EndChild();
      ImGui::EndTabItem();
    }
    if (named_tab(ctx.hooks, "memory.tab.export", "Export")) {
      session_summary(m);
      ImGui::TextDisabled("%llu KV events read this run", static_cast<unsigned long long>(m.timelines.n_events));
      ImGui::Spacing();
      export_row(ctx);
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
  }
  ImGui::End();
}

}  // namespace kvc::ui
