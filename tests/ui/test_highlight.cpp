// Tests of the code highlighter: token classes per language family, and that tokens tile the code.
#include <catch2/catch.hpp>

#include "support/test_support.h"
#include "ui/highlight.h"
#include "ui/markdown.h"

using namespace kvc::ui;
using C = TokenClass;

namespace {

// Tokens cover [0, code.size()) in order, without gaps or empty tokens.
void require_tiling(std::string_view code, const std::vector<CodeToken>& toks) {
  uint32_t at = 0;
  for (const auto& t : toks) {
    REQUIRE(t.begin == at);
    REQUIRE(t.end > t.begin);
    at = t.end;
  }
  REQUIRE(at == code.size());
}

// The class of the token that holds the first `nth` occurrence of `needle`; the needle must
// lie inside one token.
C class_of(std::string_view code, Lang lang, std::string_view needle, int nth = 1) {
  const auto toks = highlight(code, lang);
  require_tiling(code, toks);
  size_t pos = std::string_view::npos;
  for (size_t from = 0; nth > 0; --nth, from = pos + 1) {
    pos = code.find(needle, from);
    REQUIRE(pos != std::string_view::npos);
  }
  for (const auto& t : toks) {
    if (pos >= t.begin && pos < t.end) {
      INFO("needle \"" << needle << "\" in token \"" << code.substr(t.begin, t.end - t.begin) << "\"");
      REQUIRE(pos + needle.size() <= t.end);
      return t.cls;
    }
  }
  FAIL("no token");
  return C::plain;
}

}  // namespace

TEST_CASE("highlight: fence labels map to language families", "[ui]") {
  CHECK(language_family("cpp") == Lang::c_like);
  CHECK(language_family("C++") == Lang::c_like);
  CHECK(language_family("python3") == Lang::python);
  CHECK(language_family("TSX") == Lang::javascript);
  CHECK(language_family("rs") == Lang::rust);
  CHECK(language_family("golang") == Lang::go);
  CHECK(language_family("console") == Lang::shell);
  CHECK(language_family("jsonc") == Lang::json);
  CHECK(language_family("yml") == Lang::yaml);
  CHECK(language_family("postgresql") == Lang::sql);
  CHECK(language_family("brainfuck") == Lang::none);
  CHECK(language_family("") == Lang::none);
}

TEST_CASE("highlight: C and C++", "[ui]") {
  const std::string_view code =
      "#include <vector>\nint main() { // entry\n  auto s = \"a\\\"b\"; /* x\ny */ return 0x1F + 1'000 + 2.5e-3f; }\n";
  const Lang l = Lang::c_like;
  CHECK(class_of(code, l, "#include <vector>") == C::preprocessor);
  CHECK(class_of(code, l, "int") == C::type);
  CHECK(class_of(code, l, "main") == C::plain);
  CHECK(class_of(code, l, "// entry") == C::comment);
  CHECK(class_of(code, l, "auto") == C::keyword);
  CHECK(class_of(code, l, "\"a\\\"b\"") == C::string);
  CHECK(class_of(code, l, "/* x\ny */") == C::comment);
  CHECK(class_of(code, l, "return") == C::keyword);
  CHECK(class_of(code, l, "0x1F") == C::number);
  CHECK(class_of(code, l, "1'000") == C::number);
  CHECK(class_of(code, l, "2.5e-3f") == C::number);
  CHECK(class_of("bool b = nullptr == NULL;", l, "nullptr") == C::literal);
}

TEST_CASE("highlight: Python", "[ui]") {
  const std::string_view code =
      "def f(x):\n    \"\"\"Doc\n    string\"\"\"\n    return None if x else 'y'  # done\nprint(f(1.5))";
  const Lang l = Lang::python;
  CHECK(class_of(code, l, "def") == C::keyword);
  CHECK(class_of(code, l, "\"\"\"Doc\n    string\"\"\"") == C::string);
  CHECK(class_of(code, l, "None") == C::literal);
  CHECK(class_of(code, l, "if") == C::keyword);
  CHECK(class_of(code, l, "'y'") == C::string);
  CHECK(class_of(code, l, "# done") == C::comment);
  CHECK(class_of(code, l, "print") == C::type);
  CHECK(class_of(code, l, "1.5") == C::number);
}

