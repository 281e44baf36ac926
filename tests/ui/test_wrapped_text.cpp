// Wrapped text's layout (lines, visible range, the bound on a line, UTF-8 boundaries) and its
// drawing in a headless ImGui frame: a text of any length costs vertices only for what is in view.
#include "ui/wrapped_text.h"

#include <imgui.h>
#include <imgui_internal.h>
#include <catch2/catch.hpp>

#include <string>

#include "core/util/utf8.h"

namespace {

using kvc::ui::TextLine;

// A wrap that lets everything fit (as zero-width glyphs would): only '\n' and the bound end lines.
const kvc::ui::WrapAt k_no_wrap = [](const char*, const char* end, float) { return end; };

std::string line_text(std::string_view text, const TextLine& l) {
  return std::string(text.substr(l.begin, l.end - l.begin));
}

// The built-in font, built without a window (ImFontAtlas needs no context).
struct DefaultFont {
  ImFontAtlas atlas;
  ImFont* font = nullptr;
  DefaultFont() {
    font = atlas.AddFontDefault();
    unsigned char* pixels = nullptr;
    int w = 0, h = 0;
    atlas.GetTexDataAsAlpha8(&pixels, &w, &h);
    atlas.SetTexID(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(1)));
  }
};

std::string repeat(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("wrap_lines: a line ends at each newline, a trailing one starts none, an empty text is one line", "[ui]") {
  const std::string t = "one\n\ntwo\n";
  const auto lines = kvc::ui::wrap_lines(t, 100.0f, k_no_wrap);
  REQUIRE(lines.size() == 3);
  CHECK(line_text(t, lines[0]) == "one");
  CHECK(line_text(t, lines[1]).empty());
  CHECK(line_text(t, lines[2]) == "two");
  CHECK(kvc::ui::wrap_lines("", 100.0f, k_no_wrap).size() == 1);
  CHECK(kvc::ui::wrap_lines("a\n\n", 100.0f, k_no_wrap).size() == 2);  // as ImGui counts "a\n\n": 2 lines
}

TEST_CASE("wrap_lines: words wrap where ImGui's word wrap says, with the same number of lines", "[ui]") {
  DefaultFont f;
  const float size = f.font->FontSize;
  const std::string t =
      "The quick brown fox jumps over the lazy dog, again and again; then it rests.\n\nA second paragraph "
      "with averyveryveryveryveryverylongwordthatcannotfitonalineofitsown and more words after it.";
  for (const float width : {60.0f, 120.0f, 333.0f, 2000.0f}) {
    const auto lines = kvc::ui::wrap_lines(t, width, kvc::ui::font_wrap(f.font, size));
    const ImVec2 imgui = f.font->CalcTextSizeA(size, FLT_MAX, width, t.data(), t.data() + t.size());
    INFO("width " << width);
    CHECK(static_cast<float>(lines.size()) * size == Approx(imgui.y));
    for (const TextLine& l : lines) {
      CHECK(f.font->CalcTextSizeA(size, FLT_MAX, 0.0f, t.data() + l.begin, t.data() + l.end).x <= width + 0.01f);
      // The blanks at a wrap are skipped: no line starts with one.
      if (l.end > l.begin) CHECK(t[l.begin] != ' ');
    }
  }
}

TEST_CASE("wrap_lines: no line is longer than the bound, even where every glyph fits (zero-width marks)", "[ui]") {
  const std::string a(17000, 'a');
  const auto lines = kvc::ui::wrap_lines(a, 800.0f, k_no_wrap);
  size_t covered = 0;
  for (const TextLine& l : lines) {
    CHECK(l.end - l.begin <= kvc::ui::k_max_line_bytes);
    CHECK(l.begin == covered);  // nothing skipped, nothing twice: there is no blank to skip
    covered = l.end;
  }
  CHECK(covered == a.size());
  CHECK(lines.size() == (a.size() + kvc::ui::k_max_line_bytes - 1) / kvc::ui::k_max_line_bytes);
}

TEST_CASE("wrap_lines: a line never starts or ends inside a UTF-8 sequence", "[ui]") {
  // CJK (3 bytes), Arabic (2), combining acute accents (2) on 'e', an emoji (4): bounds of 1 to 9 bytes.
  const std::string t = repeat("漢字", 7) + repeat("مرحبا", 5) + repeat("e\xCC\x81", 9) + repeat("\xF0\x9F\x98\x80", 4);
  for (size_t bound = 1; bound <= 9; ++bound) {
    const auto lines = kvc::ui::wrap_lines(t, 800.0f, k_no_wrap, bound);
    size_t covered = 0;
    INFO("bound " << bound);
    for (const TextLine& l : lines) {
      REQUIRE(l.end > l.begin);
      CHECK(!kvc::is_utf8_continuation(t[l.begin]));
      CHECK((l.end == t.size() || !kvc::is_utf8_continuation(t[l.end])));
      // A line holds at least one code point, and no more bytes than the bound unless one code point is longer.
      CHECK((l.end - l.begin <= bound || l.end - l.begin <= 4));
      CHECK(l.begin == covered);
      covered = l.end;
    }
    CHECK(covered == t.size());
  }
}

TEST_CASE("wrap_lines: a width too small for one glyph still gives one code point a line", "[ui]") {
  DefaultFont f;
  const std::string t = "ab\xC3\xA9";  // "abé"
  const auto lines = kvc::ui::wrap_lines(t, 1.0f, kvc::ui::font_wrap(f.font, f.font->FontSize));
  REQUIRE(lines.size() == 3);
  CHECK(line_text(t, lines[2]) == "\xC3\xA9");
}

TEST_CASE("visible_lines: the lines that meet the visible band", "[ui]") {
  using P = std::pair<size_t, size_t>;
  CHECK(kvc::ui::visible_lines(100, 10.0f, 0.0f, 35.0f) == P{0, 4});
  CHECK(kvc::ui::visible_lines(100, 10.0f, 15.0f, 35.0f) == P{1, 4});
  CHECK(kvc::ui::visible_lines(100, 10.0f, -500.0f, 20.0f) == P{0, 2});
  CHECK(kvc::ui::visible_lines(100, 10.0f, 990.0f, 5000.0f) == P{99, 100});
  CHECK(kvc::ui::visible_lines(100, 10.0f, 1000.0f, 5000.0f) == P{100, 100});  // below the text
  CHECK(kvc::ui::visible_lines(100, 10.0f, -50.0f, -1.0f) == P{0, 0});         // above it
  CHECK(kvc::ui::visible_lines(0, 10.0f, 0.0f, 100.0f) == P{0, 0});
}

TEST_CASE("fit_prefix: the longest prefix that fits, read no further", "[ui]") {
  DefaultFont f;
  const float size = f.font->FontSize;
  const std::string t = std::string(20000, 'x');
  const float w = f.font->GetCharAdvance('x');
  CHECK(kvc::ui::fit_prefix(f.font, size, t, w * 10.5f) == 10);
  CHECK(kvc::ui::fit_prefix(f.font, size, "abc", 1000.0f) == 3);
  CHECK(kvc::ui::fit_prefix(f.font, size, "abc", 0.0f) == 0);
  // Whole code points only.
  const std::string e = repeat("\xC3\xA9", 100);
  CHECK(kvc::ui::fit_prefix(f.font, size, e, f.font->FallbackAdvanceX * 3.5f) % 2 == 0);
}

TEST_CASE("add_text_bounded: a 17,000-glyph line fits the renderer's 16-bit indices", "[ui]") {
  DefaultFont f;
  ImDrawListSharedData shared;
  shared.ClipRectFullscreen = ImVec4(-1e6f, -1e6f, 1e6f, 1e6f);  // every glyph "visible"
  shared.TexUvWhitePixel = f.atlas.TexUvWhitePixel;
  ImDrawList dl(&shared);
  dl._ResetForNewFrame();
  dl.Flags |= ImDrawListFlags_AllowVtxOffset;  // as with the OpenGL 3 backend
  dl.PushClipRectFullScreen();
  dl.PushTextureID(f.atlas.TexID);
  const std::string t(17000, 'a');
  kvc::ui::add_text_bounded(&dl, f.font, f.font->FontSize, ImVec2(0, 0), IM_COL32_WHITE, t);
  CHECK(dl.VtxBuffer.Size == 17000 * 4);  // every glyph drawn
  // The pieces follow each other: the last glyph ends where the whole line would.
  CHECK(dl.VtxBuffer.back().pos.x <= f.font->GetCharAdvance('a') * 17000.0f + 0.01f);
  CHECK(dl.VtxBuffer.back().pos.x > f.font->GetCharAdvance('a') * 16999.0f);
  // Each draw command addresses its vertices from its own offset: all under 65,536.
  CHECK(dl._VtxCurrentIdx < (1u << 16));
  // One AddText of the same line is what aborted: more vertices than a 16-bit index reaches.
  ImDrawList one(&shared);
  one._ResetForNewFrame();
  one.Flags |= ImDrawListFlags_AllowVtxOffset;
  one.PushClipRectFullScreen();
  one.PushTextureID(f.atlas.TexID);
  one.AddText(f.font, f.font->FontSize, ImVec2(0, 0), IM_COL32_WHITE, t.data(), t.data() + t.size());
  CHECK(one._VtxCurrentIdx >= (1u << 16));
}

TEST_CASE("WrappedText: a 17,000-glyph message in a frame draws only the lines in view", "[ui]") {
  ImGuiContext* ctx = ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.DisplaySize = ImVec2(800, 600);
  io.DeltaTime = 1.0f / 60.0f;
  io.IniFilename = nullptr;
  io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;
  unsigned char* pixels = nullptr;
  int w = 0, h = 0;
  io.Fonts->GetTexDataAsAlpha8(&pixels, &w, &h);
  io.Fonts->SetTexID(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(1)));
  kvc::ui::WrappedText text, narrow;
  const std::string a(17000, 'a');
  int total_vtx = 0;
  int64_t n_layouts_settled = 0;
  for (int frame = 0; frame < 4; ++frame) {
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(800, 600));
    ImGui::Begin("w");
    if (frame == 3) ImGui::SetScrollY(ImGui::GetScrollMaxY() * 0.5f);
    text.draw(a);
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + 200.0f);  // a wrap position of its own
    narrow.draw("a few words that wrap in two hundred pixels");
    ImGui::PopTextWrapPos();
    ImGui::End();
    ImGui::Render();
    total_vtx = ImGui::GetDrawData()->TotalVtxCount;
    if (frame == 1) n_layouts_settled = text.n_layouts();  // the scroll bar came with the second frame
  }
  const float line_h = ImGui::GetFontSize();
  CHECK(text.n_layouts() == n_layouts_settled);  // laid out again only when the width changed
  CHECK(text.n_lines() > 100);
  CHECK(text.n_drawn() >= 30);
  CHECK(static_cast<float>(text.n_drawn()) <= 600.0f / line_h + 2.0f);
  CHECK(total_vtx < 20000);  // a screenful, not 68,000
  CHECK(narrow.n_lines() >= 2);
  ImGui::DestroyContext(ctx);
}
