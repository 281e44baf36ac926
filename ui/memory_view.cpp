// The Memory window, first version: weights, the session's KV buffer, and per-turn cache reuse.
// The tier view (T0/T1/T2 bars, block map, prefix tree) draws from MemoryState::tiers once the
// paged engine fills it.
#include <imgui.h>

#include <algorithm>

#include "ui/format.h"
#include "ui/views.h"

namespace kvc::ui {

namespace {

// A labelled bar: used of capacity.
void usage_bar(const char* label, double used, double capacity, ImVec4 color) {
  ImGui::TextUnformatted(label);
  ImGui::SameLine(140.0f);
  const float frac = capacity > 0 ? static_cast<float>(std::clamp(used / capacity, 0.0, 1.0)) : 0.0f;
  ImGui::PushStyleColor(ImGuiCol_PlotHistogram, color);
  const std::string overlay = format_bytes(used) + " / " + format_bytes(capacity);
  ImGui::ProgressBar(frac, ImVec2(-1.0f, 0), overlay.c_str());
  ImGui::PopStyleColor();
}

// Stacked bars per turn: prompt tokens served from cache (bottom) and computed (top).
void reuse_chart(const std::vector<TurnPoint>& turns, float height) {
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const float w = ImGui::GetContentRegionAvail().x;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + height), IM_COL32(22, 24, 29, 255), 4.0f);
  int64_t peak = 1;
  for (const auto& t : turns) peak = std::max(peak, t.n_reused + t.n_computed);
  const size_t n_show = std::min<size_t>(turns.size(), 40);
  const size_t first = turns.size() - n_show;
  const float slot = n_show ? (w - 8.0f) / static_cast<float>(std::max<size_t>(n_show, 8)) : w;
  const float bar = std::max(2.0f, slot * 0.7f);
  const float base = p0.y + height - 4.0f;
  const float scale = (height - 8.0f) / static_cast<float>(peak);
  for (size_t i = 0; i < n_show; ++i) {
    const TurnPoint& t = turns[first + i];
    const float x = p0.x + 4.0f + slot * static_cast<float>(i) + (slot - bar) / 2.0f;
    const float h_re = static_cast<float>(t.n_reused) * scale;
    const float h_co = static_cast<float>(t.n_computed) * scale;
    dl->AddRectFilled(ImVec2(x, base - h_re), ImVec2(x + bar, base), ImGui::GetColorU32(colors::cached));
    dl->AddRectFilled(ImVec2(x, base - h_re - h_co), ImVec2(x + bar, base - h_re), ImGui::GetColorU32(colors::computed));
  }
  ImGui::Dummy(ImVec2(w, height));
  if (ImGui::IsItemHovered() && n_show > 0) {
    const float mx = ImGui::GetIO().MousePos.x - p0.x - 4.0f;
    const auto i = static_cast<size_t>(std::clamp(mx / slot, 0.0f, static_cast<float>(n_show - 1)));
    const TurnPoint& t = turns[first + i];
    ImGui::SetTooltip("turn %zu: %lld from cache, %lld computed, TTFT %s", first + i + 1,
                      static_cast<long long>(t.n_reused), static_cast<long long>(t.n_computed),
                      format_duration_ms(t.ttft_ms).c_str());
  }
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
  if (!m.tier_warning.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.72f, 0.3f, 1.0f));
    ImGui::TextWrapped("%s", m.tier_warning.c_str());
    ImGui::PopStyleColor();
  }
  if (m.tiers.empty()) {
    usage_bar("KV (session)", static_cast<double>(m.kv_used_bytes), static_cast<double>(m.kv_capacity_bytes),
              colors::accent);
    ImGui::TextDisabled("%lld of %lld positions hold tokens  ·  %s per token",
                        static_cast<long long>(m.n_session_tokens), static_cast<long long>(m.n_ctx),
                        format_bytes(m.kv_bytes_per_token).c_str());
  } else {
    for (const TierView& t : m.tiers) {
      usage_bar(t.name.c_str(), static_cast<double>(t.used_bytes), static_cast<double>(t.capacity_bytes), colors::accent);
    }
  }
  ImGui::TextDisabled("weights");
  ImGui::SameLine(140.0f);
  ImGui::TextUnformatted(format_bytes(static_cast<double>(m.weight_bytes)).c_str());

  ImGui::Separator();
  ImGui::TextUnformatted("Prompt tokens per turn");
  ImGui::SameLine();
  ImGui::TextColored(colors::cached, "  from cache");
  ImGui::SameLine();
  ImGui::TextColored(colors::computed, "  computed");
  reuse_chart(m.turns, 110.0f);
  if (m.turns.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::muted);
    ImGui::TextWrapped("Send a message: each turn's bar shows how much of its prompt was already cached.");
    ImGui::PopStyleColor();
  } else {
    int64_t reused = 0, total = 0;
    for (const auto& t : m.turns) {
      reused += t.n_reused;
      total += t.n_reused + t.n_computed;
    }
    const TurnPoint& last = m.turns.back();
    ImGui::TextWrapped("last turn: %lld from cache, %lld computed  ·  all turns: %.0f%% of prompt tokens reused",
                static_cast<long long>(last.n_reused), static_cast<long long>(last.n_computed),
                total ? 100.0 * static_cast<double>(reused) / static_cast<double>(total) : 0.0);
    std::vector<float> ttft;
    for (const auto& t : m.turns) ttft.push_back(static_cast<float>(t.ttft_ms));
    const std::string label = "TTFT, last " + format_duration_ms(last.ttft_ms);
    ImGui::PlotHistogram("##ttft", ttft.data(), static_cast<int>(ttft.size()), 0, label.c_str(), 0.0f, FLT_MAX,
                     ImVec2(-1.0f, 60.0f));
  }
  if (m.tiers.empty()) {
    ImGui::Spacing();
    ImGui::PushStyleColor(ImGuiCol_Text, colors::muted);
    ImGui::TextWrapped("Tiers (T0 device / T1 host / T2 disk), the block map and the prefix tree appear here once "
                       "the paged KV engine is running.");
    ImGui::PopStyleColor();
  }
  ImGui::End();
}

}  // namespace kvc::ui
