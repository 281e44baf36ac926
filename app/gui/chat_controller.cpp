// The chat controller's worker: model loading, conversations, turns and snapshots.
#include "app/gui/chat_controller.h"
#include "app/gui/replay_turn_runner.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include "app/common/chat_turn.h"
#include "app/common/demo_model.h"
#include "app/gui/app_settings.h"
#include "core/chat/reasoning.h"
#include "core/model/context_budget.h"
#include "core/util/clock.h"
#include "core/util/machine_budget.h"
#include "core/util/thread_name.h"
#include "core/util/utf8.h"
#include "storage/data_dir.h"
#include "storage/data_dir_lock.h"

namespace kvc::app {

namespace {

constexpr const char* k_new_title = "New chat";
constexpr const char* k_welcome_title = "Welcome to kvchat";
constexpr int64_t k_publish_interval_us = 30'000;  // streamed text reaches the UI at ~30 Hz
constexpr int64_t k_memory_interval_us = 250'000;  // the memory picture, while text streams
constexpr int64_t k_flush_interval_us = 250'000;   // and the disk at 4 Hz
constexpr int64_t k_unsaved_retry_us = 2'000'000;  // an answer's end the disk refused: tried again when idle

ui::Role to_ui(storage::Role r) {
  switch (r) {
    case storage::Role::system: return ui::Role::system;
    case storage::Role::user: return ui::Role::user;
    case storage::Role::assistant: return ui::Role::assistant;
  }
  return ui::Role::user;
}

// What a new conversation starts with: GenerateOptions' defaults (the CLI's and the server's).
storage::ConversationSettings default_settings(const ui::ModelState& m) {
  storage::ConversationSettings s;
  s.model_path = m.path;
  s.model_name = m.name;
  return s;
}

std::string title_from(const std::string& text) {
  std::string t(utf8_prefix(text, 48));  // never a UTF-8 sequence cut in half
  for (char& c : t) c = (c == '\n' || c == '\t') ? ' ' : c;
  if (t.size() < text.size()) t += "...";
  return t.empty() ? k_new_title : t;
}

}  // namespace

ChatController::ChatController(Options options)
    : options_(std::move(options)), snap_(std::make_shared<ui::AppSnapshot>()), worker_([this] { worker_loop(); }) {
  post([this] { start(); });
}

ChatController::~ChatController() {
  cancel_ = true;
  download_cancel_ = true;
  if (download_thread_.joinable()) download_thread_.join();
  {
    std::lock_guard lock(q_mu_);
    quit_ = true;
  }
  q_cv_.notify_all();
  worker_.join();
  // The worker is gone: an answer's end the disk refused gets a last try.
  if (store_ && !unsaved_.empty()) write_unsaved();
}

std::shared_ptr<const ui::AppSnapshot> ChatController::snapshot() const {
  std::lock_guard lock(snap_mu_);
  return snap_;
}

void ChatController::post(std::function<void()> task) {
  ++n_busy_;
  {
    std::lock_guard lock(q_mu_);
    if (holding_) {
      held_.push_back(std::move(task));  // release_commands() wakes the worker for it
      return;
    }
    queue_.push_back(std::move(task));
  }
  q_cv_.notify_one();
}

void ChatController::hold_commands() {
  std::lock_guard lock(q_mu_);
  holding_ = true;
}

void ChatController::release_commands() {
  {
    std::lock_guard lock(q_mu_);
    holding_ = false;
    if (held_.empty()) return;
    for (auto& task : held_) queue_.push_back(std::move(task));
    held_.clear();
  }
  q_cv_.notify_one();
}

void ChatController::worker_loop() {
  set_thread_name("kvc-worker");
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(q_mu_);
      // Idle, the engine may still change what the memory view shows (a prefetch finishing):
      // look a few times a second.
      // A download's progress wakes it too.
      const bool woke = q_cv_.wait_for(lock, std::chrono::milliseconds(150),
                                       [&] { return quit_ || !queue_.empty() || dl_dirty_.load(); });
      if (quit_) return;
      if (!woke || queue_.empty()) {
        lock.unlock();
        if (!unsaved_.empty() && now_us() - last_unsaved_try_us_ >= k_unsaved_retry_us) {
          if (write_unsaved()) reload_chat();  // the chat now shows what is on disk
          publish(true);
        }
        if (dl_dirty_.load() || (runner_ && runner_->memory_version() != shown_memory_version_) ||
            (serving_ && serving_->version() != shown_serve_version_)) {
          publish(true);
        }
        continue;
      }
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
    publish(true);
    --n_busy_;
    if (options_.wake_ui) options_.wake_ui();
  }
}

