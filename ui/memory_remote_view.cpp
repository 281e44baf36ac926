// The Memory window for a remote engine: what the server's /metrics and its answers' usage say
// of its KV cache (kvchat's tiers, vLLM's and SGLang's usage and prefix cache), or plainly that
// it reports nothing.
#include <imgui.h>

#include <algorithm>
#include <cstdio>

#include "ui/format.h"
#include "ui/memory_draw.h"
#include "ui/views.h"

namespace kvc::ui {

namespace {

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", 100.0 * f);
  return buf;
}

std::string count(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

void fraction_bar(const char* label, double fraction, const std::string& overlay) {
  ImGui::TextUnformatted(label);
  ImGui::SameLine(label_column_width({"KV cache in use", "prefix cache hits"}));
  ImGui::PushStyleColor(ImGuiCol_PlotHistogram, colors::accent);
  ImGui::ProgressBar(static_cast<float>(std::clamp(fraction, 0.0, 1.0)), ImVec2(-1.0f, 0), overlay.c_str());
  ImGui::PopStyleColor();
}

}  // namespace

// A one-line summary a script can assert on ("memory_remote_summary").
std::string remote_cache_summary(const RemoteCacheView& r) {
  if (!r.has_cache_data()) return "this server reports no cache data";
  std::string s = r.engine.empty() ? std::string("server") : r.engine;
  if (r.kv_usage >= 0) s += ": KV " + percent(r.kv_usage) + " in use";
  if (r.prefix_hit_rate >= 0) s += ", prefix cache hit rate " + percent(r.prefix_hit_rate);
  if (r.last_cached_tokens >= 0) {
    s += ", last answer: " + std::to_string(r.last_cached_tokens) + " of " + std::to_string(r.last_prompt_tokens) +
         " prompt tokens cached";
  }
  return s;
}

void MemoryView::draw_remote(ViewContext& ctx) {
  const RemoteCacheView& r = ctx.snap.memory.remote;
  const std::string summary = remote_cache_summary(r);
  ctx.hooks.set_fact("memory_remote_summary", summary);
  ImGui::TextWrapped("Remote engine: %s (%s)", r.url.c_str(), r.model.c_str());
  if (named_button(ctx.hooks, "memory.remote_refresh", "Refresh")) ctx.cmd.refresh_remote_memory();
  ImGui::SameLine();
  ImGui::TextDisabled("%s", r.engine.empty()
                                ? "no metrics kvchat knows"
                                : (r.engine + " metrics, " + std::to_string(r.n_samples) + " samples").c_str());
  ImGui::Separator();
  if (!r.has_cache_data()) {
    ImGui::TextWrapped("This server reports no cache data.");
    std::string why;
    if (!r.metrics_error.empty()) {
      why = "Its metrics page: " + r.metrics_error + ".";
    } else {
      why = "Its /metrics page has no KV cache metrics kvchat knows (kvchat, vLLM, SGLang, llama.cpp).";
    }
    if (r.n_answers > 0) why += " Its answers carry no usage.prompt_tokens_details.cached_tokens.";
    text_disabled_wrapped(why.c_str());
    return;
  }
  if (r.kv_usage >= 0) {
    std::string overlay = percent(r.kv_usage);
    if (r.kv_used_tokens >= 0 && r.kv_capacity_tokens > 0) {
      overlay += "  (" + count(r.kv_used_tokens) + " / " + count(r.kv_capacity_tokens) + " tokens)";
    }
    fraction_bar("KV cache in use", r.kv_usage, overlay);
  }
  if (r.prefix_hit_rate >= 0) {
    std::string overlay = percent(r.prefix_hit_rate);
    if (r.prefix_queries >= 0 && r.prefix_hits >= 0) {
      overlay += "  (" + count(r.prefix_hits) + " of " + count(r.prefix_queries) + " prompt tokens)";
    }
    fraction_bar("prefix cache hits", r.prefix_hit_rate, overlay);
  }
  for (int t = 0; t < k_n_kv_tiers; ++t) {
    const double used = r.tier_used_bytes[static_cast<size_t>(t)];
    const double cap = r.tier_capacity_bytes[static_cast<size_t>(t)];
    if (used < 0 || cap <= 0) continue;
    fraction_bar(tier_name(t), used / cap, format_bytes(used) + " / " + format_bytes(cap));
  }
  if (r.cached_tokens_total >= 0 && r.prompt_tokens_total > 0) {
    ImGui::Text("prompt tokens served from the cache: %s of %s", count(r.cached_tokens_total).c_str(),
                count(r.prompt_tokens_total).c_str());
  }
  if (r.n_running >= 0 || r.n_waiting >= 0) {
    ImGui::Text("requests: %s running, %s waiting", r.n_running >= 0 ? count(r.n_running).c_str() : "?",
                r.n_waiting >= 0 ? count(r.n_waiting).c_str() : "?");
  }
  if (r.last_cached_tokens >= 0) {
    ImGui::Text("last answer: %lld of %lld prompt tokens from the server's cache",
                static_cast<long long>(r.last_cached_tokens), static_cast<long long>(r.last_prompt_tokens));
  } else if (r.n_answers > 0) {
    text_disabled_wrapped("Its answers carry no usage.prompt_tokens_details.cached_tokens.");
  }
  if (!r.metrics_error.empty()) text_disabled_wrapped(("metrics: " + r.metrics_error).c_str());
}

}  // namespace kvc::ui
