// The layout model's derived facts: plain text for copying, invariants, table column widths.
#include <algorithm>
#include <numeric>

#include "ui/markdown.h"

namespace kvc::ui {

namespace {

std::string spans_text(const std::vector<MdSpan>& spans) {
  std::string out;
  for (const MdSpan& s : spans) out += s.text;
  return out;
}

}  // namespace

std::string MdDocument::plain_text() const {
  std::string out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const MdBlock& b = blocks[i];
    if (i > 0) {
      // Items of one list follow each other line by line; other blocks get a blank line.
      const bool same_list = b.list_depth > 0 && blocks[i - 1].list_depth > 0 && !b.marker.empty();
      out += same_list ? "\n" : "\n\n";
    }
    std::string prefix;
    for (int q = 0; q < b.quote_depth; ++q) prefix += "> ";
    if (b.list_depth > 0) prefix += std::string(static_cast<size_t>(b.list_depth - 1) * 2, ' ');
    if (!b.marker.empty()) prefix += b.marker + " ";
    if (b.task != MdTask::none) prefix += b.task == MdTask::done ? "[x] " : "[ ] ";
    out += prefix;
    switch (b.kind) {
      case MdBlockKind::paragraph:
      case MdBlockKind::heading: out += spans_text(b.spans); break;
      case MdBlockKind::code: out += b.code; break;
      case MdBlockKind::rule: out += "---"; break;
      case MdBlockKind::table:
        for (size_t r = 0; r < b.table.rows.size(); ++r) {
          if (r > 0) out += "\n";
          for (size_t c = 0; c < b.table.rows[r].size(); ++c) {
            if (c > 0) out += "\t";
            out += spans_text(b.table.rows[r][c]);
          }
        }
        break;
    }
  }
  return out;
}

std::string MdDocument::check_invariants() const {
  auto check_spans = [&](const std::vector<MdSpan>& spans, const std::string& where) -> std::string {
    for (const MdSpan& s : spans) {
      if (s.text.empty()) return where + ": an empty span";
      const bool is_link = (s.style & md_link) != 0;
      if (is_link != (s.link >= 0))
        return where + ": link index " + std::to_string(s.link) + " with style " + std::to_string(s.style);
      if (s.link >= static_cast<int>(links.size())) return where + ": link index past the links";
    }
    return {};
  };
  for (size_t i = 0; i < blocks.size(); ++i) {
    const MdBlock& b = blocks[i];
    const std::string where = "block " + std::to_string(i);
    if (b.list_depth < 0 || b.quote_depth < 0) return where + ": negative depth";
    if (!b.marker.empty() && b.list_depth == 0) return where + ": a list marker outside a list";
    if (b.kind == MdBlockKind::heading && (b.level < 1 || b.level > 6))
      return where + ": heading level " + std::to_string(b.level);
    if (b.kind != MdBlockKind::code && (!b.code.empty() || !b.closed)) return where + ": code text on a non-code block";
    if (auto e = check_spans(b.spans, where); !e.empty()) return e;
    if (b.kind == MdBlockKind::table) {
      const MdTable& t = b.table;
      if (t.n_header_rows < 0 || t.n_header_rows > static_cast<int>(t.rows.size())) return where + ": header rows";
      for (size_t r = 0; r < t.rows.size(); ++r) {
        if (t.rows[r].size() != t.align.size()) {
          return where + ": row " + std::to_string(r) + " has " + std::to_string(t.rows[r].size()) + " cells for " +
                 std::to_string(t.align.size()) + " columns";
        }
        for (const auto& cell : t.rows[r]) {
          if (auto e = check_spans(cell, where + " row " + std::to_string(r)); !e.empty()) return e;
        }
      }
    } else if (!b.table.rows.empty()) {
      return where + ": table rows on a non-table block";
    }
  }
  return {};
}

std::vector<float> table_column_widths(const MdTable& table, float avail, float cell_padding,
                                       const MdMeasure& measure) {
  const size_t n = table.align.size();
  std::vector<float> natural(n, 0.0f), least(n, 0.0f);
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < n && c < row.size(); ++c) {
      float line = 0;
      for (const MdSpan& s : row[c]) {
        line += measure(s.text, s.style);
        size_t pos = 0;
        while (pos < s.text.size()) {
          size_t end = s.text.find_first_of(" \n", pos);
          if (end == std::string::npos) end = s.text.size();
          if (end > pos)
            least[c] = std::max(least[c], measure(std::string_view(s.text).substr(pos, end - pos), s.style));
          pos = end + 1;
        }
      }
      natural[c] = std::max(natural[c], line);
    }
  }
  for (size_t c = 0; c < n; ++c) {
    natural[c] += 2 * cell_padding;
    least[c] += 2 * cell_padding;
  }
  const float sum_natural = std::accumulate(natural.begin(), natural.end(), 0.0f);
  if (sum_natural <= avail) return natural;
  const float sum_least = std::accumulate(least.begin(), least.end(), 0.0f);
  if (sum_least >= avail) return least;  // wider than the view even wrapped: it scrolls
  float sum_want = 0;
  for (size_t c = 0; c < n; ++c) sum_want += natural[c] - least[c];
  std::vector<float> w(n);
  for (size_t c = 0; c < n; ++c) w[c] = least[c] + (avail - sum_least) * (natural[c] - least[c]) / sum_want;
  return w;
}

uint64_t markdown_cache_key(std::string_view text) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h ^ (static_cast<uint64_t>(text.size()) << 40);
}

}  // namespace kvc::ui
