// The family renderers of ChatTemplate: detection by markers, and each family's segments (user turn, header, suffix,
// stops).
#include "core/chat/chat_template.h"

namespace kvc::chat {
namespace {

bool has(std::string_view text, std::string_view marker) { return text.find(marker) != std::string_view::npos; }

std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (const auto p : parts) s.append(p);
  return s;
}

}  // namespace

ChatTemplate ChatTemplate::detect(std::string_view t) {
  // gpt-oss's harmony format (as llama.cpp tells it: its template writes channels).
  if (has(t, "<|channel|>")) return ChatTemplate(Family::harmony);
  if (has(t, "<|im_start|>")) return ChatTemplate(Family::chatml);
  if (has(t, "<|start_header_id|>")) return ChatTemplate(Family::llama3);
  if (has(t, "<start_of_turn>")) return ChatTemplate(Family::gemma);
  if (has(t, "<｜User｜>") && has(t, "<｜Assistant｜>")) return ChatTemplate(Family::deepseek);
  // Zephyr-style templates may build the role marker: '<|' + message['role'] + '|>' (TinyLlama).
  const bool role_markers = has(t, "<|user|>") || has(t, "'<|' + message") || has(t, "\"<|\" + message");
  if (role_markers) return ChatTemplate(has(t, "<|end|>") ? Family::phi3 : Family::zephyr);
  if (has(t, "[INST]")) return ChatTemplate(has(t, "<<SYS>>") ? Family::llama2 : Family::mistral);
  return ChatTemplate(Family::fallback);
}

std::string_view ChatTemplate::name() const {
  switch (family_) {
    case Family::chatml: return "chatml";
    case Family::llama2: return "llama-2";
    case Family::llama3: return "llama-3";
    case Family::mistral: return "mistral";
    case Family::zephyr: return "zephyr";
    case Family::gemma: return "gemma";
    case Family::phi3: return "phi-3";
    case Family::deepseek: return "deepseek";
    case Family::harmony: return "harmony";
    case Family::fallback: break;
  }
  return "fallback (plain 'User:/Assistant:')";
}

std::string ChatTemplate::user_part(std::string_view system, std::string_view user, bool first) const {
  const bool sys = !system.empty();
  switch (family_) {
    case Family::chatml:
      return cat({sys ? cat({"<|im_start|>system\n", system, "<|im_end|>\n"}) : "", "<|im_start|>user\n", user,
                  "<|im_end|>\n"});
    case Family::llama2:
      return cat({first ? "" : "<s>", "[INST] ", sys ? cat({"<<SYS>>\n", system, "\n<</SYS>>\n\n"}) : "", user});
    case Family::llama3:
      return cat({sys ? cat({"<|start_header_id|>system<|end_header_id|>\n\n", system, "<|eot_id|>"}) : "",
                  "<|start_header_id|>user<|end_header_id|>\n\n", user, "<|eot_id|>"});
    case Family::mistral: return cat({"[INST] ", sys ? cat({system, "\n\n"}) : "", user});
    case Family::zephyr: return cat({sys ? cat({"<|system|>\n", system, "</s>\n"}) : "", "<|user|>\n", user, "</s>\n"});
    case Family::gemma:
      return cat({"<start_of_turn>user\n", sys ? cat({system, "\n\n"}) : "", user, "<end_of_turn>\n"});
    case Family::phi3:
      return cat({sys ? cat({"<|system|>\n", system, "<|end|>\n"}) : "", "<|user|>\n", user, "<|end|>\n"});
    case Family::deepseek: return cat({system, "<｜User｜>", user});
    case Family::harmony:
      // The header gpt-oss's template writes first, with its default effort; the system prompt
      // as its developer message.
      return cat({first
                      ? "<|start|>system<|message|>Reasoning: medium\n\n# Valid channels: analysis, commentary, final. "
                        "Channel must be included for every message.<|end|>"
                      : "",
                  sys ? cat({"<|start|>developer<|message|># Instructions\n\n", system, "\n\n<|end|>"}) : "",
                  "<|start|>user<|message|>", user, "<|end|>"});
    case Family::fallback: return cat({sys ? cat({system, "\n\n"}) : "", "User: ", user, "\n"});
  }
  return {};
}

