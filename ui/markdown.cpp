// Markdown to the layout model: md4c's callbacks build flat blocks of styled spans.
#include "ui/markdown.h"

#include <md4c.h>

#include <cstdio>

#include "core/util/utf8.h"

namespace kvc::ui {

namespace {

// "&amp;" -> "&", "&#955;" -> "λ"; a named entity we do not know stays as written.
std::string decode_entity(std::string_view e) {
  struct Named {
    std::string_view name, text;
  };
  static constexpr Named k_named[] = {{"&amp;", "&"},         {"&lt;", "<"},         {"&gt;", ">"},
                                      {"&quot;", "\""},       {"&apos;", "'"},       {"&nbsp;", "\u00A0"},
                                      {"&copy;", "\u00A9"},   {"&mdash;", "\u2014"}, {"&ndash;", "\u2013"},
                                      {"&hellip;", "\u2026"}, {"&rarr;", "\u2192"},  {"&larr;", "\u2190"}};
  for (const Named& n : k_named) {
    if (e == n.name) return std::string(n.text);
  }
  if (e.size() > 3 && e[0] == '&' && e[1] == '#' && e.back() == ';') {
    const bool hex = e[2] == 'x' || e[2] == 'X';
    uint32_t cp = 0;
    for (size_t i = hex ? 3 : 2; i + 1 < e.size(); ++i) {
      const char c = e[i];
      const int d = c >= '0' && c <= '9'          ? c - '0'
                    : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                  : -1;
      if (d < 0 || cp > 0x10FFFF) return std::string(e);
      cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
    }
    // As HTML does: NUL, surrogates and values past Unicode become U+FFFD.
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    std::string out;
    append_utf8(out, cp);
    return out;
  }
  return std::string(e);
}

std::string attribute_text(const MD_ATTRIBUTE& a) {
  std::string out;
  if (a.size == 0 || a.text == nullptr) return out;
  for (int i = 0; a.substr_offsets[i] < a.size; ++i) {
    const std::string_view part(a.text + a.substr_offsets[i], a.substr_offsets[i + 1] - a.substr_offsets[i]);
    if (a.substr_types[i] == MD_TEXT_ENTITY) {
      out += decode_entity(part);
    } else if (a.substr_types[i] == MD_TEXT_NULLCHAR) {
      out += "\uFFFD";
    } else {
      out += part;
    }
  }
  return out;
}

const char* bullet_for_depth(int depth) {
  static constexpr const char* k_bullets[] = {"\u2022", "\u25E6", "\u25AA"};  // • ◦ ▪
  return k_bullets[(depth - 1) % 3];
}

// Builder state while md4c walks the document. Invariant: block_ is -1 or an index into
// doc.blocks; cell_ is set only inside a table cell.
struct Builder {
  std::string_view src;
  MdDocument doc;
  struct List {
    bool ordered = false;
    unsigned next = 1;
  };
  std::vector<List> lists;
  int quote_depth = 0;
  int block = -1;              // the block that receives text
  bool implicit = false;       // block is a paragraph opened for text straight in a list item
  std::string pending_marker;  // the open list item's marker, until a block takes it
  MdTask pending_task = MdTask::none;
  bool item_open = false;
  std::vector<uint8_t> styles{md_plain};  // span style stack
  std::vector<int> link_stack;
  std::vector<MdSpan>* cell = nullptr;
  bool in_head = false;
  size_t code_end = 0;  // source offset after the last code text of the last code block
  size_t text_end = 0;  // source offset after the last text of any kind
  char fence = 0;       // the last code block's fence character (0: indented)

  MdBlock& start_block(MdBlockKind kind) {
    end_implicit();
    MdBlock b;
    b.kind = kind;
    b.list_depth = static_cast<int>(lists.size());
    b.quote_depth = quote_depth;
    b.marker = std::move(pending_marker);
    b.task = pending_task;
    pending_marker.clear();
    pending_task = MdTask::none;
    doc.blocks.push_back(std::move(b));
    block = static_cast<int>(doc.blocks.size()) - 1;
    return doc.blocks.back();
  }
  void end_implicit() {
    if (implicit) block = -1;
    implicit = false;
  }

