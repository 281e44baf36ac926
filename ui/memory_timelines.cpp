// The Memory window's timelines: hit/miss per turn by tier, TTFT split, tier bandwidth, evictions and fragmentation.
#include <imgui.h>

#include <algorithm>
#include <array>
#include <cstdio>

#include "ui/format.h"
#include "ui/memory_draw.h"
#include "ui/memory_layout.h"
#include "ui/theme.h"

namespace kvc::ui {

namespace {

constexpr size_t k_max_bars = 40;
constexpr ImU32 k_plot_bg = IM_COL32(22, 24, 29, 255);

// A legend row of coloured labels.
void legend(std::initializer_list<std::pair<const char*, ImVec4>> items) {
  bool first = true;
  for (const auto& [name, col] : items) {
    if (!first) ImGui::SameLine();
    first = false;
    ImGui::TextColored(col, "■ %s", name);
  }
}

// Stacked bars, one per TurnBar; values(bar, k) gives segment k (bottom first). Returns the
// hovered bar index, or -1.
template <size_t K, typename Values>
int stacked_bars(const std::vector<TurnBar>& bars, const std::array<ImVec4, K>& cols, float height, Values values) {
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const float w = ImGui::GetContentRegionAvail().x;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + height), k_plot_bg, 4.0f);
  double peak = 1e-9;
  for (const TurnBar& b : bars) {
    double s = 0;
    for (size_t k = 0; k < K; ++k) s += values(b, k);
    peak = std::max(peak, s);
  }
  const float slot = (w - 8.0f) / static_cast<float>(std::max<size_t>(bars.size(), 8));
  const float bar_w = std::max(2.0f, slot * 0.7f);
  const float base = p0.y + height - 4.0f;
  const auto scale = static_cast<double>(height - 8.0f) / peak;
  for (size_t i = 0; i < bars.size(); ++i) {
    const float x = p0.x + 4.0f + slot * static_cast<float>(i) + (slot - bar_w) / 2.0f;
    float y = base;
    for (size_t k = 0; k < K; ++k) {
      const auto h = static_cast<float>(values(bars[i], k) * scale);
      if (h <= 0) continue;
      dl->AddRectFilled(ImVec2(x, y - h), ImVec2(x + bar_w, y), ImGui::GetColorU32(cols[k]));
      y -= h;
    }
  }
  ImGui::Dummy(ImVec2(w, height));
  if (!ImGui::IsItemHovered() || bars.empty()) return -1;
  const float mx = ImGui::GetIO().MousePos.x - p0.x - 4.0f;
  return static_cast<int>(std::clamp(mx / slot, 0.0f, static_cast<float>(bars.size() - 1)));
}

// Lines over a shared x axis of n points, each scaled to the common peak; the peak is labelled.
void line_chart(const std::vector<const std::vector<float>*>& series, const std::vector<ImVec4>& cols, float height,
                const std::string& peak_label) {
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const float w = ImGui::GetContentRegionAvail().x;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + height), k_plot_bg, 4.0f);
  float peak = 0;
  size_t n = 0;
  for (const auto* s : series) {
    n = std::max(n, s->size());
    for (float v : *s) peak = std::max(peak, v);
  }
  if (n >= 2 && peak > 0) {
    std::vector<ImVec2> pts;
    for (size_t k = 0; k < series.size(); ++k) {
      pts.clear();
      const std::vector<float>& s = *series[k];
      for (size_t i = 0; i < s.size(); ++i) {
        pts.emplace_back(p0.x + 4.0f + (w - 8.0f) * static_cast<float>(i) / static_cast<float>(n - 1),
                         p0.y + height - 4.0f - (height - 8.0f) * s[i] / peak);
      }
      dl->AddPolyline(pts.data(), static_cast<int>(pts.size()), ImGui::GetColorU32(cols[k]), 0, 1.8f);
    }
  }
  dl->AddText(ImVec2(p0.x + 6.0f, p0.y + 3.0f), ImGui::GetColorU32(colors::muted), peak_label.c_str());
  ImGui::Dummy(ImVec2(w, height));
}

}  // namespace

