// Parsing and validating script-mode JSON.
#include "ui/script.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/kv/kv_format.h"

namespace kvc::ui {

namespace {

using nlohmann::json;

struct KindName {
  StepKind kind;
  const char* name;
};
constexpr KindName k_kinds[] = {
    {StepKind::wait_model, "wait_model"}, {StepKind::type, "type"},
    {StepKind::click, "click"},           {StepKind::key, "key"},
    {StepKind::wait_idle, "wait_idle"},   {StepKind::frames, "frames"},
    {StepKind::screenshot, "screenshot"}, {StepKind::assert_state, "assert"},
    {StepKind::command, "command"},       {StepKind::quit, "quit"},
    {StepKind::wait_state, "wait_state"}, {StepKind::print, "print"},
    {StepKind::sleep, "sleep"},
};

struct OpName {
  CompareOp op;
  const char* name;
};
constexpr OpName k_ops[] = {{CompareOp::eq, "=="},
                            {CompareOp::ne, "!="},
                            {CompareOp::ge, ">="},
                            {CompareOp::le, "<="},
                            {CompareOp::gt, ">"},
                            {CompareOp::lt, "<"},
                            {CompareOp::contains, "contains"}};

const char* const k_keys[] = {"ctrl+n",    "ctrl+enter", "escape",    "ctrl+f",  "ctrl+up",
                              "ctrl+down", "page_up",    "page_down", "ctrl+end"};
const char* const k_commands[] = {"restart_engine",    "set_tier_budgets",       "set_kv_format",
                                  "set_chat_settings", "export_conversation_md", "export_conversation_json"};

// Whether `s` is one of `names`; if not, `known` gets them as "a, b, c" for the error message.
template <size_t N>
bool one_of(const std::string& s, const char* const (&names)[N], std::string& known) {
  for (const char* name : names) {
    if (s == name) return true;
  }
  for (const char* name : names) known += (known.empty() ? "" : ", ") + std::string(name);
  return false;
}

Error step_error(int index, const std::string& kind, const std::string& what) {
  return make_error(ErrorCode::invalid_argument,
                    "step " + std::to_string(index) + (kind.empty() ? "" : " (" + kind + ")") + ": " + what);
}

// A required non-empty string member.
Result<std::string> need_string(const json& j, const char* key, int index, const std::string& kind) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get<std::string>().empty()) {
    return step_error(index, kind, std::string("\"") + key + "\" must be a non-empty string");
  }
  return it->get<std::string>();
}

// An optional byte count in [0, 1 TiB].
Result<int64_t> optional_bytes(const json& j, const char* key, int index, const std::string& kind) {
  auto it = j.find(key);
  if (it == j.end()) return int64_t{0};
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > (int64_t{1} << 40)) {
    return step_error(index, kind, std::string("\"") + key + "\" must be a byte count in [0, 2^40] (0: default)");
  }
  return it->get<int64_t>();
}

