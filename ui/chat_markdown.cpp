// Drawing the Markdown layout model with ImGui: wrapped styled text, lists, quotes, tables,
// highlighted code blocks with Copy, links that open in the browser.
#include "ui/chat_markdown.h"

#include <imgui.h>

#include <algorithm>
#include <cfloat>

#include "core/util/utf8.h"
#include "ui/open_url.h"
#include "ui/views.h"
#include "ui/wrapped_text.h"

namespace kvc::ui {

namespace {

constexpr float k_list_indent = 22.0f;
constexpr float k_quote_indent = 16.0f;

// Colors of code token classes, by TokenClass.
constexpr ImU32 k_token_colors[] = {
    IM_COL32(220, 224, 214, 255),  // plain
    IM_COL32(198, 120, 221, 255),  // keyword
    IM_COL32(229, 192, 123, 255),  // type
    IM_COL32(209, 154, 102, 255),  // literal
    IM_COL32(152, 195, 121, 255),  // string
    IM_COL32(127, 132, 142, 255),  // comment
    IM_COL32(209, 154, 102, 255),  // number
    IM_COL32(97, 175, 239, 255),   // key
    IM_COL32(86, 182, 194, 255),   // preprocessor
};
static_assert(std::size(k_token_colors) == static_cast<size_t>(TokenClass::preprocessor) + 1);

ImFont* font_for(const Fonts& f, uint8_t style, ImFont* base) {
  if (style & md_code) return f.mono ? f.mono : base;
  if (base != f.regular && base != nullptr) return base;  // headings keep their face
  if ((style & md_bold) && (style & md_italic)) return f.bold_italic ? f.bold_italic : base;
  if (style & md_bold) return f.bold ? f.bold : base;
  if (style & md_italic) return f.italic ? f.italic : base;
  return base;
}

float text_width(ImFont* font, std::string_view s) {
  return font->CalcTextSizeA(font->FontSize, FLT_MAX, 0.0f, s.data(), s.data() + s.size()).x;
}

// A link hit this frame: what the caller does with hover and clicks.
struct LinkHit {
  int link = -1;
};

// Lays out spans word by word in [origin.x, origin.x + width), drawing when `draw`; returns the
// height. Links under the mouse show their URL; a click on one is returned in `clicked`.
float flow_spans(const ViewContext& ctx, const std::vector<MdSpan>& spans, const MdDocument& doc, ImVec2 origin,
                 float width, ImFont* base, ImU32 color, bool draw, LinkHit* clicked) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line_h = base->FontSize * 1.3f;
  const float right = origin.x + std::max(width, base->FontSize * 4.0f);
  float x = origin.x, y = origin.y;
  const bool hover_ok = draw && ImGui::IsWindowHovered();
  // Only lines in the clip rectangle are drawn, each word in bounded pieces (ui/wrapped_text.h).
  const float clip_top = dl->GetClipRectMin().y, clip_bottom = dl->GetClipRectMax().y;
  auto in_view = [&](float line_y) { return draw && line_y + line_h >= clip_top && line_y <= clip_bottom; };
  for (const MdSpan& s : spans) {
    if (s.text == "\n") {
      x = origin.x;
      y += line_h;
      continue;
    }
    ImFont* font = font_for(ctx.fonts, s.style, base);
    const float dy = (base->FontSize - font->FontSize) * 0.6f;
    const ImU32 col = (s.style & md_link)   ? ImGui::ColorConvertFloat4ToU32(colors::accent)
                      : (s.style & md_code) ? IM_COL32(230, 190, 140, 255)
                                            : color;
    const std::string_view t = s.text;
    size_t pos = 0;
    while (pos < t.size()) {
      // A word and the spaces after it.
      size_t end = t.find(' ', pos);
      if (end == std::string_view::npos) end = t.size();
      size_t next = t.find_first_not_of(' ', end);
      if (next == std::string_view::npos) next = t.size();
      std::string_view word = t.substr(pos, end - pos);
      const std::string_view spaces = t.substr(end, next - end);
      float w = text_width(font, word);
      if (x > origin.x && x + w > right) {
        x = origin.x;
        y += line_h;
      }
      // A word wider than the line (a long URL, a paragraph of CJK) is cut at whole UTF-8 characters.
      while (!word.empty() && x + w > right && x == origin.x) {
        size_t cut = fit_prefix(font, font->FontSize, word, right - x);
        if (cut == 0) cut = utf8_boundary_at_or_after(word, 1);
        const std::string_view piece = word.substr(0, cut);
        if (in_view(y)) add_text_bounded(dl, font, font->FontSize, ImVec2(x, y + dy), col, piece);
        word.remove_prefix(cut);
        w = std::max(0.0f, w - text_width(font, piece));
        y += line_h;
      }
      const float ws = x == origin.x && pos == 0 && spaces.empty() ? 0.0f : text_width(font, spaces);
      if (in_view(y) && !word.empty()) {
        const ImVec2 a(x, y + dy), b(x + w, y + dy + font->FontSize);
        if (s.style & md_code) {
          // One box for the whole code span on this line: the spaces inside it are covered too.
          const float tail = next < t.size() && x + w + ws <= right ? ws : 0.0f;
          dl->AddRectFilled(ImVec2(a.x - 2, a.y - 1), ImVec2(b.x + tail + 2, b.y + 1), IM_COL32(44, 48, 58, 255), 3.0f);
        }
        add_text_bounded(dl, font, font->FontSize, a, col, word);
        if (s.style & md_strike)
          dl->AddLine(ImVec2(a.x, (a.y + b.y) * 0.5f), ImVec2(b.x, (a.y + b.y) * 0.5f), col, 1.0f);
        if (s.style & md_link) {
          dl->AddLine(ImVec2(a.x, b.y), ImVec2(b.x, b.y), col, 1.0f);
          if (hover_ok && ImGui::IsMouseHoveringRect(a, b)) {
            ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
            ImGui::SetTooltip("%s", doc.links[static_cast<size_t>(s.link)].c_str());
            if (ImGui::IsMouseClicked(ImGuiMouseButton_Left) && clicked) clicked->link = s.link;
          }
        }
      }
      x += w + ws;
      pos = next;
    }
  }
  return y + line_h - origin.y;
}

void draw_code_block(ViewContext& ctx, const MdBlock& b, const std::vector<CodeToken>& toks, float width,
                     const std::string& copy_name, std::string& copied) {
  ImFont* mono = ctx.fonts.mono ? ctx.fonts.mono : ImGui::GetFont();
  const ImVec2 start = ImGui::GetCursorScreenPos();
  const float pad = 8.0f;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  // Header: the language, and Copy.
  const float header_h = ImGui::GetFrameHeight();
  dl->AddRectFilled(start, ImVec2(start.x + width, start.y + header_h), IM_COL32(30, 33, 40, 255), 6.0f,
                    ImDrawFlags_RoundCornersTop);
  ImGui::SetCursorScreenPos(ImVec2(start.x + pad, start.y + (header_h - ImGui::GetTextLineHeight()) * 0.5f));
  const std::string label = (b.language.empty() ? std::string("code") : b.language) + (b.closed ? "" : "  \u2026");
  ImGui::TextDisabled("%s", label.c_str());
  const float copy_w = ImGui::CalcTextSize("Copy").x + ImGui::GetStyle().FramePadding.x * 2;
  ImGui::SetCursorScreenPos(
      ImVec2(start.x + width - copy_w - pad, start.y + (header_h - ImGui::GetFrameHeight()) * 0.5f));
  ImGui::PushID(copy_name.c_str());
  const bool script_copy = !copy_name.empty() && ctx.hooks.take_click(copy_name);
  if (!copy_name.empty()) ctx.hooks.note_widget(copy_name);
  if (ImGui::SmallButton("Copy") || script_copy) {
    ImGui::SetClipboardText(b.code.c_str());
    copied = b.code;
  }
  ImGui::PopID();
  // Body: highlighted lines in a child that scrolls sideways when a line is too long.
  const float line_h = mono->FontSize * 1.25f;
  int n_lines = 1;
  float max_w = 0, line_w = 0;
  for (const CodeToken& t : toks) {
    std::string_view s = std::string_view(b.code).substr(t.begin, t.end - t.begin);
    for (size_t nl; (nl = s.find('\n')) != std::string_view::npos; s.remove_prefix(nl + 1)) {
      max_w = std::max(max_w, line_w + text_width(mono, s.substr(0, nl)));
      line_w = 0;
      ++n_lines;
    }
    line_w += text_width(mono, s);
  }
  max_w = std::max(max_w, line_w);
  const bool scrolls = max_w + 2 * pad > width;
  const float body_h =
      static_cast<float>(n_lines) * line_h + 2 * pad + (scrolls ? ImGui::GetStyle().ScrollbarSize : 0.0f);
  ImGui::SetCursorScreenPos(ImVec2(start.x, start.y + header_h));
  ImGui::PushStyleColor(ImGuiCol_ChildBg, IM_COL32(18, 20, 24, 255));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(pad, pad));
  ImGui::BeginChild(ImGui::GetID(&b), ImVec2(width, body_h), false,
                    ImGuiWindowFlags_HorizontalScrollbar | ImGuiWindowFlags_NoScrollWithMouse |
                        ImGuiWindowFlags_AlwaysUseWindowPadding);
  ImDrawList* cdl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  // Lines outside the clip rectangle are skipped; a long line is drawn in bounded pieces.
  const float clip_top = cdl->GetClipRectMin().y, clip_bottom = cdl->GetClipRectMax().y;
  float x = o.x, y = o.y;
  for (const CodeToken& t : toks) {
    const ImU32 col = k_token_colors[static_cast<size_t>(t.cls)];
    std::string_view s = std::string_view(b.code).substr(t.begin, t.end - t.begin);
    while (!s.empty()) {
      const size_t nl = s.find('\n');
      const std::string_view part = s.substr(0, nl);
      if (y + line_h >= clip_top && y <= clip_bottom && !part.empty()) {
        add_text_bounded(cdl, mono, mono->FontSize, ImVec2(x, y), col, part);
        if (nl == std::string_view::npos) x += text_width(mono, part);  // the next token goes on after it
      }
      if (nl == std::string_view::npos) break;
      x = o.x;
      y += line_h;
      s.remove_prefix(nl + 1);
    }
  }
  ImGui::Dummy(ImVec2(max_w, static_cast<float>(n_lines) * line_h));
  ImGui::EndChild();
  ImGui::PopStyleVar();
  ImGui::PopStyleColor();
}