void draw_timelines(const MemoryState& m) {
  const KvTimelines& tl = m.timelines;
  const float h = std::clamp(ImGui::GetContentRegionAvail().y / 4.0f - ImGui::GetTextLineHeightWithSpacing() * 2.0f,
                             48.0f, 140.0f);
  const std::vector<TurnBar> bars = bucket_turns(tl.turns, k_max_bars);

  ImGui::TextUnformatted("Prompt tokens per turn");
  legend({{"T0", tier_colors::t0}, {"T1", tier_colors::t1}, {"T2", tier_colors::t2}, {"computed", colors::computed}});
  const std::array<ImVec4, 4> hit_cols = {tier_colors::t0, tier_colors::t1, tier_colors::t2, colors::computed};
  int hov = stacked_bars(bars, hit_cols, h, [](const TurnBar& b, size_t k) {
    return static_cast<double>(k < 3 ? b.sum.n_cached[k] : b.sum.n_computed);
  });
  if (hov >= 0) {
    const TurnPhases& s = bars[static_cast<size_t>(hov)].sum;
    ImGui::SetTooltip("turn %zu%s: T0 %lld, T1 %lld, T2 %lld from cache, %lld computed",
                      bars[static_cast<size_t>(hov)].first_turn + 1, bars[static_cast<size_t>(hov)].n_turns > 1 ? "+" : "",
                      static_cast<long long>(s.n_cached[0]), static_cast<long long>(s.n_cached[1]),
                      static_cast<long long>(s.n_cached[2]), static_cast<long long>(s.n_computed));
  }

  ImGui::TextUnformatted("Time to first token");
  const ImVec4 c_lookup{0.62f, 0.64f, 0.70f, 1.0f}, c_promote = tier_colors::t2, c_prefill = colors::computed,
               c_decode = tier_colors::t1;
  legend({{"lookup", c_lookup}, {"promote", c_promote}, {"prefill", c_prefill}, {"first decode", c_decode}});
  const std::array<ImVec4, 4> ttft_cols = {c_lookup, c_promote, c_prefill, c_decode};
  hov = stacked_bars(bars, ttft_cols, h, [](const TurnBar& b, size_t k) {
    const double v[4] = {b.sum.lookup_ms, b.sum.promote_ms, b.sum.prefill_ms, b.sum.first_decode_ms};
    return v[k];
  });
  if (hov >= 0) {
    const TurnPhases& s = bars[static_cast<size_t>(hov)].sum;
    ImGui::SetTooltip("TTFT %s: lookup %s, promote %s, prefill %s, first decode %s", format_duration_ms(s.ttft_ms()).c_str(),
                      format_duration_ms(s.lookup_ms).c_str(), format_duration_ms(s.promote_ms).c_str(),
                      format_duration_ms(s.prefill_ms).c_str(), format_duration_ms(s.first_decode_ms).c_str());
  }

  ImGui::TextUnformatted("Bytes moved between tiers, last 60 s");
  const ImVec4 c01{0.95f, 0.75f, 0.30f, 1.0f}, c10 = tier_colors::t0, c2 = tier_colors::t2, c20{0.95f, 0.45f, 0.55f, 1.0f};
  legend({{"T0→T1", c01}, {"T1→T0", c10}, {"→T2", c2}, {"T2→T0", c20}});
  float peak = 0;
  for (const auto& s : tl.bytes_per_s) {
    for (float v : s) peak = std::max(peak, v);
  }
  line_chart({&tl.bytes_per_s[0], &tl.bytes_per_s[1], &tl.bytes_per_s[2], &tl.bytes_per_s[3]}, {c01, c10, c2, c20}, h,
             "peak " + format_bytes(static_cast<double>(peak)) + "/s");

  ImGui::TextUnformatted("Evictions and fragmentation over time");
  const ImVec4 c_ev = colors::error, c_fr = colors::warning;
  legend({{"evictions (cumulative)", c_ev}, {"wasted tokens", c_fr}});
  std::vector<float> ev, fr;
  int64_t ev_max = 0, fr_max = 0;
  for (const CounterSample& s : tl.samples) {
    ev_max = std::max(ev_max, s.n_evictions);
    fr_max = std::max(fr_max, s.n_wasted_tokens);
  }
  for (const CounterSample& s : tl.samples) {  // each normalised to its own peak
    ev.push_back(ev_max > 0 ? static_cast<float>(s.n_evictions) / static_cast<float>(ev_max) : 0.0f);
    fr.push_back(fr_max > 0 ? static_cast<float>(s.n_wasted_tokens) / static_cast<float>(fr_max) : 0.0f);
  }
  char label[96];
  std::snprintf(label, sizeof label, "max %lld evictions, %lld wasted tokens", static_cast<long long>(ev_max),
                static_cast<long long>(fr_max));
  line_chart({&ev, &fr}, {c_ev, c_fr}, h, label);
  if (tl.n_events_lost > 0) {
    ImGui::TextColored(colors::warning, "%llu KV events were overwritten before they were read",
                       static_cast<unsigned long long>(tl.n_events_lost));
  }
}

}  // namespace kvc::ui
