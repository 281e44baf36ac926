// JSON and Markdown exports of a conversation path.
#include "storage/conversation.h"

#include <charconv>
#include <cstdio>

namespace kvc::storage {

const char* to_string(Role role) {
  switch (role) {
    case Role::system: return "system";
    case Role::user: return "user";
    case Role::assistant: return "assistant";
  }
  return "user";
}

const char* to_string(MessageState state) {
  switch (state) {
    case MessageState::complete: return "complete";
    case MessageState::streaming: return "streaming";
    case MessageState::interrupted: return "interrupted";
  }
  return "complete";
}

namespace {

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;  // UTF-8 passes through
        }
    }
  }
  out += '"';
}

// The shortest text that reads back as the same float ("0.8", not 0.800000011920929).
void json_number(std::string& out, float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

const char* role_heading(Role r) {
  switch (r) {
    case Role::system: return "System";
    case Role::user: return "User";
    case Role::assistant: return "Assistant";
  }
  return "User";
}

}  // namespace

std::string export_json(const Conversation& c, const std::vector<Message>& path) {
  std::string o = "{\n  \"id\": " + std::to_string(c.id) + ",\n  \"title\": ";
  json_string(o, c.title);
  o += ",\n  \"created_ms\": " + std::to_string(c.created_ms) + ",\n  \"updated_ms\": " + std::to_string(c.updated_ms);
  const auto& s = c.settings;
  o += ",\n  \"settings\": {\"system_prompt\": ";
  json_string(o, s.system_prompt);
  o += ", \"model_path\": ";
  json_string(o, s.model_path);
  o += ", \"model_name\": ";
  json_string(o, s.model_name);
  o += ", \"temperature\": ";
  const sampling::SamplingParams& p = s.generation.sampling;
  json_number(o, p.temperature);
  o += ", \"top_k\": " + std::to_string(p.top_k) + ", \"top_p\": ";
  json_number(o, p.top_p);
  o += ", \"min_p\": ";
  json_number(o, p.min_p);
  o += ", \"repeat_penalty\": ";
  json_number(o, p.repeat_penalty);
  o += ", \"seed\": " + std::to_string(p.seed) + ", \"max_tokens\": " + std::to_string(s.generation.max_tokens);
  if (!s.reasoning_effort.empty()) {
    o += ", \"reasoning_effort\": ";
    json_string(o, s.reasoning_effort);
  }
  o += "},\n  \"messages\": [";
  for (size_t i = 0; i < path.size(); ++i) {
    const Message& m = path[i];
    o += i ? ",\n    {" : "\n    {";
    o += "\"id\": " + std::to_string(m.id) + ", \"parent_id\": " + std::to_string(m.parent_id) + ", \"role\": \"" +
         to_string(m.role) + "\", \"state\": \"" + to_string(m.state) +
         "\", \"created_ms\": " + std::to_string(m.created_ms) + ", \"text\": ";
    json_string(o, m.text);
    o += ", \"tokens\": [";
    for (size_t t = 0; t < m.tokens.size(); ++t) {
      if (t) o += ", ";
      o += std::to_string(m.tokens[t]);
    }
    o += "]}";
  }
  o += path.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return o;
}

std::string export_markdown(const Conversation& c, const std::vector<Message>& path) {
  std::string o = "# " + (c.title.empty() ? std::string("Untitled conversation") : c.title) + "\n\n";
  if (!c.settings.model_name.empty()) o += "*Model: " + c.settings.model_name + "*\n\n";
  if (!c.settings.system_prompt.empty()) o += "## System\n\n" + c.settings.system_prompt + "\n\n";
  for (const Message& m : path) {
    o += std::string("## ") + role_heading(m.role);
    if (m.state != MessageState::complete) o += " (incomplete)";
    o += "\n\n" + m.text + "\n\n";
  }
  return o;
}

}  // namespace kvc::storage
