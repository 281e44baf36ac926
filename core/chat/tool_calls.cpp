// Reading a reply's tool calls per format: markers found, each call's JSON (or Python-style call) parsed, the rest kept
// as text.
#include "core/chat/tool_calls.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <optional>

#include "core/chat/reasoning.h"

namespace kvc::chat {
namespace {

using nlohmann::json;
constexpr size_t npos = std::string_view::npos;
constexpr std::string_view k_ws = " \t\r\n";

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(k_ws);
  if (b == npos) return {};
  return s.substr(b, s.find_last_not_of(k_ws) - b + 1);
}

// The length of the longest end of `s` that is a proper beginning of `marker`.
size_t partial_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

// Where the JSON object or array opening at s[pos] ends (one past its closing bracket), or npos
// while it is not closed. Strings are skipped, so brackets in them do not count.
size_t json_end(std::string_view s, size_t pos) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return npos;
}

std::optional<json> parse_json(std::string_view s) {
  json j = json::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// OpenAI's arguments: JSON text of an object. A model that wrote them as a string of JSON gets
// that string; none at all, "{}".
std::optional<std::string> arguments_text(const json* a) {
  if (!a || a->is_null()) return std::string("{}");
  if (a->is_object()) return a->dump(-1, ' ', false, json::error_handler_t::replace);
  if (a->is_string()) {
    const std::string s = a->get<std::string>();
    if (auto inner = parse_json(s); inner && inner->is_object()) return s;
  }
  return std::nullopt;
}

// {"name": "f", "arguments" | "parameters": {...}} (Llama's may add "type": "function"), or
// OpenAI's own {"type": "function", "function": {...}} shape some models copy.
std::optional<ToolCall> call_from_json(const json& j) {
  if (!j.is_object()) return std::nullopt;
  if (auto f = j.find("function"); f != j.end() && f->is_object() && !j.contains("name")) return call_from_json(*f);
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  const json* args = nullptr;
  for (const char* key : {"arguments", "parameters"}) {
    if (auto a = j.find(key); a != j.end()) args = &*a;
  }
  auto text = arguments_text(args);
  if (!text) return std::nullopt;
  ToolCall c;
  c.name = name->get<std::string>();
  c.arguments = std::move(*text);
  return c;
}

// A Python literal as JSON: 'x' / "x", True / False / None, numbers, JSON lists and objects.
std::optional<json> python_literal(std::string_view v) {
  v = trim(v);
  if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') {
    std::string out;
    for (size_t i = 1; i + 1 < v.size(); ++i) {
      if (v[i] == '\\' && i + 2 < v.size()) ++i;
      out += v[i];
    }
    return json(out);
  }
  if (v == "True") return json(true);
  if (v == "False") return json(false);
  if (v == "None") return json(nullptr);
  auto j = parse_json(v);
  if (!j) return std::nullopt;
  return j;
}

// NAME(key=value, ...) or NAME.call(key=value, ...) (Llama's built-in tools): the call, with the
// keyword arguments as a JSON object. Positional arguments are not a call we can name.
std::optional<ToolCall> python_call(std::string_view s) {
  s = trim(s);
  const size_t open = s.find('(');
  if (open == npos || open == 0 || s.back() != ')') return std::nullopt;
  std::string_view name = trim(s.substr(0, open));
  if (name.ends_with(".call")) name.remove_suffix(5);
  for (const char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return std::nullopt;
  }
  json args = json::object();
  const std::string_view body = s.substr(open + 1, s.size() - open - 2);
  size_t p = 0;
  while (p < body.size()) {
    // One key=value, up to a comma outside quotes and brackets.
    size_t end = p;
    int depth = 0;
    char quote = 0;
    for (; end < body.size(); ++end) {
      const char c = body[end];
      if (quote) {
        if (c == '\\')
          ++end;
        else if (c == quote)
          quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '[' || c == '{' || c == '(') {
        ++depth;
      } else if (c == ']' || c == '}' || c == ')') {
        --depth;
      } else if (c == ',' && depth == 0) {
        break;
      }
    }
    const std::string_view item = trim(body.substr(p, end - p));
    p = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == npos) return std::nullopt;
    auto value = python_literal(item.substr(eq + 1));
    if (!value) return std::nullopt;
    args[std::string(trim(item.substr(0, eq)))] = std::move(*value);
  }
  ToolCall c;
  c.name = std::string(name);
  c.arguments = args.dump();
  return c;
}

