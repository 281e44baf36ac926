// The font atlas built from the base set and the code points the text shown needs.
#include "ui/glyph_atlas.h"

#include <imgui_internal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <initializer_list>

#include "core/util/assert.h"

namespace kvc::ui {

namespace {

constexpr float k_base_font_px = 16.0f;

// Always in the atlas, from each face's own file: Latin-1 and Latin Extended, Greek, Cyrillic,
// general punctuation, arrows, box drawing, the replacement character. Pairs [first, last].
constexpr ImWchar k_base_ranges[] = {0x0020, 0x00FF, 0x0100, 0x024F, 0x0370, 0x03FF, 0x0400, 0x052F,
                                     0x2000, 0x206F, 0x2190, 0x21FF, 0x2500, 0x25FF, 0xFFFD, 0xFFFD};

enum : uint8_t { k_unseen = 0, k_no_font = 1, k_base = 2, k_needed = 3, k_over_cap = 4 };

// Glyphs rasterized at the size they are drawn and placed on whole pixels: the atlas is read
// texel for pixel and sampled without filtering (app/gui/main.cpp). Every glyph advances at least
// a pixel: a line of zero-width marks is then as long as it has glyphs, and a text box (which
// draws the lines in view as one primitive) cuts it at its edge like any other.
ImFontConfig glyph_config(bool merge) {
  ImFontConfig cfg;
  cfg.OversampleH = 1;
  cfg.OversampleV = 1;
  cfg.PixelSnapH = true;
  cfg.GlyphMinAdvanceX = 1.0f;
  // Not copied (ImGui copies data it does not own: 19 MB of CJK for every face); the ownership is
  // taken back once the atlas is built (GlyphAtlas::build), so the atlas never frees it.
  cfg.FontDataOwnedByAtlas = true;
  cfg.MergeMode = merge;
  return cfg;
}

// The first of `paths` that loads, as a chain of one file (or none).
FontChain first_of(std::initializer_list<const char*> paths) {
  for (const char* p : paths) {
    FontChain c = FontChain::load({{p, 0, ""}});
    if (c.size() == 1) return c;
  }
  return {};
}

}  // namespace

GlyphAtlas::GlyphAtlas(FontChain chain, FontChain faces_regular, FontChain faces_mono, FontChain faces_bold,
                       FontChain faces_italic, FontChain faces_bold_italic)
    : chain_(std::move(chain)),
      regular_(std::move(faces_regular)),
      mono_(std::move(faces_mono)),
      bold_(std::move(faces_bold)),
      italic_(std::move(faces_italic)),
      bold_italic_(std::move(faces_bold_italic)),
      state_(0x10000, k_unseen),
      owner_(0x10000, 0) {
  KVC_ASSERT(chain_.size() < 256);
  for (size_t i = 0; i + 1 < std::size(k_base_ranges); i += 2) {
    for (uint32_t cp = k_base_ranges[i]; cp <= k_base_ranges[i + 1]; ++cp) state_[cp] = k_base;
  }
}

GlyphAtlas GlyphAtlas::debian() {
  FontChain chain = FontChain::load(FontChain::debian_sources());
  std::string packages;
  for (const FontSource& m : chain.missing()) {
    if (*m.package && packages.find(m.package) == std::string::npos) packages += std::string(" ") + m.package;
  }
  if (!packages.empty()) {
    std::fprintf(stderr, "kvchat: some fonts are not installed (apt install%s); the scripts they draw show as boxes\n",
                 packages.c_str());
  }
  const std::string d = "/usr/share/fonts/truetype/dejavu/", n = "/usr/share/fonts/truetype/noto/";
  auto face = [](const std::string& a, const std::string& b) { return first_of({a.c_str(), b.c_str()}); };
  return GlyphAtlas(std::move(chain), face(d + "DejaVuSans.ttf", n + "NotoSans-Regular.ttf"),
                    face(d + "DejaVuSansMono.ttf", n + "NotoSansMono-Regular.ttf"),
                    face(d + "DejaVuSans-Bold.ttf", n + "NotoSans-Bold.ttf"),
                    face(d + "DejaVuSans-Oblique.ttf", n + "NotoSans-Italic.ttf"),
                    face(d + "DejaVuSans-BoldOblique.ttf", n + "NotoSans-BoldItalic.ttf"));
}

void GlyphAtlas::note(uint32_t cp) {
  if (cp >= state_.size() || state_[cp] != k_unseen) return;
  // An alphabet comes whole (the 128 code points around cp): a text in it then needs no more
  // builds. Ideographs and syllables (from U+3000) come one by one.
  if (cp < 0x3000) {
    const uint32_t first = cp & ~0x7Fu;
    for (uint32_t c = first; c < first + 0x80; ++c) note_one(c);
  } else {
    note_one(cp);
  }
}

void GlyphAtlas::note_one(uint32_t cp) {
  if (state_[cp] != k_unseen) return;
  const int owner = chain_.owner(cp);
  if (owner < 0) {
    state_[cp] = k_no_font;
    return;
  }
  if (needed_.size() >= k_max_needed) {
    if (!warned_full_) {
      std::fprintf(stderr, "kvchat: the font atlas holds %zu extra characters; more show as boxes\n", k_max_needed);
      warned_full_ = true;
    }
    state_[cp] = k_over_cap;
    return;
  }
  state_[cp] = k_needed;
  owner_[cp] = static_cast<uint8_t>(owner);
  needed_.push_back(cp);
  dirty_ = true;
}

void GlyphAtlas::note_text(std::string_view utf8) {
  const char* s = utf8.data();
  const char* const end = s + utf8.size();
  while (s < end) {
    if (static_cast<unsigned char>(*s) < 0x80) {
      ++s;  // ASCII: always in the base set
      continue;
    }
    unsigned int c = 0;
    s += std::max(1, ImTextCharFromUtf8(&c, s, end));
    note(c);
  }
}

void GlyphAtlas::note_wide(const ImWchar* text, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (text[i] >= 0x80) note(text[i]);
  }
}

