// The Model window: the loaded model, models found on this machine, a file browser, and what
// a model will cost before it is loaded. Disk work runs in std::async tasks polled each frame.
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/kv/kv_format.h"
#include "core/util/machine_budget.h"
#include "ui/format.h"
#include "ui/views.h"

namespace kvc::ui {

namespace fs = std::filesystem;

namespace {

template <typename T>
bool ready(const std::future<T>& f) {
  return f.valid() && f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

const char* status_text(ModelStatus s) {
  switch (s) {
    case ModelStatus::none: return "no model";
    case ModelStatus::building_demo: return "building the demo model";
    case ModelStatus::loading: return "loading";
    case ModelStatus::ready: return "ready";
    case ModelStatus::failed: return "failed";
  }
  return "";
}

void row(const char* label, const std::string& value) {
  ImGui::TextDisabled("%s", label);
  ImGui::SameLine(120.0f);
  ImGui::PushTextWrapPos(0.0f);  // long values (why a chat template cannot run) wrap at the window's edge
  ImGui::TextUnformatted(value.c_str());
  ImGui::PopTextWrapPos();
}

}  // namespace

void ModelView::select(const fs::path& p) {
  selected_ = p;
  info_.reset();
  info_future_ = std::async(std::launch::async, [p] { return read_model_info(p); });
}

void ModelView::list_dir(const fs::path& dir) {
  dir_ = dir;
  entries_.reset();
  listing_ = std::async(std::launch::async, [dir] {
    std::vector<DirEntry> out;
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.empty() || name[0] == '.') continue;
      std::error_code fec;
      DirEntry e{name, it->is_directory(fec), 0};
      if (!e.is_dir) {
        if (!has_gguf_magic(it->path())) continue;
        e.file_bytes = it->file_size(fec);
      }
      out.push_back(std::move(e));
    }
    std::sort(out.begin(), out.end(),
              [](const DirEntry& a, const DirEntry& b) { return a.is_dir != b.is_dir ? a.is_dir : a.name < b.name; });
    return out;
  });
}

void ModelView::draw_current(ViewContext& ctx) {
  const ModelState& m = ctx.snap.model;
  ImGui::PushFont(ctx.fonts.large);
  ImGui::TextUnformatted(m.name.empty() ? "No model" : m.name.c_str());
  ImGui::PopFont();
  if (m.status == ModelStatus::building_demo || m.status == ModelStatus::loading) {
    ImGui::TextUnformatted(m.status == ModelStatus::building_demo ? "Building the demo model (first launch only)..."
                                                                  : "Loading...");
    ImGui::ProgressBar(static_cast<float>(m.progress), ImVec2(-1.0f, 0));
    return;
  }
  if (m.status == ModelStatus::failed) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::error);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(("Could not load " + m.path + ": " + m.error).c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
    return;
  }
  if (m.status != ModelStatus::ready) {
    ImGui::TextDisabled("%s", status_text(m.status));
    return;
  }
  if (m.is_remote) {
    row("server", m.path);
    row("model", m.name + " (answers stream from the server; conversations stay here)");
    return;
  }
  row("architecture", m.arch + ", " + std::to_string(m.n_layer) + " layers");
  row("parameters", format_params(m.n_params) + " (" + format_bytes(static_cast<double>(m.weight_bytes)) + ")");
  row("weights", m.weight_type);
  row("context", std::to_string(m.n_ctx) + " tokens (trained: " + std::to_string(m.n_ctx_train) + ")");
  row("template", m.chat_template);
  row("backend", m.backend);
  if (m.is_demo) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::warning);
    ImGui::TextUnformatted("Demo model: random weights, gibberish replies.");
    ImGui::PopStyleColor();
  }
}

void ModelView::rescan() {
  found_.reset();
  scan_ = std::async(std::launch::async, [s = default_model_sources(home, data_dir)] { return discover_models(s); });
}

