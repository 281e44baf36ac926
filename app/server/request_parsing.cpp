// Request bodies to typed requests: JSON parsed once, each field checked for type and range.
#include "app/server/request_parsing.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "app/server/response_format.h"

namespace kvc::server {

namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The field, or null when it is absent or JSON null (both mean "not given").
const json* field(const json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

ApiError wrong_type(const std::string& name, const char* expected, const json& v) {
  return bad_request(name + " must be " + expected + ", not " + v.type_name(), name);
}

MaybeError read_number(const json& o, const char* name, double lo, double hi, double& out) {
  const json* v = field(o, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return wrong_type(name, "a number", *v);
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) {
    return bad_request(std::string(name) + " must be in [" + fmt(lo) + ", " + fmt(hi) + "], got " + fmt(d), name);
  }
  out = d;
  return std::nullopt;
}

MaybeError read_integer(const json& o, const char* name, int64_t lo, int64_t hi, int64_t& out, bool& given) {
  const json* v = field(o, name);
  given = false;
  if (!v) return std::nullopt;
  if (!v->is_number()) return wrong_type(name, "an integer", *v);
  int64_t n = 0;
  if (v->is_number_unsigned()) {
    const auto u = v->get<uint64_t>();
    n = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                       : static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    n = v->get<int64_t>();
  } else {
    const double d = v->get<double>();
    if (!(std::floor(d) == d && std::fabs(d) < 9.0e18)) return wrong_type(name, "an integer", *v);
    n = static_cast<int64_t>(d);
  }
  if (n < lo || n > hi) {
    return bad_request(std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                           "], got " + std::to_string(n),
                       name);
  }
  out = n;
  given = true;
  return std::nullopt;
}

MaybeError read_bool(const json& o, const char* name, bool& out) {
  const json* v = field(o, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return wrong_type(name, "true or false", *v);
  out = v->get<bool>();
  return std::nullopt;
}

MaybeError read_model(const json& o, std::string& out) {
  const json* v = field(o, "model");
  if (!v) return bad_request("model is required: the id that GET /v1/models lists", "model");
  if (!v->is_string()) return wrong_type("model", "a string", *v);
  out = v->get<std::string>();
  return std::nullopt;
}

MaybeError read_stop(const json& o, const RequestLimits& limits, std::vector<std::string>& out) {
  const json* v = field(o, "stop");
  if (!v) return std::nullopt;
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string())
        return bad_request(
            std::string("stop must be a string or an array of strings, not an array holding ") + s.type_name(), "stop");
      stops.push_back(s.get<std::string>());
    }
  } else {
    return wrong_type("stop", "a string or an array of strings", *v);
  }
  if (static_cast<int>(stops.size()) > limits.max_stop) {
    return bad_request("stop holds " + std::to_string(stops.size()) + " strings; at most " +
                           std::to_string(limits.max_stop) + " are allowed",
                       "stop");
  }
  for (std::string& s : stops) {
    if (static_cast<int64_t>(s.size()) > limits.max_stop_bytes) {
      return bad_request("a stop string is " + std::to_string(s.size()) + " bytes; at most " +
                             std::to_string(limits.max_stop_bytes) + " are allowed",
                         "stop");
    }
    if (!s.empty()) out.push_back(std::move(s));
  }
  return std::nullopt;
}

// Fields a request may carry that kvchat cannot honour: refused rather than silently ignored.
MaybeError refuse_unsupported(const json& o, bool chat) {
  if (const json* v = field(o, "logprobs"); v && !(v->is_boolean() && !v->get<bool>())) {
    return bad_request("logprobs are not supported by kvchat serve", "logprobs");
  }
  if (field(o, "top_logprobs")) return bad_request("top_logprobs are not supported by kvchat serve", "top_logprobs");
  if (const json* v = field(o, "functions"); v && !(v->is_array() && v->empty())) {
    return bad_request("functions (OpenAI's deprecated form) are not supported by kvchat serve; send tools",
                       "functions");
  }
  if (const json* v = field(o, "logit_bias"); v && !(v->is_object() && v->empty())) {
    return bad_request("logit_bias is not supported by kvchat serve", "logit_bias");
  }
  if (!chat) {
    bool echo = false;
    if (auto e = read_bool(o, "echo", echo)) return e;
    if (echo) return bad_request("echo is not supported by kvchat serve", "echo");
    if (const json* v = field(o, "suffix"); v && !(v->is_string() && v->get<std::string>().empty())) {
      return bad_request("suffix is not supported by kvchat serve", "suffix");
    }
    int64_t best_of = 1;
    bool given = false;
    if (auto e = read_integer(o, "best_of", 1, 1, best_of, given)) {
      e->message += " (kvchat serve generates one candidate)";
      return e;
    }
  }
  return std::nullopt;
}

