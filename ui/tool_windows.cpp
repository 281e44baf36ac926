// The KV calculator and Engine windows.
#include "ui/tool_windows.h"

#include <imgui.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <string>

#include "ui/format.h"
#include "ui/kv_calculator.h"
#include "ui/widgets.h"

namespace kvc::ui {

namespace {

void int_input(const char* label, int& v, int lo, int hi) {
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  ImGui::InputInt(label, &v);
  v = std::clamp(v, lo, hi);
}

// The two KV groups apart (F16): bytes per token of each, and what keeping only the local
// layers' window saves at the context length.
void draw_layer_groups(const KvEstimate& e, int window, int n_ctx) {
  ImGui::Separator();
  ImGui::TextUnformatted("By layer group (F16), as kvchat's cache keeps them");
  const int64_t n_global = e.n_kv_layers - e.n_local_layers;
  ImGui::BulletText("global layers (%lld): %s per token, every position", static_cast<long long>(n_global),
                    format_bytes(e.bytes_per_token_global).c_str());
  ImGui::BulletText("local layers (%lld), window %d: %s per token, the last %d positions",
                    static_cast<long long>(e.n_local_layers), window, format_bytes(e.bytes_per_token_local).c_str(),
                    window);
  ImGui::TextWrapped("At %d tokens: %s instead of %s with every layer keeping every position (saves %.1f %%)", n_ctx,
                     format_bytes(e.bytes_per_conversation).c_str(),
                     format_bytes(e.bytes_per_conversation_full).c_str(), 100.0 * e.saved_fraction());
}

}  // namespace

void KvCalculatorView::draw(ViewContext& ctx) {
  if (!open) return;
  ImGui::SetNextWindowSize(ImVec2(ImGui::GetFontSize() * 34, ImGui::GetFontSize() * 30), ImGuiCond_FirstUseEver);
  if (!ImGui::Begin(k_kv_calculator_window, &open)) {
    ImGui::End();
    return;
  }
  ctx.hooks.note_window(k_kv_calculator_window);
  const ModelState& m = ctx.snap.model;
  // Seeded once per loaded model, from its real shape; the fields stay editable.
  const int64_t identity = m.status == ModelStatus::ready ? static_cast<int64_t>(std::hash<std::string>{}(m.path)) : -1;
  if (identity != -1 && identity != seeded_from_ && m.n_layer > 0 && m.n_head > 0) {
    seeded_from_ = identity;
    n_layer_ = static_cast<int>(m.n_layer);
    n_head_ = static_cast<int>(m.n_head);
    n_kv_head_ = static_cast<int>(m.n_kv_head);
    head_dim_ = static_cast<int>(m.head_dim);
    n_ctx_ = static_cast<int>(std::max<int64_t>(1, m.n_ctx));
    n_recurrent_ = static_cast<int>(m.n_recurrent_layers);
    state_floats_ = m.recurrent_state_floats;
    if (const int g = kv::kv_group_for_head_dim(m.head_dim); g > 0) group_ = g;  // the engine's group for this head
    // The model's own local layers (Gemma), so the estimate splits its layer groups as the cache does.
    const KvWhatIf own = model_local_layers(m.n_local_layers, m.n_layer, m.local_window);
    local_fraction_ = static_cast<float>(own.local_fraction);
    if (own.window_tokens > 0) window_tokens_ = static_cast<int>(own.window_tokens);
  }
  ImGui::TextDisabled("%s",
                      seeded_from_ != -1 ? ("shape of " + m.name).c_str() : "shape: TinyLlama 1.1B (no model loaded)");
  int_input("layers", n_layer_, 1, 1024);
  int_input("query heads", n_head_, 1, 1024);
  int_input("KV heads", n_kv_head_, 1, 1024);
  int_input("head dim", head_dim_, 1, 4096);
  int_input("context (tokens)", n_ctx_, 1, 1 << 24);
  int_input("INT8/INT4 scale group", group_, 1, 4096);
  ImGui::Separator();
  ImGui::TextUnformatted("What if");
  ImGui::RadioButton("model's KV heads", &kv_heads_choice_, 0);
  ImGui::SameLine();
  ImGui::RadioButton("MQA (1)", &kv_heads_choice_, 1);
  ImGui::SameLine();
  ImGui::RadioButton("GQA", &kv_heads_choice_, 2);
  if (kv_heads_choice_ == 2) {
    ImGui::SameLine();
    int_input("KV heads##gqa", gqa_heads_, 1, 1024);
  }
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 12);
  ImGui::SliderFloat("of layers local", &local_fraction_, 0.0f, 1.0f, "%.2f");
  if (local_fraction_ > 0) int_input("window (tokens)", window_tokens_, 1, 1 << 24);
  int_input("layers sharing one KV", share_every_, 1, 1024);

