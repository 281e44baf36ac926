// kvchat's look: the fonts the views draw with (built by ui/glyph_atlas.h) and colors, scaled for HiDPI.
#pragma once

#include <imgui.h>

namespace kvc::ui {

// Glyphs are rasterized at the size they are drawn and snapped to whole pixels: the renderer
// samples the atlas without filtering (GL_NEAREST), the same text for less work per pixel.
struct Fonts {
  ImFont* regular = nullptr;
  ImFont* mono = nullptr;   // code blocks
  ImFont* large = nullptr;  // headings
  // Markdown answers: emphasis and the smaller headings (each falls back to regular).
  ImFont* bold = nullptr;
  ImFont* italic = nullptr;
  ImFont* bold_italic = nullptr;
  ImFont* medium = nullptr;  // bold, 1.25x: second-level headings
};

// The presenter layout's font size relative to the normal one (on top of HiDPI scaling).
inline constexpr float k_presenter_font_scale = 1.75f;
// Colors, rounding and spacing; sizes multiplied by `scale`.
void apply_theme(float scale);

// Accent colors the views share.
namespace colors {
inline const ImVec4 accent{0.36f, 0.62f, 0.98f, 1.0f};
inline const ImVec4 user{0.55f, 0.80f, 1.00f, 1.0f};
inline const ImVec4 assistant{0.65f, 0.90f, 0.65f, 1.0f};
inline const ImVec4 muted{0.58f, 0.60f, 0.66f, 1.0f};
inline const ImVec4 warning{1.00f, 0.80f, 0.35f, 1.0f};
inline const ImVec4 error{1.00f, 0.45f, 0.42f, 1.0f};
inline const ImVec4 cached{0.30f, 0.78f, 0.50f, 1.0f};
inline const ImVec4 computed{0.96f, 0.60f, 0.25f, 1.0f};
}  // namespace colors

}  // namespace kvc::ui
