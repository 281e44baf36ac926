// The code tokenizer: one scanner, and a table per language family of what its words and
// delimiters are.
#include "ui/highlight.h"

#include <algorithm>
#include <array>
#include <span>
#include <string>

#include "core/util/utf8.h"

namespace kvc::ui {

namespace {

using Words = std::span<const std::string_view>;

// What one family's code looks like. Word lists are sorted (binary search), lowercase when
// case_insensitive.
struct LangSpec {
  std::array<std::string_view, 2> line_comments;
  std::string_view block_open, block_close;
  std::string_view quotes;            // characters that open a string
  std::string_view multiline_quotes;  // of them, strings that may span lines (`...` in JS)
  bool triple_quotes = false;         // Python's """ and '''
  bool preprocessor = false;          // C: a line starting with # is a directive
  bool case_insensitive = false;      // SQL
  bool dollar_variables = false;      // shell: $x ${x} $1 (class `type`)
  bool hash_needs_space = false;      // shell, YAML: # starts a comment only after a space
  bool json_keys = false;             // a string followed by ':' is a key
  bool yaml_keys = false;             // "key:" at the start of a line is a key
  bool lifetimes = false;             // Rust: 'a is a lifetime, not a character
  bool dollar_in_words = false;       // JavaScript: $ is a letter
  Words keywords, types, literals;
};

constexpr std::string_view k_c_keywords[] = {
    "alignas",   "alignof",   "auto",     "break",         "case",        "catch",     "class",
    "co_await",  "co_return", "co_yield", "concept",       "const",       "consteval", "constexpr",
    "constinit", "continue",  "decltype", "default",       "delete",      "do",        "else",
    "enum",      "explicit",  "export",   "extern",        "final",       "for",       "friend",
    "goto",      "if",        "inline",   "mutable",       "namespace",   "new",       "noexcept",
    "operator",  "override",  "private",  "protected",     "public",      "register",  "requires",
    "return",    "sizeof",    "static",   "static_assert", "static_cast", "struct",    "switch",
    "template",  "this",      "throw",    "try",           "typedef",     "typename",  "union",
    "using",     "virtual",   "volatile", "while"};
constexpr std::string_view k_c_types[] = {
    "bool",    "char",     "char16_t", "char32_t", "char8_t",   "double",   "float",  "int",    "int16_t",
    "int32_t", "int64_t",  "int8_t",   "long",     "ptrdiff_t", "short",    "signed", "size_t", "std",
    "string",  "uint16_t", "uint32_t", "uint64_t", "uint8_t",   "unsigned", "vector", "void",   "wchar_t"};
constexpr std::string_view k_c_literals[] = {"NULL", "false", "nullptr", "true"};

constexpr std::string_view k_py_keywords[] = {
    "and",   "as",       "assert",  "async", "await", "break",  "class",  "continue", "def",   "del",  "elif",
    "else",  "except",   "finally", "for",   "from",  "global", "if",     "import",   "in",    "is",   "lambda",
    "match", "nonlocal", "not",     "or",    "pass",  "raise",  "return", "try",      "while", "with", "yield"};
constexpr std::string_view k_py_types[] = {"bool",  "bytes", "dict", "float", "int", "len",   "list",  "object",
                                           "print", "range", "self", "set",   "str", "super", "tuple", "type"};
constexpr std::string_view k_py_literals[] = {"False", "None", "True"};

constexpr std::string_view k_js_keywords[] = {
    "abstract",  "as",         "async",     "await",   "break",    "case",      "catch", "class",      "const",
    "continue",  "debugger",   "declare",   "default", "delete",   "do",        "else",  "enum",       "export",
    "extends",   "finally",    "for",       "from",    "function", "get",       "if",    "implements", "import",
    "in",        "instanceof", "interface", "keyof",   "let",      "namespace", "new",   "of",         "private",
    "protected", "public",     "readonly",  "return",  "set",      "static",    "super", "switch",     "this",
    "throw",     "try",        "type",      "typeof",  "var",      "void",      "while", "with",       "yield"};
constexpr std::string_view k_js_types[] = {"Array",   "Map",   "Promise", "Set",    "any",    "bigint", "boolean",
                                           "console", "never", "number",  "object", "string", "symbol", "unknown"};
constexpr std::string_view k_js_literals[] = {"NaN", "false", "null", "true", "undefined"};

constexpr std::string_view k_rust_keywords[] = {
    "as",     "async", "await",  "break",  "const", "continue", "crate", "dyn",    "else", "enum",  "extern", "fn",
    "for",    "if",    "impl",   "in",     "let",   "loop",     "match", "mod",    "move", "mut",   "pub",    "ref",
    "return", "self",  "static", "struct", "super", "trait",    "type",  "unsafe", "use",  "where", "while"};
constexpr std::string_view k_rust_types[] = {"Box", "Option", "Result", "Self", "String", "Vec", "bool", "char",
                                             "f32", "f64",    "i128",   "i16",  "i32",    "i64", "i8",   "isize",
                                             "str", "u128",   "u16",    "u32",  "u64",    "u8",  "usize"};
constexpr std::string_view k_rust_literals[] = {"Err", "None", "Ok", "Some", "false", "true"};

constexpr std::string_view k_go_keywords[] = {
    "break", "case",   "chan",   "const",  "continue", "default", "defer",     "else", "fallthrough",
    "for",   "func",   "go",     "goto",   "if",       "import",  "interface", "map",  "package",
    "range", "return", "select", "struct", "switch",   "type",    "var"};
constexpr std::string_view k_go_types[] = {"any",  "bool",   "byte",   "complex128", "error", "float32", "float64",
                                           "int",  "int16",  "int32",  "int64",      "int8",  "rune",    "string",
                                           "uint", "uint16", "uint32", "uint64",     "uint8", "uintptr"};
constexpr std::string_view k_go_literals[] = {"false", "iota", "nil", "true"};

constexpr std::string_view k_sh_keywords[] = {"case",   "do",     "done",     "elif",  "else", "esac",  "export",
                                              "fi",     "for",    "function", "if",    "in",   "local", "readonly",
                                              "return", "select", "then",     "until", "while"};
constexpr std::string_view k_sh_types[] = {"apt",    "apt-get", "cd",   "cmake", "echo",   "exit", "git",  "make",
                                           "printf", "pwd",     "read", "set",   "source", "sudo", "test", "unset"};
constexpr std::string_view k_sh_literals[] = {"false", "true"};

constexpr std::string_view k_json_literals[] = {"false", "null", "true"};
constexpr std::string_view k_yaml_literals[] = {"False", "No",  "Null", "True", "Yes", "false", "no",
                                                "null",  "off", "on",   "true", "yes", "~"};

constexpr std::string_view k_sql_keywords[] = {
    "add",   "all",      "alter",       "and",        "as",         "asc",    "begin",    "between", "by",
    "case",  "check",    "column",      "commit",     "constraint", "create", "cross",    "default", "delete",
    "desc",  "distinct", "drop",        "else",       "end",        "exists", "foreign",  "from",    "full",
    "group", "having",   "if",          "in",         "index",      "inner",  "insert",   "into",    "is",
    "join",  "key",      "left",        "like",       "limit",      "not",    "offset",   "on",      "or",
    "order", "outer",    "primary",     "references", "returning",  "right",  "rollback", "select",  "set",
    "table", "then",     "transaction", "union",      "unique",     "update", "values",   "view",    "when",
    "where", "with"};
constexpr std::string_view k_sql_types[] = {"bigint",  "blob",   "boolean", "char", "count",     "date",
                                            "decimal", "int",    "integer", "max",  "min",       "numeric",
                                            "real",    "serial", "sum",     "text", "timestamp", "varchar"};
constexpr std::string_view k_sql_literals[] = {"false", "null", "true"};

// The word lists are searched by bisection.
static_assert(std::ranges::is_sorted(k_c_keywords) && std::ranges::is_sorted(k_c_types) &&
              std::ranges::is_sorted(k_c_literals));
static_assert(std::ranges::is_sorted(k_py_keywords) && std::ranges::is_sorted(k_py_types) &&
              std::ranges::is_sorted(k_py_literals));
static_assert(std::ranges::is_sorted(k_js_keywords) && std::ranges::is_sorted(k_js_types) &&
              std::ranges::is_sorted(k_js_literals));
static_assert(std::ranges::is_sorted(k_rust_keywords) && std::ranges::is_sorted(k_rust_types) &&
              std::ranges::is_sorted(k_rust_literals));
static_assert(std::ranges::is_sorted(k_go_keywords) && std::ranges::is_sorted(k_go_types) &&
              std::ranges::is_sorted(k_go_literals));
static_assert(std::ranges::is_sorted(k_sh_keywords) && std::ranges::is_sorted(k_sh_types) &&
              std::ranges::is_sorted(k_sh_literals));
static_assert(std::ranges::is_sorted(k_json_literals) && std::ranges::is_sorted(k_yaml_literals));
static_assert(std::ranges::is_sorted(k_sql_keywords) && std::ranges::is_sorted(k_sql_types) &&
              std::ranges::is_sorted(k_sql_literals));

const LangSpec& spec_of(Lang lang) {
  static const LangSpec k_none{};
  static const LangSpec k_c{{"//", ""}, "/*",  "*/",  "\"'", "",    false,        true,      false,       false,
                            false,      false, false, false, false, k_c_keywords, k_c_types, k_c_literals};
  static const LangSpec k_py{{"#", ""}, "",    "",    "\"'", "",    true,          false,      false,        false,
                             false,     false, false, false, false, k_py_keywords, k_py_types, k_py_literals};
  static const LangSpec k_js{{"//", ""}, "/*",  "*/",  "\"'`", "`",  false,         false,      false,        false,
                             false,      false, false, false,  true, k_js_keywords, k_js_types, k_js_literals};
  static const LangSpec k_rust{{"//", ""},      "/*",         "*/",           "\"'", "\"",  false, false,
                               false,           false,        false,          false, false, true,  false,
                               k_rust_keywords, k_rust_types, k_rust_literals};
  static const LangSpec k_go{{"//", ""}, "/*",  "*/",  "\"'`", "`",   false,         false,      false,        false,
                             false,      false, false, false,  false, k_go_keywords, k_go_types, k_go_literals};
  static const LangSpec k_sh{{"#", ""}, "",    "",    "\"'", "\"'", false,         false,      false,        true,
                             true,      false, false, false, false, k_sh_keywords, k_sh_types, k_sh_literals};
  static const LangSpec k_json{{"//", ""}, "/*", "*/",  "\"",  "",    false, false, false,          false,
                               false,      true, false, false, false, {},    {},    k_json_literals};
  static const LangSpec k_yaml{{"#", ""}, "",    "",   "\"'", "",    false, false, false,          false,
                               true,      false, true, false, false, {},    {},    k_yaml_literals};
  static const LangSpec k_sql{{"--", "#"}, "/*",  "*/",           "'\"",       "'",           false,
                              false,       true,  false,          false,       false,         false,
                              false,       false, k_sql_keywords, k_sql_types, k_sql_literals};
  switch (lang) {
    case Lang::none: return k_none;
    case Lang::c_like: return k_c;
    case Lang::python: return k_py;
    case Lang::javascript: return k_js;
    case Lang::rust: return k_rust;
    case Lang::go: return k_go;
    case Lang::shell: return k_sh;
    case Lang::json: return k_json;
    case Lang::yaml: return k_yaml;
    case Lang::sql: return k_sql;
  }
  return k_none;
}

bool contains(Words words, std::string_view w) {
  const auto it = std::lower_bound(words.begin(), words.end(), w);
  return it != words.end() && *it == w;
}

bool is_word_start(unsigned char c, const LangSpec& s) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80 || (c == '$' && s.dollar_in_words);
}
bool is_word_char(unsigned char c, const LangSpec& s, bool shell) {
  return is_word_start(c, s) || (c >= '0' && c <= '9') || (shell && c == '-');
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The scanner: appends tokens, merging neighbours of the same class.
class Scanner {
 public:
  Scanner(std::string_view code, Lang lang) : code_(code), s_(spec_of(lang)), shell_(lang == Lang::shell) {}

  std::vector<CodeToken> run() {
    while (i_ < code_.size()) step();
    return std::move(out_);
  }

 private:
  bool at(std::string_view w) const { return !w.empty() && code_.substr(i_, w.size()) == w; }
  bool line_start() const {
    size_t j = i_;
    while (j > 0 && (code_[j - 1] == ' ' || code_[j - 1] == '\t')) --j;
    return j == 0 || code_[j - 1] == '\n';
  }
  size_t line_end(size_t from) const {
    const size_t nl = code_.find('\n', from);
    return nl == std::string_view::npos ? code_.size() : nl;
  }
  void emit(size_t end, TokenClass cls) {
    end = std::min(end, code_.size());
    if (end <= i_) return;
    if (!out_.empty() && out_.back().cls == cls && out_.back().end == i_) {
      out_.back().end = static_cast<uint32_t>(end);
    } else {
      out_.push_back({static_cast<uint32_t>(i_), static_cast<uint32_t>(end), cls});
    }
    i_ = end;
  }
  // The end of a string opened at i_ by `q` (its length qn): after the closing quote, or at
  // the end of the line (or of the text) when it is not closed.
  size_t string_end(std::string_view q, bool multiline) const {
    size_t j = i_ + q.size();
    while (j < code_.size()) {
      if (code_[j] == '\\' && !(shell_ && q == "'") && !s_.case_insensitive) {
        j += 2;
        continue;
      }
      if (code_.substr(j, q.size()) == q) return j + q.size();
      if (code_[j] == '\n' && !multiline) return j;
      ++j;
    }
    return code_.size();
  }

  void step() {
    const char c = code_[i_];
    const auto uc = static_cast<unsigned char>(c);
    if (s_.preprocessor && c == '#' && line_start()) return emit(line_end(i_), TokenClass::preprocessor);
    if (at(s_.block_open)) {
      const size_t close = code_.find(s_.block_close, i_ + s_.block_open.size());
      return emit(close == std::string_view::npos ? code_.size() : close + s_.block_close.size(), TokenClass::comment);
    }
    for (std::string_view lc : s_.line_comments) {
      if (!at(lc)) continue;
      if (s_.hash_needs_space && lc == "#" && i_ > 0 && code_[i_ - 1] != ' ' && code_[i_ - 1] != '\t' &&
          code_[i_ - 1] != '\n') {
        continue;
      }
      return emit(line_end(i_), TokenClass::comment);
    }
    if (s_.yaml_keys && line_start()) {
      // "  - name: value" -> "name" is a key.
      size_t j = i_;
      if (code_.substr(j, 2) == "- ") j += 2;
      const size_t e = line_end(j);
      const size_t colon = code_.find(':', j);
      if (colon != std::string_view::npos && colon < e && colon > j && (colon + 1 == e || code_[colon + 1] == ' ')) {
        const std::string_view k = code_.substr(j, colon - j);
        if (k.find_first_of("\"'#{[") == std::string_view::npos) {
          emit(j, TokenClass::plain);
          return emit(colon, TokenClass::key);
        }
      }
    }
    if (s_.triple_quotes && (at("\"\"\"") || at("'''"))) {
      return emit(string_end(code_.substr(i_, 3), true), TokenClass::string);
    }
    if (s_.quotes.find(c) != std::string_view::npos) {
      if (s_.lifetimes && c == '\'' && i_ + 2 < code_.size() &&
          is_word_start(static_cast<unsigned char>(code_[i_ + 1]), s_) && code_[i_ + 2] != '\'') {
        size_t j = i_ + 1;
        while (j < code_.size() && is_word_char(static_cast<unsigned char>(code_[j]), s_, false)) ++j;
        return emit(j, TokenClass::type);  // 'a, 'static
      }
      const bool multiline = s_.multiline_quotes.find(c) != std::string_view::npos;
      const size_t end = string_end(code_.substr(i_, 1), multiline);
      TokenClass cls = TokenClass::string;
      if (s_.json_keys) {
        size_t j = end;
        while (j < code_.size() && (code_[j] == ' ' || code_[j] == '\t')) ++j;
        if (j < code_.size() && code_[j] == ':') cls = TokenClass::key;
      }
      return emit(end, cls);
    }
    if (s_.dollar_variables && c == '$' && i_ + 1 < code_.size()) {
      size_t j = i_ + 1;
      if (code_[j] == '{') {
        const size_t close = code_.find('}', j);
        j = close == std::string_view::npos ? line_end(j) : close + 1;
      } else if (std::string_view("?@#$!*").find(code_[j]) != std::string_view::npos || is_digit(code_[j])) {
        j += 1;
      } else {
        while (j < code_.size() && is_word_char(static_cast<unsigned char>(code_[j]), s_, false)) ++j;
      }
      if (j > i_ + 1) return emit(j, TokenClass::type);
    }
    const bool prev_word = i_ > 0 && is_word_char(static_cast<unsigned char>(code_[i_ - 1]), s_, shell_);
    if (!prev_word && (is_digit(c) || (c == '-' && s_.json_keys && i_ + 1 < code_.size() && is_digit(code_[i_ + 1])) ||
                       (c == '.' && i_ + 1 < code_.size() && is_digit(code_[i_ + 1])))) {
      size_t j = i_ + 1;
      while (j < code_.size()) {
        const char d = code_[j];
        const bool exp_sign = (d == '+' || d == '-') && (code_[j - 1] == 'e' || code_[j - 1] == 'E') &&
                              !(code_.substr(i_, 2) == "0x" || code_.substr(i_, 2) == "0X");
        if (!(is_digit(d) || (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || d == '_' || d == '.' || d == '\'' ||
              exp_sign))
          break;
        if (d == '.' && j + 1 < code_.size() && code_[j + 1] == '.') break;  // Rust ranges: 0..10
        if (d == '\'' && !(s_.preprocessor && j + 1 < code_.size() && is_digit(code_[j + 1]))) break;  // C++ 1'000
        ++j;
      }
      return emit(j, TokenClass::number);
    }
    if (is_word_start(uc, s_) && !prev_word) {
      size_t j = i_ + 1;
      while (j < code_.size() && is_word_char(static_cast<unsigned char>(code_[j]), s_, shell_)) ++j;
      std::string word(code_.substr(i_, j - i_));
      if (s_.case_insensitive) {
        std::transform(word.begin(), word.end(), word.begin(),
                       [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; });
      }
      TokenClass cls = TokenClass::plain;
      if (contains(s_.keywords, word)) {
        cls = TokenClass::keyword;
      } else if (contains(s_.types, word)) {
        cls = TokenClass::type;
      } else if (contains(s_.literals, word)) {
        cls = TokenClass::literal;
      }
      return emit(j, cls);
    }
    // Anything else, one code point at a time (UTF-8 continuation bytes stay with their lead).
    size_t j = i_ + 1;
    while (j < code_.size() && is_utf8_continuation(code_[j])) ++j;
    emit(j, TokenClass::plain);
  }

  std::string_view code_;
  const LangSpec& s_;
  bool shell_;
  size_t i_ = 0;
  std::vector<CodeToken> out_;
};

}  // namespace

Lang language_family(std::string_view label) {
  std::string l(label);
  std::transform(l.begin(), l.end(), l.begin(),
                 [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; });
  struct Alias {
    std::string_view name;
    Lang lang;
  };
  static constexpr Alias k_aliases[] = {{"bash", Lang::shell},
                                        {"c", Lang::c_like},
                                        {"c++", Lang::c_like},
                                        {"cc", Lang::c_like},
                                        {"console", Lang::shell},
                                        {"cpp", Lang::c_like},
                                        {"cs", Lang::c_like},
                                        {"csharp", Lang::c_like},
                                        {"cuda", Lang::c_like},
                                        {"cxx", Lang::c_like},
                                        {"go", Lang::go},
                                        {"golang", Lang::go},
                                        {"h", Lang::c_like},
                                        {"hpp", Lang::c_like},
                                        {"java", Lang::c_like},
                                        {"javascript", Lang::javascript},
                                        {"js", Lang::javascript},
                                        {"json", Lang::json},
                                        {"json5", Lang::json},
                                        {"jsonc", Lang::json},
                                        {"jsx", Lang::javascript},
                                        {"mjs", Lang::javascript},
                                        {"mysql", Lang::sql},
                                        {"objc", Lang::c_like},
                                        {"postgres", Lang::sql},
                                        {"postgresql", Lang::sql},
                                        {"psql", Lang::sql},
                                        {"py", Lang::python},
                                        {"python", Lang::python},
                                        {"python3", Lang::python},
                                        {"rs", Lang::rust},
                                        {"rust", Lang::rust},
                                        {"sh", Lang::shell},
                                        {"shell", Lang::shell},
                                        {"sql", Lang::sql},
                                        {"sqlite", Lang::sql},
                                        {"ts", Lang::javascript},
                                        {"tsx", Lang::javascript},
                                        {"typescript", Lang::javascript},
                                        {"yaml", Lang::yaml},
                                        {"yml", Lang::yaml},
                                        {"zsh", Lang::shell}};
  for (const Alias& a : k_aliases) {
    if (a.name == l) return a.lang;
  }
  return Lang::none;
}

const char* to_string(Lang lang) {
  switch (lang) {
    case Lang::none: return "none";
    case Lang::c_like: return "c_like";
    case Lang::python: return "python";
    case Lang::javascript: return "javascript";
    case Lang::rust: return "rust";
    case Lang::go: return "go";
    case Lang::shell: return "shell";
    case Lang::json: return "json";
    case Lang::yaml: return "yaml";
    case Lang::sql: return "sql";
  }
  return "none";
}

std::vector<CodeToken> highlight(std::string_view code, Lang lang) {
  if (lang == Lang::none) {
    if (code.empty()) return {};
    return {CodeToken{0, static_cast<uint32_t>(code.size()), TokenClass::plain}};
  }
  return Scanner(code, lang).run();
}

}  // namespace kvc::ui