Result<ScriptStep> parse_step(const json& j, int index) {
  if (!j.is_object()) return step_error(index, "", "a step must be an object like {\"do\": \"click\", ...}");
  auto d = j.find("do");
  if (d == j.end() || !d->is_string()) return step_error(index, "", "missing \"do\" (what the step does)");
  const std::string kind = d->get<std::string>();
  ScriptStep s;
  s.index = index;
  bool known = false;
  for (const auto& k : k_kinds) {
    if (kind == k.name) {
      s.kind = k.kind;
      known = true;
    }
  }
  if (!known) {
    std::string names;
    for (const auto& k : k_kinds) names += std::string(names.empty() ? "" : ", ") + k.name;
    return step_error(index, kind, "unknown step; known: " + names);
  }
  if (auto t = j.find("timeout_s"); t != j.end()) {
    if (!t->is_number() || t->get<double>() <= 0)
      return step_error(index, kind, "\"timeout_s\" must be a positive number");
    s.timeout_s = t->get<double>();
  }
  switch (s.kind) {
    case StepKind::type: {
      auto w = need_string(j, "widget", index, kind);
      if (!w.ok()) return w.error();
      s.widget = *w;
      auto t = j.find("text");
      if (t == j.end() || !t->is_string()) return step_error(index, kind, "\"text\" must be a string");
      s.text = t->get<std::string>();
      break;
    }
    case StepKind::click: {
      auto w = need_string(j, "widget", index, kind);
      if (!w.ok()) return w.error();
      s.widget = *w;
      break;
    }
    case StepKind::key: {
      auto k = need_string(j, "key", index, kind);
      if (!k.ok()) return k.error();
      s.text = *k;
      if (std::string names; !one_of(s.text, k_keys, names))
        return step_error(index, kind, "unknown key \"" + s.text + "\"; known: " + names);
      break;
    }
    case StepKind::sleep: {
      auto n = j.find("seconds");
      if (n == j.end() || !n->is_number() || n->get<double>() <= 0 || n->get<double>() > 600) {
        return step_error(index, kind, "\"seconds\" must be a number in (0, 600]");
      }
      s.timeout_s = n->get<double>();
      break;
    }
    case StepKind::frames: {
      auto n = j.find("n");
      if (n == j.end() || !n->is_number_integer() || n->get<int64_t>() < 1 || n->get<int64_t>() > 100000) {
        return step_error(index, kind, "\"n\" must be an integer in [1, 100000]");
      }
      s.n_frames = n->get<int>();
      break;
    }
    case StepKind::screenshot: {
      auto n = need_string(j, "name", index, kind);
      if (!n.ok()) return n.error();
      s.name = *n;
      if (s.name.find('/') != std::string::npos || s.name.find("..") != std::string::npos) {
        return step_error(index, kind, "\"name\" must be a plain file name, got \"" + s.name + "\"");
      }
      if (auto w = j.find("window"); w != j.end()) {
        if (!w->is_string()) return step_error(index, kind, "\"window\" must be a string");
        s.window = w->get<std::string>();
      }
      break;
    }
    case StepKind::assert_state:
    case StepKind::wait_state: {
      auto st = need_string(j, "state", index, kind);
      if (!st.ok()) return st.error();
      s.state = *st;
      if (auto o = j.find("op"); o != j.end()) {
        bool found = false;
        for (const auto& op : k_ops) {
          if (o->is_string() && o->get<std::string>() == op.name) {
            s.op = op.op;
            found = true;
          }
        }
        if (!found) return step_error(index, kind, "\"op\" must be one of == != >= <= > < contains");
      }
      auto v = j.find("value");
      if (v == j.end()) return step_error(index, kind, "missing \"value\"");
      if (v->is_string()) {
        s.value_is_string = true;
        s.value_text = v->get<std::string>();
      } else if (v->is_number()) {
        s.value = v->get<double>();
      } else if (v->is_boolean()) {
        s.value = v->get<bool>() ? 1 : 0;
      } else {
        return step_error(index, kind, "\"value\" must be a number, a boolean or a string");
      }
      if (!s.value_is_string && s.op == CompareOp::contains) {
        return step_error(index, kind, "\"contains\" needs a string value");
      }
      break;
    }
    case StepKind::command: {
      auto n = need_string(j, "name", index, kind);
      if (!n.ok()) return n.error();
      s.name = *n;
      if (std::string names; !one_of(s.name, k_commands, names))
        return step_error(index, kind, "unknown command \"" + s.name + "\"; known: " + names);
      auto t0 = optional_bytes(j, "t0_bytes", index, kind);
      if (!t0.ok()) return t0.error();
      auto t1 = optional_bytes(j, "t1_bytes", index, kind);
      if (!t1.ok()) return t1.error();
      auto ctx_kv = optional_bytes(j, "ctx_kv_bytes", index, kind);
      if (!ctx_kv.ok()) return ctx_kv.error();
      auto t2 = optional_bytes(j, "t2_bytes", index, kind);
      if (!t2.ok()) return t2.error();
      s.t0_bytes = *t0;
      s.t1_bytes = *t1;
      s.t2_bytes = *t2;
      s.ctx_kv_bytes = *ctx_kv;
      if (s.name == "set_kv_format") {
        auto f = need_string(j, "format", index, kind);
        if (!f.ok()) return f.error();
        if (!kv::parse_kv_format(*f)) {
          return step_error(index, kind,
                            "\"format\" must be " + std::string(kv::k_kv_format_names) + ", got \"" + *f + "\"");
        }
        s.text = *f;
      }
      if (s.name == "set_chat_settings") {
        if (auto it = j.find("max_tokens"); it != j.end()) {
          if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1'000'000) {
            return step_error(index, kind, "\"max_tokens\" must be an integer in [1, 1000000]");
          }
          s.max_tokens = it->get<int64_t>();
        }
        if (auto it = j.find("temperature"); it != j.end()) {
          if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 2) {
            return step_error(index, kind, "\"temperature\" must be a number in [0, 2]");
          }
          s.temperature = it->get<double>();
        }
        if (auto it = j.find("reasoning_effort"); it != j.end()) {
          if (!it->is_string() || !(*it == "low" || *it == "medium" || *it == "high")) {
            return step_error(index, kind, "\"reasoning_effort\" must be \"low\", \"medium\" or \"high\"");
          }
          s.reasoning_effort = it->get<std::string>();
        }
        if (auto it = j.find("system_prompt"); it != j.end()) {
          if (!it->is_string()) return step_error(index, kind, "\"system_prompt\" must be a string");
          s.text = it->get<std::string>();
          s.value_is_string = true;  // a system prompt was given (it may be empty)
        }
      }
      break;
    }
    case StepKind::print: {
      auto st = need_string(j, "state", index, kind);
      if (!st.ok()) return st.error();
      s.state = *st;
      break;
    }
    case StepKind::wait_model:
    case StepKind::wait_idle:
    case StepKind::quit: break;
  }
  return s;
}

}  // namespace