void draw_table(const ViewContext& ctx, const MdTable& t, const MdDocument& doc, float width, LinkHit* clicked) {
  ImFont* regular = ctx.fonts.regular ? ctx.fonts.regular : ImGui::GetFont();
  ImFont* bold = ctx.fonts.bold ? ctx.fonts.bold : regular;
  const float pad = 6.0f;
  const MdMeasure measure = [&](std::string_view s, uint8_t style) {
    return text_width(font_for(ctx.fonts, style, regular), s) + ((style & md_code) ? 4.0f : 0.0f);
  };
  const std::vector<float> widths = table_column_widths(t, width, pad, measure);
  const ImU32 grid = IM_COL32(64, 70, 82, 255);
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  float total_w = 0;
  for (float w : widths) total_w += w;
  std::vector<float> row_h(t.rows.size(), 0.0f);
  float total_h = 0;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    ImFont* base = static_cast<int>(r) < t.n_header_rows ? bold : regular;
    for (size_t c = 0; c < widths.size(); ++c) {
      row_h[r] = std::max(
          row_h[r], flow_spans(ctx, t.rows[r][c], doc, ImVec2(0, 0), widths[c] - 2 * pad, base, text, false, nullptr));
    }
    row_h[r] += 2 * pad;
    total_h += row_h[r];
  }
  // Wider than the view even with every column wrapped to its longest word: it scrolls sideways.
  const bool scrolls = total_w > width + 0.5f;
  if (scrolls) {
    ImGui::BeginChild(ImGui::GetID(&t), ImVec2(width, total_h + ImGui::GetStyle().ScrollbarSize + 2.0f), false,
                      ImGuiWindowFlags_HorizontalScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  }
  const ImVec2 o = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  float y = o.y;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const bool header = static_cast<int>(r) < t.n_header_rows;
    ImFont* base = header ? bold : regular;
    if (header) dl->AddRectFilled(ImVec2(o.x, y), ImVec2(o.x + total_w, y + row_h[r]), IM_COL32(36, 40, 50, 255));
    float x = o.x;
    for (size_t c = 0; c < widths.size(); ++c) {
      const float inner = widths[c] - 2 * pad;
      float natural = 0;
      for (const MdSpan& s : t.rows[r][c]) natural += measure(s.text, s.style);
      float dx = 0;
      if (natural < inner && t.align[c] == MdAlign::center) dx = (inner - natural) * 0.5f;
      if (natural < inner && t.align[c] == MdAlign::right) dx = inner - natural;
      flow_spans(ctx, t.rows[r][c], doc, ImVec2(x + pad + dx, y + pad), inner - dx, base, text, true, clicked);
      x += widths[c];
      if (c + 1 < widths.size()) dl->AddLine(ImVec2(x, y), ImVec2(x, y + row_h[r]), grid);
    }
    y += row_h[r];
    dl->AddLine(ImVec2(o.x, y), ImVec2(o.x + total_w, y), grid);
  }
  dl->AddRect(o, ImVec2(o.x + total_w, y), grid, 4.0f);
  ImGui::Dummy(ImVec2(total_w, y - o.y));
  if (scrolls) ImGui::EndChild();
}