TEST_CASE("highlight: JavaScript and TypeScript", "[ui]") {
  const std::string_view code =
      "const $el: number = 1; // n\nlet s = `multi\nline ${x}`;\nif (a === null) { return undefined; }";
  const Lang l = Lang::javascript;
  CHECK(class_of(code, l, "const") == C::keyword);
  CHECK(class_of(code, l, "$el") == C::plain);
  CHECK(class_of(code, l, "number") == C::type);
  CHECK(class_of(code, l, "// n") == C::comment);
  CHECK(class_of(code, l, "`multi\nline ${x}`") == C::string);
  CHECK(class_of(code, l, "null") == C::literal);
  CHECK(class_of(code, l, "undefined") == C::literal);
}

TEST_CASE("highlight: Rust", "[ui]") {
  const std::string_view code = "fn f<'a>(x: &'a str) -> Option<u32> { let c = 'z'; Some(0..10) } // r";
  const Lang l = Lang::rust;
  CHECK(class_of(code, l, "fn") == C::keyword);
  CHECK(class_of(code, l, "'a") == C::type);
  CHECK(class_of(code, l, "str") == C::type);
  CHECK(class_of(code, l, "Option") == C::type);
  CHECK(class_of(code, l, "'z'") == C::string);
  CHECK(class_of(code, l, "Some") == C::literal);
  CHECK(class_of(code, l, "0") == C::number);
  CHECK(class_of(code, l, "10") == C::number);
  CHECK(class_of(code, l, "// r") == C::comment);
}

TEST_CASE("highlight: Go", "[ui]") {
  const std::string_view code = "package main\nfunc f() error { s := `raw\nstr`; return nil } /* c */";
  const Lang l = Lang::go;
  CHECK(class_of(code, l, "package") == C::keyword);
  CHECK(class_of(code, l, "func") == C::keyword);
  CHECK(class_of(code, l, "error") == C::type);
  CHECK(class_of(code, l, "`raw\nstr`") == C::string);
  CHECK(class_of(code, l, "nil") == C::literal);
  CHECK(class_of(code, l, "/* c */") == C::comment);
}

TEST_CASE("highlight: shell", "[ui]") {
  const std::string_view code = "for f in *.md; do  # each\n  echo \"$f\" ${HOME} $1 'lit $x' a#b\ndone";
  const Lang l = Lang::shell;
  CHECK(class_of(code, l, "for") == C::keyword);
  CHECK(class_of(code, l, "# each") == C::comment);
  CHECK(class_of(code, l, "echo") == C::type);
  CHECK(class_of(code, l, "\"$f\"") == C::string);
  CHECK(class_of(code, l, "${HOME}") == C::type);
  CHECK(class_of(code, l, "$1") == C::type);
  CHECK(class_of(code, l, "'lit $x'") == C::string);
  CHECK(class_of(code, l, "a#b") == C::plain);  // not a comment: no space before #
  CHECK(class_of(code, l, "done") == C::keyword);
  CHECK(class_of("apt-get install -y x", l, "apt-get") == C::type);
}

TEST_CASE("highlight: JSON", "[ui]") {
  const std::string_view code = "{\"name\": \"Ada\", \"n\": -1.5e3, \"ok\": true, \"none\" : null}";
  const Lang l = Lang::json;
  CHECK(class_of(code, l, "\"name\"") == C::key);
  CHECK(class_of(code, l, "\"Ada\"") == C::string);
  CHECK(class_of(code, l, "-1.5e3") == C::number);
  CHECK(class_of(code, l, "true") == C::literal);
  CHECK(class_of(code, l, "\"none\"") == C::key);
  CHECK(class_of(code, l, "null") == C::literal);
}

