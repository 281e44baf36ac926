// The app's font atlas: the DejaVu faces at the sizes they are drawn, and, for the code points
// that the text shown needs, glyphs from the fallback chain (ui/font_chain.h: Noto's scripts, CJK,
// symbols) merged into every face, the title's and the input box's included.
//
// Every script's full ranges in every face would make a huge atlas and a slow start, so the atlas
// holds a base set (Latin, Greek, Cyrillic, punctuation, arrows, box drawing) plus the code points
// noted in what is shown (with the 128 around each, for alphabets; ideographs one by one), and is
// built again between frames when new ones come (the renderer's
// texture must then be made again). Dear ImGui 1.86 as Debian builds it has 16-bit ImWchar: code
// points past U+FFFF (most emoji) draw as U+FFFD. It does no shaping: no Arabic joining, no
// right-to-left reordering, combining marks drawn as glyphs of their own.
#pragma once

#include <imgui.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ui/app_state.h"
#include "ui/font_chain.h"
#include "ui/theme.h"

namespace kvc::ui {

// Invariant: needed_ holds code points outside the base set that some chain file draws, at
// most k_max_needed of them; state_[cp] says whether cp was looked at and who draws it.
class GlyphAtlas {
 public:
  // Code points past the base set the atlas takes at most (a text of many thousands of distinct
  // ideographs draws the rest as the fallback glyph rather than growing the atlas without bound).
  static constexpr size_t k_max_needed = 4096;

  GlyphAtlas(FontChain chain, FontChain faces_regular, FontChain faces_mono, FontChain faces_bold,
             FontChain faces_italic, FontChain faces_bold_italic);
  // The chain and faces of a Debian system (DejaVu, then Noto's names); a file that is not
  // installed is left out, and the packages missing are said once on stderr.
  static GlyphAtlas debian();

  // Code points to have glyphs for (UTF-8; ImGui's wide text of an input box).
  void note_text(std::string_view utf8);
  void note_wide(const ImWchar* text, size_t n);
  // Every text of the snapshot that may be drawn; a message's text is read from where the last
  // call left it (answers grow while they stream).
  void note_snapshot(const AppSnapshot& s);
  // New code points came since the last build().
  bool needs_build() const { return dirty_; }
  // Builds `atlas` anew (the old fonts are gone): `normal` at `scale`, `presenter` at
  // presenter_scale. Leaves the atlas built (pixels made), ready for the renderer's texture.
  void build(ImFontAtlas& atlas, float scale, float presenter_scale, Fonts& normal, Fonts& presenter);

  size_t n_needed() const { return needed_.size(); }
  int64_t n_builds() const { return n_builds_; }
  double last_build_ms() const { return last_build_ms_; }
  // Of the code points noted that a chain file draws, how many `font` has no glyph for (0 when the
  // atlas is up to date).
  size_t n_missing(const ImFont* font) const;

 private:
  Fonts add_set(ImFontAtlas& atlas, float scale);
  ImFont* add_face(ImFontAtlas& atlas, const FontChain& face, float px);
  void note(uint32_t cp);
  void note_one(uint32_t cp);

  FontChain chain_;
  FontChain regular_, mono_, bold_, italic_, bold_italic_;  // each one file, or empty
  std::vector<uint8_t> state_;    // per BMP code point: not looked at, none draws it, base set, needed, over the cap
  std::vector<uint8_t> owner_;    // per needed code point: the chain file that draws it
  std::vector<uint32_t> needed_;  // code points past the base set, in the order noted
  std::vector<std::vector<ImWchar>> ranges_;         // the glyph ranges the atlas's fonts point at (build())
  std::unordered_map<int64_t, size_t> noted_bytes_;  // message id -> bytes of its text noted
  bool dirty_ = true;
  bool warned_full_ = false;
  int64_t n_builds_ = 0;
  double last_build_ms_ = 0;
};

}  // namespace kvc::ui
