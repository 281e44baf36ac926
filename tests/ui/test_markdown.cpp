// Tests of the Markdown layout model: blocks, spans and styles of md4c's parse, table column
// widths, and every half-streamed prefix of a corpus of answers (tests/data/markdown).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "support/test_support.h"
#include "ui/markdown.h"

using namespace kvc::ui;
using Kind = MdBlockKind;

namespace {

std::string text_of(const std::vector<MdSpan>& spans) {
  std::string s;
  for (const auto& sp : spans) s += sp.text;
  return s;
}

// The span holding `needle`, or nullptr.
const MdSpan* span_with(const MdBlock& b, std::string_view needle) {
  for (const auto& s : b.spans) {
    if (s.text.find(needle) != std::string::npos) return &s;
  }
  return nullptr;
}

std::vector<std::string> corpus_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(kvc::test::data_dir() / "markdown")) {
    if (e.path().extension() == ".md" && e.path().filename() != "README.md") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

MdDocument corpus(const std::string& name, bool streaming = false) {
  return parse_markdown(kvc::test::read_file(kvc::test::data_dir() / "markdown" / name), streaming);
}

}  // namespace

TEST_CASE("markdown: headings, paragraphs and inline styles", "[ui]") {
  const auto d = parse_markdown("# Title\n\nSome **bold**, *italic*, ~~gone~~ and `code`.\n\n### Small", false);
  REQUIRE(d.check_invariants().empty());
  REQUIRE(d.blocks.size() == 3);
  CHECK(d.blocks[0].kind == Kind::heading);
  CHECK(d.blocks[0].level == 1);
  CHECK(text_of(d.blocks[0].spans) == "Title");
  const MdBlock& p = d.blocks[1];
  CHECK(p.kind == Kind::paragraph);
  CHECK(text_of(p.spans) == "Some bold, italic, gone and code.");
  CHECK(span_with(p, "bold")->style == md_bold);
  CHECK(span_with(p, "italic")->style == md_italic);
  CHECK(span_with(p, "gone")->style == md_strike);
  CHECK(span_with(p, "code")->style == md_code);
  CHECK(span_with(p, "Some")->style == md_plain);
  CHECK(d.blocks[2].level == 3);
  // Nested styles combine; soft breaks are spaces, hard breaks a "\n" span.
  const auto n = parse_markdown("***both*** a\nb  \nc", false);
  REQUIRE(n.blocks.size() == 1);
  CHECK(span_with(n.blocks[0], "both")->style == (md_bold | md_italic));
  CHECK(text_of(n.blocks[0].spans) == "both a b\nc");
}

TEST_CASE("markdown: links, autolinks and images keep their URL", "[ui]") {
  const auto d = parse_markdown(
      "See [the docs](https://example.com/a?b=1&amp;c=2) or https://kvchat.dev/x and ![logo](img.png).", false);
  REQUIRE(d.check_invariants().empty());
  REQUIRE(d.blocks.size() == 1);
  const MdSpan* docs = span_with(d.blocks[0], "the docs");
  REQUIRE(docs);
  CHECK((docs->style & md_link));
  CHECK(d.links[static_cast<size_t>(docs->link)] == "https://example.com/a?b=1&c=2");
  const MdSpan* auto_link = span_with(d.blocks[0], "kvchat.dev");
  REQUIRE(auto_link);
  CHECK(d.links[static_cast<size_t>(auto_link->link)] == "https://kvchat.dev/x");
  const MdSpan* img = span_with(d.blocks[0], "logo");
  REQUIRE(img);
  CHECK(img->style == (md_link | md_italic));
  CHECK(d.links[static_cast<size_t>(img->link)] == "img.png");
}

TEST_CASE("markdown: nested lists, ordered numbering and task lists", "[ui]") {
  const auto d = parse_markdown("- a\n  - b\n    1. c\n    2. d\n- [x] done\n- [ ] todo\n\n3. three\n4. four", false);
  REQUIRE(d.check_invariants().empty());
  REQUIRE(d.blocks.size() == 8);
  const std::vector<std::pair<int, std::string>> want = {{1, "\u2022"}, {2, "\u25E6"}, {3, "1."}, {3, "2."},
                                                         {1, "\u2022"}, {1, "\u2022"}, {1, "3."}, {1, "4."}};
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(d.blocks[i].kind == Kind::paragraph);
    CHECK(d.blocks[i].list_depth == want[i].first);
    CHECK(d.blocks[i].marker == want[i].second);
  }
  CHECK(text_of(d.blocks[2].spans) == "c");
  CHECK(d.blocks[4].task == MdTask::done);
  CHECK(text_of(d.blocks[4].spans) == "done");
  CHECK(d.blocks[5].task == MdTask::open);
  CHECK(d.blocks[0].task == MdTask::none);
  // A loose item with two paragraphs: the marker goes on the first only.
  const auto loose = parse_markdown("1. first\n\n   more\n2. second", false);
  REQUIRE(loose.blocks.size() == 3);
  CHECK(loose.blocks[0].marker == "1.");
  CHECK(loose.blocks[1].marker.empty());
  CHECK(loose.blocks[1].list_depth == 1);
  CHECK(loose.blocks[2].marker == "2.");
}

