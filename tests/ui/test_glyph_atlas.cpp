// The font atlas from Debian's font files: the scripts of the text noted get glyphs in the chat,
// title and input fonts (from the fallback chain), built only for what is needed; a missing
// file is left out, never fatal.
#include "ui/glyph_atlas.h"

#include <imgui.h>
#include <catch2/catch.hpp>

#include <filesystem>

#include "support/test_support.h"

namespace {

// One code point of each script, and whether the Debian file that draws it is installed.
struct Sample {
  const char* script;
  const char* utf8;
  ImWchar cp;
  const char* file;
};
const Sample k_samples[] = {
    {"Arabic", "\xD9\x85", 0x0645, "/usr/share/fonts/truetype/noto/NotoSansArabic-Regular.ttf"},
    {"Hebrew", "\xD7\xA9", 0x05E9, "/usr/share/fonts/truetype/noto/NotoSansHebrew-Regular.ttf"},
    {"Devanagari", "\xE0\xA4\xA8", 0x0928, "/usr/share/fonts/truetype/noto/NotoSansDevanagari-Regular.ttf"},
    {"Thai", "\xE0\xB8\xAA", 0x0E2A, "/usr/share/fonts/truetype/noto/NotoSansThai-Regular.ttf"},
    {"CJK", "\xE6\xBC\xA2", 0x6F22, "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"},
    {"combining acute", "\xCC\x81", 0x0301, "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf"},
    {"symbol (sun)", "\xE2\x98\x80", 0x2600, "/usr/share/fonts/truetype/noto/NotoSansSymbols2-Regular.ttf"},
};

bool installed(const char* path) { return std::filesystem::exists(path); }

}  // namespace

TEST_CASE("GlyphAtlas: the scripts of the text shown get glyphs in the chat, title and input fonts", "[ui]") {
  if (!installed("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")) KVC_SKIP("fonts-dejavu-core is not installed");
  kvc::ui::GlyphAtlas glyphs = kvc::ui::GlyphAtlas::debian();
  ImFontAtlas atlas;
  kvc::ui::Fonts normal, presenter;
  glyphs.build(atlas, 1.0f, 1.75f, normal, presenter);
  CHECK_FALSE(glyphs.needs_build());
  const int base_height = atlas.TexHeight;
  // Before any text is noted, no extra script is in the atlas.
  for (const Sample& s : k_samples) CHECK(normal.regular->FindGlyphNoFallback(s.cp) == nullptr);

  std::string text = "plain ASCII, then: ";
  for (const Sample& s : k_samples) text += s.utf8;
  glyphs.note_text(text);
  bool any = false;
  for (const Sample& s : k_samples) any = any || installed(s.file);
  if (!any) KVC_SKIP("none of fonts-noto-core, fonts-noto-cjk is installed");
  CHECK(glyphs.needs_build());
  glyphs.build(atlas, 1.0f, 1.75f, normal, presenter);
  CHECK(glyphs.n_builds() == 2);
  CHECK(atlas.TexHeight >= base_height);
  // The input box draws with the regular font (ImGui's default: the atlas's first font).
  CHECK(atlas.Fonts[0] == normal.regular);
  for (const Sample& s : k_samples) {
    INFO(s.script << " U+" << std::hex << s.cp);
    if (!installed(s.file)) {
      WARN("kvc-test-skipped: " << s.script << ": " << s.file << " is not installed");
      continue;
    }
    for (const ImFont* f :
         {normal.regular, normal.large, normal.mono, normal.bold, normal.medium, presenter.regular, presenter.large}) {
      const ImFontGlyph* g = f->FindGlyphNoFallback(s.cp);
      REQUIRE(g != nullptr);
      CHECK(g->AdvanceX >= 1.0f);  // zero-width marks advance a pixel: a line's glyphs are bounded by its width
    }
  }
  CHECK(glyphs.n_missing(normal.regular) == 0);
  CHECK(glyphs.n_missing(normal.large) == 0);
  // Noting the same text again changes nothing: no new build.
  glyphs.note_text(text);
  CHECK_FALSE(glyphs.needs_build());
}

TEST_CASE("GlyphAtlas: a snapshot's messages are read on from where the last look stopped", "[ui]") {
  if (!installed("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")) KVC_SKIP("fonts-noto-cjk is not installed");
  kvc::ui::GlyphAtlas glyphs = kvc::ui::GlyphAtlas::debian();
  ImFontAtlas atlas;
  kvc::ui::Fonts normal, presenter;
  glyphs.build(atlas, 1.0f, 1.75f, normal, presenter);
  kvc::ui::AppSnapshot s;
  s.chat.messages.push_back({});
  s.chat.messages[0].id = 7;
  s.chat.messages[0].text = "answer: \xE6\xBC";  // a streamed chunk that ends inside a code point
  glyphs.note_snapshot(s);
  const size_t n = glyphs.n_needed();
  s.chat.messages[0].text += "\xA2";  // the rest of U+6F22 arrives
  glyphs.note_snapshot(s);
  CHECK(glyphs.n_needed() == n + 1);
  s.chat.title = "\xE5\xAD\x97";  // U+5B57 in the title
  glyphs.note_snapshot(s);
  CHECK(glyphs.n_needed() == n + 2);
  glyphs.build(atlas, 1.0f, 1.75f, normal, presenter);
  CHECK(normal.large->FindGlyphNoFallback(0x6F22) != nullptr);
  CHECK(normal.large->FindGlyphNoFallback(0x5B57) != nullptr);
}

TEST_CASE("FontChain: files that are not there are left out and listed, never fatal", "[ui]") {
  const kvc::ui::FontChain chain = kvc::ui::FontChain::load(
      {{"/nonexistent/NoSuchFont.ttf", 0, "fonts-none"}, {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 0, ""}});
  REQUIRE(chain.missing().size() == (installed("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf") ? 1u : 2u));
  CHECK(chain.missing()[0].path == "/nonexistent/NoSuchFont.ttf");
  if (chain.size() == 1) {
    CHECK(chain.owner('A') == 0);
    CHECK(chain.owner(0xE000) == -1);  // a private-use code point: no file draws it
  }
  // An atlas with no font file at all still builds (ImGui's own font).
  kvc::ui::GlyphAtlas bare(kvc::ui::FontChain{}, {}, {}, {}, {}, {});
  ImFontAtlas atlas;
  kvc::ui::Fonts normal, presenter;
  bare.build(atlas, 1.0f, 1.75f, normal, presenter);
  REQUIRE(normal.regular != nullptr);
  CHECK(normal.large == normal.regular);
  bare.note_text("\xE6\xBC\xA2");
  CHECK_FALSE(bare.needs_build());
}