void GlyphAtlas::note_snapshot(const AppSnapshot& s) {
  note_text(s.chat.title);
  note_text(s.error);
  note_text(s.model.name);
  for (const ConversationSummary& c : s.conversations) note_text(c.title);
  for (const ConversationSummary& c : s.search_results) {
    note_text(c.title);
    note_text(c.snippet);
  }
  for (const MessageView& m : s.chat.messages) {
    size_t& done = noted_bytes_[m.id];
    if (done > m.text.size()) done = 0;
    // From the start of the code point where the last call stopped.
    while (done > 0 && (static_cast<unsigned char>(m.text[done - 1]) & 0xC0) == 0x80) --done;
    if (done > 0 && static_cast<unsigned char>(m.text[done - 1]) >= 0xC0) --done;
    note_text(std::string_view(m.text).substr(done));
    done = m.text.size();
  }
}

ImFont* GlyphAtlas::add_face(ImFontAtlas& atlas, const FontChain& face, float px) {
  if (face.size() == 0) return nullptr;
  // The face's own file for the base set and whatever needed code points it has; then each chain
  // file for the needed code points it draws first (ImGui skips those already there).
  ImFontConfig cfg = glyph_config(false);
  ImFont* font =
      atlas.AddFontFromMemoryTTF(face.data(0), static_cast<int>(face.data_bytes(0)), px, &cfg, ranges_.front().data());
  if (font == nullptr) return nullptr;
  for (size_t i = 0; i < chain_.size(); ++i) {
    if (ranges_[i + 1].empty() || chain_.path(i) == face.path(0)) continue;
    ImFontConfig merge = glyph_config(true);
    merge.FontNo = chain_.index(i);
    atlas.AddFontFromMemoryTTF(chain_.data(i), static_cast<int>(chain_.data_bytes(i)), px, &merge,
                               ranges_[i + 1].data());
  }
  return font;
}

Fonts GlyphAtlas::add_set(ImFontAtlas& atlas, float scale) {
  const float px = k_base_font_px * scale;
  Fonts f;
  f.regular = add_face(atlas, regular_, px);
  if (!f.regular) {
    ImFontConfig cfg;
    cfg.SizePixels = 13.0f * scale;
    f.regular = atlas.AddFontDefault(&cfg);
  }
  f.mono = add_face(atlas, mono_, (k_base_font_px - 1.0f) * scale);
  if (!f.mono) f.mono = f.regular;
  f.large = add_face(atlas, regular_, px * 1.5f);
  if (!f.large) f.large = f.regular;
  f.bold = add_face(atlas, bold_, px);
  if (!f.bold) f.bold = f.regular;
  f.italic = add_face(atlas, italic_, px);
  if (!f.italic) f.italic = f.regular;
  f.bold_italic = add_face(atlas, bold_italic_, px);
  if (!f.bold_italic) f.bold_italic = f.bold;
  f.medium = add_face(atlas, bold_, px * 1.25f);
  if (!f.medium) f.medium = f.large;
  return f;
}

void GlyphAtlas::build(ImFontAtlas& atlas, float scale, float presenter_scale, Fonts& normal, Fonts& presenter) {
  const auto t0 = std::chrono::steady_clock::now();
  atlas.Clear();
  atlas.Flags |= ImFontAtlasFlags_NoBakedLines;        // thick lines as polygons: baked ones need bilinear filtering
  atlas.Flags |= ImFontAtlasFlags_NoPowerOfTwoHeight;  // as high as its glyphs, not the next power of two
  // ranges_[0]: a face's own file, the base set and every needed code point; ranges_[1 + i]: the
  // needed code points chain file i draws first (empty: the file is left out).
  std::sort(needed_.begin(), needed_.end());
  ranges_.assign(chain_.size() + 1, {});
  ranges_[0].assign(std::begin(k_base_ranges), std::end(k_base_ranges));
  for (const uint32_t cp : needed_) {
    for (std::vector<ImWchar>* r : {&ranges_[0], &ranges_[1 + owner_[cp]]}) {
      r->push_back(static_cast<ImWchar>(cp));
      r->push_back(static_cast<ImWchar>(cp));
    }
  }
  for (std::vector<ImWchar>& r : ranges_) {
    if (!r.empty()) r.push_back(0);
  }
  normal = add_set(atlas, scale);
  presenter = add_set(atlas, presenter_scale);
  unsigned char* pixels = nullptr;
  int w = 0, h = 0;
  atlas.GetTexDataAsRGBA32(&pixels, &w, &h);
  // The chain's and faces' bytes are ours (they live as long as this object): the atlas must not
  // free them when it is cleared or destroyed.
  std::vector<const void*> ours;
  for (const FontChain* c : {&chain_, &regular_, &mono_, &bold_, &italic_, &bold_italic_}) {
    for (size_t i = 0; i < c->size(); ++i) ours.push_back(c->data(i));
  }
  for (ImFontConfig& cfg : atlas.ConfigData) {
    if (std::find(ours.begin(), ours.end(), cfg.FontData) != ours.end()) cfg.FontDataOwnedByAtlas = false;
  }
  dirty_ = false;
  ++n_builds_;
  last_build_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

size_t GlyphAtlas::n_missing(const ImFont* font) const {
  size_t n = 0;
  for (const uint32_t cp : needed_) n += font->FindGlyphNoFallback(static_cast<ImWchar>(cp)) == nullptr ? 1 : 0;
  return n;
}

}  // namespace kvc::ui
