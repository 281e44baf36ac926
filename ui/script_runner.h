// Script mode: runs a Script against the live app, one step at a time, frame by frame.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <variant>

#include "ui/app_state.h"
#include "ui/script.h"
#include "ui/widgets.h"

namespace kvc::ui {

// The app state that asserts can name: numbers and strings derived from a snapshot.
//   n_conversations, n_messages, n_user_messages, n_assistant_messages, last_reply_chars,
//   last_reply_tokens, last_prompt_reused, last_prompt_from_t0/t1/t2, tier_warning, n_turns, n_stream_tokens,
//   generating, model_ready, model_is_demo, model_status, model_name, model_chat_template, chat_title, last_reply,
//   error, t0_used_bytes, t1_used_bytes, t2_used_bytes (0 for a tier the engine does not report), n_restarts,
//   n_branch_points (messages on the active branch that have other versions), last_prompt_tokens,
//   last_tokens_per_s and last_ttft_ms (the last answer's decode speed, counted as kvchat-cli
//   generate counts it, and its time to first token; 0 before an answer of this run),
//   frame_ms_p50/p99/max and frame_ms_stream_p50/p99/max (the main loop's work per frame over
//   its last frames, all and while an answer streamed; facts main.cpp sets),
//   n_outside_context and context_marker (the overflow policy's cut: messages outside the model's
//   context, and the chat's marker text, "" for none), model_n_ctx,
//   and the facts views report through ScriptHooks::set_fact (the chat view's md_*: what the
//   last answer's Markdown rendered as, see chat_markdown.h).
using StateValue = std::variant<double, std::string>;
std::map<std::string, StateValue> script_state(const AppSnapshot& s);

// Writes the framebuffer region [x, x + w) x [y, y + h) (pixels, origin top-left) as a PNG;
// reads the current GL read buffer (call after rendering, before swapping).
Status write_screenshot(const std::filesystem::path& file, int fb_width, int fb_height, int x, int y, int w, int h);

class ScriptRunner {
 public:
  ScriptRunner(Script script, std::filesystem::path screenshot_dir);

  // Once per frame before the views draw: advances waits and asserts, queues typing and clicks.
  void before_frame(const AppSnapshot& snap, AppCommands& cmd, ScriptHooks& hooks, double now_s);
  // Once per frame after rendering: takes a pending screenshot. fb_scale: framebuffer pixels per point.
  void after_render(const ScriptHooks& hooks, int fb_width, int fb_height, float fb_scale);

  bool finished() const { return finished_; }
  int exit_code() const { return exit_code_; }
  const std::string& message() const { return message_; }

 private:
  void advance();
  void fail(const std::string& why);
  const ScriptStep& step() const { return script_.steps[current_]; }

  Script script_;
  std::filesystem::path dir_;
  size_t current_ = 0;
  double step_start_s_ = -1;  // when the current step began
  int frames_in_step_ = 0;
  bool requested_ = false;  // type / click / key: the request has been handed to the hooks
  bool screenshot_due_ = false;
  bool finished_ = false;
  int exit_code_ = 0;
  std::string message_;
};

}  // namespace kvc::ui
