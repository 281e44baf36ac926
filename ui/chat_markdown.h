// The chat view's Markdown answers: each message parsed once per change (cached by message id
// and text key), and drawn with ImGui from the layout model (ui/markdown.h).
//
// For scripts, the last answer drawn reports what it rendered as facts (ScriptHooks::set_fact):
//   md_blocks md_headings md_paragraphs md_code_blocks md_open_code_blocks md_code_languages
//   md_tables md_table_rows md_table_columns md_list_items md_max_list_depth md_tasks_done
//   md_tasks_open md_quote_blocks md_rules md_links md_bold_spans md_italic_spans md_strike_spans
//   md_inline_code_spans md_highlighted_tokens md_parses md_frames_since_parse md_cached_messages
//   (messages parsed as Markdown: answers only)
//   and, over the frames it was drawn while streaming: md_stream_frames md_stream_open_code_frames
//   md_stream_table_frames md_stream_raw_markup_frames (a paragraph showing ``` or a "|" row).
// Its links and code blocks are named widgets: "chat.link.K", "chat.copy_code.K" (K from 1);
// md_link_opened / md_link_error and md_copied_code say what the last click did.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ui/highlight.h"
#include "ui/markdown.h"

namespace kvc::ui {

struct ViewContext;

struct RenderedAnswer {
  uint64_t key = 0;        // markdown_cache_key of the text parsed
  bool streaming = false;  // parsed as a prefix still arriving
  MdDocument doc;
  std::vector<std::vector<CodeToken>> tokens;  // per block; code blocks only
  std::string plain;                           // doc.plain_text(), for "Select"
  int64_t n_parses = 0;
  int64_t n_frames_since_parse = 0;
};

class MarkdownAnswers {
 public:
  // Parses (and highlights) only when the text or its streaming state changed.
  RenderedAnswer& get(int64_t id, const std::string& text, bool streaming);
  // `last`: this is the last answer of the conversation (its widgets are named for scripts).
  void draw(ViewContext& ctx, RenderedAnswer& answer, int64_t id, bool last);
  // Whether message `id` shows its selectable plain text instead of the rendering.
  bool& selecting(int64_t id) { return select_[id]; }
  // A new answer started streaming: the md_stream_* counts start again.
  void watch_stream(int64_t id) {
    if (watch_.id != id) watch_ = StreamWatch{id};
  }
  // Drops every cached message (another conversation opened).
  void clear() {
    cache_.clear();
    select_.clear();
  }

 private:
  void report(ViewContext& ctx, const RenderedAnswer& a);
  std::map<int64_t, RenderedAnswer> cache_;
  std::map<int64_t, bool> select_;  // message id -> showing the selectable plain text
  std::string select_buffer_;
  struct StreamWatch {
    int64_t id = 0;
    double frames = 0, open_code = 0, tables = 0, raw_markup = 0;
  } watch_;
  std::string link_opened_, link_error_, copied_code_;
};

}  // namespace kvc::ui