MaybeError read_generation(const json& o, const RequestLimits& limits, bool chat, GenerationParams& p) {
  sampling::SamplingParams& s = p.sampling;  // its defaults are the CLI's and the app's
  double d = s.temperature;
  if (auto e = read_number(o, "temperature", 0.0, 2.0, d)) return e;
  s.temperature = static_cast<float>(d);
  d = s.top_p;
  if (auto e = read_number(o, "top_p", 0.0, 1.0, d)) return e;
  if (d <= 0.0) return bad_request("top_p must be in (0, 1], got 0", "top_p");
  s.top_p = static_cast<float>(d);
  d = s.min_p;
  if (auto e = read_number(o, "min_p", 0.0, 1.0, d)) return e;
  s.min_p = static_cast<float>(d);
  d = s.repeat_penalty;
  if (auto e = read_number(o, "repeat_penalty", 0.0, 10.0, d)) return e;
  if (d <= 0.0) return bad_request("repeat_penalty must be in (0, 10], got 0", "repeat_penalty");
  s.repeat_penalty = static_cast<float>(d);
  if (auto e = read_number(o, "presence_penalty", -2.0, 2.0, p.presence_penalty)) return e;
  if (auto e = read_number(o, "frequency_penalty", -2.0, 2.0, p.frequency_penalty)) return e;

  bool given = false;
  int64_t n = s.top_k;
  if (auto e = read_integer(o, "top_k", 0, int64_t{1} << 20, n, given)) return e;
  s.top_k = static_cast<int>(n);
  if (auto e = read_integer(o, "n", 1, 1, n, given)) {
    e->message += " (kvchat serve generates one choice per request)";
    return e;
  }
  int64_t seed = 0;
  if (auto e = read_integer(o, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), seed,
                            given)) {
    return e;
  }
  p.seeded = given;
  // Any integer is a seed (its low 63 bits); none given: the sampler draws one.
  s.seed =
      given ? static_cast<int64_t>(static_cast<uint64_t>(seed) & 0x7fff'ffff'ffff'ffffULL) : sampling::k_random_seed;

  const std::string cap = " (this server's limit, kvchat-cli serve --max-tokens)";
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (!chat && std::string_view(name) == "max_completion_tokens") continue;
    int64_t m = 0;
    if (auto e = read_integer(o, name, 1, limits.max_tokens, m, given)) {
      if (e->message.find("must be in") != std::string::npos) e->message += cap;
      return e;
    }
    if (given) p.max_tokens = m;  // max_completion_tokens, read second, wins
  }
  if (auto e = read_stop(o, limits, p.stop)) return e;
  if (auto e = read_bool(o, "stream", p.stream)) return e;
  if (const json* so = field(o, "stream_options")) {
    if (!so->is_object()) return wrong_type("stream_options", "an object", *so);
    if (auto e = read_bool(*so, "include_usage", p.include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  if (auto e = read_response_format(o, p.grammar)) return e;  // json_object / json_schema: constrained
  return refuse_unsupported(o, chat);
}

// A message's content: a string, or an array of text parts (joined by newlines).
MaybeError read_content(const json& m, size_t i, bool assistant, std::string& out) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  const json* c = field(m, "content");
  if (!c) {
    if (assistant) return std::nullopt;  // an assistant turn with only tool calls: empty text
    return bad_request(param + " is required", param);
  }
  if (c->is_string()) {
    out = c->get<std::string>();
    return std::nullopt;
  }
  if (!c->is_array()) return wrong_type(param, "a string or an array of content parts", *c);
  for (size_t j = 0; j < c->size(); ++j) {
    const json& part = (*c)[j];
    const std::string pp = param + "[" + std::to_string(j) + "]";
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    if (!type || !type->is_string()) return bad_request(pp + " must be an object with a \"type\"", pp);
    if (type->get<std::string>() != "text") {
      return bad_request(pp + " is of type \"" + type->get<std::string>() + "\"; kvchat serve takes text parts only",
                         pp + ".type");
    }
    const json* text = field(part, "text");
    if (!text || !text->is_string()) return bad_request(pp + ".text must be a string", pp + ".text");
    if (j > 0) out += '\n';
    out += text->get<std::string>();
  }
  return std::nullopt;
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}].
MaybeError read_tool_calls(const json& m, const std::string& param, std::vector<chat::ToolCall>& out) {
  const json* v = field(m, "tool_calls");
  if (!v) return std::nullopt;
  const std::string p = param + ".tool_calls";
  if (!v->is_array()) return wrong_type(p, "an array", *v);
  for (size_t j = 0; j < v->size(); ++j) {
    const json& c = (*v)[j];
    const std::string pc = p + "[" + std::to_string(j) + "]";
    if (!c.is_object()) return wrong_type(pc, "an object", c);
    if (const json* type = field(c, "type"); type && !(type->is_string() && type->get<std::string>() == "function")) {
      return bad_request(pc + ".type must be \"function\"", pc + ".type");
    }
    chat::ToolCall call;
    if (const json* id = field(c, "id")) {
      if (!id->is_string()) return wrong_type(pc + ".id", "a string", *id);
      call.id = id->get<std::string>();
    }
    const json* f = field(c, "function");
    if (!f || !f->is_object()) return bad_request(pc + ".function must be an object", pc + ".function");
    const json* name = field(*f, "name");
    if (!name || !name->is_string()) return bad_request(pc + ".function.name must be a string", pc + ".function.name");
    call.name = name->get<std::string>();
    const json* args = field(*f, "arguments");
    if (!args || !args->is_string()) {
      return bad_request(pc + ".function.arguments must be a string (the arguments as JSON text)",
                         pc + ".function.arguments");
    }
    call.arguments = args->get<std::string>();
    out.push_back(std::move(call));
  }
  return std::nullopt;
}

