// The app's windows. Each keeps only UI state (text being typed, what is selected) and draws
// from the snapshot in the ViewContext; whatever needs the model or the disk goes through
// AppCommands.
#pragma once

#include <cstdint>
#include <filesystem>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ui/app_state.h"
#include "ui/chat_markdown.h"
#include "ui/model_discovery.h"
#include "ui/theme.h"
#include "ui/widgets.h"
#include "ui/wrapped_text.h"

namespace kvc::ui {

struct ViewContext {
  const AppSnapshot& snap;
  AppCommands& cmd;
  ScriptHooks& hooks;
  const Fonts& fonts;
  int64_t now_ms = 0;  // wall clock, for "5 min ago"
};

// Window titles: also the names script mode crops screenshots to.
inline constexpr const char* k_conversations_window = "Conversations";
inline constexpr const char* k_chat_window = "Chat";
inline constexpr const char* k_model_window = "Model";
inline constexpr const char* k_memory_window = "Memory";

struct ConversationsView {
  void draw(ViewContext& ctx);
  bool focus_search = false;  // Ctrl+F

 private:
  std::string query_;
  std::string sent_query_;
  int64_t rename_id_ = 0;
  std::string rename_text_;
  int64_t delete_id_ = 0;
};

struct ChatView {
  void draw(ViewContext& ctx);
  // Ctrl+Enter and the Send button.
  void send(ViewContext& ctx);
  bool focus_input = false;
  // From Shell::shortcuts: PageUp (-1) / PageDown (+1) move the history a page; Ctrl+End goes to
  // its end, and follows an answer that streams from there.
  int page_scroll = 0;
  bool scroll_to_end = false;

 private:
  void draw_message(ViewContext& ctx, const MessageView& m, bool last);
  // The reply's <think> reasoning: a collapsed header above the answer, expanded on a click.
  void draw_reasoning(ViewContext& ctx, const MessageView& m, const std::string& reasoning, bool thinking, bool last);
  void start_edit(const MessageView& m);
  void draw_settings(ViewContext& ctx);
  // A message the app handed back (AppSnapshot::unsent): into the input box, once.
  void restore_unsent(const UnsentMessage& unsent);
  std::string input_;
  uint64_t restored_serial_ = 0;  // the last UnsentMessage::serial put back
  int64_t editing_id_ = 0;
  bool scroll_to_edit_ = false;  // the message being edited was off screen: scroll to it once
  std::string edit_text_;
  int64_t shown_conversation_ = -1;
  size_t shown_messages_ = 0;
  size_t shown_chars_ = 0;
  bool stick_to_bottom_ = true;
  bool scrolled_elsewhere_ = false;  // this frame asked for another scroll position (an edit)
  // Height of each drawn message, keyed by (id, text size, width): messages off screen are
  // replaced by empty space of that height (variable-height list clipping).
  std::map<int64_t, std::pair<uint64_t, float>> heights_;
  MarkdownAnswers answers_;                 // assistant messages, parsed once per change
  std::map<int64_t, bool> reasoning_open_;  // message id -> its reasoning is expanded
  // The user's messages and the replies' reasoning, laid out once and drawn by the lines in view.
  std::map<int64_t, WrappedText> texts_, reasoning_texts_;
  size_t n_lines_drawn_ = 0;  // of those, this frame (script fact chat_lines_drawn)
  WrappedText error_text_;    // the app's last error, above the history
  std::string settings_system_;
  sampling::GenerateOptions settings_generation_;
  int settings_effort_ = 1;  // index in chat::k_reasoning_efforts
};

struct ModelView {
  void draw(ViewContext& ctx);
  std::filesystem::path home;
  std::filesystem::path data_dir;
  bool open_browser = false;  // File > Open model

 private:
  void draw_current(ViewContext& ctx);
  void draw_found(ViewContext& ctx);
  void draw_browser(ViewContext& ctx);
  void draw_selected(ViewContext& ctx);
  void draw_download(ViewContext& ctx);  // model_download_view.cpp
  void draw_remote(ViewContext& ctx);    // model_remote_view.cpp
  void rescan();
  void select(const std::filesystem::path& p);
  void list_dir(const std::filesystem::path& dir);

  struct DirEntry {
    std::string name;
    bool is_dir = false;
    uintmax_t file_bytes = 0;
  };
  std::future<std::vector<FoundModel>> scan_;
  std::optional<std::vector<FoundModel>> found_;
  std::filesystem::path dir_;
  std::future<std::vector<DirEntry>> listing_;
  std::optional<std::vector<DirEntry>> entries_;
  std::filesystem::path selected_;
  std::future<Result<ModelInfo>> info_future_;
  std::optional<Result<ModelInfo>> info_;
  int estimate_ctx_ = 4096;
  int estimate_kv_format_ = 0;  // F16, INT8, INT4
  bool started_ = false;
  std::string download_url_;
  int64_t seen_downloads_ = 0;  // DownloadState::n_completed last seen: a new file to list and select
  // The Remote tab: what is typed (the key stays here and in the command, never in a snapshot).
  std::string remote_url_;
  std::string remote_key_;
  std::string remote_timeout_ = "60";
  std::string remote_model_;
  bool remote_prefilled_ = false;
};

struct MemoryView {
  void draw(ViewContext& ctx);

 private:
  void draw_remote(ViewContext& ctx);  // memory_remote_view.cpp: what a remote server reports
};

}  // namespace kvc::ui