TEST_CASE("markdown: block quotes, rules and code blocks", "[ui]") {
  const auto d =
      parse_markdown("> quoted\n>\n> > deeper\n\n---\n\n```Rust extra\nfn main() {}\n```\n\n    indented", false);
  REQUIRE(d.check_invariants().empty());
  REQUIRE(d.blocks.size() == 5);
  CHECK(d.blocks[0].quote_depth == 1);
  CHECK(d.blocks[1].quote_depth == 2);
  CHECK(text_of(d.blocks[1].spans) == "deeper");
  CHECK(d.blocks[2].kind == Kind::rule);
  CHECK(d.blocks[3].kind == Kind::code);
  CHECK(d.blocks[3].language == "Rust");
  CHECK(d.blocks[3].code == "fn main() {}");
  CHECK(d.blocks[3].closed);
  CHECK(d.blocks[4].kind == Kind::code);
  CHECK(d.blocks[4].code == "indented");
  CHECK(d.blocks[4].language.empty());
}

TEST_CASE("markdown: tables with alignment, inline styles and ragged rows", "[ui]") {
  const auto d = parse_markdown("| a | **b** | c |\n|:--|:-:|--:|\n| 1 | `two` | 3 |\n| only |\n", false);
  REQUIRE(d.check_invariants().empty());
  REQUIRE(d.blocks.size() == 1);
  const MdTable& t = d.blocks[0].table;
  CHECK(d.blocks[0].kind == Kind::table);
  REQUIRE(t.align == std::vector<MdAlign>{MdAlign::left, MdAlign::center, MdAlign::right});
  REQUIRE(t.rows.size() == 3);
  CHECK(t.n_header_rows == 1);
  CHECK(t.rows[0][1][0].style == md_bold);
  CHECK(t.rows[1][1][0].text == "two");
  CHECK(t.rows[1][1][0].style == md_code);
  CHECK(text_of(t.rows[2][0]) == "only");
  CHECK(t.rows[2][2].empty());  // padded to the column count
}

TEST_CASE("markdown: raw HTML and entities show as text", "[ui]") {
  const auto d = parse_markdown("<b>not bold</b> &lt;tag&gt; &#955; &unknown;\n\n<div>\nblock\n</div>", false);
  REQUIRE(d.check_invariants().empty());
  REQUIRE(d.blocks.size() == 2);
  CHECK(text_of(d.blocks[0].spans) == "<b>not bold</b> <tag> \u03BB &unknown;");
  CHECK(text_of(d.blocks[1].spans) == "<div> block </div>");
}

TEST_CASE("markdown: plain text for copying", "[ui]") {
  const auto d =
      parse_markdown("# T\n\n- a **b**\n- [x] c\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n```sh\nls -l\n```", false);
  CHECK(d.plain_text() == "T\n\n\u2022 a b\n\u2022 [x] c\n\nx\ty\n1\t2\n\nls -l");
}

