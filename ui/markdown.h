// The layout model of a Markdown answer: md4c's parse flattened into blocks of styled spans.
//
//   "# Title\n- **a** `b`\n  - [x] c\n> q\n```py\nx\n```"
//     heading(1)  [Title]
//     paragraph   list_depth 1, marker "•"   [a:bold][ :plain][b:code]
//     paragraph   list_depth 2, task done    [c]
//     paragraph   quote_depth 1              [q]
//     code        language "py", "x"
//
// Nesting is kept as depths on each block (lists, quotes), so a view draws the blocks in order
// with an indent; nothing here knows about ImGui (table column widths take a measuring
// function), so the model is tested without a window.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kvc::ui {

// Bits of MdSpan::style.
enum MdStyle : uint8_t {
  md_plain = 0,
  md_bold = 1,
  md_italic = 2,
  md_strike = 4,
  md_code = 8,   // inline code
  md_link = 16,  // MdSpan::link names the URL
};

// A run of text in one style. Invariant: text is non-empty; link >= 0 iff style has md_link.
// A hard line break is a span of exactly "\n".
struct MdSpan {
  std::string text;
  uint8_t style = md_plain;
  int link = -1;  // index into MdDocument::links
};

enum class MdAlign : uint8_t { left, center, right };

// Invariant: every row has align.size() cells; 0 <= n_header_rows <= rows.size().
struct MdTable {
  std::vector<MdAlign> align;                          // one per column
  std::vector<std::vector<std::vector<MdSpan>>> rows;  // (row, column) -> spans
  int n_header_rows = 0;
};

enum class MdBlockKind : uint8_t { paragraph, heading, code, rule, table };
enum class MdTask : uint8_t { none, open, done };

struct MdBlock {
  MdBlockKind kind = MdBlockKind::paragraph;
  int level = 0;        // heading: 1..6
  int list_depth = 0;   // 0: not in a list; 1: top-level item; 2: nested once ...
  int quote_depth = 0;  // enclosing block quotes
  std::string marker;   // on the first block of a list item: "•", "◦", "3."; empty otherwise
  MdTask task = MdTask::none;
  std::vector<MdSpan> spans;  // paragraph, heading
  std::string code;           // code: the text without its fences, no trailing newline
  std::string language;       // code: the word after the opening fence ("cpp"), may be empty
  bool closed = true;         // code: false while its closing fence has not arrived
  MdTable table;              // table
};

struct MdDocument {
  std::vector<MdBlock> blocks;
  std::vector<std::string> links;  // URLs, by MdSpan::link
  // The text as shown (no markup): blocks separated by blank lines, list markers and table
  // cells (tab-separated) included. What "select text" offers for copying.
  std::string plain_text() const;
  // Checks the invariants above; empty when they hold, else what is wrong.
  std::string check_invariants() const;
};

// Parses GitHub-flavoured Markdown (tables, strikethrough, task lists, autolinks; raw HTML is
// shown as text). streaming: the text is an answer still arriving; a last line that would
// flicker (the start of a fence, a table's header row before its delimiter row) is held back
// until its line is complete, and an unclosed fence is an open code block.
MdDocument parse_markdown(std::string_view text, bool streaming);

// The part of `text` that parse_markdown renders when streaming (prefix of text).
std::string_view streaming_prefix(std::string_view text);

// Column widths for a table `avail` wide: each column's natural width (its widest cell on one
// line) when they all fit, else every column gets at least its longest word and the space
// left is shared in proportion to how much more each would take. measure(text, style) -> width.
using MdMeasure = std::function<float(std::string_view text, uint8_t style)>;
std::vector<float> table_column_widths(const MdTable& table, float avail, float cell_padding, const MdMeasure& measure);

// Cache key of a message's text (its length and an FNV-1a hash of its bytes): a view parses
// again only when this changes.
uint64_t markdown_cache_key(std::string_view text);

}  // namespace kvc::ui