// One attempt at reading call(s) at a marker.
struct Attempt {
  enum { complete, incomplete, malformed } status = malformed;
  size_t end = npos;  // where the attempt's text ends (complete or malformed); npos: the rest of the reply
  std::vector<ToolCall> calls;
};

// The text between `open` at s[m] and the next `close`: the call's body.
Attempt between(std::string_view s, size_t m, std::string_view open, std::string_view close, bool finished) {
  Attempt a;
  const size_t body = m + open.size();
  const size_t at = s.find(close, body);
  if (at == npos) {
    a.status = finished ? Attempt::malformed : Attempt::incomplete;
    return a;
  }
  a.end = at + close.size();
  return a;
}

Attempt hermes_call(std::string_view s, size_t m, bool finished) {
  static constexpr std::string_view open = "<tool_call>", close = "</tool_call>";
  Attempt a = between(s, m, open, close, finished);
  if (a.end == npos) return a;
  const std::string_view body = s.substr(m + open.size(), a.end - close.size() - m - open.size());
  if (auto j = parse_json(trim(body))) {
    if (auto c = call_from_json(*j)) {
      a.status = Attempt::complete;
      a.calls.push_back(std::move(*c));
    }
  }
  return a;
}

// A JSON object or array opening at s[p] (after spaces): the calls it holds.
Attempt json_calls(std::string_view s, size_t p, bool finished) {
  Attempt a;
  p = s.find_first_not_of(k_ws, p);
  if (p == npos || (s[p] != '{' && s[p] != '[')) {
    a.status = p == npos && !finished ? Attempt::incomplete : Attempt::malformed;
    return a;
  }
  const size_t end = json_end(s, p);
  if (end == npos) {
    a.status = finished ? Attempt::malformed : Attempt::incomplete;
    return a;
  }
  a.end = end;
  auto j = parse_json(s.substr(p, end - p));
  if (!j) return a;
  if (j->is_object()) {
    if (auto c = call_from_json(*j)) a.calls.push_back(std::move(*c));
  } else if (j->is_array() && !j->empty()) {
    for (const json& item : *j) {
      auto c = call_from_json(item);
      if (!c) return Attempt{Attempt::malformed, end, {}};
      a.calls.push_back(std::move(*c));
    }
  }
  a.status = a.calls.empty() ? Attempt::malformed : Attempt::complete;
  return a;
}

Attempt mistral_call(std::string_view s, size_t m, bool finished) {
  static constexpr std::string_view open = "[TOOL_CALLS]", args = "[ARGS]";
  const size_t p = m + open.size();
  const size_t first = s.find_first_not_of(k_ws, p);
  if (first == npos) return Attempt{finished ? Attempt::malformed : Attempt::incomplete, npos, {}};
  if (s[first] == '[') return json_calls(s, first, finished);
  // NAME[ARGS]{...}
  const size_t at = s.find(args, p);
  if (at == npos) return Attempt{finished ? Attempt::malformed : Attempt::incomplete, npos, {}};
  const size_t b = s.find_first_not_of(k_ws, at + args.size());
  if (b == npos) return Attempt{finished ? Attempt::malformed : Attempt::incomplete, npos, {}};
  if (s[b] != '{') return Attempt{Attempt::malformed, b, {}};
  const size_t end = json_end(s, b);
  if (end == npos) return Attempt{finished ? Attempt::malformed : Attempt::incomplete, npos, {}};
  auto j = parse_json(s.substr(b, end - b));
  const std::string_view name = trim(s.substr(p, at - p));
  if (!j || !j->is_object() || name.empty()) return Attempt{Attempt::malformed, end, {}};
  return Attempt{Attempt::complete, end, {ToolCall{"", std::string(name), j->dump()}}};
}