void ModelView::draw_found(ViewContext& ctx) {
  if (ready(scan_)) found_ = scan_.get();
  if (ImGui::SmallButton("Rescan")) rescan();
  ImGui::SameLine();
  text_disabled_wrapped("kvchat, Ollama, LM Studio, Hugging Face folders");
  if (!found_) {
    ImGui::TextDisabled("scanning...");
    return;
  }
  if (found_->empty()) {
    text_disabled_wrapped("No GGUF models found. Use Browse to open one from anywhere.");
    return;
  }
  ImGui::BeginChild("##found", ImVec2(0, 150.0f), true);
  for (size_t i = 0; i < found_->size(); ++i) {
    const FoundModel& f = (*found_)[i];
    ImGui::PushID(static_cast<int>(i));
    const std::string label = f.display_name + "##" + std::to_string(i);
    // Named for script mode: "model.found.FILE".
    const std::string hook = "model.found." + f.path.filename().string();
    ctx.hooks.note_widget(hook);
    if (ImGui::Selectable(label.c_str(), selected_ == f.path) || ctx.hooks.take_click(hook)) select(f.path);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", f.path.string().c_str());
    ImGui::SameLine(ImGui::GetContentRegionAvail().x - 150.0f);
    ImGui::TextDisabled("%s  %s", f.source.c_str(), format_bytes(static_cast<double>(f.file_bytes)).c_str());
    ImGui::PopID();
  }
  ImGui::EndChild();
}

void ModelView::draw_browser(ViewContext&) {
  if (dir_.empty()) list_dir(home.empty() ? fs::path("/") : home);
  if (ready(listing_)) entries_ = listing_.get();
  if (ImGui::SmallButton("Up") && dir_.has_parent_path()) list_dir(dir_.parent_path());
  ImGui::SameLine();
  ImGui::TextUnformatted(dir_.string().c_str());
  ImGui::BeginChild("##browser", ImVec2(0, 150.0f), true);
  if (!entries_) {
    ImGui::TextDisabled("reading...");
  } else if (entries_->empty()) {
    ImGui::TextDisabled("(no folders or GGUF files here)");
  } else {
    for (const DirEntry& e : *entries_) {
      if (e.is_dir) {
        if (ImGui::Selectable(("[dir] " + e.name).c_str())) {
          list_dir(dir_ / e.name);
          break;
        }
      } else {
        if (ImGui::Selectable(e.name.c_str(), selected_ == dir_ / e.name)) select(dir_ / e.name);
        ImGui::SameLine(ImGui::GetContentRegionAvail().x - 80.0f);
        ImGui::TextDisabled("%s", format_bytes(static_cast<double>(e.file_bytes)).c_str());
      }
    }
  }
  ImGui::EndChild();
}

void ModelView::draw_selected(ViewContext& ctx) {
  if (selected_.empty()) {
    text_disabled_wrapped("Select a model to see what it needs before loading it.");
    return;
  }
  if (ready(info_future_)) info_ = info_future_.get();
  if (!info_) {
    ImGui::TextDisabled("reading %s...", selected_.filename().string().c_str());
    return;
  }
  if (!info_->ok()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::error);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(("Cannot use this file: " + info_->error().message).c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
    return;
  }
  const ModelInfo& i = info_->value();
  row("model", i.name);
  row("architecture", i.arch + ", " + std::to_string(i.n_layer) + " layers, width " + std::to_string(i.n_embd) + ", " +
                          std::to_string(i.n_head) + "/" + std::to_string(i.n_head_kv) + " heads");
  row("parameters", format_params(i.n_params));
  row("weights", i.weight_type + ", " + format_bytes(static_cast<double>(i.weight_bytes)));
  if (i.n_expert > 0) {  // all experts in memory, a token reads its chosen ones
    row("experts", std::to_string(i.n_expert) + " per layer, " + std::to_string(i.n_expert_used) +
                       " per token: " + format_bytes(static_cast<double>(i.expert_bytes)) + ", " +
                       format_bytes(static_cast<double>(i.active_expert_bytes)) + " read per token");
  }
  row("context", std::to_string(i.n_ctx_train) + " tokens");
  const int max_ctx = static_cast<int>(std::max<int64_t>(256, i.n_ctx_train));
  estimate_ctx_ = std::clamp(estimate_ctx_, 256, max_ctx);
  ImGui::SetNextItemWidth(180.0f);
  ImGui::SliderInt("context##est", &estimate_ctx_, 256, max_ctx);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90.0f);
  ImGui::Combo("KV##fmt", &estimate_kv_format_, "F16\0INT8\0INT4\0");
  const kv::KvFormat fmt = estimate_kv_format_ == 0   ? kv::KvFormat::f16
                           : estimate_kv_format_ == 1 ? kv::KvFormat::int8
                                                      : kv::KvFormat::int4;
  // A quantized format the head size cannot use estimates as F16, the format that would run.
  const double q_elem = kv::kv_bytes_per_element(fmt, i.kv_group);
  const double elem = q_elem > 0 ? q_elem : 2.0;
  const double kv = kv_estimate_bytes(i, estimate_ctx_, elem);
  row("memory", format_bytes(memory_estimate_bytes(i, estimate_ctx_, elem)) + " (weights " +
                    format_bytes(static_cast<double>(i.weight_bytes)) + " + KV " + format_bytes(kv) + ")");
  if (i.n_local_layers > 0) {  // Gemma: the local layers' KV group keeps only its window
    const double local = i.kv_bytes_per_token_local_f16 / 2.0 * elem;
    const double global = i.kv_bytes_per_token_f16 / 2.0 * elem - local;
    const double full = kv_estimate_bytes(i, estimate_ctx_, elem, true);
    row("KV groups", std::to_string(i.n_layer - i.n_local_layers) + " global layers " + format_bytes(global) +
                         "/token + " + std::to_string(i.n_local_layers) + " local (window " +
                         std::to_string(i.local_window) + ") " + format_bytes(local) + "/token");
    char saved[160];
    std::snprintf(saved, sizeof saved, "%s instead of %s (saves %.1f %%)", format_bytes(kv).c_str(),
                  format_bytes(full).c_str(), full > 0 ? 100.0 * (1.0 - kv / full) : 0.0);
    row("KV, window kept", saved);
  }
  // Free RAM as of the last load, plus the loaded model's weights, which loading this one frees.
  const EngineState& es = ctx.snap.engine;
  MachineResources m{es.mem_total_bytes, es.mem_available_bytes + ctx.snap.model.weight_bytes, es.disk_free_bytes};
  if (const std::string w = fit_warning(m, i.weight_bytes, static_cast<uint64_t>(kv), estimate_ctx_); !w.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::warning);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(("This model " + w + ".").c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
  }
  const bool busy =
      ctx.snap.model.status == ModelStatus::loading || ctx.snap.model.status == ModelStatus::building_demo;
  ImGui::BeginDisabled(busy || ctx.snap.chat.generating);
  if (named_button(ctx.hooks, "model.load", "Load this model")) ctx.cmd.load_model(selected_.string());
  ImGui::EndDisabled();
}

