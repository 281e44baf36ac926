// The chat controller: owns the model, the conversation store and one worker thread; the UI
// pushes commands and reads snapshots, and never waits on the model or the disk.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "app/common/chat_turn.h"
#include "app/common/chat_window.h"
#include "app/gui/api_serving.h"
#include "app/gui/engine_turn_runner.h"
#include "app/gui/turn_runner.h"
#include "core/backend/backend.h"
#include "core/model/model.h"
#include "storage/conversation_store.h"
#include "storage/data_dir_lock.h"
#include "ui/app_state.h"

namespace kvc::app {

// Threads: every member below the queue is touched only by the worker thread, which runs the
// queued commands one at a time in order. The UI thread only posts commands, sets cancel_,
// and reads snapshot(); the snapshot mutex guards a pointer swap, never model or disk work.
class ChatController final : public ui::AppCommands {
 public:
  struct Options {
    std::string data_dir;       // --data-dir; empty: the default data directory
    std::string model_path;     // -m; empty: the demo model, built on first use
    int n_threads = 0;          // 0: one per physical core
    int64_t n_ctx = 0;          // 0: the model's training context, cut to what the KV budget holds
    int64_t ctx_kv_bytes = 0;   // that budget (0: model::k_default_ctx_kv_budget_bytes); the Engine window changes it
    std::string replay_answer;  // --replay-answer: non-empty: every turn streams this text (replay_turn_runner.h)
    // Called on the worker thread when a frame should come now, not at the window's paced next
    // one: a command ended (busy() may be false). Empty: none.
    std::function<void()> wake_ui;
    bool ignore_eos = false;  // --ignore-eos: answers run to their max tokens past the end of text (benchmarks)
  };

  explicit ChatController(Options options);
  ~ChatController() override;
  ChatController(const ChatController&) = delete;
  ChatController& operator=(const ChatController&) = delete;

  // The latest state; cheap (a shared pointer copy under a mutex nobody holds for long).
  std::shared_ptr<const ui::AppSnapshot> snapshot() const;

  void new_conversation() override;
  void open_conversation(int64_t id) override;
  void rename_conversation(int64_t id, std::string title) override;
  void delete_conversation(int64_t id) override;
  void search(std::string query) override;
  void send(std::string text) override;
  void stop() override { cancel_ = true; }
  void regenerate() override;
  void edit_message(int64_t message_id, std::string text) override;
  void switch_branch(int64_t message_id) override;
  void update_settings(std::string system_prompt, sampling::GenerateOptions generation) override;
  void set_reasoning_effort(std::string effort) override;
  void load_model(std::string path) override;
  void dismiss_error() override;
  void set_tier_budgets(KvBudget budgets) override;
  void save_tier_budgets(KvBudget budgets) override;
  void set_kv_format(kv::KvFormat format) override;
  void restart_engine() override;
  void export_kv_trace() override;
  void export_kv_csv() override;
  void export_conversation(int64_t id, bool markdown) override;
  void set_serving(bool on, int port) override;
  void start_download(std::string source) override;
  void cancel_download() override { download_cancel_ = true; }
  void list_remote_models(std::string url, std::string api_key) override;
  void connect_remote(ui::RemoteConnection connection) override;
  void refresh_remote_memory() override;
  bool busy() const override { return n_busy_.load() > 0 || download_running_.load() || dl_dirty_.load(); }
  // True from a send, regenerate or edit (UI thread) until its turn ended: the window paces its
  // frames from that click on, before the worker has published anything of the turn.
  bool answering() const { return n_answering_.load() > 0; }
  // The window brackets each frame's drawing with these (UI thread): commands posted in between
  // (a send clicked in this frame) reach the worker once the frame is on screen, so the frame
  // that shows the click is not rasterized beside the answer's first tokens.
  void hold_commands();
  void release_commands();

 private:
  void post(std::function<void()> task);
  void worker_loop();
  void publish(bool force);

