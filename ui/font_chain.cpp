// Font files read once, and which of them has a glyph for a code point (stb_truetype's cmap lookup).
#include "ui/font_chain.h"

#include <stb/stb_truetype.h>

#include <filesystem>
#include <fstream>

namespace kvc::ui {

struct FontChain::File {
  std::string path;
  int index = 0;
  std::vector<unsigned char> bytes;
  stbtt_fontinfo info{};
};

FontChain::FontChain() = default;
FontChain::FontChain(FontChain&&) noexcept = default;
FontChain& FontChain::operator=(FontChain&&) noexcept = default;
FontChain::~FontChain() = default;

FontChain FontChain::load(const std::vector<FontSource>& sources) {
  FontChain chain;
  for (const FontSource& s : sources) {
    std::error_code ec;
    bool duplicate = false;
    for (const auto& f : chain.files_) duplicate = duplicate || (f->path == s.path && f->index == s.index);
    if (duplicate) continue;
    auto file = std::make_unique<File>();
    file->path = s.path;
    file->index = s.index;
    const uintmax_t n_bytes = std::filesystem::is_regular_file(s.path, ec) ? std::filesystem::file_size(s.path, ec) : 0;
    if (!ec && n_bytes > 0) {
      file->bytes.resize(static_cast<size_t>(n_bytes));
      std::ifstream in(s.path, std::ios::binary);
      if (!in.read(reinterpret_cast<char*>(file->bytes.data()), static_cast<std::streamsize>(n_bytes)))
        file->bytes.clear();
    }
    const int offset = file->bytes.empty() ? -1 : stbtt_GetFontOffsetForIndex(file->bytes.data(), s.index);
    if (offset < 0 || !stbtt_InitFont(&file->info, file->bytes.data(), offset)) {
      chain.missing_.push_back(s);
      continue;
    }
    chain.files_.push_back(std::move(file));
  }
  return chain;
}

std::vector<FontSource> FontChain::debian_sources() {
  const std::string dejavu = "/usr/share/fonts/truetype/dejavu/";
  const std::string noto = "/usr/share/fonts/truetype/noto/";
  std::vector<FontSource> v = {{dejavu + "DejaVuSans.ttf", 0, "fonts-dejavu-core"},
                               {noto + "NotoSans-Regular.ttf", 0, "fonts-noto-core"}};
  // The scripts of fonts-noto-core that DejaVu lacks or draws in part.
  for (const char* script :
       {"Arabic", "Hebrew", "Devanagari", "Bengali", "Gurmukhi", "Gujarati", "Oriya", "Tamil", "Telugu", "Kannada",
        "Malayalam", "Sinhala", "Thai", "Lao", "Khmer", "Myanmar", "Armenian", "Georgian", "Ethiopic"}) {
    v.push_back({noto + "NotoSans" + script + "-Regular.ttf", 0, "fonts-noto-core"});
  }
  v.push_back({"/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", 0, "fonts-noto-cjk"});
  // Other CJK fonts, where Noto's is not installed (package "": not worth a note).
  v.push_back({"/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", 0, ""});
  v.push_back({"/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf", 0, ""});
  // Symbols and emoji in one color (the atlas cannot draw color glyphs).
  v.push_back({noto + "NotoSansSymbols2-Regular.ttf", 0, "fonts-noto-core"});
  v.push_back({noto + "NotoSansSymbols-Regular.ttf", 0, "fonts-noto-core"});
  v.push_back({noto + "NotoSansMath-Regular.ttf", 0, "fonts-noto-core"});
  v.push_back({"/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf", 0, "fonts-symbola"});
  return v;
}

size_t FontChain::size() const { return files_.size(); }
const std::string& FontChain::path(size_t i) const { return files_[i]->path; }
int FontChain::index(size_t i) const { return files_[i]->index; }
unsigned char* FontChain::data(size_t i) const { return files_[i]->bytes.data(); }
size_t FontChain::data_bytes(size_t i) const { return files_[i]->bytes.size(); }

bool FontChain::covers(size_t i, uint32_t cp) const {
  return stbtt_FindGlyphIndex(&files_[i]->info, static_cast<int>(cp)) != 0;
}

int FontChain::owner(uint32_t cp) const {
  for (size_t i = 0; i < files_.size(); ++i) {
    if (covers(i, cp)) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace kvc::ui
