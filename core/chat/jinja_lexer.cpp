// The Jinja lexer: tags, comments, raw blocks, whitespace control, and the tokens inside tags.
#include "core/chat/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>

#include "core/util/utf8.h"

namespace kvc::chat::jinja {

void fail(std::string message, int line) { throw TemplateError{std::move(message), line}; }

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Piece> run() {
    size_t text_begin = 0;
    bool strip_next = false;  // the previous tag ended with "-": drop the whitespace that follows it
    while (pos_ < src_.size()) {
      const size_t open = find_tag(pos_);
      add_text(text_begin, open, strip_next);
      strip_next = false;
      if (open == src_.size()) break;
      const char kind = src_[open + 1];
      const int open_line = line_at(open);
      pos_ = open + 2;
      const bool strip_before = pos_ < src_.size() && src_[pos_] == '-';
      const bool keep_before = pos_ < src_.size() && src_[pos_] == '+';
      if (strip_before || keep_before) ++pos_;
      if (strip_before) strip_trailing_text(false);
      if (kind != '{' && !strip_before && !keep_before) lstrip_block(open, text_begin);
      bool strip_after = false;
      if (kind == '#') {
        strip_after = skip_comment(open_line);
      } else {
        Piece p;
        p.kind = kind == '{' ? Piece::Kind::output : Piece::Kind::statement;
        p.line = open_line;
        strip_after = read_tokens(p, kind == '{' ? '}' : '%', open_line);
        if (p.kind == Piece::Kind::statement && p.tokens.size() == 1 && p.tokens[0].is_name("raw")) {
          strip_after = read_raw(open_line, strip_after);
        } else {
          pieces_.push_back(std::move(p));
        }
      }
      // trim_blocks: the first newline after a block or comment tag goes.
      if (!strip_after && kind != '{' && pos_ < src_.size()) {
        if (src_[pos_] == '\n') {
          ++pos_;
        } else if (src_[pos_] == '\r' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '\n') {
          pos_ += 2;
        }
      }
      strip_next = strip_after;
      text_begin = pos_;
    }
    return std::move(pieces_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  int line_at(size_t pos) {
    // Lines are counted incrementally: positions only move forward.
    for (; line_pos_ < pos && line_pos_ < src_.size(); ++line_pos_) {
      if (src_[line_pos_] == '\n') ++line_;
    }
    return line_;
  }

  void add_text(size_t begin, size_t end, bool strip_leading) {
    if (strip_leading) {
      while (begin < end && is_space(src_[begin])) ++begin;
    }
    if (begin >= end) return;
    Piece p;
    p.kind = Piece::Kind::text;
    p.text.assign(src_.substr(begin, end - begin));
    p.line = line_at(begin);
    pieces_.push_back(std::move(p));
  }

  // {%- / {{- / {#-: the whitespace before the tag goes (only_blank: spaces and tabs only).
  void strip_trailing_text(bool only_blank) {
    if (pieces_.empty() || pieces_.back().kind != Piece::Kind::text) return;
    std::string& t = pieces_.back().text;
    size_t n = t.size();
    while (n > 0 && (only_blank ? (t[n - 1] == ' ' || t[n - 1] == '\t') : is_space(t[n - 1]))) --n;
    t.resize(n);
    if (t.empty()) pieces_.pop_back();
  }

  // lstrip_blocks: a {% or {# preceded on its line by nothing but spaces and tabs loses them. The
  // text piece just before the tag holds them when they lie after this piece's start.
  void lstrip_block(size_t open, size_t text_begin) {
    size_t i = open;
    while (i > 0 && (src_[i - 1] == ' ' || src_[i - 1] == '\t')) --i;
    if (i > 0 && src_[i - 1] != '\n') return;
    if (i < text_begin) return;  // the blanks are not all in the text just before (a tag sits there)
    if (i == open) return;
    strip_trailing_text(true);
  }

  bool skip_comment(int open_line) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos) fail("the comment '{#' opened here is never closed with '#}'", open_line);
    const bool strip_after = end > pos_ && src_[end - 1] == '-';
    pos_ = end + 2;
    return strip_after;
  }

  // {% raw %}...{% endraw %}: the text between them as it is.
  bool read_raw(int open_line, bool strip_after_open) {
    size_t search = pos_;
    for (;;) {
      const size_t tag = src_.find("{%", search);
      if (tag == std::string_view::npos) fail("'{% raw %}' opened here is never closed with '{% endraw %}'", open_line);
      size_t j = tag + 2;
      const bool strip_before = j < src_.size() && src_[j] == '-';
      if (strip_before || (j < src_.size() && src_[j] == '+')) ++j;
      while (j < src_.size() && is_space(src_[j])) ++j;
      if (src_.substr(j, 6) != "endraw") {
        search = tag + 2;
        continue;
      }
      j += 6;
      while (j < src_.size() && is_space(src_[j])) ++j;
      bool strip_after = false;
      if (j < src_.size() && src_[j] == '-') {
        strip_after = true;
        ++j;
      }
      if (src_.substr(j, 2) != "%}") fail("'{% endraw' must end with '%}'", line_at(tag));
      size_t begin = pos_;
      if (strip_after_open) {
        while (begin < tag && is_space(src_[begin])) ++begin;
      }
      std::string body(src_.substr(begin, tag - begin));
      if (strip_before) {
        while (!body.empty() && is_space(body.back())) body.pop_back();
      }
      if (!body.empty()) {
        Piece p;
        p.kind = Piece::Kind::text;
        p.text = std::move(body);
        p.line = open_line;
        pieces_.push_back(std::move(p));
      }
      pos_ = j + 2;
      return strip_after;
    }
  }

