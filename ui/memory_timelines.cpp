// The Memory window's timelines: hit/miss per turn by tier, TTFT split, tier bandwidth, evictions and fragmentation.
#include <imgui.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "ui/format.h"
#include "ui/memory_draw.h"
#include "ui/memory_layout.h"
#include "ui/theme.h"

namespace kvc::ui {

namespace {

constexpr size_t k_max_bars = 40;
constexpr ImU32 k_plot_bg = IM_COL32(22, 24, 29, 255);

// Room at the top of a plot for its peak label, so no bar or line runs through the text.
float plot_top_inset() { return ImGui::GetTextLineHeight() + 6.0f; }

// A plot's label in its top-left corner: the most detailed variant that fits, clipped to the plot.
void plot_label(ImDrawList* dl, ImVec2 p0, float w, const std::vector<std::string>& variants) {
  if (variants.empty()) return;
  std::vector<float> widths;
  for (const std::string& v : variants) widths.push_back(ImGui::CalcTextSize(v.c_str()).x);
  dl->PushClipRect(p0, ImVec2(p0.x + w, p0.y + plot_top_inset()), true);
  dl->AddText(ImVec2(p0.x + 6.0f, p0.y + 3.0f), ImGui::GetColorU32(colors::muted),
              variants[first_fitting(widths, w - 12.0f)].c_str());
  dl->PopClipRect();
}

using Legend = std::vector<LegendItem>;

Legend legend(std::initializer_list<std::pair<const char*, ImVec4>> items) {
  Legend out;
  for (const auto& [name, col] : items) out.push_back(LegendItem{name, ImGui::GetColorU32(col), colors::muted});
  return out;
}

// Lines a legend takes at `width`, as flow_legend lays it out.
int legend_lines(const Legend& items, float width) {
  const float sz = std::round(ImGui::GetTextLineHeight() * 0.7f);
  std::vector<float> widths;
  for (const LegendItem& it : items) {
    widths.push_back(sz + legend_inner_spacing() + ImGui::CalcTextSize(it.text.c_str()).x);
  }
  return n_flow_lines(widths, legend_spacing(), width);
}

// Stacked bars, one per TurnBar; values(bar, k) gives segment k (bottom first). Returns the
// hovered bar index, or -1.
template <size_t K, typename Values, typename Label>
int stacked_bars(const std::vector<TurnBar>& bars, const std::array<ImVec4, K>& cols, float height, Values values,
                 Label peak_label) {
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
  const auto scale = static_cast<double>(std::max(1.0f, height - plot_top_inset() - 4.0f)) / peak;
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
  if (!bars.empty()) { plot_label(dl, p0, w, {peak_label(peak)}); }
  ImGui::Dummy(ImVec2(w, height));
  if (!ImGui::IsItemHovered() || bars.empty()) return -1;
  const float mx = ImGui::GetIO().MousePos.x - p0.x - 4.0f;
  return static_cast<int>(std::clamp(mx / slot, 0.0f, static_cast<float>(bars.size() - 1)));
}

// Lines over a shared x axis of n points, each scaled to the common peak; the peak is labelled.
void line_chart(const std::vector<const std::vector<float>*>& series, const std::vector<ImVec4>& cols, float height,
                const std::vector<std::string>& peak_label) {
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
                         p0.y + height - 4.0f - std::max(1.0f, height - plot_top_inset() - 4.0f) * s[i] / peak);
      }
      dl->AddPolyline(pts.data(), static_cast<int>(pts.size()), ImGui::GetColorU32(cols[k]), 0, 1.8f);
    }
  }
  plot_label(dl, p0, w, peak_label);
  ImGui::Dummy(ImVec2(w, height));
}

}  // namespace

