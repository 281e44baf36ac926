// Anthropic Messages request bodies to ChatRequest: field by field, errors named as Anthropic names them.
#include "app/server/anthropic_request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

namespace kvc::server {

namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

const json* field(const json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

ApiError wrong_type(const std::string& name, const char* expected, const json& v) {
  return bad_request(name + ": must be " + expected + ", not " + v.type_name(), name);
}

MaybeError read_unit(const json& o, const char* name, float& out) {
  const json* v = field(o, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return wrong_type(name, "a number", *v);
  const double d = v->get<double>();
  if (!(d >= 0.0 && d <= 1.0)) return bad_request(std::string(name) + ": must be between 0 and 1", name);
  out = static_cast<float>(d);
  return std::nullopt;
}

MaybeError read_int(const json& o, const std::string& name, int64_t lo, int64_t hi, std::optional<int64_t>& out) {
  const json* v = field(o, name.c_str());
  if (!v) return std::nullopt;
  const bool integral = v->is_number_integer() || v->is_number_unsigned() ||
                        (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>());
  if (!integral) return wrong_type(name, "an integer", *v);
  const double d = v->get<double>();
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
    return bad_request(
        name + ": must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + v->dump(), name);
  }
  out = static_cast<int64_t>(d);
  return std::nullopt;
}

// Text blocks (or a string) joined by newlines; `kinds` names what else the caller takes.
MaybeError read_text_blocks(const json& v, const std::string& param, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) return wrong_type(param, "a string or an array of text blocks", v);
  for (size_t j = 0; j < v.size(); ++j) {
    const json& b = v[j];
    const std::string pb = param + "." + std::to_string(j);
    const json* type = b.is_object() ? field(b, "type") : nullptr;
    if (!type || !type->is_string()) return bad_request(pb + ": must be an object with a \"type\"", pb);
    if (*type != "text") {
      return bad_request(pb + ".type: \"" + ellipsize(type->get<std::string>(), 40) +
                             "\" is not supported here; kvchat takes text blocks only",
                         pb + ".type");
    }
    const json* text = field(b, "text");
    if (!text || !text->is_string()) return bad_request(pb + ".text: must be a string", pb + ".text");
    if (j > 0) out += '\n';
    out += text->get<std::string>();
  }
  return std::nullopt;
}

MaybeError refuse_media(const std::string& type, const std::string& param) {
  if (type == "image" || type == "document" || type == "search_result" || type == "container_upload") {
    return bad_request(
        param + ": " + type + " blocks are not supported: kvchat serve runs text models only; send text blocks", param);
  }
  return bad_request(param + ": unknown content block type \"" + ellipsize(type, 40) + "\"", param);
}

// One message of `messages`, appended to `out` as one or more chat messages.
MaybeError read_message(const json& m, size_t i, std::vector<chat::ChatMessage>& out) {
  const std::string param = "messages." + std::to_string(i);
  if (!m.is_object()) return wrong_type(param, "an object", m);
  const json* role = field(m, "role");
  if (!role || !role->is_string())
    return bad_request(param + ".role: must be \"user\" or \"assistant\"", param + ".role");
  const std::string r = role->get<std::string>();
  if (r != "user" && r != "assistant") {
    return bad_request(param + ".role: must be \"user\" or \"assistant\", not \"" + ellipsize(r, 40) +
                           "\" (the system prompt is the top-level system field)",
                       param + ".role");
  }
  const json* c = field(m, "content");
  if (!c) return bad_request(param + ".content: Field required", param + ".content");
  chat::ChatMessage msg(r, "");
  if (c->is_string()) {
    msg.content = c->get<std::string>();
    out.push_back(std::move(msg));
    return std::nullopt;
  }
  if (!c->is_array()) return wrong_type(param + ".content", "a string or an array of content blocks", *c);
  std::vector<chat::ChatMessage> results;  // a user message's tool_result blocks
  bool any_text = false;
  for (size_t j = 0; j < c->size(); ++j) {
    const json& b = (*c)[j];
    const std::string pb = param + ".content." + std::to_string(j);
    const json* type = b.is_object() ? field(b, "type") : nullptr;
    if (!type || !type->is_string()) return bad_request(pb + ": must be an object with a \"type\"", pb);
    const std::string t = type->get<std::string>();
    if (t == "text") {
      const json* text = field(b, "text");
      if (!text || !text->is_string()) return bad_request(pb + ".text: must be a string", pb + ".text");
      if (any_text) msg.content += '\n';
      msg.content += text->get<std::string>();
      any_text = true;
    } else if (r == "assistant" && (t == "thinking" || t == "redacted_thinking")) {
      const json* thinking = field(b, "thinking");
      if (t == "thinking" && thinking && thinking->is_string()) {
        msg.reasoning_content = msg.reasoning_content.value_or("") + thinking->get<std::string>();
      }
    } else if (r == "assistant" && t == "tool_use") {
      chat::ToolCall call;
      const json* id = field(b, "id");
      const json* name = field(b, "name");
      const json* input = field(b, "input");
      if (!id || !id->is_string()) return bad_request(pb + ".id: must be a string", pb + ".id");
      if (!name || !name->is_string()) return bad_request(pb + ".name: must be a string", pb + ".name");
      if (input && !input->is_object()) return wrong_type(pb + ".input", "an object", *input);
      call.id = id->get<std::string>();
      call.name = name->get<std::string>();
      call.arguments = input ? input->dump() : "{}";
      msg.tool_calls.push_back(std::move(call));
    } else if (r == "user" && t == "tool_result") {
      const json* id = field(b, "tool_use_id");
      if (!id || !id->is_string()) {
        return bad_request(pb + ".tool_use_id: must be the id of the tool_use block this answers", pb + ".tool_use_id");
      }
      chat::ChatMessage result("tool", "");
      result.tool_call_id = id->get<std::string>();
      if (const json* rc = field(b, "content")) {
        if (auto e = read_text_blocks(*rc, pb + ".content", result.content)) return e;
      }
      results.push_back(std::move(result));
    } else if (t == "tool_use" || t == "tool_result" || t == "thinking" || t == "redacted_thinking") {
      return bad_request(
          pb + ".type: a " + t + " block belongs in " + (r == "user" ? "an assistant" : "a user") + " message",
          pb + ".type");
    } else {
      return refuse_media(t, pb + ".type");
    }
  }
  if (!results.empty()) {
    out.insert(out.end(), results.begin(), results.end());
    if (any_text) out.push_back(std::move(msg));
  } else {
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

MaybeError read_messages(const json& o, const RequestLimits& limits, ChatRequest& r) {
  const json* v = field(o, "messages");
  if (!v) return bad_request("messages: Field required", "messages");
  if (!v->is_array()) return wrong_type("messages", "an array", *v);
  if (v->empty()) return bad_request("messages: at least one message is required", "messages");
  if (static_cast<int64_t>(v->size()) > limits.max_messages) {
    return bad_request("messages: holds " + std::to_string(v->size()) + " messages; this server takes at most " +
                           std::to_string(limits.max_messages) + " (kvchat-cli serve --max-messages)",
                       "messages");
  }
  if (const json* s = field(o, "system")) {
    std::string system;
    if (auto e = read_text_blocks(*s, "system", system)) return e;
    if (!system.empty()) r.messages.emplace_back("system", std::move(system));
  }
  for (size_t i = 0; i < v->size(); ++i) {
    if (auto e = read_message((*v)[i], i, r.messages)) return e;
  }
  if ((*v)[v->size() - 1].is_object() && (*v)[v->size() - 1].value("role", "") == "assistant") {
    const std::string p = "messages." + std::to_string(v->size() - 1);
    return bad_request(p + ".role: the last message must be a user message; kvchat serve does not continue a "
                           "prefilled assistant message",
                       p + ".role");
  }
  return std::nullopt;
}

// tools: [{name, description?, input_schema}] (custom tools; Anthropic's server tools are refused).
MaybeError read_tools(const json& o, ChatRequest& r) {
  const json* v = field(o, "tools");
  if (!v) return std::nullopt;
  if (!v->is_array()) return wrong_type("tools", "an array", *v);
  if (v->size() > 128)
    return bad_request("tools: holds " + std::to_string(v->size()) + " tools; at most 128 are allowed", "tools");
  json clean = json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& t = (*v)[i];
    const std::string p = "tools." + std::to_string(i);
    if (!t.is_object()) return wrong_type(p, "an object", t);
    if (const json* type = field(t, "type"); type && *type != "custom") {
      return bad_request(p + ".type: \"" + ellipsize(type->is_string() ? type->get<std::string>() : type->dump(), 40) +
                             "\" is one of Anthropic's own tools, which kvchat serve does not run; send a custom "
                             "tool (name, description, input_schema)",
                         p + ".type");
    }
    const json* name = field(t, "name");
    if (!name || !name->is_string()) return bad_request(p + ".name: must be a string", p + ".name");
    const std::string n = name->get<std::string>();
    const bool valid = !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    if (!valid)
      return bad_request(p + ".name: must be 1 to 64 letters, digits, _ or -, not \"" + ellipsize(n, 40) + "\"",
                         p + ".name");
    if (std::find(r.tool_names.begin(), r.tool_names.end(), n) != r.tool_names.end())
      return bad_request(p + ".name: \"" + n + "\" is given twice", p + ".name");
    json fn{{"name", n}};
    if (const json* d = field(t, "description")) {
      if (!d->is_string()) return wrong_type(p + ".description", "a string", *d);
      fn["description"] = *d;
    }
    const json* schema = field(t, "input_schema");
    if (!schema) return bad_request(p + ".input_schema: Field required", p + ".input_schema");
    if (!schema->is_object()) return wrong_type(p + ".input_schema", "a JSON Schema object", *schema);
    fn["parameters"] = *schema;
    r.tool_names.push_back(n);
    clean.push_back(json{{"type", "function"}, {"function", std::move(fn)}});
  }
  if (!clean.empty()) r.tools_json = clean.dump();
  return std::nullopt;
}

// tool_choice: {type: auto | any | tool (with name) | none, disable_parallel_tool_use?}.
MaybeError read_tool_choice(const json& o, ChatRequest& r) {
  const json* v = field(o, "tool_choice");
  if (!v) return std::nullopt;
  if (!v->is_object())
    return wrong_type("tool_choice", "an object {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}", *v);
  const json* type = field(*v, "type");
  const std::string t = type && type->is_string() ? type->get<std::string>() : "";
  if (t == "auto") {
    r.tool_choice = ToolChoice::automatic;
  } else if (t == "any") {
    r.tool_choice = ToolChoice::required;
  } else if (t == "none") {
    r.tool_choice = ToolChoice::none;
  } else if (t == "tool") {
    const json* name = field(*v, "name");
    if (!name || !name->is_string())
      return bad_request("tool_choice.name: required (a string) when tool_choice.type is \"tool\"", "tool_choice.name");
    r.tool_choice = ToolChoice::named;
    r.tool_choice_name = name->get<std::string>();
    if (std::find(r.tool_names.begin(), r.tool_names.end(), r.tool_choice_name) == r.tool_names.end()) {
      return bad_request(
          "tool_choice.name: \"" + ellipsize(r.tool_choice_name, 64) + "\" is not the name of one of tools",
          "tool_choice.name");
    }
  } else {
    return bad_request("tool_choice.type: must be \"auto\", \"any\", \"tool\" or \"none\"", "tool_choice.type");
  }
  if (const json* d = field(*v, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) return wrong_type("tool_choice.disable_parallel_tool_use", "true or false", *d);
    r.parallel_tool_calls = !d->get<bool>();
  }
  if (r.tool_names.empty() && (r.tool_choice == ToolChoice::required || r.tool_choice == ToolChoice::named)) {
    return bad_request("tool_choice: \"" + t + "\" needs tools", "tool_choice");
  }
  return std::nullopt;
}

MaybeError read_sampling(const json& o, const RequestLimits& limits, GenerationParams& p) {
  sampling::SamplingParams& s = p.sampling;
  if (auto e = read_unit(o, "temperature", s.temperature)) return e;
  float top_p = s.top_p;
  if (auto e = read_unit(o, "top_p", top_p)) return e;
  if (top_p <= 0.0F) return bad_request("top_p: must be above 0", "top_p");
  s.top_p = top_p;
  std::optional<int64_t> top_k;
  if (auto e = read_int(o, "top_k", 0, int64_t{1} << 20, top_k)) return e;
  if (top_k) s.top_k = static_cast<int>(*top_k);
  s.seed = sampling::k_random_seed;
  if (const json* v = field(o, "stream")) {
    if (!v->is_boolean()) return wrong_type("stream", "true or false", *v);
    p.stream = v->get<bool>();
  }
  if (const json* v = field(o, "stop_sequences")) {
    if (!v->is_array()) return wrong_type("stop_sequences", "an array of strings", *v);
    if (static_cast<int64_t>(v->size()) > limits.max_stop * 4) {
      return bad_request("stop_sequences: holds " + std::to_string(v->size()) + " strings; at most " +
                             std::to_string(limits.max_stop * 4) + " are allowed",
                         "stop_sequences");
    }
    for (size_t i = 0; i < v->size(); ++i) {
      const json& s2 = (*v)[i];
      const std::string ps = "stop_sequences." + std::to_string(i);
      if (!s2.is_string()) return wrong_type(ps, "a string", s2);
      const std::string text = s2.get<std::string>();
      if (static_cast<int64_t>(text.size()) > limits.max_stop_bytes) {
        return bad_request(ps + ": is " + std::to_string(text.size()) + " bytes; at most " +
                               std::to_string(limits.max_stop_bytes) + " are allowed",
                           ps);
      }
      if (!text.empty()) p.stop.push_back(text);
    }
  }
  return std::nullopt;
}

// thinking: {type: enabled, budget_tokens} or {type: disabled}.
MaybeError read_thinking(const json& o, int64_t max_tokens, MessagesRequest& r) {
  const json* v = field(o, "thinking");
  if (!v) return std::nullopt;
  if (!v->is_object()) return wrong_type("thinking", "an object {\"type\": \"enabled\", \"budget_tokens\"}", *v);
  const json* type = field(*v, "type");
  if (type && *type == "disabled") return std::nullopt;
  if (!type || *type != "enabled")
    return bad_request("thinking.type: must be \"enabled\" or \"disabled\"", "thinking.type");
  std::optional<int64_t> budget;
  if (auto e = read_int(*v, "budget_tokens", 1024, int64_t{1} << 30, budget)) {
    e->param = "thinking.budget_tokens";
    e->message = "thinking." + e->message;
    return e;
  }
  if (!budget) return bad_request("thinking.budget_tokens: Field required", "thinking.budget_tokens");
  if (max_tokens > 0 && *budget >= max_tokens) {
    return bad_request("thinking.budget_tokens: must be less than max_tokens (" + std::to_string(max_tokens) + ")",
                       "thinking.budget_tokens");
  }
  r.thinking = true;
  r.budget_tokens = *budget;
  return std::nullopt;
}

}  // namespace

Parsed<MessagesRequest> parse_messages_request(std::string_view body, const RequestLimits& limits, MessagesBody kind,
                                               bool uses_reasoning_effort) {
  using P = Parsed<MessagesRequest>;
  auto j = parse_json_object(body, limits);
  if (!j.ok) return P::failure(j.error);
  const json& o = j.value;
  MessagesRequest r;
  ChatRequest& cr = r.chat;
  const json* model = field(o, "model");
  if (!model) return P::failure(bad_request("model: Field required (the id that GET /v1/models lists)", "model"));
  if (!model->is_string()) return P::failure(wrong_type("model", "a string", *model));
  cr.model = model->get<std::string>();
  if (auto e = read_messages(o, limits, cr)) return P::failure(*e);
  if (kind == MessagesBody::create) {
    std::optional<int64_t> max_tokens;
    if (auto e = read_int(o, "max_tokens", 1, limits.max_tokens, max_tokens)) {
      if (e->message.find("must be between") != std::string::npos)
        e->message += " (this server's limit, kvchat-cli serve --max-tokens)";
      return P::failure(*e);
    }
    if (!max_tokens) return P::failure(bad_request("max_tokens: Field required", "max_tokens"));
    cr.params.max_tokens = *max_tokens;
    if (auto e = read_sampling(o, limits, cr.params)) return P::failure(*e);
  }
  if (auto e = read_thinking(o, cr.params.max_tokens, r)) return P::failure(*e);
  if (r.thinking && uses_reasoning_effort) {
    cr.reasoning_effort = r.budget_tokens < 4096 ? "low" : r.budget_tokens < 16384 ? "medium" : "high";
  }
  if (auto e = read_tools(o, cr)) return P::failure(*e);
  if (auto e = read_tool_choice(o, cr)) return P::failure(*e);
  return P::success(std::move(r));
}

}  // namespace kvc::server