  void add_text(std::string_view t) {
    if (t.empty()) return;
    std::vector<MdSpan>* target = cell;
    if (!target) {
      if (block < 0) {
        start_block(MdBlockKind::paragraph);
        implicit = true;
      }
      target = &doc.blocks[static_cast<size_t>(block)].spans;
    }
    const uint8_t style = styles.back();
    const int link = (style & md_link) && !link_stack.empty() ? link_stack.back() : -1;
    if (!target->empty() && target->back().style == style && target->back().link == link &&
        target->back().text != "\n" && t != "\n") {
      target->back().text += t;
    } else {
      target->push_back(MdSpan{std::string(t), style, link});
    }
  }

  void enter(MD_BLOCKTYPE type, void* detail) {
    switch (type) {
      case MD_BLOCK_DOC: break;
      case MD_BLOCK_QUOTE:
        end_implicit();
        ++quote_depth;
        break;
      case MD_BLOCK_UL:
        end_implicit();
        lists.push_back({false, 1});
        break;
      case MD_BLOCK_OL:
        end_implicit();
        lists.push_back({true, static_cast<const MD_BLOCK_OL_DETAIL*>(detail)->start});
        break;
      case MD_BLOCK_LI: {
        end_implicit();
        const auto* d = static_cast<const MD_BLOCK_LI_DETAIL*>(detail);
        if (lists.empty()) lists.push_back({});  // md4c always opens a list first; be safe
        List& l = lists.back();
        pending_marker = l.ordered ? std::to_string(l.next++) + "." : bullet_for_depth(static_cast<int>(lists.size()));
        pending_task = d->is_task ? (d->task_mark == ' ' ? MdTask::open : MdTask::done) : MdTask::none;
        item_open = true;
        break;
      }
      case MD_BLOCK_HR:
        start_block(MdBlockKind::rule);
        block = -1;
        break;
      case MD_BLOCK_H:
        start_block(MdBlockKind::heading).level =
            static_cast<int>(static_cast<const MD_BLOCK_H_DETAIL*>(detail)->level);
        break;
      case MD_BLOCK_CODE: {
        const auto* d = static_cast<const MD_BLOCK_CODE_DETAIL*>(detail);
        start_block(MdBlockKind::code).language = attribute_text(d->lang);
        fence = d->fence_char;
        code_end = 0;
        break;
      }
      case MD_BLOCK_HTML:
      case MD_BLOCK_P: start_block(MdBlockKind::paragraph); break;
      case MD_BLOCK_TABLE: start_block(MdBlockKind::table); break;
      case MD_BLOCK_THEAD: in_head = true; break;
      case MD_BLOCK_TBODY: in_head = false; break;
      case MD_BLOCK_TR:
        if (block >= 0) {
          MdTable& t = doc.blocks[static_cast<size_t>(block)].table;
          t.rows.emplace_back();
          if (in_head) ++t.n_header_rows;
        }
        break;
      case MD_BLOCK_TH:
      case MD_BLOCK_TD:
        if (block >= 0 && !doc.blocks[static_cast<size_t>(block)].table.rows.empty()) {
          MdTable& t = doc.blocks[static_cast<size_t>(block)].table;
          auto& row = t.rows.back();
          if (t.rows.size() == 1) {
            const MD_ALIGN a = static_cast<const MD_BLOCK_TD_DETAIL*>(detail)->align;
            t.align.push_back(a == MD_ALIGN_CENTER  ? MdAlign::center
                              : a == MD_ALIGN_RIGHT ? MdAlign::right
                                                    : MdAlign::left);
          }
          row.emplace_back();
          cell = &row.back();
        }
        break;
    }
  }

  void leave(MD_BLOCKTYPE type) {
    switch (type) {
      case MD_BLOCK_QUOTE:
        end_implicit();
        --quote_depth;
        break;
      case MD_BLOCK_UL:
      case MD_BLOCK_OL:
        end_implicit();
        if (!lists.empty()) lists.pop_back();
        break;
      case MD_BLOCK_LI:
        // An item with nothing in it yet ("- " while streaming) still shows its marker.
        if (!pending_marker.empty()) start_block(MdBlockKind::paragraph);
        end_implicit();
        block = -1;
        item_open = false;
        break;
      case MD_BLOCK_CODE:
        if (block >= 0) {
          std::string& c = doc.blocks[static_cast<size_t>(block)].code;
          if (!c.empty() && c.back() == '\n') c.pop_back();
        }
        block = -1;
        break;
      case MD_BLOCK_TH:
      case MD_BLOCK_TD: cell = nullptr; break;
      case MD_BLOCK_TABLE: {
        if (block >= 0) {
          MdTable& t = doc.blocks[static_cast<size_t>(block)].table;
          for (auto& row : t.rows) row.resize(t.align.size());
        }
        block = -1;
        break;
      }
      case MD_BLOCK_P:
      case MD_BLOCK_H:
      case MD_BLOCK_HTML:
        block = -1;
        implicit = false;
        break;
      default: break;
    }
  }

