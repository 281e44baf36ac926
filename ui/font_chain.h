// The fallback chain of installed font files: which file draws a code point, first one first.
//
//   DejaVu Sans -> Noto Sans -> Noto Sans Arabic, Hebrew, Devanagari, Thai, ... -> Noto Sans CJK
//   -> Noto Sans Symbols 2, Symbols, Math -> Symbola (monochrome symbols and emoji)
//
// Files are read once and kept (the atlas is rebuilt from them as new text needs new glyphs). A
// file that is not installed is left out: its scripts fall back to the next file that has them,
// else to the font's fallback glyph. Nothing here needs a window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvc::ui {

// A font file to try: its path and, in a collection (.ttc), which font.
struct FontSource {
  std::string path;
  int index = 0;
  const char* package = "";  // the Debian package that installs it ("": an alternative, not worth a note)
};

// Invariant: files_[i] is a loaded, parsed font; owner() answers from them in order.
class FontChain {
 public:
  // Reads the files of `sources` that exist and parse; the others are listed by missing().
  static FontChain load(const std::vector<FontSource>& sources);
  // Debian's files, in fallback order: DejaVu, Noto Sans, the Noto fonts of the scripts people
  // write in (fonts-noto-core), Noto Sans CJK (fonts-noto-cjk, else WenQuanYi or Droid), symbols.
  static std::vector<FontSource> debian_sources();

  FontChain();
  FontChain(FontChain&&) noexcept;
  FontChain& operator=(FontChain&&) noexcept;
  ~FontChain();

  size_t size() const;
  const std::string& path(size_t i) const;
  int index(size_t i) const;
  // The file's bytes, which the atlas reads when it builds (they live as long as the chain).
  unsigned char* data(size_t i) const;
  size_t data_bytes(size_t i) const;
  // Whether file i has a glyph for code point cp.
  bool covers(size_t i, uint32_t cp) const;
  // The first file that has a glyph for cp, or -1.
  int owner(uint32_t cp) const;
  // The sources that were not there or did not parse.
  const std::vector<FontSource>& missing() const { return missing_; }

 private:
  struct File;
  std::vector<std::unique_ptr<File>> files_;
  std::vector<FontSource> missing_;
};

}  // namespace kvc::ui