void ChatController::publish(bool force) {
  const int64_t t = now_us();
  if (!force && t - last_publish_us_ < k_publish_interval_us) return;
  last_publish_us_ = t;
  ++state_.version;
  {
    std::lock_guard lock(dl_mu_);
    dl_dirty_ = false;
    state_.download = dl_;
  }
  // Streamed text publishes at ~30 Hz; the memory picture (a copy of every block) at most every
  // k_memory_interval_us of it when the engine described the cache anew, and on every forced
  // publish (a task's end, the engine's news).
  if (runner_ && (force || (t - last_memory_fill_us_ >= k_memory_interval_us &&
                            runner_->memory_version() != shown_memory_version_))) {
    last_memory_fill_us_ = t;
    shown_memory_version_ = runner_->memory_version();
    runner_->fill_memory(state_.memory);
  }
  ui::ServeState& sv = state_.engine.serve;
  if (serving_) {
    ui::ServeState c = serving_->counters();
    c.wanted = sv.wanted;
    c.error = sv.error;
    sv = std::move(c);
    shown_serve_version_ = serving_->version();
  } else {
    sv.on = false;
    sv.url.clear();
    sv.n_in_flight = 0;
    sv.port = serve_port_;
  }
  auto next = std::make_shared<const ui::AppSnapshot>(state_);
  std::lock_guard lock(snap_mu_);
  snap_ = std::move(next);
}

Error ChatController::history_error(const Error& e) {
  return make_error(e.code, "the conversation's history cannot be read (" + e.message + "); the message was not sent");
}

bool ChatController::fail(const Error& e) {
  state_.error = e.message;
  return false;
}

// ---- commands (UI thread): each only queues ----

void ChatController::new_conversation() {
  post([this] { do_new_conversation(); });
}
void ChatController::open_conversation(int64_t id) {
  post([this, id] { do_open(id); });
}
void ChatController::send(std::string text) {
  ++n_answering_;
  post([this, t = std::move(text)] {
    do_send(t);
    --n_answering_;
  });
}
void ChatController::regenerate() {
  ++n_answering_;
  post([this] {
    do_regenerate();
    --n_answering_;
  });
}
void ChatController::load_model(std::string path) {
  post([this, p = std::move(path)] { do_load_model(p); });
}
void ChatController::dismiss_error() {
  post([this] { state_.error.clear(); });
}
void ChatController::restart_engine() {
  post([this] { do_restart_engine(); });
}

std::filesystem::path ChatController::settings_path() const {
  return storage::resolve_data_dir(options_.data_dir) / "settings.json";
}

void ChatController::save_settings() {
  // The app works without: a failure is reported once (until a save succeeds again).
  const Status st = save_app_settings(
      settings_path(),
      AppSettings{
          requested_model_, saved_budgets_, state_.engine.serve.wanted, serve_port_, state_.engine.kv_format, {}});
  // Where nothing can be saved, the storage notice already says so.
  if (!st.ok() && !settings_unsaved_ && state_.storage_notice.empty()) {
    fail(make_error(st.error().code,
                    st.error().message + ". The model and budgets will not be remembered for the next launch."));
  }
  settings_unsaved_ = !st.ok();
}

void ChatController::save_tier_budgets(KvBudget budgets) {
  post([this, budgets] { saved_budgets_ = budgets; });
  set_tier_budgets(budgets);
}

void ChatController::set_kv_format(kv::KvFormat format) {
  post([this, format] {
    const kv::KvFormat before = state_.engine.kv_format;
    if (format == before) return;
    state_.engine.kv_format = format;
    if (model_) {
      drop_runner();
      if (!make_runner()) {
        fail(make_error(ErrorCode::invalid_argument, "KV format " + std::string(kv::kv_format_name(format)) +
                                                         " does not work for this model (" + state_.model.error +
                                                         "); back to " + std::string(kv::kv_format_name(before))));
        state_.engine.kv_format = before;
        state_.model.error.clear();
        if (!make_runner()) return;
      }
    }
    save_settings();
    if (model_ && state_.chat.conversation_id != 0) do_open(state_.chat.conversation_id);
  });
}

void ChatController::set_serving(bool on, int port) {
  post([this, on, port] {
    state_.engine.serve.wanted = on;
    serve_port_ = std::clamp(port, 0, 65535);
    state_.engine.serve.error.clear();
    apply_serving();
    save_settings();
  });
}

void ChatController::set_tier_budgets(KvBudget budgets) {
  post([this, budgets] {
    state_.engine.budgets = budgets;
    if (!model_) return;
    drop_runner();
    state_.model.n_ctx = context_for(model_->config());
    if (!make_runner()) {
      fail(make_error(ErrorCode::invalid_argument,
                      "these tier budgets do not work (" + state_.model.error + "); back to the defaults"));
      state_.engine.budgets = {};
      state_.model.error.clear();
      state_.model.n_ctx = context_for(model_->config());
      if (!make_runner()) return;
      if (saved_budgets_ == budgets) saved_budgets_ = {};  // a remembered budget that does not work is forgotten
    }
    save_settings();
    if (state_.chat.conversation_id != 0) do_open(state_.chat.conversation_id);
  });
}
void ChatController::edit_message(int64_t message_id, std::string text) {
  ++n_answering_;
  post([this, message_id, t = std::move(text)] {
    do_edit(message_id, t);
    --n_answering_;
  });
}

void ChatController::rename_conversation(int64_t id, std::string title) {
  post([this, id, t = std::move(title)] {
    if (!store_) return;
    if (auto st = store_->rename_conversation(id, t); !st.ok()) fail(st.error());
    refresh_list();
    if (state_.chat.conversation_id == id) state_.chat.title = t;
  });
}

