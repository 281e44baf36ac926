// Menu bar, shortcuts (Ctrl+N, Ctrl+Enter, Esc, Ctrl+F, Ctrl+Up/Down, PageUp/PageDown, Ctrl+End)
// and window layouts (normal, presenter).
#include "ui/shell.h"

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>

#include "ui/demo_mode.h"

namespace kvc::ui {

namespace {

// Height of the demo's caption bar: a fraction of the display in the presenter layout.
float caption_height(bool has_demo, bool presenter, float display_h) {
  if (!has_demo) return 0;
  return display_h * (presenter ? 0.18f : 0.14f);
}

}  // namespace

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
  // Ctrl+Up / Ctrl+Down: the previous / next conversation of the list (most recent first).
  const int step = ((ctrl && pressed(ImGuiKey_UpArrow)) || ctx.hooks.take_key("ctrl+up"))       ? -1
                   : ((ctrl && pressed(ImGuiKey_DownArrow)) || ctx.hooks.take_key("ctrl+down")) ? 1
                                                                                                : 0;
  if (step != 0 && !ctx.snap.conversations.empty()) {
    const auto& list = ctx.snap.conversations;
    int at = -1;
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].id == ctx.snap.chat.conversation_id) at = static_cast<int>(i);
    }
    const int next = at < 0 ? 0 : std::clamp(at + step, 0, static_cast<int>(list.size()) - 1);
    if (next != at) ctx.cmd.open_conversation(list[static_cast<size_t>(next)].id);
  }
  // PageUp / PageDown: the chat history a page up / down, wherever the keyboard is; Ctrl+End: to
  // its end.
  if (pressed(ImGuiKey_PageUp) || ctx.hooks.take_key("page_up")) chat.page_scroll = -1;
  if (pressed(ImGuiKey_PageDown) || ctx.hooks.take_key("page_down")) chat.page_scroll = 1;
  if ((ctrl && pressed(ImGuiKey_End)) || ctx.hooks.take_key("ctrl+end")) chat.scroll_to_end = true;
  // Ctrl+Enter inside the input box is handled by the chat view; from anywhere else it sends too.
  if ((ctrl && pressed(ImGuiKey_Enter) && !io.WantTextInput) || ctx.hooks.take_key("ctrl+enter")) chat.send(ctx);
}

void Shell::layout(float menu_h) {
  const ImVec2 d = ImGui::GetIO().DisplaySize;
  const float gap = 6.0f;
  const float left_w = d.x * 0.20f;
  const float right_w = d.x * 0.30f;
  const float mid_w = d.x - left_w - right_w - 4.0f * gap;
  const float caption_h = caption_height(demo != nullptr, false, d.y);
  if (demo) {
    ImGui::SetWindowPos(k_demo_window, ImVec2(gap, menu_h + gap));
    ImGui::SetWindowSize(k_demo_window, ImVec2(d.x - 2 * gap, caption_h));
  }
  const float top = menu_h + gap + (caption_h > 0 ? caption_h + gap : 0);
  const float h = d.y - top - gap;
  const float model_h = h * 0.45f;  // the model's facts fit; the memory window's charts get the rest
  ImGui::SetWindowPos(k_conversations_window, ImVec2(gap, top));
  ImGui::SetWindowSize(k_conversations_window, ImVec2(left_w, h));
  ImGui::SetWindowPos(k_chat_window, ImVec2(2 * gap + left_w, top));
  ImGui::SetWindowSize(k_chat_window, ImVec2(mid_w, h));
  ImGui::SetWindowPos(k_model_window, ImVec2(3 * gap + left_w + mid_w, top));
  ImGui::SetWindowSize(k_model_window, ImVec2(right_w, model_h));
  ImGui::SetWindowPos(k_memory_window, ImVec2(3 * gap + left_w + mid_w, top + model_h + gap));
  ImGui::SetWindowSize(k_memory_window, ImVec2(right_w, h - model_h - gap));
}