Attempt deepseek_calls(std::string_view s, size_t m, bool finished) {
  static constexpr std::string_view calls_begin = "<｜tool▁calls▁begin｜>", calls_end = "<｜tool▁calls▁end｜>";
  static constexpr std::string_view call_begin = "<｜tool▁call▁begin｜>", call_end = "<｜tool▁call▁end｜>";
  static constexpr std::string_view sep = "<｜tool▁sep｜>";
  Attempt a;
  size_t p = s.compare(m, calls_begin.size(), calls_begin) == 0 ? m + calls_begin.size() : m;
  for (;;) {
    const size_t q = s.find_first_not_of(k_ws, p);
    if (q == npos) break;
    if (s.compare(q, calls_end.size(), calls_end) == 0) {
      p = q + calls_end.size();
      break;
    }
    if (s.compare(q, call_begin.size(), call_begin) != 0) break;
    const size_t end = s.find(call_end, q);
    if (end == npos) return Attempt{finished ? Attempt::malformed : Attempt::incomplete, npos, {}};
    const std::string_view body = s.substr(q + call_begin.size(), end - q - call_begin.size());
    const size_t at = body.find(sep);
    if (at == npos) return Attempt{Attempt::malformed, end + call_end.size(), {}};
    std::string_view name = trim(body.substr(0, at));
    std::string_view args = body.substr(at + sep.size());
    if (name == "function") {  // R1: function<sep>NAME\n```json\n{...}\n```
      const size_t nl = args.find('\n');
      name = trim(args.substr(0, nl));
      args = nl == npos ? std::string_view() : args.substr(nl + 1);
      args = trim(args);
      if (args.starts_with("```json")) args.remove_prefix(7);
      if (args.ends_with("```")) args.remove_suffix(3);
    }
    auto j = parse_json(trim(args));
    if (!j || !j->is_object() || name.empty()) return Attempt{Attempt::malformed, end + call_end.size(), {}};
    a.calls.push_back(ToolCall{"", std::string(name), j->dump()});
    p = end + call_end.size();
  }
  // Not closed by <｜tool▁calls▁end｜> yet: a further call may still come.
  if (!finished && s.find(calls_end, m) == npos) return Attempt{Attempt::incomplete, npos, {}};
  a.status = a.calls.empty() ? Attempt::malformed : Attempt::complete;
  a.end = a.calls.empty() ? npos : p;
  return a;
}

// Llama 3.x after <|python_tag|>: JSON call(s) separated by ";", or a built-in tool's Python call,
// up to the end of the reply (<|eom_id|> ends it and writes no text).
Attempt python_tag_calls(std::string_view s, size_t m, bool finished) {
  static constexpr std::string_view tag = "<|python_tag|>";
  if (!finished) return Attempt{Attempt::incomplete, npos, {}};
  const std::string_view body = trim(s.substr(m + tag.size()));
  Attempt a;
  if (!body.empty() && body.front() == '{') {
    size_t p = 0;
    while (p < body.size()) {
      Attempt one = json_calls(body, p, true);
      if (one.status != Attempt::complete) return Attempt{};
      a.calls.insert(a.calls.end(), one.calls.begin(), one.calls.end());
      p = body.find_first_not_of("; \t\r\n", one.end);
    }
  } else if (auto c = python_call(body)) {
    a.calls.push_back(std::move(*c));
  }
  a.status = a.calls.empty() ? Attempt::malformed : Attempt::complete;
  return a;
}