void ChatController::delete_conversation(int64_t id) {
  post([this, id] {
    if (!store_) return;
    // Its streams are read before its rows go; the blocks only they reached leave every tier.
    auto dead = store_->token_streams(id);
    if (auto st = store_->delete_conversation(id); !st.ok()) {
      fail(st.error());
    } else if (runner_ && dead.ok() && !dead->empty()) {
      auto live = store_->token_streams_except(0);
      if (live.ok())
        runner_->release_streams(id, *dead, *live);
      else
        fail(live.error());
    }
    last_stream_.erase(id);  // a new conversation may be given the id again
    refresh_list();
    if (state_.chat.conversation_id == id) {
      state_.chat = ui::ChatState{};
      state_.chat.reasoning_effort = reasoning_effort_;
      if (!state_.conversations.empty()) do_open(state_.conversations.front().id);
    }
  });
}

void ChatController::search(std::string query) {
  const uint64_t serial = ++search_serial_;
  post([this, serial, q = std::move(query)] {
    if (serial != search_serial_.load() || !store_) return;  // a newer query is queued
    state_.search_query = q;
    state_.search_results.clear();
    if (q.empty()) return;
    auto hits = store_->search(q, 50);
    if (!hits.ok()) {
      fail(hits.error());
      return;
    }
    for (const auto& h : *hits) {
      state_.search_results.push_back({h.conversation.id, h.conversation.title, h.conversation.updated_ms, h.snippet});
    }
  });
}

void ChatController::switch_branch(int64_t message_id) {
  post([this, message_id] {
    if (!store_ || state_.chat.conversation_id == 0) return;
    auto leaf = store_->newest_leaf_under(message_id);
    if (!leaf.ok()) return (void)fail(leaf.error());
    if (auto st = store_->set_active_leaf(state_.chat.conversation_id, *leaf); !st.ok()) fail(st.error());
    reload_chat();
  });
}

void ChatController::update_settings(std::string system_prompt, sampling::GenerateOptions generation) {
  generation.stop_strings.clear();  // the model's template sets them at each turn
  post([this, sp = std::move(system_prompt), generation = std::move(generation)] {
    // Settings the engine would refuse are refused here, where the user set them.
    if (auto st = generation.sampling.validate(); !st.ok()) return (void)fail(st.error());
    state_.chat.system_prompt = sp;
    state_.chat.generation = generation;
    if (!store_) return;
    if (state_.chat.conversation_id == 0) {  // no conversation open: the next one starts with them
      storage::ConversationSettings s = default_settings(state_.model);
      s.system_prompt = sp;
      s.generation = generation;
      next_settings_ = std::move(s);
      return;
    }
    auto c = store_->conversation(state_.chat.conversation_id);
    if (!c.ok()) return (void)fail(c.error());
    storage::ConversationSettings s = c->settings;
    s.system_prompt = sp;
    s.generation = generation;
    if (auto st = store_->update_settings(c->id, s); !st.ok()) fail(st.error());
  });
}

void ChatController::set_reasoning_effort(std::string effort) {
  post([this, effort = std::move(effort)] {
    if (!chat::is_reasoning_effort(effort)) {
      return (void)fail(
          make_error(ErrorCode::invalid_argument, "reasoning effort \"" + effort + "\": expected low, medium or high"));
    }
    reasoning_effort_ = effort;
    state_.chat.reasoning_effort = effort;
    // Kept with the open conversation, which reopens (after a restart too) with it.
    if (!store_ || state_.chat.conversation_id == 0) return;
    auto c = store_->conversation(state_.chat.conversation_id);
    if (!c.ok()) return (void)fail(c.error());
    if (c->settings.reasoning_effort == effort) return;
    storage::ConversationSettings s = c->settings;
    s.reasoning_effort = effort;
    if (auto st = store_->update_settings(c->id, s); !st.ok()) fail(st.error());
  });
}

// ---- worker thread ----

