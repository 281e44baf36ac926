// The chat controller's model downloads: the catalog, and one download at a time on its own thread.
#include <filesystem>

#include "app/common/demo_model.h"
#include "app/fetch/downloader.h"
#include "app/fetch/model_catalog.h"
#include "app/gui/chat_controller.h"
#include "core/util/thread_name.h"
#include "storage/data_dir.h"

namespace kvc::app {

void ChatController::download_changed() {
  dl_dirty_ = true;
  // Taking q_mu_ orders the flag before the worker's predicate check: no lost wake-up.
  { std::lock_guard lock(q_mu_); }
  q_cv_.notify_all();
}

void ChatController::load_offers() {
  auto catalog = fetch::load_catalog(asset_dir() / "models" / "catalog.json");
  std::lock_guard lock(dl_mu_);
  if (!catalog.ok()) {
    dl_.catalog_error = catalog.error().message;
  } else {
    for (const fetch::CatalogEntry& e : *catalog) {
      dl_.offers.push_back({e.name, e.source, e.size_bytes, e.licence, e.needs, e.notes, e.sha256});
    }
  }
  download_changed();
}

void ChatController::start_download(std::string source) {
  std::lock_guard lock(dl_mu_);
  if (download_running_) return;
  if (download_thread_.joinable()) download_thread_.join();  // finished: it sets running false last
  download_running_ = true;
  download_cancel_ = false;
  dl_.status = ui::DownloadStatus::running;
  dl_.source = source;
  dl_.done_bytes = dl_.total_bytes = 0;
  dl_.progress_text = "connecting";
  dl_.path.clear();
  dl_.sha256.clear();
  dl_.note.clear();
  dl_.error.clear();
  download_changed();
  download_thread_ = std::thread([this, source = std::move(source)] {
    set_thread_name("kvc-download");
    run_download(source);
  });
}

void ChatController::run_download(const std::string& source) {
  fetch::DownloadRequest req;
  auto url = fetch::resolve_source(source);
  Result<fetch::Downloaded> r =
      url.ok() ? Result<fetch::Downloaded>(fetch::Downloaded{}) : Result<fetch::Downloaded>(url.error());
  if (url.ok()) {
    req.url = *url;
    req.models_dir = storage::resolve_data_dir(options_.data_dir) / "models";
    {
      std::lock_guard lock(dl_mu_);
      for (const auto& o : dl_.offers) {
        if (o.source == source && !o.sha256.empty()) req.expected_sha256 = o.sha256;
      }
    }
    r = fetch::download_model(
        req,
        [this](const fetch::DownloadProgress& p) {
          std::lock_guard lock(dl_mu_);
          dl_.done_bytes = p.done_bytes;
          dl_.total_bytes = p.total_bytes;
          dl_.progress_text = fetch::format_progress(p);
          download_changed();
        },
        &download_cancel_);
  }
  {
    std::lock_guard lock(dl_mu_);
    if (r.ok()) {
      dl_.status = ui::DownloadStatus::done;
      dl_.path = r->path.string();
      dl_.sha256 = r->sha256;
      dl_.note = r->already_present         ? "already downloaded"
                 : r->sha256_source.empty() ? "sha256 recorded (the server publishes none to check)"
                                            : "sha256 matches " + r->sha256_source;
      if (!r->model_warning.empty()) dl_.note += "; kvchat cannot run this model: " + r->model_warning;
      dl_.progress_text = fetch::format_size(static_cast<double>(r->n_bytes));
      ++dl_.n_completed;
    } else {
      dl_.status = download_cancel_ ? ui::DownloadStatus::cancelled : ui::DownloadStatus::failed;
      dl_.error = r.error().message;
    }
    download_changed();
  }
  download_running_ = false;  // last: start_download may join this thread from here on
}

}  // namespace kvc::app