// Gemma: a fenced block, ```tool_code (Python-style calls, one a line) or ```json (a call object).
Attempt gemma_call(std::string_view s, size_t m, bool finished) {
  const bool code = s.compare(m, 12, "```tool_code") == 0;
  const size_t open = code ? 12 : 7;
  const size_t close = s.find("```", m + open);
  if (close == npos) return Attempt{finished ? Attempt::malformed : Attempt::incomplete, npos, {}};
  Attempt a;
  a.end = close + 3;
  const std::string_view body = trim(s.substr(m + open, close - m - open));
  if (code) {
    size_t p = 0;
    while (p < body.size()) {
      size_t nl = body.find('\n', p);
      if (nl == npos) nl = body.size();
      const std::string_view line = trim(body.substr(p, nl - p));
      p = nl + 1;
      if (line.empty()) continue;
      auto c = python_call(line);
      if (!c) return Attempt{Attempt::malformed, a.end, {}};
      a.calls.push_back(std::move(*c));
    }
  } else if (auto j = parse_json(body)) {
    if (auto c = call_from_json(*j)) a.calls.push_back(std::move(*c));
  }
  a.status = a.calls.empty() ? Attempt::malformed : Attempt::complete;
  return a;
}

struct Marker {
  size_t at = npos;  // where a call starts
  bool partial = false;
};

// The first call marker in s from p; or, while the reply grows, a possible beginning of one at its end.
Marker find_marker(std::string_view s, size_t p, std::initializer_list<std::string_view> markers, bool finished) {
  Marker best;
  for (const std::string_view mk : markers) {
    const size_t at = s.find(mk, p);
    if (at < best.at) best.at = at;
  }
  if (best.at == npos && !finished) {
    size_t held = 0;
    for (const std::string_view mk : markers) held = std::max(held, partial_suffix(s.substr(p), mk));
    if (held > 0) best = Marker{s.size() - held, true};
  }
  return best;
}

Attempt attempt_at(ToolFormat f, std::string_view s, size_t m, bool finished) {
  switch (f) {
    case ToolFormat::hermes: return hermes_call(s, m, finished);
    case ToolFormat::mistral: return mistral_call(s, m, finished);
    case ToolFormat::deepseek: return deepseek_calls(s, m, finished);
    case ToolFormat::gemma: return gemma_call(s, m, finished);
    case ToolFormat::llama3:
      if (s.compare(m, 14, "<|python_tag|>") == 0) return python_tag_calls(s, m, finished);
      return json_calls(s, m, finished);
    default: return Attempt{};
  }
}