TEST_CASE("highlight: YAML", "[ui]") {
  const std::string_view code =
      "spec:\n  replicas: 3  # three\n  containers:\n    - name: web\n      image: \"x:1\"\n      debug: false\n";
  const Lang l = Lang::yaml;
  CHECK(class_of(code, l, "spec") == C::key);
  CHECK(class_of(code, l, "replicas") == C::key);
  CHECK(class_of(code, l, "3") == C::number);
  CHECK(class_of(code, l, "# three") == C::comment);
  CHECK(class_of(code, l, "name") == C::key);
  CHECK(class_of(code, l, "web") == C::plain);
  CHECK(class_of(code, l, "\"x:1\"") == C::string);
  CHECK(class_of(code, l, "false") == C::literal);
}

TEST_CASE("highlight: SQL", "[ui]") {
  const std::string_view code =
      "SELECT name, COUNT(*) FROM t -- c\nwhere x = 'it''s' AND y IS NULL LIMIT 10; /* end */";
  const Lang l = Lang::sql;
  CHECK(class_of(code, l, "SELECT") == C::keyword);
  CHECK(class_of(code, l, "where") == C::keyword);  // any case
  CHECK(class_of(code, l, "COUNT") == C::type);
  CHECK(class_of(code, l, "-- c") == C::comment);
  CHECK(class_of(code, l, "'it''s'") == C::string);
  CHECK(class_of(code, l, "NULL") == C::literal);
  CHECK(class_of(code, l, "10") == C::number);
  CHECK(class_of(code, l, "/* end */") == C::comment);
}

TEST_CASE("highlight: unfinished code (streaming) and UTF-8", "[ui]") {
  // An unterminated string or block comment runs to the end; nothing is left uncovered.
  CHECK(class_of("x = \"abc", Lang::python, "\"abc") == C::string);
  CHECK(class_of("a /* open\ncomment", Lang::c_like, "/* open\ncomment") == C::comment);
  CHECK(class_of("s = \"héllo\" # é", Lang::python, "\"héllo\"") == C::string);
  CHECK(class_of("naïve = 1", Lang::python, "naïve") == C::plain);
  // Tokens never split a UTF-8 sequence.
  const std::string_view utf = "x → y «z» 🦙";
  for (const auto& t : highlight(utf, Lang::c_like)) {
    CHECK((static_cast<unsigned char>(utf[t.begin]) & 0xC0) != 0x80);
  }
  CHECK(highlight("", Lang::rust).empty());
  CHECK(highlight("", Lang::none).empty());
  CHECK(highlight("plain", Lang::none).size() == 1);
}

TEST_CASE("highlight: every prefix of the corpus's code blocks tiles", "[ui]") {
  for (const char* file : {"cpp-raii.md", "python-table.md", "setup-steps.md", "sql-json.md", "rust-go-js.md"}) {
    CAPTURE(file);
    const auto doc = parse_markdown(kvc::test::read_file(kvc::test::data_dir() / "markdown" / file), false);
    int n_code = 0;
    for (const auto& b : doc.blocks) {
      if (b.kind != MdBlockKind::code) continue;
      ++n_code;
      const Lang lang = language_family(b.language);
      CAPTURE(b.language);
      CHECK(lang != Lang::none);
      size_t n_keywords = 0;
      for (size_t n = 0; n <= b.code.size(); ++n) {
        const std::string_view prefix = std::string_view(b.code).substr(0, n);
        const auto toks = highlight(prefix, lang);
        require_tiling(prefix, toks);
        if (n == b.code.size()) {
          for (const auto& t : toks) n_keywords += t.cls != C::plain;
        }
      }
      CHECK(n_keywords > 0);
    }
    CHECK(n_code > 0);
  }
}
