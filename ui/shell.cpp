// Menu bar, shortcuts (Ctrl+N, Ctrl+Enter, Esc, Ctrl+F) and window layout.
#include "ui/shell.h"

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <imgui.h>

namespace kvc::ui {

void Shell::shortcuts(ViewContext& ctx) {
  ImGuiIO& io = ImGui::GetIO();
  const bool ctrl = io.KeyCtrl;
  auto pressed = [](ImGuiKey k) { return ImGui::IsKeyPressed(ImGui::GetKeyIndex(k), false); };
  // ImGui 1.86 maps only a few letters; the GLFW backend fills KeysDown by GLFW key code.
  auto letter = [](int glfw_key) { return ImGui::IsKeyPressed(glfw_key, false); };
  if ((ctrl && letter(GLFW_KEY_N)) || ctx.hooks.take_key("ctrl+n")) {
    ctx.cmd.new_conversation();
    chat.focus_input = true;
  }
  if ((ctrl && letter(GLFW_KEY_F)) || ctx.hooks.take_key("ctrl+f")) conversations.focus_search = true;
  if (pressed(ImGuiKey_Escape) || ctx.hooks.take_key("escape")) {
    if (ctx.snap.chat.generating) ctx.cmd.stop();
  }
  // Ctrl+Enter inside the input box is handled by the chat view; from anywhere else it sends too.
  if ((ctrl && pressed(ImGuiKey_Enter) && !io.WantTextInput) || ctx.hooks.take_key("ctrl+enter")) chat.send(ctx);
}

void Shell::layout(float menu_h) {
  const ImVec2 d = ImGui::GetIO().DisplaySize;
  const float gap = 6.0f;
  const float left_w = d.x * 0.20f;
  const float right_w = d.x * 0.30f;
  const float mid_w = d.x - left_w - right_w - 4.0f * gap;
  const float top = menu_h + gap;
  const float h = d.y - top - gap;
  const float model_h = h * 0.50f;
  ImGui::SetWindowPos(k_conversations_window, ImVec2(gap, top));
  ImGui::SetWindowSize(k_conversations_window, ImVec2(left_w, h));
  ImGui::SetWindowPos(k_chat_window, ImVec2(2 * gap + left_w, top));
  ImGui::SetWindowSize(k_chat_window, ImVec2(mid_w, h));
  ImGui::SetWindowPos(k_model_window, ImVec2(3 * gap + left_w + mid_w, top));
  ImGui::SetWindowSize(k_model_window, ImVec2(right_w, model_h));
  ImGui::SetWindowPos(k_memory_window, ImVec2(3 * gap + left_w + mid_w, top + model_h + gap));
  ImGui::SetWindowSize(k_memory_window, ImVec2(right_w, h - model_h - gap));
}

void Shell::draw(ViewContext& ctx) {
  shortcuts(ctx);
  float menu_h = 0;
  if (ImGui::BeginMainMenuBar()) {
    if (ImGui::BeginMenu("File")) {
      if (ImGui::MenuItem("New chat", "Ctrl+N")) ctx.cmd.new_conversation();
      if (ImGui::MenuItem("Open model...")) model.open_browser = true;
      ImGui::Separator();
      if (ImGui::MenuItem("Quit")) quit = true;
      ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("View")) {
      if (ImGui::MenuItem("Reset layout")) reset_layout = true;
      ImGui::EndMenu();
    }
    const ModelState& m = ctx.snap.model;
    const char* state = m.status == ModelStatus::ready ? (ctx.snap.chat.generating ? "generating" : "ready")
                        : m.status == ModelStatus::failed ? "model failed to load"
                        : m.status == ModelStatus::none   ? "no model"
                                                          : "loading model";
    const std::string right = m.name + "  ·  " + state;
    ImGui::SameLine(ImGui::GetWindowWidth() - ImGui::CalcTextSize(right.c_str()).x - 20.0f);
    ImGui::TextDisabled("%s", right.c_str());
    menu_h = ImGui::GetWindowSize().y;
    ImGui::EndMainMenuBar();
  }
  const ImVec2 d = ImGui::GetIO().DisplaySize;
  if (d.x != last_display_.x || d.y != last_display_.y) {
    reset_layout = true;
    last_display_ = d;
  }
  // Windows must exist before SetWindowPos by name works: draw first, lay out after.
  conversations.draw(ctx);
  chat.draw(ctx);
  model.draw(ctx);
  memory.draw(ctx);
  if (reset_layout) {
    layout(menu_h);
    reset_layout = false;
  }
}

}  // namespace kvc::ui