// Chat and memory side by side under the caption, a narrow conversation list on the left;
// the model window stays hidden (File > Open model leaves the presenter layout).
void Shell::presenter_layout(float menu_h) {
  const ImVec2 d = ImGui::GetIO().DisplaySize;
  const float gap = 8.0f;
  const float caption_h = caption_height(demo != nullptr, true, d.y);
  if (demo) {
    ImGui::SetWindowPos(k_demo_window, ImVec2(gap, menu_h + gap));
    ImGui::SetWindowSize(k_demo_window, ImVec2(d.x - 2 * gap, caption_h));
  }
  const float top = menu_h + gap + (caption_h > 0 ? caption_h + gap : 0);
  const float h = d.y - top - gap;
  const float list_w = (d.x - 4 * gap) * 0.16f;
  const float chat_w = (d.x - 4 * gap) * 0.46f;
  ImGui::SetWindowPos(k_conversations_window, ImVec2(gap, top));
  ImGui::SetWindowSize(k_conversations_window, ImVec2(list_w, h));
  ImGui::SetWindowPos(k_chat_window, ImVec2(2 * gap + list_w, top));
  ImGui::SetWindowSize(k_chat_window, ImVec2(chat_w, h));
  ImGui::SetWindowPos(k_memory_window, ImVec2(3 * gap + list_w + chat_w, top));
  ImGui::SetWindowSize(k_memory_window, ImVec2(d.x - 4 * gap - list_w - chat_w, h));
}

void Shell::draw(ViewContext& outer) {
  // The presenter layout draws every window with the large font set.
  const bool big = presenter && presenter_fonts;
  ViewContext ctx{outer.snap, outer.cmd, outer.hooks, big ? *presenter_fonts : outer.fonts, outer.now_ms};
  if (big) ImGui::PushFont(presenter_fonts->regular);
  shortcuts(ctx);
  float menu_h = 0;
  if (ImGui::BeginMainMenuBar()) {
    if (ImGui::BeginMenu("File")) {
      if (ImGui::MenuItem("New chat", "Ctrl+N")) ctx.cmd.new_conversation();
      if (ImGui::MenuItem("Open model...")) {
        model.open_browser = true;
        presenter = false;  // the model window is not part of the presenter layout
      }
      ImGui::Separator();
      if (ImGui::MenuItem("Quit")) quit = true;
      ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("View")) {
      if (ImGui::MenuItem("Reset layout")) reset_layout = true;
      ImGui::MenuItem("Presenter layout", nullptr, &presenter);
      ImGui::Separator();
      ImGui::MenuItem("KV calculator", nullptr, &kv_calculator.open);
      ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Engine")) {
      ImGui::MenuItem("Tier budgets, serving...", nullptr, &engine.open);
      const ServeState& sv = ctx.snap.engine.serve;
      bool serve = sv.wanted;
      if (ImGui::MenuItem("Serve on localhost", nullptr, &serve)) ctx.cmd.set_serving(serve, sv.port);
      if (ImGui::MenuItem("Restart engine (resume from disk)")) ctx.cmd.restart_engine();
      ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Demo")) {
      if (demo_files.empty()) ImGui::TextDisabled("no demos found");
      for (const auto& f : demo_files) {
        if (ImGui::MenuItem(f.stem().string().c_str())) demo_requested = f;
      }
      ImGui::EndMenu();
    }
    const ModelState& m = ctx.snap.model;
    const char* state = m.status == ModelStatus::ready    ? (ctx.snap.chat.generating ? "generating" : "ready")
                        : m.status == ModelStatus::failed ? "model failed to load"
                        : m.status == ModelStatus::none   ? "no model"
                                                          : "loading model";
    const std::string right = m.name + "  ·  " + state;
    ImGui::SameLine(ImGui::GetWindowWidth() - ImGui::CalcTextSize(right.c_str()).x - 20.0f);
    ImGui::TextDisabled("%s", right.c_str());
    menu_h = ImGui::GetWindowSize().y;
    ImGui::EndMainMenuBar();
  }
  // Script mode opens the Engine window as its menu item does.
  ctx.hooks.note_widget("menu.engine");
  if (ctx.hooks.take_click("menu.engine")) engine.open = true;
  const ImVec2 d = ImGui::GetIO().DisplaySize;
  if (d.x != last_display_.x || d.y != last_display_.y || presenter != was_presenter_) {
    reset_layout = true;
    last_display_ = d;
    was_presenter_ = presenter;
  }
  if (restore_layout) {  // the layout of the last run (imgui.ini) stands
    reset_layout = false;
    restore_layout = false;
  }
  // Windows must exist before SetWindowPos by name works: draw first, lay out after.
  if (demo) demo->draw(ctx);
  conversations.draw(ctx);
  chat.draw(ctx);
  if (!presenter) model.draw(ctx);
  memory.draw(ctx);
  kv_calculator.draw(ctx);
  engine.draw(ctx);
  if (reset_layout) {
    if (presenter) {
      presenter_layout(menu_h);
    } else {
      layout(menu_h);
    }
    reset_layout = false;
  }
  if (big) ImGui::PopFont();
}

}  // namespace kvc::ui
