// The chat controller's exports into DATA_DIR/exports/: KV events (Chrome trace JSON, CSV) and
// conversations (Markdown, JSON).
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "app/gui/chat_controller.h"
#include "core/kv/trace_export.h"
#include "storage/data_dir.h"
#include "storage/file_write.h"

namespace kvc::app {

namespace {

// "20261201-093312-045": local time to the millisecond, so two exports never share a name.
std::string timestamp_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  char out[40];
  std::snprintf(out, sizeof out, "%.*s-%03lld", static_cast<int>(n), buf, static_cast<long long>(ms));
  return out;
}

}  // namespace

void ChatController::export_conversation(int64_t id, bool markdown) {
  post([this, id, markdown] {
    if (!store_) return;
    auto c = store_->conversation(id);
    if (!c.ok()) return (void)fail(c.error());
    auto text = markdown ? store_->export_markdown(id, c->active_leaf) : store_->export_json(id, c->active_leaf);
    if (!text.ok()) return (void)fail(text.error());
    const std::filesystem::path dir = storage::resolve_data_dir(options_.data_dir) / "exports";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::filesystem::path path =
        dir / ("conversation-" + std::to_string(id) + "-" + timestamp_now() + (markdown ? ".md" : ".json"));
    if (ec) {
      return (void)fail(make_error(ErrorCode::io, "cannot create " + dir.string() + ": " + ec.message() +
                                                      "; check the data directory's permissions"));
    }
    // Whole or not at all: a full disk leaves no truncated export behind.
    if (Status st = storage::write_file_replacing(path, *text, "the conversation export"); !st.ok()) {
      return (void)fail(st.error());
    }
    state_.conversation_export_path = path.string();
  });
}

void ChatController::export_kv_trace() {
  post([this] { do_export_kv(true); });
}

void ChatController::export_kv_csv() {
  post([this] { do_export_kv(false); });
}

void ChatController::do_export_kv(bool chrome_trace) {
  ui::MemoryState& m = state_.memory;
  m.export_path.clear();
  m.export_error.clear();
  if (!runner_) {
    m.export_error = "No KV events to export: load a model and send a message first.";
    return publish(true);
  }
  const std::filesystem::path dir = storage::resolve_data_dir(options_.data_dir) / "exports";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    m.export_error =
        "Cannot create " + dir.string() + ": " + ec.message() + ". Check the data directory's permissions.";
    return publish(true);
  }
  const std::filesystem::path path = dir / ("kv-events-" + timestamp_now() + (chrome_trace ? ".json" : ".csv"));
  const std::vector<kv::KvEvent> events = runner_->kv_events();
  const Status st = chrome_trace ? kv::write_chrome_trace(path, events) : kv::write_csv(path, events);
  if (st.ok()) {
    m.export_path = path.string();
  } else {
    m.export_error = st.error().message;
  }
  publish(true);
}

}  // namespace kvc::app
