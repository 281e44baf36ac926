// Fonts and colors.
#include "ui/theme.h"

#include <filesystem>

namespace kvc::ui {

namespace {

constexpr float k_base_font_px = 16.0f;

const char* first_existing(std::initializer_list<const char*> paths) {
  for (const char* p : paths) {
    std::error_code ec;
    if (std::filesystem::exists(p, ec)) return p;
  }
  return nullptr;
}

// Glyphs rasterized at the size they are drawn and placed on whole pixels: the atlas is then
// read texel for pixel, and the window samples it without filtering (app/gui/main.cpp),
// which under a software rasterizer (Mesa's llvmpipe) costs less per pixel than bilinear.
ImFontConfig pixel_exact_config() {
  ImFontConfig cfg;
  cfg.OversampleH = 1;
  cfg.OversampleV = 1;
  cfg.PixelSnapH = true;
  return cfg;
}

ImFont* add_font(const char* path, float px, bool with_cjk) {
  ImGuiIO& io = ImGui::GetIO();
  if (!path) return nullptr;
  ImFontConfig cfg = pixel_exact_config();
  ImFont* f = io.Fonts->AddFontFromFileTTF(path, px, &cfg, io.Fonts->GetGlyphRangesDefault());
  if (!f) return nullptr;
  // Extra scripts merged into the same font when their fonts are installed.
  static const ImWchar k_extra[] = {0x0100, 0x024F, 0x0370, 0x03FF, 0x0400, 0x052F, 0x2000,
                                    0x206F, 0x2190, 0x21FF, 0x2500, 0x25FF, 0};
  ImFontConfig merge = pixel_exact_config();
  merge.MergeMode = true;
  io.Fonts->AddFontFromFileTTF(path, px, &merge, k_extra);
  if (with_cjk) {
    if (const char* cjk = first_existing({"/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
                                          "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
                                          "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf"})) {
      io.Fonts->AddFontFromFileTTF(cjk, px, &merge, io.Fonts->GetGlyphRangesChineseSimplifiedCommon());
      io.Fonts->AddFontFromFileTTF(cjk, px, &merge, io.Fonts->GetGlyphRangesJapanese());
    }
  }
  return f;
}

}  // namespace

Fonts load_fonts(float scale) {
  ImFontAtlas& atlas = *ImGui::GetIO().Fonts;
  atlas.Clear();
  atlas.Flags |= ImFontAtlasFlags_NoBakedLines;  // thick lines as polygons: baked ones need bilinear filtering
  return add_fonts(scale, true);
}

Fonts add_fonts(float scale, bool with_cjk) {
  ImGuiIO& io = ImGui::GetIO();
  const char* sans = first_existing(
      {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf"});
  const char* mono = first_existing({"/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
                                     "/usr/share/fonts/truetype/noto/NotoSansMono-Regular.ttf"});
  Fonts f;
  f.regular = add_font(sans, k_base_font_px * scale, with_cjk);
  if (!f.regular) {
    ImFontConfig cfg;
    cfg.SizePixels = 13.0f * scale;
    f.regular = io.Fonts->AddFontDefault(&cfg);
  }
  f.mono = add_font(mono, (k_base_font_px - 1.0f) * scale, false);
  if (!f.mono) f.mono = f.regular;
  f.large = add_font(sans, k_base_font_px * 1.5f * scale, false);
  if (!f.large) f.large = f.regular;
  // The styled faces, when the family has them (DejaVu does; Noto's names differ).
  auto face = [&](std::initializer_list<const char*> paths, float px, ImFont* fallback) {
    ImFont* font = add_font(first_existing(paths), px, false);
    return font ? font : fallback;
  };
  const float px = k_base_font_px * scale;
  f.bold =
      face({"/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf", "/usr/share/fonts/truetype/noto/NotoSans-Bold.ttf"},
           px, f.regular);
  f.italic = face(
      {"/usr/share/fonts/truetype/dejavu/DejaVuSans-Oblique.ttf", "/usr/share/fonts/truetype/noto/NotoSans-Italic.ttf"},
      px, f.regular);
  f.bold_italic = face({"/usr/share/fonts/truetype/dejavu/DejaVuSans-BoldOblique.ttf",
                        "/usr/share/fonts/truetype/noto/NotoSans-BoldItalic.ttf"},
                       px, f.bold);
  f.medium =
      face({"/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf", "/usr/share/fonts/truetype/noto/NotoSans-Bold.ttf"},
           px * 1.25f, f.large);
  return f;
}

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