void ChatController::start() {
  // A second app on this data directory would write the same database and cold store: it
  // shows who holds the directory and touches nothing in it (no model built, nothing opened).
  // A directory that cannot be made or locked at all fails below, where the store opens.
  const std::filesystem::path dir = storage::resolve_data_dir(options_.data_dir);
  if (storage::ensure_dir(dir).ok()) {
    auto lock = storage::DataDirLock::acquire(dir, "the kvchat app");
    if (lock.ok()) {
      data_lock_.emplace(std::move(*lock));
    } else if (lock.error().code == ErrorCode::invalid_argument) {
      fail(lock.error());
      state_.model.status = ui::ModelStatus::failed;
      state_.model.path = options_.model_path.empty() ? "the demo model" : options_.model_path;
      state_.model.error = lock.error().message;
      publish(true);
      return;
    }
  }
  load_offers();
  show_remote_settings();
  auto store = storage::ConversationStore::open_in(dir);
  if (store.ok()) {
    store_ = std::move(*store);
    if (store_->read_only()) {
      // The history stays readable; a message sent could not be kept, so none is taken.
      state_.storage_notice = "Read-only: " + store_->read_only_reason() +
                              ", so nothing new can be saved and sending is off. Your conversations are shown and "
                              "can be searched. To chat, make it writable (or remount it read-write) and restart "
                              "kvchat, or start kvchat with another --data-dir.";
    }
    if (!store_->notice().empty()) fail(make_error(ErrorCode::invalid_file, store_->notice()));
    // Answers still "streaming" were cut off by a kill or crash of the kvchat that held this
    // directory before: only the lock holder may say so (an export may read it meanwhile).
    if (data_lock_ && !store_->read_only()) {
      if (auto n = store_->mark_interrupted(); !n.ok()) fail(n.error());
    }
  } else {
    state_.storage_notice = "Conversations cannot be saved: " + store.error().message +
                            ". Nothing you send could be kept, so sending is off: fix this and restart kvchat, or "
                            "start kvchat with another --data-dir.";
  }
  refresh_list();
  publish(true);
  // No -m: the model of the last run, if it is still there (else the demo model).
  const AppSettings saved = load_app_settings(settings_path());
  if (!saved.problem.empty()) fail(make_error(ErrorCode::invalid_file, saved.problem));
  state_.engine.budgets = saved_budgets_ = saved.budgets;
  state_.engine.kv_format = saved.kv_format;
  state_.engine.serve.wanted = saved.serve;
  serve_port_ = saved.serve_port;
  std::string first = options_.model_path;
  std::error_code ec;
  if (first.empty() && !saved.last_model.empty()) {
    if (std::filesystem::is_regular_file(saved.last_model, ec)) {
      first = saved.last_model;
    } else {  // the demo model is loaded instead, and the user is told why
      fail(make_error(ErrorCode::io, "the model of the last run, " + saved.last_model +
                                         ", is no longer there (moved or deleted): the demo model is loaded instead; "
                                         "open a model in the Model window"));
    }
  }
  do_load_model(first);
  if (!store_) return;
  if (state_.conversations.empty() && !store_->read_only()) {
    auto id = store_->create_conversation(k_welcome_title, default_settings(state_.model));
    if (!id.ok()) return (void)fail(id.error());
    refresh_list();
  }
  if (!state_.conversations.empty()) do_open(state_.conversations.front().id);
}

int64_t ChatController::context_for(const model::ModelConfig& c) {
  int64_t budget = state_.engine.budgets.ctx_kv_bytes > 0 ? state_.engine.budgets.ctx_kv_bytes : options_.ctx_kv_bytes;
  if (budget <= 0) budget = model::k_default_ctx_kv_budget_bytes;
  state_.engine.ctx_kv_budget_bytes = budget;
  state_.engine.ctx_fixed = options_.n_ctx > 0;
  return options_.n_ctx > 0 ? options_.n_ctx : model::default_context(c, budget);
}

bool ChatController::make_runner() {
  if (model_->config().kv_bytes_per_token(state_.engine.kv_format) <= 0) {
    // A remembered INT8/INT4 and a model whose head size has no group: this model runs in F16.
    fail(make_error(ErrorCode::invalid_argument,
                    "this model's head size (" + std::to_string(model_->config().head_dim) + ") cannot be stored as " +
                        std::string(kv::kv_format_name(state_.engine.kv_format)) + " KV; it runs with f16"));
    state_.engine.kv_format = kv::KvFormat::f16;
  }
  EngineRunnerOptions ro;
  ro.n_ctx = state_.model.n_ctx;

  // Defaults from the machine as it is now; a budget set in the Engine window wins.
  const std::filesystem::path data_dir = storage::resolve_data_dir(options_.data_dir);
  const MachineResources machine = backend::with_device_memory(read_machine_resources(data_dir), *backend_);
  const double kv_per_token = model_->config().kv_bytes_per_token(state_.engine.kv_format);
  const BudgetDefaults d =
      default_budgets(machine, model_->weight_bytes(), true, static_cast<uint64_t>(kv_per_token), state_.model.n_ctx);
  ui::EngineState& es = state_.engine;
  es.defaults = d.budget;
  es.mem_total_bytes = machine.mem_total_bytes;
  es.mem_available_bytes = machine.mem_available_bytes;
  es.disk_free_bytes = machine.disk_free_bytes;
  es.fit_warning = d.warning;
  ro.budget = with_defaults(es.budgets, d);  // T0 0: t0_contexts contexts, in whole blocks (the cache)
  ro.t0_contexts = d.t0_contexts;
  ro.cold_dir = data_dir / "kv-cache";
  ro.model_path = state_.model.path;
  ro.kv_format = state_.engine.kv_format;
  auto runner = EngineTurnRunner::create(*model_, ro);
  if (!runner.ok()) {
    state_.model.error = runner.error().message;
    return false;
  }
  engine_runner_ = runner->get();
  runner_ = std::move(*runner);
  if (!options_.replay_answer.empty()) {
    runner_ = std::make_unique<ReplayTurnRunner>(std::move(runner_), model_->tokenizer(), options_.replay_answer);
  }
  apply_serving();
  return true;
}

void ChatController::drop_runner() {
  serving_.reset();
  engine_runner_ = nullptr;
  runner_.reset();
}