  if (n_recurrent_ > 0) int_input("of them recurrent (conv)", n_recurrent_, 0, n_layer_ - 1);
  const KvShape shape{n_layer_, n_head_, n_kv_head_, head_dim_, n_recurrent_, n_recurrent_ > 0 ? state_floats_ : 0};
  KvWhatIf w;
  w.n_kv_head = kv_heads_choice_ == 1 ? 1 : kv_heads_choice_ == 2 ? gqa_heads_ : 0;
  w.local_fraction = local_fraction_;
  w.window_tokens = window_tokens_;
  w.share_every = share_every_;
  ImGui::Separator();
  if (ImGui::BeginTable("##kv", 3, ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_SizingStretchProp)) {
    ImGui::TableSetupColumn("format");
    ImGui::TableSetupColumn("per token");
    ImGui::TableSetupColumn(("per conversation of " + std::to_string(n_ctx_) + " tokens").c_str());
    ImGui::TableHeadersRow();
    for (kv::KvFormat f : {kv::KvFormat::f16, kv::KvFormat::int8, kv::KvFormat::int4}) {
      auto e = estimate_kv(shape, w, f, group_, n_ctx_);
      if (!e.ok()) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::PushStyleColor(ImGuiCol_Text, colors::error);
        ImGui::TextWrapped("%s", e.error().message.c_str());
        ImGui::PopStyleColor();
        break;
      }
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(std::string(kv::kv_format_name(f)).c_str());
      ImGui::TableNextColumn();
      if (e->bytes_per_token >= 1024) {
        ImGui::Text("%s  (%.0f B)", format_bytes(e->bytes_per_token).c_str(), e->bytes_per_token);
      } else {
        ImGui::TextUnformatted(format_bytes(e->bytes_per_token).c_str());
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_bytes(e->bytes_per_conversation).c_str());
    }
    ImGui::EndTable();
  }
  if (auto e = estimate_kv(shape, w, kv::KvFormat::f16, group_, n_ctx_); e.ok()) {
    ImGui::TextDisabled("%lld KV heads, %lld of %d layers store KV, %lld of them local",
                        static_cast<long long>(e->n_kv_head), static_cast<long long>(e->n_kv_layers), n_layer_,
                        static_cast<long long>(e->n_local_layers));
    if (e->n_local_layers > 0) draw_layer_groups(*e, window_tokens_, n_ctx_);
    if (e->state_bytes_per_sequence > 0) {  // the recurrent group: a state a sequence, a snapshot a block
      ImGui::TextDisabled("%d recurrent layers: state %s a sequence, a snapshot of it every %lld tokens: %s",
                          n_recurrent_, format_bytes(e->state_bytes_per_sequence).c_str(),
                          static_cast<long long>(shape.block_tokens),
                          format_bytes(e->state_bytes_per_conversation).c_str());
    }
  }
  ImGui::End();
}

void EngineView::draw(ViewContext& ctx) {
  if (!open) return;
  if (!ImGui::Begin(k_engine_window, &open, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::End();
    return;
  }
  ctx.hooks.note_window(k_engine_window);
  const EngineState& e = ctx.snap.engine;
  const KvBudget& b = e.budgets;
  if (!seeded_) {
    t0_kib_ = static_cast<int>(b.t0_bytes / 1024);
    t1_kib_ = static_cast<int>(b.t1_bytes / 1024);
    t2_mib_ = static_cast<int>(b.t2_bytes >> 20);
    ctx_mib_ = static_cast<int>(ctx.snap.engine.ctx_kv_budget_bytes >> 20);
    seeded_ = true;
  }
  ImGui::Text("This machine: %s of %s RAM free, %s free on the data directory's disk",
              format_bytes(static_cast<double>(e.mem_available_bytes)).c_str(),
              format_bytes(static_cast<double>(e.mem_total_bytes)).c_str(),
              format_bytes(static_cast<double>(e.disk_free_bytes)).c_str());
  if (!e.fit_warning.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::warning);
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 36.0f);
    ImGui::TextUnformatted(("The loaded model " + e.fit_warning + ".").c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
  }
  ImGui::TextUnformatted("Tier budgets (0: the default from free RAM and disk)");
  int_input("T0 compute, KiB", t0_kib_, 0, 1 << 30);
  ImGui::SameLine();
  ImGui::TextDisabled("default %s", format_bytes(static_cast<double>(e.defaults.t0_bytes)).c_str());
  int_input("T1 host RAM, KiB", t1_kib_, 0, 1 << 30);
  ImGui::SameLine();
  ImGui::TextDisabled("default %s", format_bytes(static_cast<double>(e.defaults.t1_bytes)).c_str());
  int_input("T2 disk, MiB", t2_mib_, 0, 1 << 30);
  ImGui::SameLine();
  ImGui::TextDisabled("default %s", format_bytes(static_cast<double>(e.defaults.t2_bytes)).c_str());
  // The context: the model's trained context, cut to what this budget of F16 KV holds.
  int_input("Context KV, MiB", ctx_mib_, 0, 1 << 20);
  const ModelState& ms = ctx.snap.model;
  if (ms.n_ctx > 0) {
    ImGui::TextDisabled("context %lld tokens (trained %lld): KV %s%s", static_cast<long long>(ms.n_ctx),
                        static_cast<long long>(ms.n_ctx_train),
                        format_bytes(ctx.snap.memory.kv_bytes_per_token * static_cast<double>(ms.n_ctx)).c_str(),
                        ctx.snap.engine.ctx_fixed ? ", set by -c" : "");
  }
  if (named_button(ctx.hooks, "engine.apply", "Apply")) {
    ctx.cmd.save_tier_budgets(
        KvBudget{int64_t{t0_kib_} * 1024, int64_t{t1_kib_} * 1024, int64_t{t2_mib_} << 20, int64_t{ctx_mib_} << 20});
  }
  ImGui::SameLine();
  ImGui::TextDisabled("recreates the KV cache: T0 and T1 start empty, T2 keeps its blocks");
  draw_kv_format(ctx);
  for (const TierView& t : ctx.snap.memory.tiers) {
    ImGui::Text("%s: %s of %s", t.name.c_str(), format_bytes(static_cast<double>(t.used_bytes)).c_str(),
                format_bytes(static_cast<double>(t.capacity_bytes)).c_str());
  }
  ImGui::Separator();
  if (named_button(ctx.hooks, "engine.restart", "Restart engine")) ctx.cmd.restart_engine();
  ImGui::SameLine();
  ImGui::TextDisabled("drops every RAM tier and resumes from disk (restarts so far: %lld)",
                      static_cast<long long>(ctx.snap.engine.n_restarts));
  ImGui::Separator();
  draw_serving(ctx);
  ImGui::End();
}