  void text(MD_TEXTTYPE type, const MD_CHAR* t, MD_SIZE size) {
    const std::string_view s(t, size);
    if (t >= src.data() && t <= src.data() + src.size()) text_end = static_cast<size_t>(t - src.data()) + size;
    switch (type) {
      case MD_TEXT_NULLCHAR: add_text("\uFFFD"); break;
      case MD_TEXT_BR: add_text("\n"); break;
      case MD_TEXT_SOFTBR: add_text(" "); break;
      case MD_TEXT_ENTITY: add_text(decode_entity(s)); break;
      case MD_TEXT_CODE:
        if (!cell && block >= 0 && doc.blocks[static_cast<size_t>(block)].kind == MdBlockKind::code) {
          doc.blocks[static_cast<size_t>(block)].code += s;
          code_end = text_end;
        } else {
          add_text(s);
        }
        break;
      default: add_text(s); break;
    }
  }
};

// Whether a line (container prefixes "> " and indentation skipped) is a fence of `c`.
bool is_fence_line(std::string_view line, char c) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '>' || line[i] == '\t')) ++i;
  size_t n = 0;
  while (i + n < line.size() && line[i + n] == c) ++n;
  return n >= 3;
}

int count_fence_lines(std::string_view text, char c) {
  int n = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    n += is_fence_line(text.substr(pos, nl - pos), c) ? 1 : 0;
    pos = nl + 1;
  }
  return n;
}

bool line_starts_with_pipe(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '>')) ++i;
  return i < line.size() && line[i] == '|';
}

bool is_delimiter_row(std::string_view line) {
  for (char c : line) {
    if (c != '|' && c != '-' && c != ':' && c != ' ' && c != '\t' && c != '>') return false;
  }
  return true;
}

// md4c 0.4.8 starts a table only after a blank line; GitHub also lets one interrupt a
// paragraph ("Compare:\n| a | b |\n|---|---|"), as models write them. Adds that blank line
// before a header row whose next line is a delimiter row (outside fenced code).
std::string separate_tables(std::string text) {
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos <= text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(std::string_view(text).substr(pos, nl - pos));
    pos = nl + 1;
  }
  std::vector<size_t> before;  // lines that get a blank line before them
  char fence = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view l = lines[i];
    if (is_fence_line(l, '`') || is_fence_line(l, '~')) {
      const char c = is_fence_line(l, '`') ? '`' : '~';
      fence = fence == 0 ? c : fence == c ? 0 : fence;
      continue;
    }
    if (fence || i == 0 || i + 1 >= lines.size() || !line_starts_with_pipe(l)) continue;
    const std::string_view prev = lines[i - 1];
    const bool prev_prose = prev.find_first_not_of(" \t") != std::string_view::npos && !line_starts_with_pipe(prev);
    const std::string_view next = lines[i + 1];
    if (prev_prose && line_starts_with_pipe(next) && is_delimiter_row(next) &&
        next.find('-') != std::string_view::npos) {
      before.push_back(static_cast<size_t>(l.data() - text.data()));
    }
  }
  if (before.empty()) return text;
  std::string out;
  out.reserve(text.size() + before.size());
  size_t from = 0;
  for (const size_t at : before) {
    out.append(text, from, at - from);
    out += '\n';
    from = at;
  }
  out.append(text, from, std::string::npos);
  return out;
}

}  // namespace

