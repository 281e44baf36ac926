// Script mode's scripts: JSON steps that drive the real app (type, click, wait, screenshot, assert).
//
//   {"steps": [
//     {"do": "wait_model", "timeout_s": 120},
//     {"do": "type", "widget": "chat.input", "text": "Hello"},
//     {"do": "click", "widget": "chat.send"},
//     {"do": "wait_idle", "timeout_s": 60},
//     {"do": "frames", "n": 5},
//     {"do": "screenshot", "name": "chat", "window": "Chat"},
//     {"do": "assert", "state": "n_messages", "op": ">=", "value": 2},
//     {"do": "wait_state", "state": "md_tables", "op": ">=", "value": 1, "timeout_s": 30},
//     {"do": "command", "name": "set_tier_budgets", "t0_bytes": 163840, "t1_bytes": 81920, "t2_bytes": 0,
//     "ctx_kv_bytes": 65536},
//     {"do": "command", "name": "restart_engine"},
//     {"do": "command", "name": "set_kv_format", "format": "int8"},   (as the Engine window's KV format)
//     {"do": "click", "widget": "menu.engine"},            (opens the Engine window: engine.serve, engine.serve_port)
//     {"do": "command", "name": "set_chat_settings", "max_tokens": 48, "temperature": 0, "system_prompt": "..."},
//                                          (the open conversation's; each field optional)
//     {"do": "print", "state": "last_tokens_per_s"},   (writes "kvchat: state NAME = VALUE" to stdout)
//     {"do": "sleep", "seconds": 2},   (frames go on; a process outside the app looks at it meanwhile)
//     {"do": "quit"}
//   ]}
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace kvc::ui {

// wait_state: an assert that waits (up to timeout_s) for its comparison to hold.
enum class StepKind {
  wait_model,
  type,
  click,
  key,
  wait_idle,
  frames,
  screenshot,
  assert_state,
  command,
  quit,
  wait_state,
  print,
  sleep
};
const char* to_string(StepKind k);

enum class CompareOp { eq, ne, ge, le, gt, lt, contains };

// Invariant (parse_script): the fields a kind needs are set; timeout_s > 0; n_frames >= 1.
struct ScriptStep {
  int index = 0;  // 1-based, for messages
  StepKind kind = StepKind::frames;
  std::string widget;  // type, click
  std::string text;    // type; key: "ctrl+n", "ctrl+enter", "escape", "ctrl+f", "ctrl+up", "ctrl+down",
                       // "page_up", "page_down", "ctrl+end"
  std::string name;    // screenshot file name (without .png)
  std::string window;  // screenshot: crop to this window; empty: the whole frame
  std::string state;   // assert, wait_state, print: which app state (or view fact)
  CompareOp op = CompareOp::eq;
  bool value_is_string = false;
  double value = 0;
  std::string value_text;
  double timeout_s = 30;  // wait_model, wait_idle, and how long a widget may take to appear; sleep: its length
  int n_frames = 1;       // frames
  int64_t t0_bytes = 0;   // command set_tier_budgets (0: default)
  int64_t t1_bytes = 0;
  int64_t t2_bytes = 0;
  int64_t ctx_kv_bytes = 0;  // set_tier_budgets: the context's KV budget (0: default)
  int64_t max_tokens = 0;    // command set_chat_settings (0: unchanged; its system_prompt: text, when value_is_string)
  double temperature = -1;   // set_chat_settings (< 0: unchanged; 0: greedy)
  std::string reasoning_effort;  // set_chat_settings: low, medium or high ("": unchanged)
};

struct Script {
  std::vector<ScriptStep> steps;
};

// Errors name the step: "step 3 (click): \"widget\" must be a non-empty string".
Result<Script> parse_script(std::string_view json_text);
Result<Script> load_script(const std::filesystem::path& path);

// Applies op to numbers; for strings only eq, ne and contains are meaningful (others false).
bool compare(double actual, CompareOp op, double expected);
bool compare(const std::string& actual, CompareOp op, const std::string& expected);
const char* to_string(CompareOp op);

}  // namespace kvc::ui
