// The script runner, the app state asserts read, and PNG screenshots.
#include "ui/script_runner.h"

#include <GL/gl.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/chat/context_window.h"
#include "ui/memory_draw.h"
#include "ui/memory_layout.h"

namespace kvc::ui {

std::map<std::string, StateValue> script_state(const AppSnapshot& s) {
  std::map<std::string, StateValue> m;
  double n_user = 0, n_assistant = 0;
  for (const auto& msg : s.chat.messages) {
    n_user += msg.role == Role::user ? 1 : 0;
    n_assistant += msg.role == Role::assistant ? 1 : 0;
  }
  const MessageView* last = nullptr;
  for (const auto& msg : s.chat.messages) {
    if (msg.role == Role::assistant) last = &msg;
  }
  m["n_conversations"] = static_cast<double>(s.conversations.size());
  m["n_messages"] = static_cast<double>(s.chat.messages.size());
  m["n_user_messages"] = n_user;
  m["n_assistant_messages"] = n_assistant;
  m["last_reply_chars"] = last ? static_cast<double>(last->text.size()) : 0.0;
  m["last_reply_tokens"] = last && last->stats.valid ? static_cast<double>(last->stats.n_tokens) : 0.0;
  m["last_prompt_reused"] = last && last->stats.valid ? static_cast<double>(last->stats.n_prompt_reused) : 0.0;
  m["last_prompt_recomputed"] = last && last->stats.valid ? static_cast<double>(last->stats.n_prompt_recomputed) : 0.0;
  for (int t = 0; t < 3; ++t) {
    m["last_prompt_from_t" + std::to_string(t)] =
        last && last->stats.valid ? static_cast<double>(last->stats.n_from_tier[t]) : 0.0;
  }
  m["last_reply"] = last ? last->text : std::string();
  m["last_reply_interrupted"] = last && !last->interrupted.empty() ? 1.0 : 0.0;
  m["tier_warning"] = s.memory.tier_warning;
  m["n_turns"] = static_cast<double>(s.memory.turns.size());
  m["n_stream_tokens"] = static_cast<double>(s.chat.n_stream_tokens);
  m["last_prompt_tokens"] = last && last->stats.valid ? static_cast<double>(last->stats.n_prompt) : 0.0;
  // The last answer's speed, as kvchat-cli generate counts it: tokens after the first over the
  // time after the first; and its time to first token.
  m["last_tokens_per_s"] = last && last->stats.valid ? decode_tokens_per_s(last->stats) : 0.0;
  m["last_ttft_ms"] = last && last->stats.valid ? last->stats.ttft_ms : 0.0;
  // The context overflow policy's cut: messages outside the model's view, and the chat's marker.
  m["n_outside_context"] = static_cast<double>(s.chat.n_outside_context);
  m["context_marker"] = chat::outside_context_note(s.chat.n_outside_context);
  m["model_n_ctx"] = static_cast<double>(s.model.n_ctx);
  m["model_uses_reasoning_effort"] = s.model.uses_reasoning_effort ? 1.0 : 0.0;
  m["reasoning_effort"] = s.chat.reasoning_effort;
  // The Memory window: what its block map draws (cells per tier group, shared cells), the tree, timelines, exports.
  const BlockMapLayout map = layout_block_map(s.memory.kv.blocks, 300.0f, 9.0f, 2.0f);
  double n_shared_cells = 0;
  for (const kv::KvBlockView& b : s.memory.kv.blocks) n_shared_cells += b.is_shared() ? 1 : 0;
  for (int t = 0; t < 3; ++t) {
    m["kv_map_t" + std::to_string(t) + "_cells"] = static_cast<double>(map.groups[static_cast<size_t>(t)].cells.size());
  }
  m["kv_map_shared_cells"] = n_shared_cells;
  // Each KV group (docs/ARCHITECTURE.md §3.9; one for most models, group 0 the global layers):
  // kv_group<g>_ layers, window, t0/t1/t2_blocks (where its blocks live; t2: those with a disk
  // copy, as its block map's rows), t0_tokens, in_window_blocks and behind_window(_t0)_blocks
  // (against each conversation's window), tokens (the furthest position its blocks reach),
  // t0_of_history / t2_of_history (the part of those positions on T0 / with a disk copy) and
  // tree_nodes (the nodes of its own prefix index, as the Prefix tree tab draws them).
  const std::vector<const KvPicture*> groups = kv_groups(s.memory.kv);
  m["kv_n_groups"] = static_cast<double>(groups.size());
  for (const KvPicture* g : groups) {
    const std::string k = "kv_group" + std::to_string(g->group) + "_";
    const WindowCounts w = window_counts(g->blocks, g->window);
    m[k + "layers"] = static_cast<double>(g->n_layers);
    m[k + "window"] = static_cast<double>(g->window);
    m[k + "t0_blocks"] = static_cast<double>(g->n_blocks_on_tier[0]);
    m[k + "t1_blocks"] = static_cast<double>(g->n_blocks_on_tier[1]);
    m[k + "t2_blocks"] = static_cast<double>(g->n_blocks_on_disk);
    m[k + "t0_tokens"] = static_cast<double>(w.n_t0_tokens);
    m[k + "in_window_blocks"] = static_cast<double>(w.n_in_window);
    m[k + "behind_window_blocks"] = static_cast<double>(w.n_behind);
    m[k + "behind_window_t0_blocks"] = static_cast<double>(w.n_behind_on_t0);
    m[k + "tokens"] = static_cast<double>(w.max_end);
    // Of the positions the group covers, the part whose blocks are on T0 / have a disk copy.
    const double covered = static_cast<double>(std::max<int64_t>(1, w.max_end));
    m[k + "t0_of_history"] = static_cast<double>(w.n_t0_tokens) / covered;
    m[k + "t2_of_history"] =
        static_cast<double>(g->n_blocks_on_disk) * static_cast<double>(s.memory.kv.block_tokens) / covered;
    m[k + "tree_nodes"] = static_cast<double>(g->nodes.size());  // its Prefix tree's nodes
  }
  m["kv_tree_nodes"] = static_cast<double>(s.memory.kv.nodes.size());  // group 0's
  m["kv_timeline_turns"] = static_cast<double>(s.memory.timelines.turns.size());
  double last_cached = 0;  // the timeline's newest request: its prompt tokens found in the cache
  if (!s.memory.timelines.turns.empty()) {
    for (int64_t n : s.memory.timelines.turns.back().n_cached) last_cached += static_cast<double>(n);
  }
  m["kv_timeline_last_cached"] = last_cached;
  m["kv_export_path"] = s.memory.export_path;
  m["kv_export_error"] = s.memory.export_error;
  m["generating"] = s.chat.generating ? 1.0 : 0.0;
  m["model_ready"] = s.model.status == ModelStatus::ready ? 1.0 : 0.0;
  m["model_is_demo"] = s.model.is_demo ? 1.0 : 0.0;
  const char* status = "none";
  switch (s.model.status) {
    case ModelStatus::none: status = "none"; break;
    case ModelStatus::building_demo: status = "building_demo"; break;
    case ModelStatus::loading: status = "loading"; break;
    case ModelStatus::ready: status = "ready"; break;
    case ModelStatus::failed: status = "failed"; break;
  }
  m["model_status"] = std::string(status);
  m["model_name"] = s.model.name;
  m["model_path"] = s.model.path;
  m["model_chat_template"] = s.model.chat_template;
  m["chat_title"] = s.chat.title;
  m["error"] = s.error;
  m["storage_notice"] = s.storage_notice;
  const char* const used_keys[] = {"t0_used_bytes", "t1_used_bytes", "t2_used_bytes"};
  for (const char* key : used_keys) m[key] = 0.0;
  for (const auto& tier : s.memory.tiers) {
    // Tier names start with their tier: "T0 compute", "T1 host RAM", "T2 disk".
    if (tier.name.size() >= 2 && tier.name[0] == 'T' && tier.name[1] >= '0' && tier.name[1] <= '2') {
      m[used_keys[tier.name[1] - '0']] = static_cast<double>(tier.used_bytes);
    }
  }
  m["n_restarts"] = static_cast<double>(s.engine.n_restarts);
  m["kv_format"] = std::string(kv::kv_format_name(s.engine.kv_format));
  m["kv_bytes_per_token"] = s.memory.kv_bytes_per_token;
  m["t0_default_bytes"] = static_cast<double>(s.engine.defaults.t0_bytes);
  m["t1_default_bytes"] = static_cast<double>(s.engine.defaults.t1_bytes);
  m["t2_default_bytes"] = static_cast<double>(s.engine.defaults.t2_bytes);
  m["mem_available_bytes"] = static_cast<double>(s.engine.mem_available_bytes);
  m["disk_free_bytes"] = static_cast<double>(s.engine.disk_free_bytes);
  m["fit_warning"] = s.engine.fit_warning;
  const ServeState& sv = s.engine.serve;
  m["serve_wanted"] = sv.wanted ? 1.0 : 0.0;
  m["serve_on"] = sv.on ? 1.0 : 0.0;
  m["serve_port"] = static_cast<double>(sv.port);
  m["serve_url"] = sv.url;
  m["serve_error"] = sv.error;
  m["serve_requests"] = static_cast<double>(sv.n_requests);
  m["serve_in_flight"] = static_cast<double>(sv.n_in_flight);
  m["serve_last_prompt_tokens"] = static_cast<double>(sv.last_prompt_tokens);
  m["serve_last_cached_tokens"] = static_cast<double>(sv.last_cached_tokens);
  m["serve_last_completion_tokens"] = static_cast<double>(sv.last_completion_tokens);
  m["download_status"] = std::string(to_string(s.download.status));
  m["download_path"] = s.download.path;
  m["download_error"] = s.download.error;
  m["n_downloads"] = static_cast<double>(s.download.n_completed);
  m["conversation_export_path"] = s.conversation_export_path;
  double n_branch_points = 0;
  for (const auto& msg : s.chat.messages) n_branch_points += msg.n_siblings > 1 ? 1 : 0;
  m["n_branch_points"] = n_branch_points;
  // A remote source: the Remote tab's listing, the answer cut off, and what the server reports.
  m["last_interrupted"] = last ? last->interrupted : std::string();
  m["last_stop_reason"] = last && last->stats.valid ? last->stats.stop_reason : std::string();
  m["model_is_remote"] = s.model.is_remote ? 1.0 : 0.0;
  m["remote_n_models"] = static_cast<double>(s.remote.models.size());
  m["remote_models"] = [&] {
    std::string all;
    for (const auto& id : s.remote.models) all += (all.empty() ? "" : ",") + id;
    return all;
  }();
  m["remote_list_error"] = s.remote.list_error;
  m["remote_n_saved"] = static_cast<double>(s.remote.saved.size());
  const RemoteCacheView& rc = s.memory.remote;
  m["remote_active"] = rc.active ? 1.0 : 0.0;
  m["remote_engine"] = rc.engine;
  m["remote_metrics_error"] = rc.metrics_error;
  m["remote_n_metrics_reads"] = static_cast<double>(rc.n_metrics_reads);
  m["remote_has_cache_data"] = rc.has_cache_data() ? 1.0 : 0.0;
  m["remote_summary"] = remote_cache_summary(rc);
  m["remote_kv_usage"] = rc.kv_usage;
  m["remote_prefix_hit_rate"] = rc.prefix_hit_rate;
  m["remote_prefix_hits"] = rc.prefix_hits;
  m["remote_prefix_queries"] = rc.prefix_queries;
  m["remote_t0_used_bytes"] = rc.tier_used_bytes[0];
  m["remote_cached_tokens_total"] = rc.cached_tokens_total;
  m["remote_last_prompt_tokens"] = static_cast<double>(rc.last_prompt_tokens);
  m["remote_last_cached_tokens"] = static_cast<double>(rc.last_cached_tokens);
  m["remote_n_answers_with_cached"] = static_cast<double>(rc.n_answers_with_cached);
  return m;
}

Status write_screenshot(const std::filesystem::path& file, int fb_w, int fb_h, int x, int y, int w, int h) {
  x = std::clamp(x, 0, fb_w);
  y = std::clamp(y, 0, fb_h);
  w = std::clamp(w, 0, fb_w - x);
  h = std::clamp(h, 0, fb_h - y);
  if (w == 0 || h == 0) return make_error(ErrorCode::invalid_argument, "the screenshot region is empty");
  std::vector<unsigned char> pixels(static_cast<size_t>(w) * static_cast<size_t>(h) *
                                    3);  // (h, w, rgb), bottom row first
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(x, fb_h - y - h, w, h, GL_RGB, GL_UNSIGNED_BYTE, pixels.data());
  // GL's rows run bottom-up; PNG's top-down.
  const size_t stride = static_cast<size_t>(w) * 3;
  std::vector<unsigned char> flipped(pixels.size());
  for (int r = 0; r < h; ++r) {
    std::copy_n(pixels.data() + static_cast<size_t>(h - 1 - r) * stride, stride,
                flipped.data() + static_cast<size_t>(r) * stride);
  }
  if (!stbi_write_png(file.c_str(), w, h, 3, flipped.data(), static_cast<int>(stride))) {
    return make_error(ErrorCode::io, "cannot write " + file.string());
  }
  return {};
}

// Empty when the step's comparison holds; else why not. Views' facts (ScriptHooks::set_fact)
// are states too.
namespace {

std::map<std::string, StateValue> all_state(const AppSnapshot& snap, const ScriptHooks& hooks) {
  auto state = script_state(snap);
  for (const auto& [k, v] : hooks.number_facts()) state[k] = v;
  for (const auto& [k, v] : hooks.string_facts()) state[k] = v;
  return state;
}

std::string known_names(const std::map<std::string, StateValue>& state) {
  std::string names;
  for (const auto& [k, v] : state) names += (names.empty() ? "" : ", ") + k;
  return names;
}

std::string check_state(const ScriptStep& s, const AppSnapshot& snap, const ScriptHooks& hooks) {
  auto state = all_state(snap, hooks);
  // "window.TITLE.x" / .y / .w / .h: where a window is on screen, in points.
  if (s.state.rfind("window.", 0) == 0 && s.state.size() > 9) {
    const std::string title = s.state.substr(7, s.state.size() - 9);
    if (const auto r = hooks.window_rect(title)) {
      const char c = s.state.back();
      state[s.state] = static_cast<double>(c == 'x'   ? r->min.x
                                           : c == 'y' ? r->min.y
                                           : c == 'w' ? r->max.x - r->min.x
                                                      : r->max.y - r->min.y);
    }
  }
  auto it = state.find(s.state);
  if (it == state.end()) return "unknown state \"" + s.state + "\"; known: " + known_names(state);
  if (const double* d = std::get_if<double>(&it->second)) {
    if (s.value_is_string) return "\"" + s.state + "\" is a number, the script compares it to a string";
    if (compare(*d, s.op, s.value)) return {};
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s is %g, expected %s %g", s.state.c_str(), *d, to_string(s.op), s.value);
    return buf;
  }
  const std::string& str = std::get<std::string>(it->second);
  if (!s.value_is_string) return "\"" + s.state + "\" is a string, the script compares it to a number";
  if (compare(str, s.op, s.value_text)) return {};
  return s.state + " is \"" + str.substr(0, 200) + "\", expected " + to_string(s.op) + " \"" + s.value_text + "\"";
}

}  // namespace

ScriptRunner::ScriptRunner(Script script, std::filesystem::path screenshot_dir)
    : script_(std::move(script)), dir_(std::move(screenshot_dir)) {}

void ScriptRunner::fail(const std::string& why) {
  finished_ = true;
  exit_code_ = 1;
  message_ = "step " + std::to_string(step().index) + " (" + to_string(step().kind) + ") failed: " + why;
}

void ScriptRunner::advance() {
  ++current_;
  step_start_s_ = -1;  // the next before_frame starts the step's clock
  frames_in_step_ = 0;
  requested_ = false;
  if (current_ >= script_.steps.size()) {
    finished_ = true;
    message_ = "script passed: " + std::to_string(script_.steps.size()) + " steps";
  }
}

void ScriptRunner::before_frame(const AppSnapshot& snap, AppCommands& cmd, ScriptHooks& hooks, double now_s) {
  if (finished_ || screenshot_due_) return;
  if (step_start_s_ < 0) step_start_s_ = now_s;
  ++frames_in_step_;
  const ScriptStep& s = step();
  const double elapsed = now_s - step_start_s_;
  const bool timed_out = elapsed > s.timeout_s;
  switch (s.kind) {
    case StepKind::wait_model:
      if (snap.model.status == ModelStatus::ready) return advance();
      if (snap.model.status == ModelStatus::failed) return fail("the model failed to load: " + snap.model.error);
      if (timed_out) return fail("no model after " + std::to_string(s.timeout_s) + " s");
      return;
    case StepKind::wait_idle:
      // Two frames first, so a command posted by the previous step's click is counted as busy.
      if (frames_in_step_ > 2 && !cmd.busy() && !snap.chat.generating) return advance();
      if (timed_out) return fail("still busy after " + std::to_string(s.timeout_s) + " s");
      return;
    case StepKind::type:
    case StepKind::click:
      if (!requested_) {
        if (!hooks.seen_last_frame(s.widget)) {
          if (timed_out) return fail("no widget \"" + s.widget + "\" on screen; visible: " + hooks.seen_list());
          return;
        }
        if (s.kind == StepKind::type) hooks.set_text(s.widget, s.text);
        if (s.kind == StepKind::click) hooks.request_click(s.widget);
        requested_ = true;
        return;
      }
      if (!hooks.pending(s.widget)) return advance();
      if (timed_out) return fail("widget \"" + s.widget + "\" did not take the input");
      return;
    case StepKind::key:
      if (!requested_) {
        hooks.request_key(s.text);
        requested_ = true;
        return;
      }
      if (!hooks.key_pending(s.text)) return advance();
      if (timed_out) return fail("key " + s.text + " was not handled");
      return;
    case StepKind::frames:
      if (frames_in_step_ > s.n_frames) return advance();
      return;
    case StepKind::sleep:
      if (timed_out) return advance();
      return;
    case StepKind::screenshot:
      if (!s.window.empty() && !hooks.window_rect(s.window)) return fail("no window \"" + s.window + "\"");
      screenshot_due_ = true;
      return;
    case StepKind::assert_state:
    case StepKind::wait_state: {
      const std::string why = check_state(s, snap, hooks);
      if (why.empty()) return advance();
      // wait_state waits for a view's fact to appear too (nothing drawn yet), not for a type to change.
      if (s.kind == StepKind::assert_state || why.find(" is a number, ") != std::string::npos ||
          why.find(" is a string, ") != std::string::npos) {
        return fail(why);
      }
      if (timed_out) return fail("after " + std::to_string(s.timeout_s) + " s: " + why);
      return;
    }
    case StepKind::command:
      if (s.name == "restart_engine") cmd.restart_engine();
      if (s.name == "set_kv_format") {
        if (const auto f = kv::parse_kv_format(s.text)) cmd.set_kv_format(*f);
      }
      if (s.name == "set_tier_budgets") {
        cmd.set_tier_budgets(KvBudget{s.t0_bytes, s.t1_bytes, s.t2_bytes, s.ctx_kv_bytes});
      }
      if (s.name == "set_chat_settings") {
        sampling::GenerateOptions v = snap.chat.generation;
        if (s.max_tokens > 0) v.max_tokens = s.max_tokens;
        if (s.temperature >= 0) v.sampling.temperature = static_cast<float>(s.temperature);
        cmd.update_settings(s.value_is_string ? s.text : snap.chat.system_prompt, v);
        if (!s.reasoning_effort.empty()) cmd.set_reasoning_effort(s.reasoning_effort);
      }
      // The open conversation, as its menu's Export items do.
      if (s.name == "export_conversation_md") cmd.export_conversation(snap.chat.conversation_id, true);
      if (s.name == "export_conversation_json") cmd.export_conversation(snap.chat.conversation_id, false);
      return advance();
    case StepKind::print: {
      const auto state = all_state(snap, hooks);
      const auto it = state.find(s.state);
      if (it == state.end()) return fail("unknown state \"" + s.state + "\"; known: " + known_names(state));
      if (const double* d = std::get_if<double>(&it->second)) {
        std::printf("kvchat: state %s = %.6g\n", s.state.c_str(), *d);
      } else {
        std::printf("kvchat: state %s = \"%s\"\n", s.state.c_str(), std::get<std::string>(it->second).c_str());
      }
      std::fflush(stdout);
      return advance();
    }
    case StepKind::quit:
      finished_ = true;
      message_ = "script passed: quit at step " + std::to_string(s.index);
      return;
  }
}

void ScriptRunner::after_render(const ScriptHooks& hooks, int fb_w, int fb_h, float fb_scale) {
  if (!screenshot_due_) return;
  screenshot_due_ = false;
  const ScriptStep& s = step();
  int x = 0, y = 0, w = fb_w, h = fb_h;
  if (!s.window.empty()) {
    const auto r = hooks.window_rect(s.window);
    if (!r) return fail("no window \"" + s.window + "\"");
    x = static_cast<int>(r->min.x * fb_scale);
    y = static_cast<int>(r->min.y * fb_scale);
    w = static_cast<int>((r->max.x - r->min.x) * fb_scale);
    h = static_cast<int>((r->max.y - r->min.y) * fb_scale);
  }
  const auto file = dir_ / (s.name + ".png");
  if (auto st = write_screenshot(file, fb_w, fb_h, x, y, w, h); !st.ok()) return fail(st.error().message);
  std::fprintf(stderr, "kvchat: screenshot %s (%dx%d)\n", file.c_str(), w, h);
  advance();
}

}  // namespace kvc::ui
