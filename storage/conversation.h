// Conversations and messages as stored: plain values, shared by the store and its exports.
//
// Messages form a tree per conversation; editing an earlier message adds a sibling, so every
// version of the chat stays reachable. The active leaf says which branch is shown.
//
//   root (system/user) ── assistant ── user ──┬── assistant        (branch 1)
//                                             └── user (edited) ── assistant   (branch 2, active)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/sampling/generate_options.h"

namespace kvc::storage {

enum class Role { system, user, assistant };
// streaming: still being generated (or, until the next writer opens the store, cut off by a
// crash); interrupted: an answer whose generation stopped before its end because kvchat was
// killed or crashed while it streamed: its text is what had been committed, its tokens may be
// empty (streamed chunks carry text only).
enum class MessageState { complete, streaming, interrupted };

const char* to_string(Role role);
const char* to_string(MessageState state);

struct ConversationSettings {
  std::string system_prompt;
  std::string model_path;
  std::string model_name;
  // Stored: max_tokens and sampling's temperature, top_k, top_p, min_p, repeat_penalty, seed
  // (the rest keeps GenerateOptions' defaults; the model's template sets the stop strings).
  sampling::GenerateOptions generation;
  // How hard a reasoning model thinks (low, medium, high) for templates that read it (gpt-oss);
  // empty: the app's current choice.
  std::string reasoning_effort;
  friend bool operator==(const ConversationSettings&, const ConversationSettings&) = default;
};

struct Conversation {
  int64_t id = 0;
  std::string title;
  int64_t created_ms = 0;  // milliseconds since the Unix epoch
  int64_t updated_ms = 0;  // last change to the conversation or any of its messages
  ConversationSettings settings;
  int64_t active_leaf = 0;  // 0: no messages yet
  // The first message the model sees when the path no longer fits its context (the messages
  // before it stay stored, outside the context); 0: the whole path. Set by the chat's overflow
  // policy (app/common/chat_window.h) and kept until the next overflow moves it.
  int64_t context_cut = 0;
};

struct Message {
  int64_t id = 0;
  int64_t conversation_id = 0;
  int64_t parent_id = 0;  // 0: a root
  Role role = Role::user;
  std::string text;
  std::vector<int32_t> tokens;  // exactly the ids the model saw or sampled
  int64_t created_ms = 0;
  MessageState state = MessageState::complete;
};

// JSON of one path through a conversation (root to leaf), tokens included.
std::string export_json(const Conversation& conversation, const std::vector<Message>& path);
// Markdown of the same, for people: a heading per message, no token ids.
std::string export_markdown(const Conversation& conversation, const std::vector<Message>& path);

}  // namespace kvc::storage