// The plain text hard-wrapped to `width` (InputTextMultiline does not wrap), lines of at most
// max_line_bytes: the box draws the lines in view as one primitive, which has to stay under the
// renderer's 65,536 vertices whatever the glyphs' widths.
std::string wrap_plain(const std::string& text, ImFont* font, float width, size_t max_line_bytes) {
  std::string out;
  const std::vector<TextLine> lines = wrap_lines(text, width, font_wrap(font, font->FontSize), max_line_bytes);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    out.append(text, lines[i].begin, lines[i].end - lines[i].begin);
  }
  return out;
}

}  // namespace

RenderedAnswer& MarkdownAnswers::get(int64_t id, const std::string& text, bool streaming) {
  RenderedAnswer& a = cache_[id];
  const uint64_t key = markdown_cache_key(text);
  if (a.n_parses > 0 && a.key == key && a.streaming == streaming) {
    ++a.n_frames_since_parse;
    return a;
  }
  a.key = key;
  a.streaming = streaming;
  a.doc = parse_markdown(text, streaming);
  a.tokens.assign(a.doc.blocks.size(), {});
  for (size_t i = 0; i < a.doc.blocks.size(); ++i) {
    const MdBlock& b = a.doc.blocks[i];
    if (b.kind == MdBlockKind::code) a.tokens[i] = highlight(b.code, language_family(b.language));
  }
  a.plain = a.doc.plain_text();
  ++a.n_parses;
  a.n_frames_since_parse = 0;
  return a;
}