  // Tokens up to the closing "}}" or "%}" (`close` is '}' or '%'); returns whether it was "-}}" / "-%}".
  bool read_tokens(Piece& p, char close, int open_line) {
    const char* what =
        close == '}' ? "'{{' opened here is never closed with '}}'" : "'{%' opened here is never closed with '%}'";
    int brackets = 0;  // open ( [ { inside the tag: "}}" closes a dict there, not the tag
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      if (pos_ >= src_.size()) fail(what, open_line);
      const char c = src_[pos_];
      const auto closes_at = [&](size_t at) {
        return brackets == 0 && at + 1 < src_.size() && src_[at] == close && src_[at + 1] == '}';
      };
      if (closes_at(pos_)) {
        pos_ += 2;
        return false;
      }
      if ((c == '-' || c == '+') && closes_at(pos_ + 1)) {
        pos_ += 3;
        return c == '-';
      }
      Token t;
      t.line = line_at(pos_);
      if (is_name_start(c)) {
        const size_t b = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        t.type = Token::Type::name;
        t.text.assign(src_.substr(b, pos_ - b));
      } else if (is_digit(c)) {
        read_number(t);
      } else if (c == '\'' || c == '"') {
        read_string(t, c);
      } else {
        read_operator(t);
        if (t.text == "(" || t.text == "[" || t.text == "{") ++brackets;
        if ((t.text == ")" || t.text == "]" || t.text == "}") && brackets > 0) --brackets;
      }
      p.tokens.push_back(std::move(t));
    }
  }

  void read_number(Token& t) {
    const size_t b = pos_;
    while (pos_ < src_.size() && (is_digit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      while (pos_ < src_.size() && (is_digit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t e = pos_ + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && is_digit(src_[e])) {
        is_float = true;
        pos_ = e;
        while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
      }
    }
    std::string digits;
    for (size_t i = b; i < pos_; ++i) {
      if (src_[i] != '_') digits += src_[i];
    }
    t.text = digits;
    if (is_float) {
      t.type = Token::Type::number;
      t.number = std::strtod(digits.c_str(), nullptr);
    } else {
      t.type = Token::Type::integer;
      errno = 0;
      t.integer = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("the number " + digits + " is too large", t.line);
    }
  }

  void read_string(Token& t, char quote) {
    const int open_line = t.line;
    ++pos_;
    t.type = Token::Type::string;
    for (;;) {
      if (pos_ >= src_.size()) fail("a string opened here is never closed", open_line);
      const char c = src_[pos_++];
      if (c == quote) return;
      if (c != '\\') {
        t.text += c;
        continue;
      }
      if (pos_ >= src_.size()) fail("a string opened here is never closed", open_line);
      const char e = src_[pos_++];
      switch (e) {
        case 'n': t.text += '\n'; break;
        case 't': t.text += '\t'; break;
        case 'r': t.text += '\r'; break;
        case '0': t.text += '\0'; break;
        case 'b': t.text += '\b'; break;
        case 'f': t.text += '\f'; break;
        case 'v': t.text += '\v'; break;
        case 'a': t.text += '\a'; break;
        case '\\': t.text += '\\'; break;
        case '\'': t.text += '\''; break;
        case '"': t.text += '"'; break;
        case '\n': break;  // a backslash at the end of a line joins the lines
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          if (pos_ + n > src_.size())
            fail("a \\" + std::string(1, e) + " escape needs " + std::to_string(n) + " hex digits", open_line);
          const std::string hex(src_.substr(pos_, n));
          char* end = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + n || cp > 0x10FFFF)
            fail("a bad \\" + std::string(1, e) + " escape: " + hex, open_line);
          pos_ += n;
          append_utf8(t.text, static_cast<uint32_t>(cp));
          break;
        }
        default:  // Python keeps an unknown escape as written
          t.text += '\\';
          t.text += e;
      }
    }
  }

  void read_operator(Token& t) {
    t.type = Token::Type::op;
    const char c = src_[pos_];
    const char d = pos_ + 1 < src_.size() ? src_[pos_ + 1] : '\0';
    const bool two = (c == '/' && d == '/') || (c == '*' && d == '*') ||
                     (d == '=' && (c == '=' || c == '!' || c == '<' || c == '>'));
    static constexpr std::string_view one = "+-*/%~<>=.,:|()[]{}";
    if (!two && one.find(c) == std::string_view::npos) {
      fail("unexpected character '" + std::string(1, c) + "' in a tag", t.line);
    }
    t.text.push_back(c);
    if (two) t.text.push_back(d);
    pos_ += two ? 2 : 1;
  }

  std::string_view src_;
  size_t pos_ = 0;
  size_t line_pos_ = 0;
  int line_ = 1;
  std::vector<Piece> pieces_;
};

}  // namespace

std::vector<Piece> lex(std::string_view source) {
  // Without keep_trailing_newline, one trailing newline of the source is not part of the template.
  if (source.size() >= 2 && source.substr(source.size() - 2) == "\r\n") {
    source.remove_suffix(2);
  } else if (!source.empty() && source.back() == '\n') {
    source.remove_suffix(1);
  }
  return Lexer(source).run();
}

}  // namespace kvc::chat::jinja
