// The engine-shaped seam of the chat controller: submit a turn, get streamed events back.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/kv/kv_events.h"
#include "core/model/session.h"
#include "core/util/result.h"
#include "ui/app_state.h"

namespace kvc::app {

// One request: conversation C's prompt, history then the new segment to append.
//   prompt = history ++ segment; the reply continues it.
struct TurnRequest {
  int64_t conversation_id = 0;
  // The stored stream (never re-tokenized), or the window of it that the context overflow
  // policy keeps (app/common/chat_window.h), which may end with the new turn already.
  std::vector<int32_t> history;
  std::vector<int32_t> segment;       // the new user turn, when not in history
  sampling::GenerateOptions options;  // the conversation's settings (ui::ChatState::generation) and the stop strings
  // The same turn as text: the conversation's system prompt and its path, oldest first, ending
  // with the user message answered. A source without a local tokenizer (RemoteTurnRunner,
  // remote_turn_runner.h) sends these; history and segment are then empty.
  std::string system_prompt;
  std::vector<chat::ChatMessage> messages;
};

// Streamed while a turn runs; returning false from the callback cancels it. Text may be empty
// (a periodic call while nothing streams, so that the caller can still cancel).
struct TurnDelta {
  std::string_view text;
};

struct TurnResult {
  std::vector<int32_t> tokens;  // the reply's ids, exactly as sampled
  std::string text;
  ui::TurnStats stats;
};

// The token source seam: EngineTurnRunner (engine_turn_runner.h) implements it on the batching
// engine, RemoteTurnRunner (remote_turn_runner.h) on an OpenAI-compatible server.
class TurnRunner {
 public:
  virtual ~TurnRunner() = default;
  virtual Result<TurnResult> run(const TurnRequest& request, const std::function<bool(const TurnDelta&)>& on_delta) = 0;
  // Called when a conversation is opened: its cached blocks are brought to T0 ahead of the next turn.
  virtual void prefetch(int64_t conversation_id, const std::vector<int32_t>& tokens) = 0;
  // Fills the memory view's state; reads the KV events that arrived since the last call.
  virtual void fill_memory(ui::MemoryState& out) = 0;
  // The KV events still held (oldest first), for the trace and CSV exports.
  virtual std::vector<kv::KvEvent> kv_events() const = 0;
  // Changes when what fill_memory would show changed on its own (the engine worked in the
  // background, e.g. a prefetch): the controller then publishes a new snapshot while idle.
  virtual uint64_t memory_version() const { return 0; }
  // Describes the source's memory afresh where that costs a request (a remote server's /metrics).
  virtual void refresh_memory() {}
  // After conversation `id` was deleted: drops the cached blocks (RAM and disk) that its
  // streams (`dead`, every branch) reach and no remaining stream (`live`) does. Hashes the
  // streams: call it off the UI thread.
  virtual void release_streams(int64_t id, std::span<const std::vector<int32_t>> dead,
                               std::span<const std::vector<int32_t>> live) = 0;
};

}  // namespace kvc::app
