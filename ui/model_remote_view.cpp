// The Model window's Remote tab: a server's base URL, an optional API key, its models, connect.
#include <imgui.h>

#include <cstdlib>

#include "ui/views.h"

namespace kvc::ui {

void ModelView::draw_remote(ViewContext& ctx) {
  const RemoteState& rs = ctx.snap.remote;
  if (!remote_prefilled_) {
    remote_prefilled_ = true;
    for (const SavedServer& v : rs.saved) {
      if (v.url != rs.last_url) continue;
      remote_url_ = v.url;
      remote_model_ = v.model;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", v.timeout_s);
      remote_timeout_ = buf;
    }
  }
  text_disabled_wrapped(
      "An OpenAI-compatible server: kvchat-cli serve, vLLM, SGLang, llama-server, Ollama. "
      "Answers stream from it; conversations, branches and search stay on this machine.");
  ImGui::SetNextItemWidth(-110.0f);
  named_input(ctx.hooks, "model.remote_url", "base URL", remote_url_, 0, ImVec2(0, 0), "http://gpu-box:8000/v1");
  ImGui::SetNextItemWidth(-110.0f);
  named_input(ctx.hooks, "model.remote_key", "API key", remote_key_, ImGuiInputTextFlags_Password, ImVec2(0, 0),
              "optional; stored with user-only permissions");
  ImGui::SetNextItemWidth(80.0f);
  named_input(ctx.hooks, "model.remote_timeout", "timeout (s)", remote_timeout_, ImGuiInputTextFlags_CharsDecimal);
  ImGui::BeginDisabled(rs.listing || remote_url_.empty());
  if (named_button(ctx.hooks, "model.remote_list", "List models")) ctx.cmd.list_remote_models(remote_url_, remote_key_);
  ImGui::EndDisabled();
  if (rs.listing) {
    ImGui::SameLine();
    ImGui::TextDisabled("asking the server...");
  }
  if (!rs.list_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::error);
    ImGui::TextWrapped("%s", rs.list_error.c_str());
    ImGui::PopStyleColor();
  }
  if (!rs.models.empty()) {
    ImGui::TextDisabled("models on %s", rs.listed_url.c_str());
    ImGui::BeginChild("##remote_models", ImVec2(0, 100.0f), true);
    for (const std::string& id : rs.models) {
      // Named for script mode: "model.remote_model.ID".
      const std::string hook = "model.remote_model." + id;
      ctx.hooks.note_widget(hook);
      if (ImGui::Selectable((id + "##rm").c_str(), remote_model_ == id) || ctx.hooks.take_click(hook)) {
        remote_model_ = id;
      }
    }
    ImGui::EndChild();
  }
  const double timeout = std::atof(remote_timeout_.c_str());
  ImGui::BeginDisabled(remote_url_.empty() || remote_model_.empty() || ctx.snap.chat.generating);
  const std::string label = remote_model_.empty() ? std::string("Connect") : "Chat with " + remote_model_;
  if (named_button(ctx.hooks, "model.remote_connect", label.c_str())) {
    RemoteConnection c;
    c.url = remote_url_;
    c.api_key = remote_key_;
    c.keep_key = remote_key_.empty();
    c.model = remote_model_;
    c.timeout_s = timeout;
    ctx.cmd.connect_remote(std::move(c));
    remote_key_.clear();  // kept on disk (0600) by the controller; not in this window any longer
  }
  ImGui::EndDisabled();
  if (!rs.saved.empty()) {
    ImGui::Spacing();
    ImGui::TextDisabled("Used before");
    for (size_t i = 0; i < rs.saved.size(); ++i) {
      const SavedServer& v = rs.saved[i];
      ImGui::PushID(static_cast<int>(i));
      const std::string text = v.url + "  " + v.model + (v.has_key ? "  (key stored)" : "");
      const std::string hook = "model.remote_saved." + std::to_string(i);
      ctx.hooks.note_widget(hook);
      if (ImGui::Selectable(text.c_str()) || ctx.hooks.take_click(hook)) {
        remote_url_ = v.url;
        remote_model_ = v.model;
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v.timeout_s);
        remote_timeout_ = buf;
      }
      ImGui::PopID();
    }
  }
}

}  // namespace kvc::ui