MaybeError read_messages(const json& o, const RequestLimits& limits, std::vector<chat::ChatMessage>& out) {
  const json* v = field(o, "messages");
  if (!v) return bad_request("messages is required", "messages");
  if (!v->is_array()) return wrong_type("messages", "an array", *v);
  if (v->empty()) return bad_request("messages must hold at least one message", "messages");
  if (static_cast<int64_t>(v->size()) > limits.max_messages) {
    return bad_request("messages holds " + std::to_string(v->size()) + " messages; this server takes at most " +
                           std::to_string(limits.max_messages) + " (kvchat-cli serve --max-messages)",
                       "messages");
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return wrong_type(param, "an object", m);
    const json* role = field(m, "role");
    if (!role || !role->is_string()) return bad_request(param + ".role must be a string", param + ".role");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r == "function") {
      return bad_request(param + ".role \"function\" (OpenAI's deprecated form) is not supported; send \"tool\"",
                         param + ".role");
    }
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return bad_request(param + ".role must be system, developer, user, assistant or tool, not \"" + r + "\"",
                         param + ".role");
    }
    chat::ChatMessage msg;
    msg.role = r;
    if (auto e = read_content(m, i, r == "assistant", msg.content)) return e;
    if (r == "assistant") {
      if (auto e = read_tool_calls(m, param, msg.tool_calls)) return e;
    }
    if (r == "tool") {
      const json* id = field(m, "tool_call_id");
      if (!id)
        return bad_request(param + ".tool_call_id is required: the id of the call this answers",
                           param + ".tool_call_id");
      if (!id->is_string()) return wrong_type(param + ".tool_call_id", "a string", *id);
      msg.tool_call_id = id->get<std::string>();
    }
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

