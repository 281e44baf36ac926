// What the views draw (an immutable snapshot of the app) and what they may ask for (commands).
//
// The views never touch the model, the engine or the disk: each frame they read the latest
// AppSnapshot and push commands through AppCommands, which only queue work
// (docs/ARCHITECTURE.md §9). The chat controller in app/gui fills the snapshot; its memory
// part comes from the engine's KV cache through app/gui's MemoryFeed (§3.8 there).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/sampling/generate_options.h"
#include "ui/engine_state.h"
#include "ui/memory_state.h"

namespace kvc::ui {

enum class ModelStatus { none, building_demo, loading, ready, failed };
enum class Role { system, user, assistant };

struct ModelState {
  ModelStatus status = ModelStatus::none;
  std::string path;
  std::string name;  // general.name or the file name
  std::string arch;
  std::string weight_type;  // "Q8_0", "mixed: Q4_K, Q6_K"
  std::string backend;      // "cpu (avx512_vnni, 2 threads)"
  std::string chat_template;
  bool uses_reasoning_effort = false;  // the model's template reads reasoning_effort (gpt-oss): Chat settings show it
  int64_t n_params = 0;
  int64_t n_ctx = 0;  // context the engine runs each conversation with
  int64_t n_ctx_train = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;  // query heads
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;
  // Gemma's local layers (KV group 1, docs/ARCHITECTURE.md §3.9): how many, and their window; 0: none.
  int64_t n_local_layers = 0;
  int64_t local_window = 0;
  // lfm2's conv layers (KV group kind recurrent): how many, and the floats of one's state; 0: none.
  int64_t n_recurrent_layers = 0;
  int64_t recurrent_state_floats = 0;
  size_t weight_bytes = 0;
  double progress = 0;   // [0, 1] while building or loading
  bool is_demo = false;  // the built-in model with random weights
  std::string error;     // when failed
  // A remote source (Model window, Remote tab): answers come from an OpenAI-compatible server;
  // path is then its base URL and name the server's model id. No local tokenizer, no local KV.
  bool is_remote = false;
};

// Per answer: what the turn cost. Invariant: n_prompt_reused <= n_prompt.
struct TurnStats {
  bool valid = false;
  int64_t n_tokens = 0;  // generated
  int64_t n_prompt = 0;
  int64_t n_prompt_reused = 0;  // served from the KV cache
  int64_t n_from_tier[3] = {};  // of them: found on T0 (compute pool), T1 (host RAM), T2 (disk)
  // Positions of a partial hit recomputed although cached (a KV group lacked their window, §3.9).
  int64_t n_prompt_recomputed = 0;
  double ttft_ms = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  std::string stop_reason;
};

// Tokens after the first over the time after the first (kvchat-cli generate's figure); 0 when
// there are fewer than two tokens.
inline double decode_tokens_per_s(const TurnStats& s) {
  return s.n_tokens > 1 && s.decode_ms > 0 ? 1000.0 * static_cast<double>(s.n_tokens - 1) / s.decode_ms : 0.0;
}

struct MessageView {
  int64_t id = 0;
  int64_t parent_id = 0;
  Role role = Role::user;
  std::string text;
  bool streaming = false;
  int sibling_index = 0;  // [0, n_siblings): which version of this message is shown
  int n_siblings = 1;
  int64_t prev_sibling = 0;  // message ids; 0 when there is none
  int64_t next_sibling = 0;
  TurnStats stats;                  // assistant messages answered in this run of the app
  int64_t n_reasoning_tokens = -1;  // tokens of its <think> reasoning; -1: not counted (no model, or streaming)
  // Why the answer stopped before its end (kvchat was killed while it streamed, a remote stream
  // dropped): the text is what came. Empty for a complete answer.
  std::string interrupted;
};

struct ConversationSummary {
  int64_t id = 0;
  std::string title;
  int64_t updated_ms = 0;
  std::string snippet;  // search hits only: text with [brackets] around matches
};

struct ChatState {
  int64_t conversation_id = 0;  // 0: none open
  std::string title;
  std::string system_prompt;
  sampling::GenerateOptions generation;  // the Chat settings panel: max tokens, sampling (stored per conversation)
  // The Chat settings' reasoning effort (low, medium, high) for models whose template reads it;
  // for this session, from the next conversation's start (it is in the system message).
  std::string reasoning_effort = "medium";
  std::vector<MessageView> messages;  // the active branch, root first
  bool generating = false;
  int64_t n_stream_tokens = 0;  // tokens in the conversation's stream
  // The context overflow policy's cut: the model's view begins at this message (0: at the
  // first) and the n_outside_context messages before it stay shown, outside the context.
  int64_t context_first_id = 0;
  int64_t n_outside_context = 0;
  // While an answer's first token is awaited: the prompt tokens beyond what this conversation's
  // last stream shares with it (an estimate of what is computed), and since when (epoch ms).
  int64_t n_prefill_tokens = 0;
  int64_t prefill_started_ms = 0;
};

// One tier of the KV cache, as the engine will report it.
struct TierView {
  std::string name;  // tier_name(): "T0 compute", "T1 host RAM", "T2 disk"
  size_t used_bytes = 0;
  size_t capacity_bytes = 0;
};

struct TurnPoint {
  int64_t n_reused = 0;
  int64_t n_computed = 0;
  double ttft_ms = 0;
  double tok_per_s = 0;
};

struct MemoryState {
  size_t weight_bytes = 0;
  size_t kv_capacity_bytes = 0;  // KV bytes of one conversation at the full context (n_ctx)
  size_t kv_used_bytes = 0;      // of it, the last turn's prompt and reply
  double kv_bytes_per_token = 0;
  int64_t n_ctx = 0;
  int64_t n_session_tokens = 0;
  std::vector<TurnPoint> turns;        // every answer of this run, oldest first
  std::vector<TierView> tiers;         // T0, T1 and (with a disk tier) T2; empty before a model is loaded
  std::vector<KvGroupLine> kv_groups;  // every KV group of the model (the local engine's), group 0 first
  std::string tier_warning;            // e.g. the disk tier is read-only or full: KV stays in RAM
  KvPicture kv;                        // blocks, prefix tree, shares (memory_state.h)
  KvTimelines timelines;
  std::string export_path;   // the last KV event export written, or
  std::string export_error;  // why it failed
  RemoteCacheView remote;    // active: the Memory window shows this instead of the local cache
};

// A model offered for download (assets/models/catalog.json).
struct DownloadOffer {
  std::string name;
  std::string source;  // URL or OWNER/REPO/FILE.gguf
  uint64_t size_bytes = 0;
  std::string licence;
  std::string needs;
  std::string notes;
  std::string sha256;  // optional: checked when the server publishes none
};

enum class DownloadStatus { idle, running, done, failed, cancelled };
inline const char* to_string(DownloadStatus s) {
  switch (s) {
    case DownloadStatus::idle: return "idle";
    case DownloadStatus::running: return "running";
    case DownloadStatus::done: return "done";
    case DownloadStatus::failed: return "failed";
    case DownloadStatus::cancelled: return "cancelled";
  }
  return "";
}

// The Model window's Download tab: one download at a time, on its own thread.
struct DownloadState {
  std::vector<DownloadOffer> offers;
  std::string catalog_error;  // the catalog could not be read
  DownloadStatus status = DownloadStatus::idle;
  std::string source;  // what is (or was last) downloaded
  uint64_t done_bytes = 0;
  uint64_t total_bytes = 0;   // 0: unknown
  std::string progress_text;  // " 41% 1.1 GiB / 2.6 GiB  12.3 MiB/s  2 min 5 s left"
  std::string path;           // done: the file in DATA_DIR/models
  std::string sha256;         // done
  std::string note;           // done: where the hash came from, or why kvchat cannot run the model
  std::string error;          // failed / cancelled
  int64_t n_completed = 0;    // downloads finished in this run (the Model window rescans on change)
};

// A server remembered in DATA_DIR/remote/servers.json (its key, if any, in a 0600 file beside it).
struct SavedServer {
  std::string url;  // base URL: "http://gpu-box:8000/v1"
  std::string model;
  double timeout_s = 60;
  bool has_key = false;
};

// The Model window's Remote tab: the server's model list and the servers used before.
struct RemoteState {
  std::string listed_url;           // the URL the models below were listed from
  std::vector<std::string> models;  // its /v1/models ids
  std::string list_error;           // why listing failed (unreachable, 401, not an OpenAI API)
  bool listing = false;
  int64_t n_lists = 0;  // listings finished this run
  std::vector<SavedServer> saved;
  std::string last_url;  // the server used last (settings persist per server)
};

// What connect_remote needs; an empty api_key with keep_key uses the key stored for url.
struct RemoteConnection {
  std::string url;
  std::string api_key;
  bool keep_key = true;
  std::string model;
  double timeout_s = 60;  // no byte from the server for this long: the answer is cut off
};

// A message the app did not send (storage refused it, or it can never fit the model's context):
// the Chat window puts its text back in the input box, once per serial.
struct UnsentMessage {
  uint64_t serial = 0;  // 0: none yet; one more per message handed back
  std::string text;
};

struct AppSnapshot {
  uint64_t version = 0;
  ModelState model;
  std::vector<ConversationSummary> conversations;  // recent first
  std::string search_query;
  std::vector<ConversationSummary> search_results;
  ChatState chat;
  MemoryState memory;
  EngineState engine;
  DownloadState download;
  RemoteState remote;
  std::string conversation_export_path;  // the last conversation exported (DATA_DIR/exports/)
  std::string error;                     // the last failure a user should see; empty when none
  UnsentMessage unsent;                  // the last message handed back to the input box
  // Why nothing can be saved in this run (the data directory is read-only, or the conversations
  // database cannot be opened): shown for as long as it holds, beside the input box, whose Send
  // is off meanwhile; later errors do not replace it. Empty when conversations are saved.
  std::string storage_notice;
};

// Commands only queue work and return at once; results show up in later snapshots.
class AppCommands {
 public:
  virtual ~AppCommands() = default;
  virtual void new_conversation() = 0;
  virtual void open_conversation(int64_t id) = 0;
  virtual void rename_conversation(int64_t id, std::string title) = 0;
  virtual void delete_conversation(int64_t id) = 0;
  virtual void search(std::string query) = 0;
  // Stores `text` as the user's next message and answers it. A message that is not stored (the
  // disk refused it, the data directory is read-only, it cannot fit the model's context) comes
  // back in AppSnapshot::unsent, with the reason in AppSnapshot::error.
  virtual void send(std::string text) = 0;
  virtual void stop() = 0;
  virtual void regenerate() = 0;
  // Replaces an earlier user message by a new version (a branch) and answers it.
  virtual void edit_message(int64_t message_id, std::string text) = 0;
  // Shows the branch of `message_id` (a sibling of a message on the active branch).
  virtual void switch_branch(int64_t message_id) = 0;
  virtual void update_settings(std::string system_prompt, sampling::GenerateOptions generation) = 0;
  // low, medium or high: the reasoning_effort of templates that read it (ChatState::reasoning_effort).
  virtual void set_reasoning_effort(std::string effort) = 0;
  virtual void load_model(std::string path) = 0;
  virtual void dismiss_error() = 0;
  // Recreates the runner with these RAM tier budgets (0: default).
  virtual void set_tier_budgets(KvBudget budgets) = 0;
  // The same, remembered for later runs (DATA_DIR/settings.json): the Engine window's Apply.
  virtual void save_tier_budgets(KvBudget budgets) = 0;
  // Recreates the runner with K and V in `format`, remembered for later runs; a format the model
  // cannot store (INT8/INT4 need a head size that is a multiple of 8) is refused with the reason.
  virtual void set_kv_format(kv::KvFormat format) = 0;
  // An in-process restart: drops the runner, its RAM tiers and the disk tier's handle, reopens
  // them from the files on disk and reopens the current conversation.
  virtual void restart_engine() = 0;
  // Writes the KV event stream to DATA_DIR/exports/ (Chrome trace JSON, or CSV); the path or
  // the error shows up in MemoryState::export_path / export_error.
  virtual void export_kv_trace() = 0;
  virtual void export_kv_csv() = 0;
  // Writes a conversation's active branch to DATA_DIR/exports/ as Markdown or JSON; the path
  // shows up in AppSnapshot::conversation_export_path, a failure in AppSnapshot::error.
  virtual void export_conversation(int64_t id, bool markdown) = 0;
  // The Engine window's "Serve on localhost" switch: the OpenAI-compatible API on 127.0.0.1:port
  // over the app's engine, or off (streams in flight end with an error event). Remembered.
  virtual void set_serving(bool on, int port) = 0;
  // Downloads a model into DATA_DIR/models on a thread of its own (status in DownloadState).
  virtual void start_download(std::string source) = 0;
  virtual void cancel_download() = 0;
  // Lists a server's /v1/models into RemoteState (api_key empty: the one stored for url, if any).
  virtual void list_remote_models(std::string url, std::string api_key) = 0;
  // Chats through that server and model from now on instead of a local model; remembered.
  virtual void connect_remote(RemoteConnection connection) = 0;
  // Reads the remote server's /metrics again (the Memory window's Refresh).
  virtual void refresh_remote_memory() = 0;
  // True while a command is queued or running, or a download runs (script mode waits on it).
  virtual bool busy() const = 0;
};

}  // namespace kvc::ui