// The API's conversations are not added to the sidebar: a client owns its history and resends
// it whole with every request (the API is stateless); serve keeps only each answer's ids
// (AnswerStore, DATA_DIR/serve/answers.db) to map resent text back to the cached KV. They show
// in the Memory window (blocks, timeline) and in the Engine window's counts.
void ChatController::apply_serving() {
  ui::ServeState& sv = state_.engine.serve;
  if (!sv.wanted) {
    serving_.reset();
    sv.error.clear();
    return;
  }
  if (serving_ && serving_->port() == serve_port_) return;
  serving_.reset();
  if (!engine_runner_ || !model_) {
    sv.error = "Serve on localhost starts once a model is loaded.";
    return;
  }
  ApiServingOptions o;
  o.port = serve_port_;
  o.data_dir = storage::resolve_data_dir(options_.data_dir);
  auto started = ApiServing::start(*model_, *engine_runner_, o);
  if (!started.ok()) {
    sv.error = started.error().message;
    return;
  }
  sv.error.clear();
  serving_ = std::move(*started);
}

// Everything the running engine holds in RAM goes (runner, session, T0 and T1, the disk
// tier's handle, the model's mapping); it is rebuilt from the files, as after a relaunch.
void ChatController::do_restart_engine() {
  drop_runner();
  model_.reset();
  do_load_model(requested_model_);
  if (!model_) return;
  ++state_.engine.n_restarts;
  if (state_.chat.conversation_id != 0) do_open(state_.chat.conversation_id);
}

void ChatController::do_load_model(const std::string& requested) {
  requested_model_ = requested;
  drop_runner();
  model_.reset();
  ui::ModelState& ms = state_.model;
  ms = ui::ModelState{};
  state_.memory.remote = {};
  std::string path = requested;
  if (path.empty()) {
    ms.is_demo = true;
    ms.path = demo_model_path(options_.data_dir).string();
    if (!std::filesystem::exists(ms.path)) ms.status = ui::ModelStatus::building_demo;
    publish(true);
    auto built = ensure_demo_model(options_.data_dir, [&](double f) {
      ms.status = ui::ModelStatus::building_demo;
      ms.progress = f;
      publish(false);
    });
    if (!built.ok()) {
      ms.status = ui::ModelStatus::failed;
      ms.error = "cannot build the demo model: " + built.error().message;
      return;
    }
    path = *built;
  }
  ms.status = ui::ModelStatus::loading;
  ms.path = path;
  ms.progress = 0;
  ms.name = std::filesystem::path(path).filename().string();
  publish(true);
  if (!backend_) backend_ = backend::make_cpu_backend(options_.n_threads);
  model::LoadOptions lo;
  lo.progress = [&](size_t done, size_t total) {
    ms.progress = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    publish(false);
  };
  auto m = model::Model::load(path, *backend_, lo);
  if (!m.ok()) {
    ms.status = ui::ModelStatus::failed;
    ms.error = m.error().message;
    return;
  }
  model_ = std::move(*m);
  const model::ModelConfig& c = model_->config();
  ms.n_ctx = context_for(c);
  if (!make_runner()) {
    model_.reset();
    ms.status = ui::ModelStatus::failed;
    return;
  }
  if (!c.name.empty()) ms.name = c.name;
  ms.arch = c.arch;
  ms.weight_type = model_->weight_type_summary();
  ms.backend = std::string(backend_->name());
  ms.chat_template = model_->chat_template().describe();
  ms.uses_reasoning_effort = model_->chat_template().uses_reasoning_effort();
  ms.n_ctx_train = c.n_ctx_train;
  ms.n_layer = c.n_layer;
  ms.n_head = c.n_head;
  ms.n_kv_head = c.n_head_kv;
  ms.head_dim = c.head_dim;
  ms.n_local_layers = c.n_local_layers();
  ms.n_recurrent_layers = c.n_recurrent_layers();
  ms.recurrent_state_floats = c.recurrent_state_floats();
  ms.local_window = ms.n_local_layers > 0 ? c.local_window : 0;
  ms.weight_bytes = model_->weight_bytes();
  ms.n_params = 0;
  for (const auto& t : model_->file().tensors()) ms.n_params += t.n_elements();
  ms.progress = 1;
  ms.status = ui::ModelStatus::ready;
  save_settings();
  state_.memory.weight_bytes = ms.weight_bytes;
}

void ChatController::refresh_list() {
  state_.conversations.clear();
  if (!store_) return;
  auto list = store_->list_conversations(0, 1000);
  if (!list.ok()) return (void)fail(list.error());
  for (const auto& c : *list) state_.conversations.push_back({c.id, c.title, c.updated_ms, {}});
}

void ChatController::do_new_conversation() {
  if (!store_) return;
  storage::ConversationSettings settings = default_settings(state_.model);
  if (next_settings_) {
    settings.system_prompt = next_settings_->system_prompt;
    settings.generation = next_settings_->generation;
    next_settings_.reset();
  }
  settings.reasoning_effort = reasoning_effort_;
  auto id = store_->create_conversation(k_new_title, settings);
  if (!id.ok()) return (void)fail(id.error());
  refresh_list();
  do_open(*id);
}

void ChatController::do_open(int64_t id) {
  state_.chat.conversation_id = id;
  reload_chat();
  if (runner_) {
    std::vector<int32_t> tokens;
    if (!state_.chat.messages.empty()) {
      auto stream = window_until(state_.chat.messages.back().id);
      if (!stream.ok()) return (void)fail(stream.error());
      tokens = std::move(*stream);
    }
    last_stream_[id] = tokens;
    runner_->prefetch(id, tokens);
  }
}