  // Worker thread only.
  void start();
  void do_load_model(const std::string& path);
  bool make_runner();    // (re)creates runner_ for model_ with state_.engine.budgets; false: failed
  void drop_runner();    // the API server stops first (api_serving.h), then the runner goes
  void apply_serving();  // serving_ as state_.engine.serve.wanted says, on the current runner
  // The Remote tab (chat_controller_remote.cpp): list a server's models, chat through one.
  void do_list_remote(const std::string& url, const std::string& api_key);
  void do_connect_remote(const ui::RemoteConnection& c);
  std::filesystem::path remote_dir() const;  // DATA_DIR/remote (remote_settings.h)
  void show_remote_settings();               // servers.json into state_.remote.saved
  // The new user message's ids cut from the local model's template; a source without a local
  // tokenizer (a remote server) keeps the text only, and its segment holds no ids.
  Result<TurnSegment> user_segment(int64_t parent_id, const std::string& text);
  // Questions a remote server answered were stored as text only: the local engine, which runs on
  // stored ids, would leave them out of its prompt without a word. An error when the path to
  // message_id holds one and a local model is loaded.
  Status check_local_ids(int64_t message_id);
  // Records the model answering in the conversation's settings when another one did before.
  void note_model(int64_t conversation_id);
  int64_t context_for(const model::ModelConfig& c);  // -c, else the trained context within the KV budget
  void do_restart_engine();
  void do_new_conversation();
  void do_open(int64_t id);
  // True once the user message is stored (whatever happens to its answer); false: refused
  // before anything was stored, the text handed back (refuse_send).
  bool do_send(const std::string& text);
  // Records why a message was not sent and hands its text back to the input box; returns false.
  bool refuse_send(const std::string& text, const Error& e);
  // Writes what the disk refused of earlier answers (unsaved_); false when some still cannot be
  // written (`why` set). Before every turn, so that its history holds their ids, and when idle.
  bool write_unsaved(Error* why = nullptr);
  void do_regenerate();
  void give_tokens_to_interrupted(int64_t message_id);
  void do_edit(int64_t message_id, const std::string& text);
  // Answers the user message `user_id` (the active path's last) with a new assistant message.
  void run_reply(int64_t conversation_id, int64_t user_id);
  // The prompt of the turn answering user_id under the overflow policy, with the conversation's
  // stored cut (chat_controller_window.cpp).
  Result<ChatWindow> plan_turn(int64_t conversation_id, int64_t user_id, int64_t max_tokens, int64_t& first_id);
  // Records a window's first message as the conversation's cut when it moved.
  void keep_cut(int64_t conversation_id, int64_t first_id);
  // What the next turn's prompt starts with (the window before its new message), for prefetch.
  Result<std::vector<int32_t>> window_until(int64_t message_id);
  void refresh_list();
  void reload_chat();
  void do_export_kv(bool chrome_trace);  // into DATA_DIR/exports/ (chat_controller_export.cpp)
  bool fail(const Error& e);             // records e for the UI; returns false
  // "the conversation's history cannot be read (why); the message was not sent": a turn never runs
  // on an empty history instead of its conversation.
  static Error history_error(const Error& e);
  std::filesystem::path settings_path() const;   // DATA_DIR/settings.json (app_settings.h)
  void save_settings();                          // the model loaded and the budgets set
  void load_offers();                            // worker thread: assets/models/catalog.json into dl_.offers
  void run_download(const std::string& source);  // download thread (chat_controller_download.cpp)
  void download_changed();                       // any thread, dl_mu_ held: the worker publishes the new state soon
  // Tokens of the path to the message, message included; an error when the store cannot read it.
  Result<std::vector<int32_t>> stream_until(int64_t message_id);
  // Its user and assistant messages; an error when the store cannot read the path.
  Result<std::vector<chat::ChatMessage>> messages_until(int64_t message_id);
  // ChatState's cut fields for the path shown (a cut that is not on it: none shown).
  void show_cut(const storage::Conversation& c);

  Options options_;

  mutable std::mutex snap_mu_;
  std::shared_ptr<const ui::AppSnapshot> snap_;

  std::mutex q_mu_;
  std::condition_variable q_cv_;
  std::deque<std::function<void()>> queue_;
  std::deque<std::function<void()>> held_;  // posted while a frame draws (hold_commands)
  bool holding_ = false;
  bool quit_ = false;
  uint64_t shown_memory_version_ = 0;  // worker thread: the runner's memory_version() last published
  std::atomic<int> n_busy_{0};         // queued plus running commands
  std::atomic<int> n_answering_{0};    // of them: sends, regenerates and edits (turns)
  std::atomic<bool> cancel_{false};
  std::atomic<uint64_t> search_serial_{0};

  std::optional<storage::DataDirLock> data_lock_;  // held for the controller's life: one app per data dir
  std::unique_ptr<storage::ConversationStore> store_;
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<TurnRunner> runner_;         // uses model_; reset before it
  EngineTurnRunner* engine_runner_ = nullptr;  // runner_, or the one a ReplayTurnRunner wraps
  std::unique_ptr<ApiServing> serving_;        // "Serve on localhost"; uses runner_: goes before it
  int serve_port_ = 8080;
  uint64_t shown_serve_version_ = 0;
  std::string requested_model_;    // what the last load_model asked for (empty: the demo model)
  bool settings_unsaved_ = false;  // the last save of settings.json failed (reported once)
  KvBudget saved_budgets_;         // as remembered in settings.json (demos set budgets without saving)
  ui::AppSnapshot state_;
  // Set in the Chat settings with no conversation open: the next new conversation starts with them.
  std::optional<storage::ConversationSettings> next_settings_;
  // The Chat settings' reasoning effort (templates that read it), for every conversation of this run.
  std::string reasoning_effort_ = "medium";
  std::map<int64_t, ui::TurnStats> stats_;               // assistant message id -> what its turn cost
  std::map<int64_t, std::string> interrupted_;           // assistant message id -> why it was cut off
  std::map<int64_t, std::vector<int32_t>> last_stream_;  // conversation -> the tokens last opened or answered
  // The end of an answer the disk refused (a full disk): its text and ids not yet appended and
  // whether it is still to be finished; written by write_unsaved once the disk takes it. Lost
  // only if kvchat quits first (the answer then shows as cut off, as after a kill).
  struct UnsavedAnswer {
    int64_t message_id = 0;
    std::string text;
    std::vector<int32_t> tokens;
    bool finish = true;
  };
  std::vector<UnsavedAnswer> unsaved_;
  std::string refusal_;  // the error refuse_send last set: cleared by the next message stored
  int64_t last_unsaved_try_us_ = 0;
  int64_t last_publish_us_ = 0;
  int64_t last_memory_fill_us_ = 0;  // worker thread: when the memory picture was last filled

  // The download thread: one download at a time. It writes dl_ under dl_mu_ and wakes the
  // worker, whose publish() copies dl_ into the snapshot.
  std::mutex dl_mu_;
  ui::DownloadState dl_;
  std::atomic<bool> dl_dirty_{false};
  std::atomic<bool> download_cancel_{false};
  std::atomic<bool> download_running_{false};
  std::thread download_thread_;

  std::thread worker_;  // last: starts after every member above exists
};

}  // namespace kvc::app