std::string_view streaming_prefix(std::string_view text) {
  // The unfinished last line: an opening (or closing) fence, or inline code, still arriving.
  const size_t last_nl = text.rfind('\n');
  const size_t last_start = last_nl == std::string_view::npos ? 0 : last_nl + 1;
  {
    const std::string_view last = text.substr(last_start);
    size_t i = 0;
    while (i < last.size() && (last[i] == ' ' || last[i] == '>')) ++i;
    if (i < last.size() && (last[i] == '`' || last[i] == '~')) {
      const char c = last[i];
      size_t n = 0;
      while (i + n < last.size() && last[i + n] == c) ++n;
      if (last.find(c, i + n) == std::string_view::npos) text = text.substr(0, last_start);
    }
  }
  // A table's header row, and its delimiter row while it arrives: until the delimiter row is
  // complete they are a paragraph of pipes.
  std::vector<std::pair<size_t, size_t>> lines;  // [begin, end) of each line
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    const bool complete = nl != std::string_view::npos;
    if (!complete) nl = text.size();
    lines.emplace_back(pos, nl);
    pos = nl + 1;
  }
  const bool last_complete = !text.empty() && text.back() == '\n';
  size_t run = 0;
  while (run < lines.size()) {
    const auto [b, e] = lines[lines.size() - 1 - run];
    if (!line_starts_with_pipe(text.substr(b, e - b))) break;
    ++run;
  }
  if (run == 1 || (run == 2 && !last_complete && is_delimiter_row(text.substr(lines.back().first)))) {
    return text.substr(0, lines[lines.size() - run].first);
  }
  return text;
}

MdDocument parse_markdown(std::string_view full_text, bool streaming) {
  // md4c 0.4.8 looks one byte past the end of its input (an unclosed link destination at the
  // very end reads the next character): give it a copy that ends in a NUL, never a view into
  // a longer text.
  const std::string copy = separate_tables(std::string(streaming ? streaming_prefix(full_text) : full_text));
  const std::string_view text = copy;
  Builder builder;
  builder.src = text;
  MD_PARSER p{};
  p.abi_version = 0;
  p.flags = MD_DIALECT_GITHUB | MD_FLAG_NOHTML;
  p.enter_block = [](MD_BLOCKTYPE t, void* d, void* u) {
    static_cast<Builder*>(u)->enter(t, d);
    return 0;
  };
  p.leave_block = [](MD_BLOCKTYPE t, void*, void* u) {
    static_cast<Builder*>(u)->leave(t);
    return 0;
  };
  p.enter_span = [](MD_SPANTYPE t, void* d, void* u) {
    Builder& b = *static_cast<Builder*>(u);
    uint8_t s = b.styles.back();
    switch (t) {
      case MD_SPAN_EM: s |= md_italic; break;
      case MD_SPAN_STRONG: s |= md_bold; break;
      case MD_SPAN_DEL: s |= md_strike; break;
      case MD_SPAN_CODE: s |= md_code; break;
      case MD_SPAN_A:
      case MD_SPAN_IMG: {
        const MD_ATTRIBUTE& a = t == MD_SPAN_A ? static_cast<const MD_SPAN_A_DETAIL*>(d)->href
                                               : static_cast<const MD_SPAN_IMG_DETAIL*>(d)->src;
        s |= md_link;
        if (t == MD_SPAN_IMG) s |= md_italic;
        b.doc.links.push_back(attribute_text(a));
        b.link_stack.push_back(static_cast<int>(b.doc.links.size()) - 1);
        break;
      }
      default: break;
    }
    b.styles.push_back(s);
    return 0;
  };
  p.leave_span = [](MD_SPANTYPE t, void*, void* u) {
    Builder& b = *static_cast<Builder*>(u);
    if (b.styles.size() > 1) b.styles.pop_back();
    if ((t == MD_SPAN_A || t == MD_SPAN_IMG) && !b.link_stack.empty()) b.link_stack.pop_back();
    return 0;
  };
  p.text = [](MD_TEXTTYPE t, const MD_CHAR* s, MD_SIZE n, void* u) {
    static_cast<Builder*>(u)->text(t, s, n);
    return 0;
  };
  md_parse(text.data(), static_cast<MD_SIZE>(text.size()), &p, &builder);

  // Only the last block can be a fence still open (an unclosed fence runs to the end).
  if (!builder.doc.blocks.empty() && builder.doc.blocks.back().kind == MdBlockKind::code && builder.fence != 0) {
    MdBlock& last = builder.doc.blocks.back();
    if (!last.code.empty()) {
      last.closed = count_fence_lines(text.substr(std::min(builder.code_end, text.size())), builder.fence) >= 1;
    } else {
      const size_t from = std::min(builder.text_end, text.size());
      last.closed = count_fence_lines(text.substr(from), builder.fence) >= 2;
    }
  }
  return std::move(builder.doc);
}

}  // namespace kvc::ui