void ChatController::reload_chat() {
  ui::ChatState& chat = state_.chat;
  const int64_t id = chat.conversation_id;
  const bool generating = chat.generating;
  chat = ui::ChatState{};
  chat.generating = generating;
  chat.reasoning_effort = reasoning_effort_;
  if (!store_ || id == 0) return;
  auto c = store_->conversation(id);
  if (!c.ok()) return (void)fail(c.error());
  chat.conversation_id = id;
  chat.title = c->title;
  chat.system_prompt = c->settings.system_prompt;
  chat.generation = c->settings.generation;
  // A conversation answers with the effort it was last given (none stored: the current choice).
  if (chat::is_reasoning_effort(c->settings.reasoning_effort)) reasoning_effort_ = c->settings.reasoning_effort;
  chat.reasoning_effort = reasoning_effort_;
  if (c->active_leaf == 0) return;
  auto path = store_->path_to(c->active_leaf);
  if (!path.ok()) return (void)fail(path.error());
  for (const auto& m : *path) {
    ui::MessageView v;
    v.id = m.id;
    v.parent_id = m.parent_id;
    v.role = to_ui(m.role);
    v.text = m.text;
    v.streaming = m.state == storage::MessageState::streaming;
    if (m.state == storage::MessageState::interrupted) {
      v.interrupted = "kvchat stopped before this answer ended; it is shown up to the last part saved";
    }
    if (m.role == storage::Role::assistant && model_ && !v.streaming) {
      // The message's stored tokens may be its answer only (chat_turn.h): count its reasoning afresh.
      const chat::ReasoningSplit split = chat::split_reasoning(m.text, /*finished=*/true);
      if (split.has_reasoning) {
        v.n_reasoning_tokens =
            static_cast<int64_t>(model_->tokenizer().encode_continuation(split.reasoning, false).size());
      }
    }
    if (auto sib = store_->siblings(m.id); sib.ok()) {
      v.n_siblings = static_cast<int>(sib->size());
      for (size_t i = 0; i < sib->size(); ++i) {
        if ((*sib)[i].id != m.id) continue;
        v.sibling_index = static_cast<int>(i);
        if (i > 0) v.prev_sibling = (*sib)[i - 1].id;
        if (i + 1 < sib->size()) v.next_sibling = (*sib)[i + 1].id;
      }
    }
    if (auto it = stats_.find(m.id); it != stats_.end()) v.stats = it->second;
    if (auto it = interrupted_.find(m.id); it != interrupted_.end()) v.interrupted = it->second;
    chat.n_stream_tokens += static_cast<int64_t>(m.tokens.size());
    chat.messages.push_back(std::move(v));
  }
  show_cut(*c);
}

Result<std::vector<int32_t>> ChatController::stream_until(int64_t message_id) {
  std::vector<int32_t> tokens;
  if (!store_ || message_id == 0) return tokens;
  // A history that cannot be read is an error the user sees: a turn must never run on an
  // empty context instead of its conversation.
  auto path = store_->path_to(message_id);
  if (!path.ok()) return history_error(path.error());
  for (const auto& m : *path) tokens.insert(tokens.end(), m.tokens.begin(), m.tokens.end());
  return tokens;
}

Result<std::vector<chat::ChatMessage>> ChatController::messages_until(int64_t message_id) {
  std::vector<chat::ChatMessage> out;
  if (!store_ || message_id == 0) return out;
  auto path = store_->path_to(message_id);
  if (!path.ok()) return history_error(path.error());
  for (const auto& m : *path) {
    if (m.role == storage::Role::system) continue;  // the system prompt is the conversation's setting
    out.emplace_back(m.role == storage::Role::user ? "user" : "assistant", m.text);
  }
  return out;
}

bool ChatController::refuse_send(const std::string& text, const Error& e) {
  std::string why = e.message;
  if (!why.empty() && why.back() != '.') why += '.';
  state_.error = why + " The message was not sent: it is back in the input box.";
  refusal_ = state_.error;
  state_.unsent.text = text;
  ++state_.unsent.serial;
  return false;
}

bool ChatController::write_unsaved(Error* why) {
  last_unsaved_try_us_ = now_us();
  while (!unsaved_.empty()) {
    UnsavedAnswer& u = unsaved_.front();
    Status st;
    if (!u.text.empty() || !u.tokens.empty()) {
      st = store_->append_streamed(u.message_id, u.text, u.tokens);
      if (st.ok()) {
        u.text.clear();
        u.tokens.clear();
      }
    }
    if (st.ok() && u.finish) {
      st = store_->finish_message(u.message_id);
      if (st.ok()) u.finish = false;
    }
    // A message deleted meanwhile (its conversation) is no longer there to write to.
    if (st.ok() || st.error().code == ErrorCode::invalid_argument) {
      unsaved_.erase(unsaved_.begin());
      continue;
    }
    if (why) *why = st.error();
    return false;
  }
  return true;
}