const char* to_string(StepKind k) {
  for (const auto& e : k_kinds) {
    if (e.kind == k) return e.name;
  }
  return "?";
}

const char* to_string(CompareOp op) {
  for (const auto& e : k_ops) {
    if (e.op == op) return e.name;
  }
  return "?";
}

Result<Script> parse_script(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return make_error(ErrorCode::invalid_argument, "the script is not valid JSON");
  if (!j.is_object() || !j.contains("steps") || !j["steps"].is_array()) {
    return make_error(ErrorCode::invalid_argument, "the script must be an object with a \"steps\" array");
  }
  Script script;
  int index = 0;
  for (const auto& step : j["steps"]) {
    auto s = parse_step(step, ++index);
    if (!s.ok()) return s.error();
    script.steps.push_back(std::move(*s));
  }
  if (script.steps.empty()) return make_error(ErrorCode::invalid_argument, "the script has no steps");
  return script;
}

Result<Script> load_script(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) return make_error(ErrorCode::io, "cannot open script " + path.string());
  std::stringstream ss;
  ss << f.rdbuf();
  auto s = parse_script(ss.str());
  if (!s.ok()) return make_error(s.error().code, path.string() + ": " + s.error().message);
  return s;
}

bool compare(double a, CompareOp op, double e) {
  switch (op) {
    case CompareOp::eq: return a == e;
    case CompareOp::ne: return a != e;
    case CompareOp::ge: return a >= e;
    case CompareOp::le: return a <= e;
    case CompareOp::gt: return a > e;
    case CompareOp::lt: return a < e;
    case CompareOp::contains: return false;
  }
  return false;
}

bool compare(const std::string& a, CompareOp op, const std::string& e) {
  switch (op) {
    case CompareOp::eq: return a == e;
    case CompareOp::ne: return a != e;
    case CompareOp::contains: return a.find(e) != std::string::npos;
    default: return false;
  }
}

}  // namespace kvc::ui