// reasoning_effort, at the top level (OpenAI's) or in chat_template_kwargs (llama.cpp's way of
// passing template variables); the top level wins.
MaybeError read_reasoning_effort(const json& o, std::optional<std::string>& out) {
  std::string allowed;
  for (const std::string_view e : chat::k_reasoning_efforts) allowed += (allowed.empty() ? "" : ", ") + std::string(e);
  const auto read = [&](const json& from, const std::string& name) -> MaybeError {
    const json* v = field(from, "reasoning_effort");
    if (!v) return std::nullopt;
    if (!v->is_string()) return wrong_type(name, ("one of " + allowed).c_str(), *v);
    const std::string e = v->get<std::string>();
    if (!chat::is_reasoning_effort(e)) {
      return bad_request(name + " must be one of " + allowed + ", not \"" + ellipsize(e, 40) + "\"", name);
    }
    out = e;
    return std::nullopt;
  };
  if (const json* kwargs = field(o, "chat_template_kwargs")) {
    if (!kwargs->is_object()) return wrong_type("chat_template_kwargs", "an object", *kwargs);
    if (auto e = read(*kwargs, "chat_template_kwargs.reasoning_effort")) return e;
  }
  return read(o, "reasoning_effort");
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}].
MaybeError read_tools(const json& o, ChatRequest& r) {
  const json* v = field(o, "tools");
  if (!v) return std::nullopt;
  if (!v->is_array()) return wrong_type("tools", "an array", *v);
  if (v->empty()) return std::nullopt;
  if (v->size() > 128)
    return bad_request("tools holds " + std::to_string(v->size()) + " tools; at most 128 are allowed", "tools");
  json clean = json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& t = (*v)[i];
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return wrong_type(p, "an object", t);
    const json* type = field(t, "type");
    if (!type || !type->is_string() || type->get<std::string>() != "function") {
      return bad_request(p + ".type must be \"function\" (the only kind of tool kvchat serve takes)", p + ".type");
    }
    const json* f = field(t, "function");
    if (!f || !f->is_object()) return bad_request(p + ".function must be an object", p + ".function");
    const json* name = field(*f, "name");
    if (!name || !name->is_string()) return bad_request(p + ".function.name must be a string", p + ".function.name");
    const std::string n = name->get<std::string>();
    const bool valid = !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    if (!valid) {
      return bad_request(p + ".function.name must be 1 to 64 letters, digits, _ or -, not \"" + ellipsize(n, 40) + "\"",
                         p + ".function.name");
    }
    if (std::find(r.tool_names.begin(), r.tool_names.end(), n) != r.tool_names.end()) {
      return bad_request(p + ".function.name \"" + n + "\" is given twice", p + ".function.name");
    }
    json fn{{"name", n}};
    if (const json* d = field(*f, "description")) {
      if (!d->is_string()) return wrong_type(p + ".function.description", "a string", *d);
      fn["description"] = *d;
    }
    if (const json* params = field(*f, "parameters")) {
      if (!params->is_object()) return wrong_type(p + ".function.parameters", "a JSON Schema object", *params);
      fn["parameters"] = *params;
    }
    if (const json* strict = field(*f, "strict")) {
      if (!strict->is_boolean()) return wrong_type(p + ".function.strict", "true or false", *strict);
      fn["strict"] = *strict;
    }
    r.tool_names.push_back(n);
    clean.push_back(json{{"type", "function"}, {"function", std::move(fn)}});
  }
  r.tools_json = clean.dump();
  return std::nullopt;
}

// tool_choice: "auto", "none", "required" or {"type": "function", "function": {"name"}}; and
// parallel_tool_calls.
MaybeError read_tool_choice(const json& o, ChatRequest& r) {
  if (auto e = read_bool(o, "parallel_tool_calls", r.parallel_tool_calls)) return e;
  const json* v = field(o, "tool_choice");
  if (!v) return std::nullopt;
  const char* expected = "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}";
  if (v->is_string()) {
    const std::string c = v->get<std::string>();
    if (c == "auto") {
      r.tool_choice = ToolChoice::automatic;
    } else if (c == "none") {
      r.tool_choice = ToolChoice::none;
    } else if (c == "required") {
      r.tool_choice = ToolChoice::required;
    } else {
      return bad_request(std::string("tool_choice must be ") + expected + ", not \"" + ellipsize(c, 40) + "\"",
                         "tool_choice");
    }
  } else if (v->is_object()) {
    const json* type = field(*v, "type");
    const json* f = field(*v, "function");
    const json* name = f && f->is_object() ? field(*f, "name") : nullptr;
    if (!type || !type->is_string() || type->get<std::string>() != "function" || !name || !name->is_string()) {
      return bad_request(std::string("tool_choice must be ") + expected, "tool_choice");
    }
    r.tool_choice = ToolChoice::named;
    r.tool_choice_name = name->get<std::string>();
    if (std::find(r.tool_names.begin(), r.tool_names.end(), r.tool_choice_name) == r.tool_names.end()) {
      return bad_request(
          "tool_choice names the function \"" + ellipsize(r.tool_choice_name, 64) + "\", which is not among tools",
          "tool_choice.function.name");
    }
  } else {
    return wrong_type("tool_choice", expected, *v);
  }
  if (r.tool_names.empty() && r.tool_choice == ToolChoice::required) {
    return bad_request("tool_choice \"required\" needs tools", "tool_choice");
  }
  return std::nullopt;
}