TEST_CASE("markdown: streaming holds back a half fence and a table header until they are complete", "[ui]") {
  // An opening fence whose line has not ended is not yet a code block (nor raw backticks).
  auto d = parse_markdown("Here:\n``", true);
  REQUIRE(d.blocks.size() == 1);
  CHECK(text_of(d.blocks[0].spans) == "Here:");
  d = parse_markdown("Here:\n```pyt", true);
  REQUIRE(d.blocks.size() == 1);
  // Once the line ends it is an open code block; closed when the closing fence arrives.
  d = parse_markdown("Here:\n```python\nx = 1\n", true);
  REQUIRE(d.blocks.size() == 2);
  CHECK(d.blocks[1].kind == Kind::code);
  CHECK(d.blocks[1].language == "python");
  CHECK(d.blocks[1].code == "x = 1");
  CHECK_FALSE(d.blocks[1].closed);
  d = parse_markdown("Here:\n```python\nx = 1\n``", true);  // half the closing fence
  CHECK(d.blocks[1].code == "x = 1");
  CHECK_FALSE(d.blocks[1].closed);
  d = parse_markdown("Here:\n```python\nx = 1\n```\n", true);
  CHECK(d.blocks[1].closed);
  CHECK(parse_markdown("Here:\n```python\nx = 1\n```", false).blocks.at(1).closed);
  CHECK(parse_markdown("```\n", true).blocks.at(0).closed == false);
  CHECK(parse_markdown("```\n```", false).blocks.at(0).closed);

  // A header row, then its delimiter row arriving: nothing yet; then a table.
  for (const char* partial :
       {"Compare:\n| a | b |", "Compare:\n| a | b |\n", "Compare:\n| a | b |\n|--", "Compare:\n| a | b |\n|---|-"}) {
    CAPTURE(partial);
    d = parse_markdown(partial, true);
    REQUIRE(d.blocks.size() == 1);
    CHECK(text_of(d.blocks[0].spans) == "Compare:");
  }
  d = parse_markdown("Compare:\n| a | b |\n|---|---|\n| 1 | half", true);
  REQUIRE(d.blocks.size() == 2);
  CHECK(d.blocks[1].kind == Kind::table);
  REQUIRE(d.blocks[1].table.rows.size() == 2);
  CHECK(text_of(d.blocks[1].table.rows[1][1]) == "half");
  // The same table after a blank line; a header-like line without a delimiter row stays prose.
  CHECK(parse_markdown("Compare:\n\n| a | b |\n|---|---|\n| 1 | 2 |", false).blocks.at(1).kind == Kind::table);
  CHECK(parse_markdown("```\nx\n| a |\n|---|\n```", false).blocks.size() == 1);  // not in code
  // Not streaming: shown as written.
  CHECK(parse_markdown("| a | b |", false).blocks.size() == 1);
  CHECK(streaming_prefix("abc") == "abc");
  CHECK(streaming_prefix("a `b` c") == "a `b` c");
  CHECK(streaming_prefix("a\n`half") == "a\n");
}

TEST_CASE("markdown: corpus answers parse to the expected structure", "[ui]") {
  auto kinds = [](const MdDocument& d, Kind k) {
    return std::count_if(d.blocks.begin(), d.blocks.end(), [&](const MdBlock& b) { return b.kind == k; });
  };
  {
    const auto d = corpus("cpp-raii.md");
    REQUIRE(d.check_invariants().empty());
    CHECK(d.blocks.front().kind == Kind::heading);
    CHECK(d.blocks.front().level == 2);
    CHECK(kinds(d, Kind::code) == 1);
    const auto code =
        std::find_if(d.blocks.begin(), d.blocks.end(), [](const MdBlock& b) { return b.kind == Kind::code; });
    CHECK(code->language == "cpp");
    CHECK(code->code.rfind("#include <cstdio>", 0) == 0);
    CHECK(code->code.back() == '}');
    int n_items = 0;
    for (const auto& b : d.blocks) n_items += b.marker.empty() ? 0 : 1;
    CHECK(n_items == 3);
    bool strike = false;
    for (const auto& b : d.blocks) {
      for (const auto& s : b.spans) strike = strike || (s.style & md_strike);
    }
    CHECK(strike);
    REQUIRE(d.links.size() == 1);
    CHECK(d.links[0] == "https://en.cppreference.com/w/cpp/memory/unique_ptr");
  }
  {
    const auto d = corpus("python-table.md");
    REQUIRE(d.check_invariants().empty());
    REQUIRE(kinds(d, Kind::table) == 1);
    const auto t =
        std::find_if(d.blocks.begin(), d.blocks.end(), [](const MdBlock& b) { return b.kind == Kind::table; });
    CHECK(t->table.align.size() == 5);
    CHECK(t->table.align[1] == MdAlign::center);
    CHECK(t->table.rows.size() == 4);
    CHECK(d.blocks.back().quote_depth == 1);
  }
  {
    const auto d = corpus("setup-steps.md");
    REQUIRE(d.check_invariants().empty());
    int done = 0, open = 0, max_depth = 0;
    for (const auto& b : d.blocks) {
      done += b.task == MdTask::done;
      open += b.task == MdTask::open;
      max_depth = std::max(max_depth, b.list_depth);
    }
    CHECK(done == 2);
    CHECK(open == 2);
    CHECK(max_depth == 3);
    CHECK(kinds(d, Kind::code) == 2);
    CHECK(kinds(d, Kind::rule) == 1);
    CHECK(d.links.size() == 2);
  }
  {
    const auto d = corpus("rust-go-js.md");
    REQUIRE(d.check_invariants().empty());
    std::vector<std::string> langs;
    for (const auto& b : d.blocks) {
      if (b.kind == Kind::code) langs.push_back(b.language);
    }
    CHECK(langs == std::vector<std::string>{"rust", "go", "ts"});
    CHECK(kinds(d, Kind::table) == 1);
  }
}

