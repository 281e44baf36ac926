// The chat controller's remote source: a server's model list, connecting to it, its settings.
#include "app/gui/chat_controller.h"
#include "app/gui/remote_turn_runner.h"
#include "app/remote/remote_client.h"
#include "app/remote/remote_settings.h"
#include "storage/data_dir.h"

namespace kvc::app {

void ChatController::list_remote_models(std::string url, std::string api_key) {
  post([this, u = std::move(url), k = std::move(api_key)] { do_list_remote(u, k); });
}

void ChatController::connect_remote(ui::RemoteConnection connection) {
  post([this, c = std::move(connection)] { do_connect_remote(c); });
}

void ChatController::refresh_remote_memory() {
  post([this] {
    if (runner_) runner_->refresh_memory();
  });
}

std::filesystem::path ChatController::remote_dir() const {
  return storage::resolve_data_dir(options_.data_dir) / "remote";
}

void ChatController::show_remote_settings() {
  ui::RemoteState& rs = state_.remote;
  rs.saved.clear();
  auto s = remote::load_remote_settings(remote_dir());
  if (!s.ok()) return (void)fail(s.error());
  rs.last_url = s->last_url;
  for (const remote::ServerSettings& v : s->servers) {
    auto key = remote::load_api_key(remote_dir(), v.url);
    rs.saved.push_back({v.url, v.model, v.timeout_s, key.ok() && !key->empty()});
  }
}

Result<TurnSegment> ChatController::user_segment(int64_t parent_id, const std::string& text) {
  if (!model_) {
    TurnSegment seg;
    seg.text = text;
    return seg;
  }
  if (auto st = check_local_ids(parent_id); !st.ok()) return st.error();
  auto messages = messages_until(parent_id);
  if (!messages.ok()) return messages.error();
  return build_user_turn(model_->tokenizer(), model_->chat_template(), state_.chat.system_prompt, *messages, text,
                         reasoning_effort_);
}

Status ChatController::check_local_ids(int64_t message_id) {
  if (!model_ || message_id == 0) return {};
  auto path = store_->path_to(message_id);
  if (!path.ok()) return history_error(path.error());
  for (const storage::Message& m : *path) {
    if (m.role == storage::Role::user && m.tokens.empty() && !m.text.empty()) {
      return make_error(ErrorCode::unsupported,
                        "this branch was answered by a remote server, and the local model cannot continue it (its "
                        "messages have no token ids); start a new conversation here, or connect to the server "
                        "again in Model > Remote");
    }
  }
  return {};
}

void ChatController::note_model(int64_t conversation_id) {
  auto c = store_->conversation(conversation_id);
  if (!c.ok()) return;
  if (c->settings.model_path == state_.model.path && c->settings.model_name == state_.model.name) return;
  storage::ConversationSettings s = c->settings;
  s.model_path = state_.model.path;
  s.model_name = state_.model.name;
  if (auto st = store_->update_settings(conversation_id, s); !st.ok()) fail(st.error());
}

void ChatController::do_list_remote(const std::string& url, const std::string& api_key) {
  ui::RemoteState& rs = state_.remote;
  rs.listing = true;
  rs.list_error.clear();
  rs.models.clear();
  publish(true);
  auto base = remote::normalize_base_url(url);
  rs.listing = false;
  ++rs.n_lists;
  if (!base.ok()) {
    rs.list_error = base.error().message;
    return;
  }
  rs.listed_url = *base;
  remote::Endpoint e;
  e.base_url = *base;
  e.api_key = api_key;
  if (e.api_key.empty()) {
    auto stored = remote::load_api_key(remote_dir(), *base);
    if (stored.ok()) e.api_key = *stored;
  }
  e.timeout_s = 15;
  auto models = remote::list_models(e);
  if (!models.ok()) {
    rs.list_error = models.error().message;
    return;
  }
  rs.models = std::move(*models);
}

void ChatController::do_connect_remote(const ui::RemoteConnection& c) {
  auto base = remote::normalize_base_url(c.url);
  if (!base.ok()) return (void)fail(base.error());
  if (c.model.empty()) {
    return (void)fail(make_error(ErrorCode::invalid_argument, "pick one of the server's models (List models)"));
  }
  if (!(c.timeout_s > 0)) {
    return (void)fail(make_error(ErrorCode::invalid_argument, "the timeout must be a number of seconds above 0"));
  }
  remote::Endpoint e;
  e.base_url = *base;
  e.timeout_s = c.timeout_s;
  if (c.keep_key && c.api_key.empty()) {
    auto stored = remote::load_api_key(remote_dir(), *base);
    if (!stored.ok()) return (void)fail(stored.error());
    e.api_key = *stored;
  } else {
    e.api_key = c.api_key;
    if (auto st = remote::store_api_key(remote_dir(), *base, c.api_key); !st.ok()) fail(st.error());
  }
  auto settings = remote::load_remote_settings(remote_dir());
  remote::RemoteSettings s = settings.ok() ? *settings : remote::RemoteSettings{};
  remote::remember_server(s, remote::ServerSettings{*base, c.model, c.timeout_s});
  if (auto st = remote::save_remote_settings(remote_dir(), s); !st.ok()) fail(st.error());

  // The local engine goes: its runner (and cache) first, then the model it uses.
  runner_.reset();
  model_.reset();
  ui::ModelState& ms = state_.model;
  ms = ui::ModelState{};
  ms.is_remote = true;
  ms.path = *base;
  ms.name = c.model;
  ms.arch = "remote";
  ms.backend = "remote: " + *base;
  ms.chat_template = "the server's";
  ms.status = ui::ModelStatus::ready;
  ms.progress = 1;
  state_.memory = ui::MemoryState{};
  runner_ = std::make_unique<RemoteTurnRunner>(std::move(e), c.model);
  runner_->refresh_memory();
  show_remote_settings();
  if (state_.chat.conversation_id != 0) do_open(state_.chat.conversation_id);
}

}  // namespace kvc::app
