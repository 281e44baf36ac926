// ScriptHooks, the std::string input helpers and text ellipsis.
#include "ui/widgets.h"

#include <imgui_internal.h>

#include "ui/format.h"
#include "ui/wrapped_text.h"

namespace kvc::ui {

void ScriptHooks::begin_frame() {
  seen_prev_ = std::move(seen_);
  seen_.clear();
}

bool ScriptHooks::take_text(const std::string& widget, std::string& out) {
  auto it = texts_.find(widget);
  if (it == texts_.end()) return false;
  out = std::move(it->second);
  texts_.erase(it);
  return true;
}

bool ScriptHooks::take_click(const std::string& widget) { return clicks_.erase(widget) != 0; }
bool ScriptHooks::take_key(const std::string& key) { return keys_.erase(key) != 0; }

std::string ScriptHooks::seen_list() const {
  std::string s;
  for (const auto& w : seen_prev_) s += (s.empty() ? "" : ", ") + w;
  return s.empty() ? "(none)" : s;
}

void ScriptHooks::note_window(const std::string& title) {
  const ImVec2 p = ImGui::GetWindowPos();
  const ImVec2 sz = ImGui::GetWindowSize();
  windows_[title] = Rect{p, ImVec2(p.x + sz.x, p.y + sz.y)};
}

std::optional<ScriptHooks::Rect> ScriptHooks::window_rect(const std::string& title) const {
  auto it = windows_.find(title);
  if (it == windows_.end()) return std::nullopt;
  return it->second;
}

namespace {

// Grows the std::string behind an InputText as the user types.
int resize_callback(ImGuiInputTextCallbackData* data) {
  if (data->EventFlag == ImGuiInputTextFlags_CallbackResize) {
    auto* s = static_cast<std::string*>(data->UserData);
    s->resize(static_cast<size_t>(data->BufTextLen));
    data->Buf = s->data();
  }
  return 0;
}

}  // namespace

bool input_string(const char* label, std::string& text, ImGuiInputTextFlags flags) {
  return ImGui::InputText(label, text.data(), text.capacity() + 1, flags | ImGuiInputTextFlags_CallbackResize,
                          resize_callback, &text);
}

bool input_string_multiline(const char* label, std::string& text, ImVec2 size, ImGuiInputTextFlags flags) {
  return ImGui::InputTextMultiline(label, text.data(), text.capacity() + 1, size,
                                   flags | ImGuiInputTextFlags_CallbackResize, resize_callback, &text);
}

bool named_button(ScriptHooks& hooks, const std::string& name, const char* label, ImVec2 size) {
  hooks.note_widget(name);
  const bool pressed = ImGui::Button(label, size);
  return hooks.take_click(name) || pressed;
}

bool release_text_field(const char* label) {
  if (ImGui::GetActiveID() != ImGui::GetID(label)) return false;
  ImGui::ClearActiveID();
  return true;
}

bool named_input(ScriptHooks& hooks, const std::string& name, const char* label, std::string& text,
                 ImGuiInputTextFlags flags, ImVec2 size, const char* hint) {
  hooks.note_widget(name);
  // Text from a script replaces the content; an active field keeps its own copy of the text,
  // so it is deactivated first.
  if (hooks.take_text(name, text) && ImGui::GetActiveID() == ImGui::GetID(label)) ImGui::ClearActiveID();
  if (size.y > 0) return input_string_multiline(label, text, size, flags);
  if (hint) {
    return ImGui::InputTextWithHint(label, hint, text.data(), text.capacity() + 1,
                                    flags | ImGuiInputTextFlags_CallbackResize, resize_callback, &text);
  }
  return input_string(label, text, flags);
}

std::string ellipsize(std::string text, float max_w) {
  const ImFont* font = ImGui::GetFont();
  const float size = ImGui::GetFontSize();
  if (fit_prefix(font, size, text, max_w) == text.size()) return text;
  text.resize(fit_prefix(font, size, text, max_w - ImGui::CalcTextSize("…").x));
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text + "…";
}

void text_disabled_wrapped(const char* text) {
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
  ImGui::TextWrapped("%s", text);
  ImGui::PopStyleColor();
}

}  // namespace kvc::ui
