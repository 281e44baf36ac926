// Syntax highlighting of code blocks: a small tokenizer per language family, driven by tables.
//
//   highlight("int x = 42; // hi", Lang::c_like)
//     [0,3) keyword  [3,8) plain  [8,10) number  [10,12) plain  [12,17) comment
//
// Tokens cover the code without gaps or overlaps, in order. Unterminated strings and block
// comments (an answer still streaming) run to the end of the text.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kvc::ui {

enum class Lang : uint8_t { none, c_like, python, javascript, rust, go, shell, json, yaml, sql };

enum class TokenClass : uint8_t { plain, keyword, type, literal, string, comment, number, key, preprocessor };

// Invariant (highlight): begin < end; the next token begins where this one ends.
struct CodeToken {
  uint32_t begin = 0, end = 0;
  TokenClass cls = TokenClass::plain;
};

// The family of a fence's language label, case-insensitively: "cpp", "c++", "h", "py",
// "python3", "ts", "tsx", "jsx", "rs", "golang", "bash", "sh", "zsh", "console", "yml",
// "jsonc", "postgresql" ...; Lang::none for anything else (shown unhighlighted).
Lang language_family(std::string_view label);
const char* to_string(Lang lang);

std::vector<CodeToken> highlight(std::string_view code, Lang lang);

}  // namespace kvc::ui