std::string ChatTemplate::assistant_header() const {
  switch (family_) {
    case Family::chatml: return "<|im_start|>assistant\n";
    case Family::llama2:
    case Family::mistral: return " [/INST]";
    case Family::llama3: return "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case Family::zephyr:
    case Family::phi3: return "<|assistant|>\n";
    case Family::gemma: return "<start_of_turn>model\n";
    case Family::deepseek: return "<｜Assistant｜>";
    case Family::harmony: return "<|start|>assistant";
    case Family::fallback: return "Assistant:";
  }
  return {};
}

std::string ChatTemplate::render_user_turn(std::string_view system, std::string_view user, bool first) const {
  return user_part(system, user, first) + assistant_header();
}

std::string ChatTemplate::assistant_suffix() const {
  switch (family_) {
    case Family::chatml: return "<|im_end|>\n";
    case Family::llama2:
    case Family::mistral: return "</s>";
    case Family::llama3: return "<|eot_id|>";
    case Family::zephyr: return "</s>\n";
    case Family::gemma: return "<end_of_turn>\n";
    case Family::phi3: return "<|end|>\n";
    case Family::deepseek: return "<｜end▁of▁sentence｜>";
    case Family::harmony: return "<|end|>";
    case Family::fallback: return "\n";
  }
  return {};
}

std::vector<std::string> ChatTemplate::stop_strings() const {
  switch (family_) {
    case Family::chatml: return {"<|im_end|>", "<|im_start|>"};
    case Family::llama2:
    case Family::mistral: return {"</s>", "[INST]"};
    case Family::llama3: return {"<|eot_id|>", "<|start_header_id|>"};
    case Family::zephyr: return {"</s>", "<|user|>"};
    case Family::gemma: return {"<end_of_turn>", "<start_of_turn>"};
    case Family::phi3: return {"<|end|>", "<|user|>", "<|endoftext|>"};
    case Family::deepseek: return {"<｜end▁of▁sentence｜>", "<｜User｜>"};
    // <|end|> closes a message, not the reply (the answer follows the analysis); a reply ends at
    // <|return|> or <|call|>, end-of-generation tokens the tokenizer stops at.
    case Family::harmony: return {"<|return|>", "<|call|>"};
    // The model's own template with no known family: its end-of-generation tokens end replies.
    case Family::fallback: return jinja_ ? std::vector<std::string>{} : std::vector<std::string>{"\nUser:"};
  }
  return {};
}

std::vector<std::string> ChatTemplate::end_of_turn_tokens() const {
  switch (family_) {
    case Family::chatml: return {"<|im_end|>"};
    case Family::llama2:
    case Family::mistral:
    case Family::zephyr: return {"</s>"};
    case Family::llama3: return {"<|eot_id|>"};
    case Family::gemma: return {"<end_of_turn>"};
    case Family::phi3: return {"<|end|>"};
    case Family::deepseek: return {"<｜end▁of▁sentence｜>"};
    case Family::harmony: return {"<|return|>", "<|call|>"};
    case Family::fallback: return {};
  }
  return {};
}

// Two user messages in a row get an empty reply between them; an assistant message with no
// user message before it gets an empty user turn, so the output is always a concatenation of
// the segments above.
std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_assistant_header) const {
  size_t i = 0;
  std::string_view system;
  if (!messages.empty() && messages[0].role == "system") {
    system = messages[0].content;
    i = 1;
  }
  std::string out;
  bool first = true;
  bool user_open = false;  // a user part was written and waits for its assistant header
  for (; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant") {
      if (!user_open) out += user_part(first ? system : "", "", first);
      out += assistant_header() + m.content + assistant_suffix();
      user_open = false;
    } else {
      if (user_open) out += assistant_header() + assistant_suffix();
      out += user_part(first ? system : "", m.content, first);
      user_open = true;
    }
    first = false;
  }
  if (user_open && add_assistant_header) out += assistant_header();
  return out;
}

}  // namespace kvc::chat