void MarkdownAnswers::draw(ViewContext& ctx, RenderedAnswer& a, int64_t id, bool last) {
  const MdDocument& doc = a.doc;
  ImFont* regular = ctx.fonts.regular ? ctx.fonts.regular : ImGui::GetFont();
  const float avail = ImGui::GetContentRegionAvail().x;
  bool& selecting = select_[id];
  LinkHit clicked;

  if (selecting) {
    // At most 12,000 glyphs in the lines the box shows at once (4 vertices each).
    const float max_h = 600.0f;
    const auto n_shown = static_cast<size_t>(max_h / ImGui::GetTextLineHeight()) + 2;
    select_buffer_ = wrap_plain(a.plain, regular, avail - 24.0f, std::max<size_t>(64, 12000 / n_shown));
    int n_lines = 1 + static_cast<int>(std::count(select_buffer_.begin(), select_buffer_.end(), '\n'));
    const float h = std::min(max_h, static_cast<float>(n_lines) * ImGui::GetTextLineHeight() + 16.0f);
    ImGui::PushID(static_cast<int>(id));
    input_string_multiline("##select", select_buffer_, ImVec2(avail, h), ImGuiInputTextFlags_ReadOnly);
    ImGui::PopID();
  } else {
    const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
    const ImU32 quoted = ImGui::ColorConvertFloat4ToU32(ImVec4(0.74f, 0.76f, 0.80f, 1.0f));
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    int n_code = 0;
    for (size_t i = 0; i < doc.blocks.size(); ++i) {
      const MdBlock& b = doc.blocks[i];
      const float indent =
          static_cast<float>(b.list_depth) * k_list_indent + static_cast<float>(b.quote_depth) * k_quote_indent;
      const float x = origin.x + indent;
      const float width = std::max(40.0f, avail - indent);
      const ImVec2 top(x, ImGui::GetCursorScreenPos().y);
      ImGui::SetCursorScreenPos(top);
      ImDrawList* dl = ImGui::GetWindowDrawList();
      if (!b.marker.empty() || b.task != MdTask::none) {
        const float fs = regular->FontSize;
        if (b.task != MdTask::none) {
          const ImVec2 a0(x - fs - 4.0f, top.y + fs * 0.15f), a1(x - 6.0f, top.y + fs * 0.15f + fs - 2.0f);
          dl->AddRect(a0, a1, text, 2.0f);
          if (b.task == MdTask::done) {
            const ImU32 accent = ImGui::ColorConvertFloat4ToU32(colors::accent);
            dl->AddLine(ImVec2(a0.x + 3, (a0.y + a1.y) * 0.5f), ImVec2(a0.x + fs * 0.4f, a1.y - 3), accent, 2.0f);
            dl->AddLine(ImVec2(a0.x + fs * 0.4f, a1.y - 3), ImVec2(a1.x - 2, a0.y + 2), accent, 2.0f);
          }
        } else {
          const float mw = text_width(regular, b.marker);
          dl->AddText(regular, fs, ImVec2(x - mw - 6.0f, top.y), text, b.marker.c_str());
        }
      }
      const ImU32 col = b.quote_depth > 0 ? quoted : text;
      switch (b.kind) {
        case MdBlockKind::paragraph:
        case MdBlockKind::heading: {
          ImFont* base = regular;
          if (b.kind == MdBlockKind::heading) {
            base = b.level == 1 ? ctx.fonts.large : b.level == 2 ? ctx.fonts.medium : ctx.fonts.bold;
            if (!base) base = regular;
          }
          const float h = flow_spans(ctx, b.spans, doc, top, width, base, col, true, &clicked);
          ImGui::Dummy(ImVec2(width, h));
          if (b.kind == MdBlockKind::heading && b.level <= 2) {
            const float ly = ImGui::GetCursorScreenPos().y - ImGui::GetStyle().ItemSpacing.y * 0.5f;
            dl->AddLine(ImVec2(x, ly), ImVec2(x + width, ly), IM_COL32(60, 66, 78, 255));
          }
          break;
        }
        case MdBlockKind::rule: {
          const float h = regular->FontSize * 0.8f;
          dl->AddLine(ImVec2(x, top.y + h * 0.5f), ImVec2(x + width, top.y + h * 0.5f), IM_COL32(80, 86, 100, 255),
                      1.5f);
          ImGui::Dummy(ImVec2(width, h));
          break;
        }
        case MdBlockKind::code: {
          ++n_code;
          const std::string name = last ? "chat.copy_code." + std::to_string(n_code) : std::string();
          ImGui::PushID(static_cast<int>(i));
          draw_code_block(ctx, b, a.tokens[i], width, name.empty() ? "copy" : name, copied_code_);
          ImGui::PopID();
          break;
        }
        case MdBlockKind::table: draw_table(ctx, b.table, doc, width, &clicked); break;
      }
      // Quote bars beside the block.
      for (int q = 0; q < b.quote_depth; ++q) {
        const float qx = origin.x + static_cast<float>(q) * k_quote_indent + 3.0f;
        dl->AddLine(ImVec2(qx, top.y - 2.0f), ImVec2(qx, ImGui::GetCursorScreenPos().y), IM_COL32(90, 110, 150, 255),
                    3.0f);
      }
    }
    ImGui::SetCursorScreenPos(ImVec2(origin.x, ImGui::GetCursorScreenPos().y));
    ImGui::Dummy(ImVec2(0, 0));
  }

  if (last) {
    for (size_t k = 0; k < doc.links.size(); ++k) {
      const std::string name = "chat.link." + std::to_string(k + 1);
      ctx.hooks.note_widget(name);
      if (ctx.hooks.take_click(name)) clicked.link = static_cast<int>(k);
    }
  }
  if (clicked.link >= 0) {
    const std::string& url = doc.links[static_cast<size_t>(clicked.link)];
    auto st = open_url(url);
    link_opened_ = st.ok() ? url : std::string();
    link_error_ = st.ok() ? std::string() : st.error().message;
  }
  if (last) report(ctx, a);
}