void ModelView::draw(ViewContext& ctx) {
  if (!started_) {
    started_ = true;
    rescan();
  }
  // A finished download is listed (and selected) at once.
  if (ctx.snap.download.n_completed != seen_downloads_) {
    seen_downloads_ = ctx.snap.download.n_completed;
    rescan();
    if (!ctx.snap.download.path.empty()) select(ctx.snap.download.path);
  }
  if (!ImGui::Begin(k_model_window)) {
    ImGui::End();
    return;
  }
  ctx.hooks.note_window(k_model_window);
  draw_current(ctx);
  ImGui::Separator();
  if (ImGui::BeginTabBar("##model_tabs")) {
    ImGuiTabItemFlags found_flags = 0;
    ctx.hooks.note_widget("model.tab.found");
    if (ctx.hooks.take_click("model.tab.found")) found_flags = ImGuiTabItemFlags_SetSelected;
    if (ImGui::BeginTabItem("On this machine", nullptr, found_flags)) {
      draw_found(ctx);
      ImGui::EndTabItem();
    }
    ImGuiTabItemFlags browse_flags = 0;
    if (open_browser) {
      browse_flags = ImGuiTabItemFlags_SetSelected;
      open_browser = false;
    }
    if (ImGui::BeginTabItem("Browse", nullptr, browse_flags)) {
      draw_browser(ctx);
      ImGui::EndTabItem();
    }
    // Named for script mode: clicking "model.tab.download" opens the tab.
    ImGuiTabItemFlags download_flags = 0;
    ctx.hooks.note_widget("model.tab.download");
    if (ctx.hooks.take_click("model.tab.download")) download_flags = ImGuiTabItemFlags_SetSelected;
    if (ImGui::BeginTabItem("Download", nullptr, download_flags)) {
      draw_download(ctx);
      ImGui::EndTabItem();
    }
    ImGuiTabItemFlags remote_flags = 0;
    ctx.hooks.note_widget("model.tab.remote");
    if (ctx.hooks.take_click("model.tab.remote")) remote_flags = ImGuiTabItemFlags_SetSelected;
    if (ImGui::BeginTabItem("Remote", nullptr, remote_flags)) {
      draw_remote(ctx);
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
  }
  draw_selected(ctx);
  ImGui::End();
}

}  // namespace kvc::ui
