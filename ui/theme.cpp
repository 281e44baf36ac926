// Colors, rounding and spacing (the fonts are ui/glyph_atlas.h's).
#include "ui/theme.h"

namespace kvc::ui {

void apply_theme(float scale) {
  ImGuiStyle& s = ImGui::GetStyle();
  s = ImGuiStyle();
  ImGui::StyleColorsDark(&s);
  s.WindowRounding = 6.0f;
  s.ChildRounding = 6.0f;
  s.FrameRounding = 5.0f;
  s.PopupRounding = 5.0f;
  s.GrabRounding = 4.0f;
  s.ScrollbarRounding = 6.0f;
  s.TabRounding = 5.0f;
  s.WindowPadding = ImVec2(12, 10);
  s.FramePadding = ImVec2(8, 5);
  s.ItemSpacing = ImVec2(8, 7);
  s.WindowBorderSize = 1.0f;
  s.FrameBorderSize = 0.0f;
  s.WindowTitleAlign = ImVec2(0.02f, 0.5f);
  ImVec4* c = s.Colors;
  c[ImGuiCol_WindowBg] = ImVec4(0.105f, 0.110f, 0.125f, 1.0f);
  // Child regions (the chat history, the lists, the block map) show their window's background: a
  // tint of their own was a second fill under most of the window, a third of each frame's pixels
  // under a software rasterizer, for a shade hardly told from the window's. Code blocks set theirs.
  c[ImGuiCol_ChildBg] = ImVec4(0, 0, 0, 0);
  c[ImGuiCol_PopupBg] = ImVec4(0.13f, 0.14f, 0.16f, 0.98f);
  c[ImGuiCol_Border] = ImVec4(0.22f, 0.23f, 0.27f, 1.0f);
  c[ImGuiCol_TitleBg] = ImVec4(0.085f, 0.090f, 0.105f, 1.0f);
  c[ImGuiCol_TitleBgActive] = ImVec4(0.12f, 0.16f, 0.24f, 1.0f);
  c[ImGuiCol_MenuBarBg] = ImVec4(0.085f, 0.090f, 0.105f, 1.0f);
  c[ImGuiCol_FrameBg] = ImVec4(0.17f, 0.18f, 0.21f, 1.0f);
  c[ImGuiCol_FrameBgHovered] = ImVec4(0.21f, 0.23f, 0.28f, 1.0f);
  c[ImGuiCol_FrameBgActive] = ImVec4(0.24f, 0.27f, 0.34f, 1.0f);
  c[ImGuiCol_Button] = ImVec4(0.20f, 0.30f, 0.48f, 1.0f);
  c[ImGuiCol_ButtonHovered] = ImVec4(0.27f, 0.40f, 0.64f, 1.0f);
  c[ImGuiCol_ButtonActive] = ImVec4(0.30f, 0.46f, 0.74f, 1.0f);
  c[ImGuiCol_Header] = ImVec4(0.20f, 0.28f, 0.42f, 1.0f);
  c[ImGuiCol_HeaderHovered] = ImVec4(0.25f, 0.35f, 0.54f, 1.0f);
  c[ImGuiCol_HeaderActive] = ImVec4(0.28f, 0.40f, 0.62f, 1.0f);
  c[ImGuiCol_Tab] = ImVec4(0.15f, 0.17f, 0.21f, 1.0f);
  c[ImGuiCol_TabHovered] = ImVec4(0.27f, 0.40f, 0.64f, 1.0f);
  c[ImGuiCol_TabActive] = ImVec4(0.22f, 0.32f, 0.52f, 1.0f);
  c[ImGuiCol_PlotHistogram] = colors::accent;
  c[ImGuiCol_CheckMark] = colors::accent;
  c[ImGuiCol_SliderGrab] = colors::accent;
  c[ImGuiCol_Text] = ImVec4(0.92f, 0.93f, 0.95f, 1.0f);
  c[ImGuiCol_TextDisabled] = colors::muted;
  s.ScaleAllSizes(scale);
}

}  // namespace kvc::ui
