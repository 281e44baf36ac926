// Wrapped text laid out once and drawn by visible lines, each a bounded draw call.
#include "ui/wrapped_text.h"

#include <imgui_internal.h>

#include <algorithm>
#include <cmath>

#include "core/util/utf8.h"
#include "ui/markdown.h"

namespace kvc::ui {

namespace {

// The byte length of the code point that starts at s[0] (1 for a stray continuation byte).
size_t code_point_bytes(std::string_view s) {
  size_t n = 1;
  while (n < s.size() && is_utf8_continuation(s[n])) ++n;
  return n;
}

}  // namespace

std::vector<TextLine> wrap_lines(std::string_view text, float width, const WrapAt& wrap_at, size_t max_line_bytes) {
  std::vector<TextLine> lines;
  const char* const base = text.data();
  const size_t n = text.size();
  auto push = [&](size_t b, size_t e) { lines.push_back({static_cast<uint32_t>(b), static_cast<uint32_t>(e)}); };
  size_t pos = 0;
  while (true) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = n;
    if (pos == nl) {
      // An empty line; one after the last '\n' counts only when it is the whole text.
      if (nl < n || lines.empty()) push(pos, pos);
    }
    size_t s = pos;
    while (s < nl) {
      size_t limit = std::min(nl, s + max_line_bytes);
      while (limit > s && limit < nl && is_utf8_continuation(text[limit])) --limit;
      if (limit == s) limit = s + code_point_bytes(text.substr(s, nl - s));
      size_t e = static_cast<size_t>(wrap_at(base + s, base + limit, width) - base);
      if (e <= s || e > limit) e = s + code_point_bytes(text.substr(s, limit - s));
      while (e < limit && is_utf8_continuation(text[e])) ++e;  // a wrap never cuts a code point
      push(s, e);
      s = e;
      if (e < nl && e != limit) {
        while (s < nl && (text[s] == ' ' || text[s] == '\t')) ++s;  // blanks at a wrap are not drawn
      }
    }
    if (nl >= n) break;
    pos = nl + 1;
  }
  return lines;
}

std::pair<size_t, size_t> visible_lines(size_t n_lines, float line_h, float top, float bottom) {
  if (n_lines == 0 || line_h <= 0.0f || bottom <= top || bottom <= 0.0f) return {0, 0};
  const auto n = static_cast<double>(n_lines);
  const auto h = static_cast<double>(line_h);
  const double first = std::clamp(std::floor(static_cast<double>(top) / h), 0.0, n);
  const double last = std::clamp(std::ceil(static_cast<double>(bottom) / h), 0.0, n);
  return {static_cast<size_t>(first), static_cast<size_t>(std::max(first, last))};
}

WrapAt font_wrap(const ImFont* font, float size) {
  const float scale = size / font->FontSize;
  return [font, scale](const char* line, const char* end, float width) {
    return font->CalcWordWrapPositionA(scale, line, end, width);
  };
}

size_t fit_prefix(const ImFont* font, float size, std::string_view text, float max_w) {
  const float scale = size / font->FontSize;
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  float line_w = 0.0f;
  for (const char* s = begin; s < end;) {
    unsigned int c = static_cast<unsigned char>(*s);
    const int len = c < 0x80 ? 1 : ImTextCharFromUtf8(&c, s, end);
    if (c == '\n') {
      line_w = 0.0f;
    } else if (c != '\r') {
      line_w += font->GetCharAdvance(static_cast<ImWchar>(c)) * scale;
      if (line_w > max_w) return static_cast<size_t>(s - begin);
    }
    s += std::max(len, 1);
  }
  return text.size();
}

void add_text_bounded(ImDrawList* dl, const ImFont* font, float size, ImVec2 pos, ImU32 col, std::string_view text) {
  float x = pos.x;
  while (!text.empty()) {
    const std::string_view piece = utf8_prefix(text, std::max(k_max_line_bytes, code_point_bytes(text)));
    dl->AddText(font, size, ImVec2(x, pos.y), col, piece.data(), piece.data() + piece.size());
    if (piece.size() < text.size())
      x += font->CalcTextSizeA(size, FLT_MAX, 0.0f, piece.data(), piece.data() + piece.size()).x;
    text.remove_prefix(piece.size());
  }
}

void WrappedText::draw(std::string_view text) {
  ImGuiWindow* window = ImGui::GetCurrentWindow();
  n_drawn_ = 0;
  if (window->SkipItems) return;
  const ImFont* font = ImGui::GetFont();
  const float size = ImGui::GetFontSize();
  const ImVec2 pos = window->DC.CursorPos;
  // The wrap width TextUnformatted takes under the current PushTextWrapPos (none: 0.0f, the edge).
  const float width = ImGui::CalcWrapWidthForPos(pos, std::max(0.0f, window->DC.TextWrapPos));
  const uint64_t key = markdown_cache_key(text);
  if (key != key_ || width != width_ || font != font_ || size != size_) {
    key_ = key;
    width_ = width;
    font_ = font;
    size_ = size;
    lines_ = wrap_lines(text, width, font_wrap(font, size));
    max_w_ = 0.0f;
    for (const TextLine& l : lines_) {
      max_w_ = std::max(max_w_, font->CalcTextSizeA(size, FLT_MAX, 0.0f, text.data() + l.begin, text.data() + l.end).x);
    }
    ++n_layouts_;
  }
  const float line_h = size;
  const ImVec2 extent(max_w_, static_cast<float>(lines_.size()) * line_h);
  const ImRect bb(pos, ImVec2(pos.x + extent.x, pos.y + extent.y));
  ImGui::ItemSize(extent, 0.0f);
  if (!ImGui::ItemAdd(bb, 0)) return;
  ImDrawList* dl = window->DrawList;
  const ImVec2 clip_min = dl->GetClipRectMin(), clip_max = dl->GetClipRectMax();
  const auto [first, last] = visible_lines(lines_.size(), line_h, clip_min.y - pos.y, clip_max.y - pos.y);
  const ImU32 col = ImGui::GetColorU32(ImGuiCol_Text);
  for (size_t i = first; i < last; ++i) {
    const TextLine& l = lines_[i];
    if (l.begin == l.end) continue;
    dl->AddText(font, size, ImVec2(pos.x, pos.y + static_cast<float>(i) * line_h), col, text.data() + l.begin,
                text.data() + l.end);
    ++n_drawn_;
  }
}

}  // namespace kvc::ui