// K and V's format: applied at once (the runner is recreated, as for a budget). The cache keys
// blocks by format, so those of another format stay on disk unused until the budget collects them.
void EngineView::draw_kv_format(ViewContext& ctx) {
  const kv::KvFormat now = ctx.snap.engine.kv_format;
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  ctx.hooks.note_widget("engine.kv_format");
  if (ImGui::BeginCombo("KV format", std::string(kv::kv_format_name(now)).c_str())) {
    for (kv::KvFormat f : kv::k_kv_formats) {
      if (ImGui::Selectable(std::string(kv::kv_format_name(f)).c_str(), f == now) && f != now) {
        ctx.cmd.set_kv_format(f);
      }
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  ImGui::TextDisabled("%s per token; int8 / int4 about 0.53x / 0.28x of f16, *h outlier-aware",
                      format_bytes(ctx.snap.memory.kv_bytes_per_token).c_str());
}

// The switch, the port, and what the API is doing: kvchat-cli serve's endpoints on the app's
// engine and cache, so an API client's conversations show in the Memory window.
void EngineView::draw_serving(ViewContext& ctx) {
  const ServeState& sv = ctx.snap.engine.serve;
  if (sv.port != shown_port_) {  // remembered, or the one listening (port 0: the free one it found)
    shown_port_ = sv.port;
    serve_port_ = std::to_string(sv.port);
  }
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
  named_input(ctx.hooks, "engine.serve_port", "port##serve", serve_port_, ImGuiInputTextFlags_CharsDecimal);
  ImGui::SameLine();
  ctx.hooks.note_widget("engine.serve");
  bool on = sv.wanted;
  const bool toggled = ImGui::Checkbox("Serve on localhost", &on);
  if (ctx.hooks.take_click("engine.serve")) on = !sv.wanted;
  if (toggled || on != sv.wanted) {
    int port = -1;
    try {
      size_t used = 0;
      port = std::stoi(serve_port_, &used);
      if (used != serve_port_.size()) port = -1;
    } catch (const std::exception&) { port = -1; }
    if (on && (port < 0 || port > 65535)) {
      port_error_ = "\"" + serve_port_ + "\" is not a port: give a number from 1 to 65535 (0: any free port).";
    } else {
      port_error_.clear();
      ctx.cmd.set_serving(on, on ? port : sv.port);
    }
  }
  if (sv.on) {
    ImGui::TextUnformatted(("OpenAI API at " + sv.url).c_str());
    ImGui::TextDisabled("%lld answered, %lld in flight; last: %lld of %lld prompt tokens from the cache",
                        static_cast<long long>(sv.n_requests), static_cast<long long>(sv.n_in_flight),
                        static_cast<long long>(sv.last_cached_tokens), static_cast<long long>(sv.last_prompt_tokens));
  } else if (sv.error.empty() && port_error_.empty()) {
    ImGui::TextDisabled("the app's engine and KV cache answer kvchat-cli serve's API on 127.0.0.1");
  }
  for (const std::string* e : {static_cast<const std::string*>(&port_error_), &sv.error}) {
    if (e->empty()) continue;
    ImGui::PushStyleColor(ImGuiCol_Text, colors::error);
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 36.0f);
    ImGui::TextUnformatted(e->c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
  }
}

}  // namespace kvc::ui