TEST_CASE("markdown: every half-streamed prefix of the corpus renders sensibly", "[ui]") {
  const auto files = corpus_files();
  REQUIRE(files.size() >= 5);
  for (const std::string& file : files) {
    CAPTURE(file);
    const std::string text = kvc::test::read_file(file);
    const MdDocument full = parse_markdown(text, false);
    REQUIRE(full.check_invariants().empty());
    size_t n_blocks_before = 0;
    for (size_t n = 0; n <= text.size(); ++n) {
      CAPTURE(n);
      const MdDocument d = parse_markdown(std::string_view(text).substr(0, n), true);
      const std::string bad = d.check_invariants();
      INFO(bad);
      REQUIRE(bad.empty());
      // Never raw markup of a table or fence that is still arriving.
      for (const auto& b : d.blocks) {
        if (b.kind != Kind::paragraph) continue;
        const std::string t = text_of(b.spans);
        CHECK(t.find("```") == std::string::npos);
        CHECK(t.rfind("|", 0) != 0);
      }
      // The blocks before the last one are settled: the same kinds as in the whole answer,
      // and code only grows. Blocks are only added.
      REQUIRE(d.blocks.size() <= full.blocks.size());
      CHECK(d.blocks.size() + 1 >= n_blocks_before);
      n_blocks_before = d.blocks.size();
      for (size_t i = 0; i + 1 < d.blocks.size(); ++i) {
        CAPTURE(i);
        REQUIRE(d.blocks[i].kind == full.blocks[i].kind);
        if (d.blocks[i].kind == Kind::code) CHECK(full.blocks[i].code.rfind(d.blocks[i].code, 0) == 0);
      }
      if (!d.blocks.empty() && d.blocks.back().kind == Kind::code) {
        const MdBlock& last = d.blocks.back();
        const MdBlock& same = full.blocks[d.blocks.size() - 1];
        CHECK(same.kind == Kind::code);
        CHECK(same.code.rfind(last.code, 0) == 0);
        CHECK(last.language == same.language);
      }
    }
    // The whole answer, streamed to its end, is the finished parse.
    CHECK(parse_markdown(text, true).plain_text() == full.plain_text());
  }
}

TEST_CASE("markdown: table columns get their natural widths, else share the space by need", "[ui]") {
  const auto d = parse_markdown("| a | bb |\n|---|---|\n| one two three | x |\n", false);
  const MdTable& t = d.blocks.at(0).table;
  const MdMeasure chars = [](std::string_view s, uint8_t style) {
    return static_cast<float>(s.size()) * (style & md_bold ? 8.0f : 7.0f);
  };
  // Natural: "one two three" is 13 chars = 91, "bb" 14; plus 2 * 4 padding each.
  auto w = table_column_widths(t, 500.0f, 4.0f, chars);
  REQUIRE(w.size() == 2);
  CHECK(w[0] == Approx(99.0f));
  CHECK(w[1] == Approx(22.0f));
  // Too narrow: the wrapped column keeps at least its longest word ("three", 35 + 8).
  w = table_column_widths(t, 80.0f, 4.0f, chars);
  CHECK(w[0] + w[1] == Approx(80.0f));
  CHECK(w[0] >= 43.0f);
  CHECK(w[1] == Approx(22.0f));  // it had nothing to wrap
  // Narrower than the longest words: those, and the view scrolls.
  w = table_column_widths(t, 30.0f, 4.0f, chars);
  CHECK(w[0] == Approx(43.0f));
}

TEST_CASE("markdown: the cache key changes with the text", "[ui]") {
  CHECK(markdown_cache_key("abc") == markdown_cache_key("abc"));
  CHECK(markdown_cache_key("abc") != markdown_cache_key("abd"));
  CHECK(markdown_cache_key("abc") != markdown_cache_key("abc "));
}
