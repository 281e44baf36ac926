// The conversation store's rows as its statements read them: column lists and decoders shared by its source files.
#pragma once

#include "storage/conversation.h"
#include "storage/database.h"

namespace kvc::storage {

// SELECT lists over `conversations c` and `messages m`, in the order the decoders read them.
inline constexpr const char* k_conversation_cols =
    "c.id, c.title, c.created_ms, c.updated_ms, c.system_prompt, c.model_path, c.model_name, c.temperature, "
    "c.top_k, c.top_p, c.min_p, c.repeat_penalty, c.seed, c.max_tokens, c.active_leaf, c.context_cut, "
    "c.reasoning_effort";
inline constexpr int k_n_conversation_cols = 17;
inline constexpr const char* k_message_cols =
    "m.id, m.conversation_id, m.parent_id, m.role, m.text, m.tokens, m.created_ms, m.state, m.interrupted";

// The current row of a statement that selected k_conversation_cols (k_message_cols) first.
Conversation read_conversation(const Statement& st);
Message read_message(const Statement& st);

}  // namespace kvc::storage
