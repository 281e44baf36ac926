// Long text drawn safely: wrapped into visual lines once (kept while the text, width and font
// stay the same) and only the lines in view drawn, each as its own draw call of bounded size.
//
// Why: Dear ImGui 1.86 draws one wrapped TextUnformatted as a single primitive, 4 vertices for
// every glyph from the text's start (wrapped lines above or below the view are not skipped), and
// its 16-bit indices address 65,536 vertices: one text of ~16K glyphs aborted the app. Here a
// frame's vertices come only from the lines on screen, each at most k_max_line_bytes long.
//
//   text   "Hello world, this is long\nnext"          width: ~12 glyphs
//   lines  [0,12) "Hello world,"  [13,25) "this is long"  [26,30) "next"
//          (blanks after a wrap are skipped, as ImGui does; '\n' ends a line and is in none)
#pragma once

#include <imgui.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

namespace kvc::ui {

// A visual line: bytes [begin, end) of the text, never a '\n' inside, never a code point cut.
struct TextLine {
  uint32_t begin = 0;
  uint32_t end = 0;
};

// The most bytes one line (one draw call, 4 vertices a glyph at most) holds: 8,192 vertices,
// far under the 65,536 of a 16-bit index, whatever the glyphs' widths (zero-width marks too).
inline constexpr size_t k_max_line_bytes = 2048;

// Where a line that starts at `line` must end to fit `width` (ImFont::CalcWordWrapPositionA's
// contract): a position in (line, end], or `line` itself when not even one glyph fits.
using WrapAt = std::function<const char*(const char* line, const char* end, float width)>;

// `text` as lines at most `width` wide: a line ends at each '\n', where wrap_at says, and before
// it would pass max_line_bytes (at a code point's start); the blanks after a wrap are skipped; a
// line holds at least one code point. As ImGui counts them, a trailing '\n' starts no line, and an
// empty text is one empty line.
std::vector<TextLine> wrap_lines(std::string_view text, float width, const WrapAt& wrap_at,
                                 size_t max_line_bytes = k_max_line_bytes);

// Lines [first, last) of height line_h, the first at y = 0, that meet [top, bottom).
std::pair<size_t, size_t> visible_lines(size_t n_lines, float line_h, float top, float bottom);

// ImGui's own word wrap in `font` at `size` pixels, as a WrapAt (what TextWrapped does).
WrapAt font_wrap(const ImFont* font, float size);

// The length of the longest prefix of `text` (whole code points) whose widest line is at most
// max_w in `font` at `size`; it reads no further than that prefix.
size_t fit_prefix(const ImFont* font, float size, std::string_view text, float max_w);

// ImDrawList::AddText on one line of text of any length: in pieces of at most k_max_line_bytes,
// placed one after the other.
void add_text_bounded(ImDrawList* dl, const ImFont* font, float size, ImVec2 pos, ImU32 col, std::string_view text);

// One block of wrapped text, drawn as TextUnformatted under PushTextWrapPos would draw it (the
// current font and text color, wrapped at the current wrap position, else at the work area's right
// edge; the same size taken),
// with its layout kept between frames. Invariant: lines_ is the layout of (key_, width_, font_).
class WrappedText {
 public:
  // Draws `text` at the cursor (only the lines inside the window's clip rectangle) and moves the
  // cursor past it.
  void draw(std::string_view text);
  size_t n_lines() const { return lines_.size(); }
  // Lines the last draw() sent to the renderer (those in view).
  size_t n_drawn() const { return n_drawn_; }
  // Times the text was laid out (a new text, width or font).
  int64_t n_layouts() const { return n_layouts_; }

 private:
  uint64_t key_ = 0;
  float width_ = -1.0f;
  const ImFont* font_ = nullptr;
  float size_ = 0.0f;
  float max_w_ = 0.0f;  // the widest line
  std::vector<TextLine> lines_;
  size_t n_drawn_ = 0;
  int64_t n_layouts_ = 0;
};

}  // namespace kvc::ui