bool ChatController::do_send(const std::string& text) {
  if (text.empty()) return false;
  if (!state_.storage_notice.empty()) return refuse_send(text, make_error(ErrorCode::io, state_.storage_notice));
  if (!runner_)
    return refuse_send(text,
                       make_error(ErrorCode::invalid_argument, "no model is loaded: open one in the Model window"));
  // The previous answer's end first: this turn's history is read from the store.
  if (Error e; !write_unsaved(&e)) {
    return refuse_send(text, make_error(e.code, e.message + ". The last answer's end is not saved yet either (it is "
                                                            "kept in memory and written once the disk has room)"));
  }
  if (state_.chat.conversation_id == 0) {
    do_new_conversation();
    if (state_.chat.conversation_id == 0) return refuse_send(text, make_error(ErrorCode::io, state_.error));
  }
  const int64_t conv = state_.chat.conversation_id;
  const int64_t leaf = state_.chat.messages.empty() ? 0 : state_.chat.messages.back().id;
  give_tokens_to_interrupted(leaf);
  if (auto stream = stream_until(leaf); !stream.ok()) return refuse_send(text, stream.error());
  // A message that alone cannot fit the context would be stored and never answered.
  if (model_) {
    const Status fits = check_message_fits(model_->tokenizer(), model_->chat_template(), state_.chat.system_prompt,
                                           text, state_.model.n_ctx);
    if (!fits.ok()) return refuse_send(text, fits.error());
  }
  auto seg = user_segment(leaf, text);
  if (!seg.ok()) return refuse_send(text, seg.error());
  // The template shows the previous reply without its reasoning: so does the stream from now on.
  // Where that fails (a reply cut off by a crash is still "streaming"), the reply stays as
  // generated: the segment closes it either way.
  if (seg->reply_tokens) (void)store_->set_message_tokens(leaf, *seg->reply_tokens).ok();
  // Durable before generation starts; refused (a full disk), it leaves no row and comes back.
  auto user_id = store_->append_message(conv, leaf, storage::Role::user, text, seg->tokens);
  if (!user_id.ok()) return refuse_send(text, user_id.error());
  if (!refusal_.empty() && state_.error == refusal_) state_.error.clear();  // it went this time
  refusal_.clear();
  if (state_.chat.title == k_new_title || (state_.chat.title == k_welcome_title && leaf == 0)) {
    if (auto st = store_->rename_conversation(conv, title_from(text)); !st.ok()) fail(st.error());
  }
  run_reply(conv, *user_id);
  return true;
}

// An answer cut off by a kill has its committed text but no ids (streamed chunks carry text):
// the model must see what the user sees, so the text is tokenized before a turn follows it.
void ChatController::give_tokens_to_interrupted(int64_t message_id) {
  if (!store_ || !model_ || message_id == 0) return;
  auto m = store_->message(message_id);
  if (!m.ok() || m->state != storage::MessageState::interrupted || !m->tokens.empty() || m->text.empty()) return;
  const std::vector<int32_t> ids = model_->tokenizer().encode_continuation(m->text, false);
  if (auto st = store_->set_message_tokens(message_id, ids); !st.ok()) fail(st.error());
}

void ChatController::do_regenerate() {
  if (!runner_ || !store_ || state_.chat.messages.empty()) return;
  if (Error e; !write_unsaved(&e)) return (void)fail(e);
  const ui::MessageView& last = state_.chat.messages.back();
  const int64_t parent = last.role == ui::Role::assistant ? last.parent_id : last.id;
  if (parent == 0) return;
  run_reply(state_.chat.conversation_id, parent);
}

void ChatController::do_edit(int64_t message_id, const std::string& text) {
  if (!runner_ || !store_ || text.empty()) return;
  if (Error e; !write_unsaved(&e)) return (void)fail(e);
  auto m = store_->message(message_id);
  if (!m.ok()) return (void)fail(m.error());
  if (m->role != storage::Role::user) return;
  if (auto stream = stream_until(m->parent_id); !stream.ok()) return (void)fail(stream.error());
  auto seg = user_segment(m->parent_id, text);
  if (!seg.ok()) return (void)fail(seg.error());
  if (seg->reply_tokens) (void)store_->set_message_tokens(m->parent_id, *seg->reply_tokens).ok();
  auto edited = store_->edit_message(message_id, text, seg->tokens);
  if (!edited.ok()) return (void)fail(edited.error());
  run_reply(state_.chat.conversation_id, *edited);
}