void draw_timelines(const MemoryState& m) {
  const KvTimelines& tl = m.timelines;
  const std::vector<TurnBar> bars = bucket_turns(tl.turns, k_max_bars);

  const Legend hit_legend = legend({{tier_label(0), tier_colors::t0},
                                    {tier_label(1), tier_colors::t1},
                                    {tier_label(2), tier_colors::t2},
                                    {"computed", colors::computed}});
  const ImVec4 c_lookup{0.62f, 0.64f, 0.70f, 1.0f}, c_promote = tier_colors::t2, c_prefill = colors::computed,
                                                    c_decode{0.30f, 0.85f, 0.85f, 1.0f};
  const Legend ttft_legend =
      legend({{"lookup", c_lookup}, {"promote", c_promote}, {"prefill", c_prefill}, {"first decode", c_decode}});
  const ImVec4 c01{0.95f, 0.75f, 0.30f, 1.0f}, c10 = tier_colors::t0, c2 = tier_colors::t2,
                                               c20{0.95f, 0.45f, 0.55f, 1.0f};
  const Legend bw_legend = legend({{"T0→T1", c01}, {"T1→T0", c10}, {"→T2", c2}, {"T2→T0", c20}});
  const ImVec4 c_ev = colors::error, c_fr = colors::warning;
  const Legend ev_legend = legend({{"evictions (total)", c_ev}, {"wasted tokens", c_fr}});
  const char* titles[] = {"Prompt tokens per turn", "Time to first token", "Bytes between tiers, last 60 s",
                          "Evictions and fragmentation"};
  const Legend* legends[] = {&hit_legend, &ttft_legend, &bw_legend, &ev_legend};
  constexpr int k_n_charts = 4;

  // Fit the four charts to the panel: one column, or a 2 x 2 grid when the panel is short.
  const ImGuiStyle& st = ImGui::GetStyle();
  const float line_h = ImGui::GetTextLineHeightWithSpacing();
  const float width = ImGui::GetContentRegionAvail().x;
  auto header_h = [&](float col_w) {  // the tallest wrapped title and legend at this column width
    float h_max = 0;
    for (int k = 0; k < k_n_charts; ++k) {
      const float title_h = ImGui::CalcTextSize(titles[k], nullptr, false, col_w).y + st.ItemSpacing.y;
      h_max = std::max(h_max, title_h + line_h * static_cast<float>(legend_lines(*legends[k], col_w)));
    }
    return h_max;
  };
  float height = ImGui::GetContentRegionAvail().y;
  if (tl.n_events_lost > 0) height -= line_h;
  const float font = ImGui::GetFontSize();
  const float col_gap = std::round(font * 0.4f);  // cell padding either side of the column border
  const TimelineGrid grid =
      timeline_grid(k_n_charts, width, std::floor(height), {header_h(width), header_h((width - 2.0f * col_gap) / 2.0f)},
                    st.ItemSpacing.y + 2.0f * st.CellPadding.y, font * 3.5f, font * 9.0f, font * 10.0f);
  const float h = std::floor(grid.chart_h);

  auto chart = [&](int k) {
    ImGui::TextWrapped("%s", titles[k]);
    flow_legend(*legends[k]);
    switch (k) {
      case 0: {
        const std::array<ImVec4, 4> cols = {tier_colors::t0, tier_colors::t1, tier_colors::t2, colors::computed};
        const int hov = stacked_bars(
            bars, cols, h,
            [](const TurnBar& b, size_t i) {
              return static_cast<double>(i < 3 ? b.sum.n_cached[i] : b.sum.n_computed);
            },
            [](double peak) { return "max " + std::to_string(static_cast<long long>(peak + 0.5)) + " tokens"; });
        if (hov >= 0) {
          const TurnBar& b = bars[static_cast<size_t>(hov)];
          ImGui::SetTooltip("turn %zu%s: T0 %lld, T1 %lld, T2 %lld from cache, %lld computed", b.first_turn + 1,
                            b.n_turns > 1 ? "+" : "", static_cast<long long>(b.sum.n_cached[0]),
                            static_cast<long long>(b.sum.n_cached[1]), static_cast<long long>(b.sum.n_cached[2]),
                            static_cast<long long>(b.sum.n_computed));
        }
        break;
      }
      case 1: {
        const std::array<ImVec4, 4> cols = {c_lookup, c_promote, c_prefill, c_decode};
        const int hov = stacked_bars(
            bars, cols, h,
            [](const TurnBar& b, size_t i) {
              const double v[4] = {b.sum.lookup_ms, b.sum.promote_ms, b.sum.prefill_ms, b.sum.first_decode_ms};
              return v[i];
            },
            [](double peak) { return "max " + format_duration_ms(peak); });
        if (hov >= 0) {
          const TurnPhases& s = bars[static_cast<size_t>(hov)].sum;
          ImGui::SetTooltip("TTFT %s: lookup %s, promote %s, prefill %s, first decode %s",
                            format_duration_ms(s.ttft_ms()).c_str(), format_duration_ms(s.lookup_ms).c_str(),
                            format_duration_ms(s.promote_ms).c_str(), format_duration_ms(s.prefill_ms).c_str(),
                            format_duration_ms(s.first_decode_ms).c_str());
        }
        break;
      }
      case 2: {
        float peak = 0;
        for (const auto& s : tl.bytes_per_s) {
          for (float v : s) peak = std::max(peak, v);
        }
        line_chart({&tl.bytes_per_s[0], &tl.bytes_per_s[1], &tl.bytes_per_s[2], &tl.bytes_per_s[3]},
                   {c01, c10, c2, c20}, h, {"peak " + format_bytes(static_cast<double>(peak)) + "/s"});
        break;
      }
      default: {
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
        const std::string n_ev = std::to_string(ev_max), n_fr = std::to_string(fr_max);
        const std::vector<std::string> label = {"max " + n_ev + " evictions, " + n_fr + " wasted tokens",
                                                "max " + n_ev + " evicted, " + n_fr + " wasted",
                                                n_ev + " evicted · " + n_fr + " wasted"};
        line_chart({&ev, &fr}, {c_ev, c_fr}, h, label);
      }
    }
  };

  // Columns kept apart by a gap in the font's scale, so titles and plots never touch.
  ImGui::PushStyleVar(ImGuiStyleVar_CellPadding, ImVec2(col_gap, st.CellPadding.y));
  const bool table = ImGui::BeginTable("memory.timelines.grid", grid.n_cols, ImGuiTableFlags_SizingStretchSame);
  ImGui::PopStyleVar();
  if (table) {
    for (int k = 0; k < k_n_charts; ++k) {
      ImGui::TableNextColumn();
      chart(k);
    }
    ImGui::EndTable();
  }
  if (tl.n_events_lost > 0) {
    ImGui::TextColored(colors::warning, "%llu KV events were overwritten before they were read",
                       static_cast<unsigned long long>(tl.n_events_lost));
  }
}

}  // namespace kvc::ui