Marker next_marker(ToolFormat f, std::string_view s, size_t p, bool finished) {
  switch (f) {
    case ToolFormat::hermes: return find_marker(s, p, {"<tool_call>"}, finished);
    case ToolFormat::mistral: return find_marker(s, p, {"[TOOL_CALLS]"}, finished);
    case ToolFormat::deepseek: return find_marker(s, p, {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"}, finished);
    case ToolFormat::gemma: return find_marker(s, p, {"```tool_code", "```json"}, finished);
    case ToolFormat::llama3: {
      // A reply that opens with "{" is a JSON call (or text, once it closes and is not one).
      const size_t first = s.find_first_not_of(k_ws, p);
      if (p == 0 && first != npos && s[first] == '{') return Marker{first, false};
      return find_marker(s, p, {"<|python_tag|>"}, finished);
    }
    default: return Marker{};
  }
}

// The calls in s[from, end), the text around them appended to `content`. Not finished: stops at a
// call not yet complete (or a marker's possible start), leaving it out of content.
void scan_calls(ToolFormat f, std::string_view s, size_t from, bool finished, std::string& content,
                std::vector<ToolCall>& calls) {
  size_t p = from;
  while (p < s.size()) {
    const Marker mk = next_marker(f, s, p, finished);
    if (mk.at == npos) {
      content.append(s.substr(p));
      return;
    }
    content.append(s.substr(p, mk.at - p));
    if (mk.partial) return;
    const Attempt a = attempt_at(f, s, mk.at, finished);
    if (a.status == Attempt::incomplete) return;
    const size_t end = a.end == npos ? s.size() : a.end;
    if (a.status == Attempt::complete) {
      calls.insert(calls.end(), a.calls.begin(), a.calls.end());
    } else {
      content.append(s.substr(mk.at, end - mk.at));  // not a call: its text, as written
    }
    p = end;
    // Llama 3.x writes further JSON calls after "; ": read as if the reply started there.
    while (f == ToolFormat::llama3 && a.status == Attempt::complete) {
      const size_t q = s.find_first_not_of("; \t\r\n", p);
      if (q == npos) {  // only separators so far: a further call may follow
        if (!finished) return;
        p = s.size();
        break;
      }
      if (s[q] != '{') break;
      const Attempt more = json_calls(s, q, finished);
      if (more.status == Attempt::incomplete) return;
      if (more.status != Attempt::complete) break;
      calls.insert(calls.end(), more.calls.begin(), more.calls.end());
      p = more.end;
    }
  }
}

// gpt-oss: harmony messages, [<|start|>assistant[ to=functions.f]]<|channel|>CHANNEL[ to=functions.f][
// <|constrain|>json]<|message|>BODY<|end|>|<|call|>.
void parse_harmony(std::string_view s, bool finished, ParsedReply& out) {
  static constexpr std::string_view channel = "<|channel|>", message = "<|message|>", start = "<|start|>";
  static constexpr std::string_view ends[] = {"<|end|>", "<|return|>", "<|call|>"};
  size_t p = 0;
  while (p < s.size()) {
    const size_t c = s.find(channel, p);
    if (c == npos) break;
    const size_t h = c + channel.size();
    const size_t msg = s.find(message, h);
    if (msg == npos) break;
    // The recipient may be written in the role part (<|start|>assistant to=functions.f) or the channel's.
    const size_t role_at = s.rfind(start, c);
    const std::string_view role = role_at != npos && role_at >= p ? s.substr(role_at, c - role_at) : std::string_view();
    const std::string_view header = s.substr(h, msg - h);
    std::string_view recipient;
    for (const std::string_view part : {header, role}) {
      if (const size_t to = part.find("to="); to != npos) {
        recipient = part.substr(to + 3);
        recipient = recipient.substr(0, recipient.find_first_of(" <"));
      }
    }
    const std::string_view name = header.substr(0, header.find(' '));
    const size_t body = msg + message.size();
    size_t end = npos, end_size = 0;
    for (const std::string_view e : ends) {
      if (const size_t at = s.find(e, body); at < end) {
        end = at;
        end_size = e.size();
      }
    }
    std::string_view text = s.substr(body, end == npos ? npos : end - body);
    if (end == npos && !finished) {
      size_t held = 0;
      for (const std::string_view e : ends) held = std::max(held, partial_suffix(text, e));
      text.remove_suffix(held);
    }
    if (!recipient.empty()) {
      // A call: complete when its body is closed (or the reply ended).
      if (end == npos && !finished) break;
      std::string_view fn = recipient;
      if (fn.starts_with("functions.")) fn.remove_prefix(10);
      auto j = parse_json(trim(text));
      if (j && j->is_object() && !fn.empty()) {
        out.tool_calls.push_back(ToolCall{"", std::string(fn), j->dump()});
      } else {
        out.content.append(text);  // not a call we can read: its text
      }
    } else if (name == "analysis") {
      if (out.has_reasoning && !text.empty()) out.reasoning += "\n\n";
      out.has_reasoning = true;
      out.reasoning.append(text);
    } else {
      out.content.append(text);
    }
    if (end == npos) break;
    p = end + end_size;
  }
}

uint64_t fnv1a(std::string_view s, uint64_t h) {
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

std::string tool_call_id(std::string_view id_seed, size_t index) {
  std::string idx = "#";
  idx += std::to_string(index);
  const uint64_t a = fnv1a(idx, fnv1a(id_seed, 0xcbf29ce484222325ULL));
  const uint64_t b = fnv1a(id_seed, fnv1a(idx, 0x84222325cbf29ce4ULL));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b & 0xffffffffULL));
  return std::string("call_") + buf;
}

ToolFormat tool_format_of(ChatTemplate::Family family) {
  switch (family) {
    case ChatTemplate::Family::chatml: return ToolFormat::hermes;
    case ChatTemplate::Family::llama3: return ToolFormat::llama3;
    case ChatTemplate::Family::mistral: return ToolFormat::mistral;
    case ChatTemplate::Family::gemma: return ToolFormat::gemma;
    case ChatTemplate::Family::deepseek: return ToolFormat::deepseek;
    case ChatTemplate::Family::harmony: return ToolFormat::harmony;
    default: return ToolFormat::none;
  }
}

std::string_view tool_format_name(ToolFormat format) {
  switch (format) {
    case ToolFormat::hermes: return "hermes";
    case ToolFormat::llama3: return "llama3";
    case ToolFormat::mistral: return "mistral";
    case ToolFormat::harmony: return "harmony";
    case ToolFormat::deepseek: return "deepseek";
    case ToolFormat::gemma: return "gemma";
    case ToolFormat::none: break;
  }
  return "none";
}

ParsedReply parse_reply(std::string_view reply, ToolFormat format, bool finished, std::string_view id_seed) {
  ParsedReply out;
  if (format == ToolFormat::harmony && is_harmony_reply(reply)) {
    parse_harmony(reply, finished, out);
  } else if (format == ToolFormat::none) {
    out.content = std::string(reply);
  } else {
    // Calls are looked for after a <think> block (kept in content, as the server shows it), never in it.
    // A reply that opens <think> is searched after its </think> only; one that does not (DeepSeek-R1's
    // prompt opens it) after a </think> that no call precedes, so that a prefix parses as the whole does.
    size_t from = 0;
    const size_t close = reply.find(k_think_close);
    if (trim(reply).starts_with(k_think_open)) {
      from = close == npos ? reply.size() : close + k_think_close.size();
    } else if (close != npos && next_marker(format, reply.substr(0, close), 0, true).at == npos) {
      from = close + k_think_close.size();
    }
    out.content = std::string(reply.substr(0, from));
    scan_calls(format, reply.substr(from), 0, finished, out.content, out.tool_calls);
  }
  for (size_t i = 0; i < out.tool_calls.size(); ++i) out.tool_calls[i].id = tool_call_id(id_seed, i);
  if (!out.tool_calls.empty()) {
    // The text beside calls, without the spaces and newlines around them.
    out.content.resize(out.content.find_last_not_of(k_ws) == npos ? 0 : out.content.find_last_not_of(k_ws) + 1);
  }
  return out;
}

ToolCallStream::Delta ToolCallStream::feed(std::string_view piece) {
  text_.append(piece);
  return advance(false);
}

ToolCallStream::Delta ToolCallStream::finish() { return advance(true); }

ToolCallStream::Delta ToolCallStream::advance(bool finished) {
  // gpt-oss: until the reply's start says whether it is written in channels, nothing.
  if (format_ == ToolFormat::harmony && !finished && (trim(text_).empty() || trim(text_) == "<")) return {};
  last_ = parse_reply(text_, format_, finished, id_seed_);
  Delta d;
  // Spaces at the end of the content wait: if a call follows, they are dropped.
  size_t n_content = last_.content.size();
  if (!finished) {
    const size_t last = last_.content.find_last_not_of(k_ws);
    n_content = last == npos ? 0 : last + 1;
  }
  if (n_content > content_sent_) {
    d.content = last_.content.substr(content_sent_, n_content - content_sent_);
    content_sent_ = n_content;
  }
  if (last_.reasoning.size() > reasoning_sent_) {
    d.reasoning = last_.reasoning.substr(reasoning_sent_);
    reasoning_sent_ = last_.reasoning.size();
  }
  for (; calls_sent_ < last_.tool_calls.size(); ++calls_sent_)
    d.calls.emplace_back(calls_sent_, last_.tool_calls[calls_sent_]);
  return d;
}

}  // namespace kvc::chat