void ChatController::run_reply(int64_t conv, int64_t parent_id) {
  // The prompt: the path under the overflow policy (the stored cut, moved on an overflow).
  if (auto st = check_local_ids(parent_id); !st.ok()) return (void)fail(st.error());
  int64_t first_id = 0;
  // A remote source fits the conversation to its own context: it gets the messages, no window.
  auto window = model_ ? plan_turn(conv, parent_id, state_.chat.generation.max_tokens, first_id)
                       : Result<ChatWindow>(ChatWindow{});
  if (!window.ok()) {
    fail(window.error());
    reload_chat();
    return;
  }
  auto messages = messages_until(parent_id);
  if (!messages.ok()) return (void)fail(messages.error());
  auto asst = store_->begin_assistant_message(conv, parent_id);
  if (!asst.ok()) return (void)fail(asst.error());
  const int64_t asst_id = *asst;
  // SQLite gives a deleted conversation's largest ids again: nothing of the old message may stay.
  stats_.erase(asst_id);
  interrupted_.erase(asst_id);
  refresh_list();
  state_.chat.generating = true;
  reload_chat();
  publish(true);

  TurnRequest req;
  req.conversation_id = conv;
  req.history = std::move(window->prompt);
  // The reply's opening (DeepSeek-R1's "<think>\n", not in the user message's tokens: a sibling
  // reply shares them) ends the prompt and starts the reply's stored tokens.
  // A remote source has no local template: the server writes its own generation prompt.
  if (model_) {
    req.segment = reply_opening(model_->tokenizer(), model_->chat_template(), state_.chat.system_prompt, *messages,
                                reasoning_effort_)
                      .tokens;
  }
  // A user message stored before openings were the reply's ends with the opening already.
  if (req.history.size() >= req.segment.size() &&
      std::equal(req.segment.begin(), req.segment.end(),
                 req.history.end() - static_cast<ptrdiff_t>(req.segment.size())))
    req.segment.clear();
  req.options = state_.chat.generation;  // a seed < 0 is drawn by the engine's sampler
  if (model_) req.options.stop_strings = model_->chat_template().stop_strings();
  if (options_.ignore_eos) req.options.stop_at_eog = false;
  req.system_prompt = state_.chat.system_prompt;
  req.messages = std::move(*messages);
  note_model(conv);
  cancel_ = false;
  {
    // What the cache has not seen of this conversation: the prompt past its common prefix
    // with the stream last opened or answered ("prefilling N new tokens" until the first token).
    const std::vector<int32_t>& seen = last_stream_[conv];
    size_t common = 0;
    while (common < seen.size() && common < req.history.size() && seen[common] == req.history[common]) ++common;
    state_.chat.n_prefill_tokens = static_cast<int64_t>(req.history.size() + req.segment.size() - common);
    state_.chat.prefill_started_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
  }

  std::string pending;  // streamed text not yet on disk
  int64_t last_flush = now_us();
  // A write that fails (a full disk) is reported once per turn; the text stays pending and is
  // retried at the next flush, and the answer goes on streaming from RAM meanwhile. What is
  // still unwritten at the end waits in unsaved_ (write_unsaved).
  bool write_failed = false;
  auto note_write = [&](const Status& st) {
    if (st.ok()) return true;
    if (!write_failed) {
      fail(make_error(st.error().code, st.error().message +
                                           ". The answer goes on in memory; what the disk did not take is written "
                                           "once it has room (kvchat tries every few seconds and before the next "
                                           "message), and is lost only if kvchat quits first."));
    }
    write_failed = true;
    return false;
  };
  auto r = runner_->run(req, [&](const TurnDelta& d) {
    if (!state_.chat.messages.empty()) state_.chat.messages.back().text += d.text;
    if (!d.text.empty()) state_.chat.n_prefill_tokens = 0;
    pending += d.text;
    if (!pending.empty() && now_us() - last_flush > k_flush_interval_us) {
      if (note_write(store_->append_streamed(asst_id, pending, {}))) pending.clear();
      last_flush = now_us();
    }
    // The first text waits for the window's next paced frame too: a frame drawn at once would
    // land in the answer's decode (the whole of a 64-token stories260K answer: 20 ms).
    publish(false);
    return !cancel_.load();
  });
  state_.chat.generating = false;
  state_.chat.n_prefill_tokens = 0;
  if (r.ok()) {
    std::vector<int32_t>& stream = last_stream_[conv];
    stream = req.history;
    stream.insert(stream.end(), req.segment.begin(), req.segment.end());
    stream.insert(stream.end(), r->tokens.begin(), r->tokens.end());
  }
  if (!r.ok()) {
    // What streamed is kept (the user's message was stored before), marked as cut off.
    const bool saved = note_write(store_->append_streamed(asst_id, pending, {}));
    const bool finished = saved && note_write(store_->finish_message(asst_id));
    if (!finished) unsaved_.push_back({asst_id, saved ? std::string() : pending, {}, true});
    interrupted_[asst_id] = r.error().message;
    fail(r.error());
    if (finished) reload_chat();
    return;
  }
  // The streamed text is a prefix of the final text (which is cut before a stop string).
  std::vector<int32_t> reply_tokens = req.segment;  // the opening, then the reply as generated
  reply_tokens.insert(reply_tokens.end(), r->tokens.begin(), r->tokens.end());
  const bool appended = note_write(store_->append_streamed(asst_id, pending, reply_tokens));
  const bool saved = appended && note_write(store_->finish_message(asst_id));
  if (!saved)
    unsaved_.push_back(
        {asst_id, appended ? std::string() : pending, appended ? std::vector<int32_t>() : reply_tokens, true});
  keep_cut(conv, first_id);
  stats_[asst_id] = r->stats;
  const ui::TurnStats& s = r->stats;
  const double n_dec = static_cast<double>(s.n_tokens > 1 ? s.n_tokens - 1 : 0);
  state_.memory.turns.push_back({s.n_prompt_reused, s.n_prompt - s.n_prompt_reused, s.ttft_ms,
                                 s.decode_ms > 0 ? 1000.0 * n_dec / s.decode_ms : 0.0});
  refresh_list();
  // What the disk could not take is still shown (from RAM) until write_unsaved gets it on disk.
  if (saved) reload_chat();
}

}  // namespace kvc::app
