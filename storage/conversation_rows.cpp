// Decoding the conversation store's rows (conversation_rows.h).
#include "storage/conversation_rows.h"

#include <string>

namespace kvc::storage {

namespace {

Role role_from(const std::string& s) {
  return s == "system" ? Role::system : s == "assistant" ? Role::assistant : Role::user;
}

}  // namespace

Conversation read_conversation(const Statement& st) {
  Conversation c;
  c.id = st.column_int64(0);
  c.title = st.column_text(1);
  c.created_ms = st.column_int64(2);
  c.updated_ms = st.column_int64(3);
  c.settings.system_prompt = st.column_text(4);
  c.settings.model_path = st.column_text(5);
  c.settings.model_name = st.column_text(6);
  c.settings.generation.sampling.temperature = static_cast<float>(st.column_double(7));
  c.settings.generation.sampling.top_k = static_cast<int>(st.column_int64(8));
  c.settings.generation.sampling.top_p = static_cast<float>(st.column_double(9));
  c.settings.generation.sampling.min_p = static_cast<float>(st.column_double(10));
  c.settings.generation.sampling.repeat_penalty = static_cast<float>(st.column_double(11));
  c.settings.generation.sampling.seed = st.column_int64(12);
  c.settings.generation.max_tokens = st.column_int64(13);
  c.active_leaf = st.column_int64(14);  // NULL reads as 0
  c.context_cut = st.column_int64(15);
  c.settings.reasoning_effort = st.column_text(16);
  return c;
}

Message read_message(const Statement& st) {
  Message m;
  m.id = st.column_int64(0);
  m.conversation_id = st.column_int64(1);
  m.parent_id = st.column_int64(2);
  m.role = role_from(st.column_text(3));
  m.text = st.column_text(4);
  m.tokens = tokens_from_blob(st.column_blob(5));
  m.created_ms = st.column_int64(6);
  m.state = st.column_int64(8) != 0            ? MessageState::interrupted
            : st.column_text(7) == "streaming" ? MessageState::streaming
                                               : MessageState::complete;
  return m;
}

}  // namespace kvc::storage