MaybeError read_prompt(const json& o, CompletionRequest& r) {
  const json* v = field(o, "prompt");
  if (!v) return bad_request("prompt is required", "prompt");
  if (v->is_string()) {
    r.prompt = v->get<std::string>();
    return std::nullopt;
  }
  if (!v->is_array()) return wrong_type("prompt", "a string, an array of strings or an array of token ids", *v);
  const json* ids = v;
  if (v->size() == 1 && ((*v)[0].is_string() || (*v)[0].is_array())) {
    if ((*v)[0].is_string()) {
      r.prompt = (*v)[0].get<std::string>();
      return std::nullopt;
    }
    ids = &(*v)[0];
  }
  if (ids->empty()) return bad_request("prompt must not be empty", "prompt");
  for (const json& t : *ids) {
    if (t.is_string() || t.is_array()) return bad_request("prompt: only one prompt per request is supported", "prompt");
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return bad_request("prompt: a token id must be an integer in [0, 2^31), not " + t.dump(), "prompt");
    }
    r.prompt_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  r.prompt_is_ids = true;
  return std::nullopt;
}

}  // namespace

int json_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

Parsed<json> parse_json_object(std::string_view body, const RequestLimits& limits) {
  if (json_depth(body, limits.max_json_depth + 1) > limits.max_json_depth) {
    return Parsed<json>::failure(bad_request("the body nests arrays or objects deeper than " +
                                             std::to_string(limits.max_json_depth) + " levels"));
  }
  json j;
  try {
    j = json::parse(body);
  } catch (const json::out_of_range&) {
    // "number overflow parsing '1e999'": a number beyond a double's range (about 1.8e308).
    return Parsed<json>::failure(
        bad_request("the body is not valid JSON: a number in it is too large for a 64-bit float (over 1.8e308)"));
  } catch (const json::exception& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1, column 2: ..."; what it
    // quotes of the body is cut short.
    std::string what = e.what();
    if (const size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    return Parsed<json>::failure(bad_request("the body is not valid JSON: " + ellipsize(what, 200)));
  }
  if (!j.is_object())
    return Parsed<json>::failure(bad_request(std::string("the body must be a JSON object, not ") + j.type_name()));
  return Parsed<json>::success(std::move(j));
}

Parsed<ChatRequest> parse_chat_request(std::string_view body, const RequestLimits& limits) {
  auto j = parse_json_object(body, limits);
  if (!j.ok) return Parsed<ChatRequest>::failure(j.error);
  ChatRequest r;
  if (auto e = read_model(j.value, r.model)) return Parsed<ChatRequest>::failure(*e);
  if (auto e = read_messages(j.value, limits, r.messages)) return Parsed<ChatRequest>::failure(*e);
  if (auto e = read_generation(j.value, limits, true, r.params)) return Parsed<ChatRequest>::failure(*e);
  if (auto e = read_reasoning_effort(j.value, r.reasoning_effort)) return Parsed<ChatRequest>::failure(*e);
  if (auto e = read_tools(j.value, r)) return Parsed<ChatRequest>::failure(*e);
  if (auto e = read_tool_choice(j.value, r)) return Parsed<ChatRequest>::failure(*e);
  return Parsed<ChatRequest>::success(std::move(r));
}

Parsed<CompletionRequest> parse_completion_request(std::string_view body, const RequestLimits& limits) {
  auto j = parse_json_object(body, limits);
  if (!j.ok) return Parsed<CompletionRequest>::failure(j.error);
  CompletionRequest r;
  if (auto e = read_model(j.value, r.model)) return Parsed<CompletionRequest>::failure(*e);
  if (auto e = read_prompt(j.value, r)) return Parsed<CompletionRequest>::failure(*e);
  if (auto e = read_generation(j.value, limits, false, r.params)) return Parsed<CompletionRequest>::failure(*e);
  return Parsed<CompletionRequest>::success(std::move(r));
}

}  // namespace kvc::server