void MarkdownAnswers::report(ViewContext& ctx, const RenderedAnswer& a) {
  const MdDocument& doc = a.doc;
  double n_head = 0, n_par = 0, n_code = 0, n_open = 0, n_tables = 0, n_rows = 0, n_cols = 0, n_items = 0,
         max_depth = 0;
  double n_done = 0, n_todo = 0, n_quote = 0, n_rules = 0, n_bold = 0, n_italic = 0, n_strike = 0, n_icode = 0,
         n_tokens = 0;
  bool raw_markup = false;
  std::string langs;
  auto count_spans = [&](const std::vector<MdSpan>& spans) {
    for (const MdSpan& s : spans) {
      n_bold += (s.style & md_bold) ? 1 : 0;
      n_italic += (s.style & md_italic) ? 1 : 0;
      n_strike += (s.style & md_strike) ? 1 : 0;
      n_icode += (s.style & md_code) ? 1 : 0;
    }
  };
  for (size_t i = 0; i < doc.blocks.size(); ++i) {
    const MdBlock& b = doc.blocks[i];
    n_items += b.marker.empty() ? 0 : 1;
    max_depth = std::max(max_depth, static_cast<double>(b.list_depth));
    n_done += b.task == MdTask::done ? 1 : 0;
    n_todo += b.task == MdTask::open ? 1 : 0;
    n_quote += b.quote_depth > 0 ? 1 : 0;
    count_spans(b.spans);
    switch (b.kind) {
      case MdBlockKind::heading: ++n_head; break;
      case MdBlockKind::paragraph: {
        ++n_par;
        std::string t;
        for (const MdSpan& s : b.spans) t += s.text;
        raw_markup = raw_markup || t.find("```") != std::string::npos || t.rfind("|", 0) == 0;
        break;
      }
      case MdBlockKind::rule: ++n_rules; break;
      case MdBlockKind::code:
        ++n_code;
        n_open += b.closed ? 0 : 1;
        langs += (langs.empty() ? "" : ",") + b.language;
        for (const CodeToken& t : a.tokens[i]) n_tokens += t.cls != TokenClass::plain ? 1 : 0;
        break;
      case MdBlockKind::table:
        ++n_tables;
        n_rows += static_cast<double>(b.table.rows.size());
        n_cols = std::max(n_cols, static_cast<double>(b.table.align.size()));
        for (const auto& row : b.table.rows) {
          for (const auto& cell : row) count_spans(cell);
        }
        break;
    }
  }
  ScriptHooks& h = ctx.hooks;
  h.set_fact("md_blocks", static_cast<double>(doc.blocks.size()));
  h.set_fact("md_headings", n_head);
  h.set_fact("md_paragraphs", n_par);
  h.set_fact("md_code_blocks", n_code);
  h.set_fact("md_open_code_blocks", n_open);
  h.set_fact("md_code_languages", langs);
  h.set_fact("md_tables", n_tables);
  h.set_fact("md_table_rows", n_rows);
  h.set_fact("md_table_columns", n_cols);
  h.set_fact("md_list_items", n_items);
  h.set_fact("md_max_list_depth", max_depth);
  h.set_fact("md_tasks_done", n_done);
  h.set_fact("md_tasks_open", n_todo);
  h.set_fact("md_quote_blocks", n_quote);
  h.set_fact("md_rules", n_rules);
  h.set_fact("md_links", static_cast<double>(doc.links.size()));
  h.set_fact("md_bold_spans", n_bold);
  h.set_fact("md_italic_spans", n_italic);
  h.set_fact("md_strike_spans", n_strike);
  h.set_fact("md_inline_code_spans", n_icode);
  h.set_fact("md_highlighted_tokens", n_tokens);
  h.set_fact("md_parses", static_cast<double>(a.n_parses));
  h.set_fact("md_cached_messages", static_cast<double>(cache_.size()));
  h.set_fact("md_frames_since_parse", static_cast<double>(a.n_frames_since_parse));
  h.set_fact("md_link_opened", link_opened_);
  h.set_fact("md_link_error", link_error_);
  h.set_fact("md_copied_code", copied_code_);
  if (a.streaming) {
    watch_.frames += 1;
    watch_.open_code += n_open > 0 ? 1 : 0;
    watch_.tables += n_tables > 0 ? 1 : 0;
    watch_.raw_markup += raw_markup ? 1 : 0;
  }
  h.set_fact("md_stream_frames", watch_.frames);
  h.set_fact("md_stream_open_code_frames", watch_.open_code);
  h.set_fact("md_stream_table_frames", watch_.tables);
  h.set_fact("md_stream_raw_markup_frames", watch_.raw_markup);
}

}  // namespace kvc::ui
