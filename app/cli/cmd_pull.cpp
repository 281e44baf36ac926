// kvchat-cli pull: download a GGUF model into DATA_DIR/models (a URL or Hugging Face OWNER/REPO/FILE).
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>

#include "app/cli/cli_common.h"
#include "app/common/demo_model.h"
#include "app/fetch/downloader.h"
#include "app/fetch/model_catalog.h"
#include "storage/data_dir.h"

namespace kvc::cli {

namespace {

struct PullArgs {
  std::string source;
  std::string output;
  std::string sha256;
  std::string data_dir;
  int retries = 5;
  bool list = false;
  bool quiet = false;
};

std::atomic<bool> g_cancel{false};

void on_interrupt(int) { g_cancel = true; }

int list_catalog() {
  auto catalog = fetch::load_catalog(app::asset_dir() / "models" / "catalog.json");
  if (!catalog.ok()) return report(catalog.error());
  for (const auto& e : *catalog) {
    std::printf("%s\n  kvchat-cli pull %s\n  about %s, %s", e.name.c_str(), e.source.c_str(),
                fetch::format_size(static_cast<double>(e.size_bytes)).c_str(), e.licence.c_str());
    if (!e.needs.empty()) std::printf("; needs %s", e.needs.c_str());
    std::printf("\n");
    if (!e.notes.empty()) std::printf("  %s\n", e.notes.c_str());
  }
  return 0;
}

int run_pull(const PullArgs& a) {
  if (a.list) return list_catalog();
  if (a.source.empty())
    return report(
        make_error(ErrorCode::invalid_argument, "pull wants a URL or OWNER/REPO/FILE.gguf (--list shows some)"));
  auto url = fetch::resolve_source(a.source);
  if (!url.ok()) return report(url.error());
  fetch::DownloadRequest req;
  req.url = *url;
  req.models_dir = storage::resolve_data_dir(a.data_dir) / "models";
  req.file_name = a.output;
  req.expected_sha256 = a.sha256;
  req.max_attempts = a.retries;
  // A file-size limit (ulimit -f) makes write() fail with EFBIG instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  if (!a.quiet) std::fprintf(stderr, "pull: %s\n", req.url.c_str());
  int last_decile = -1;
  std::string last_phase;
  auto progress = [&](const fetch::DownloadProgress& p) {
    if (a.quiet) return;
    const std::string line = fetch::format_progress(p);
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      return;
    }
    // Not a terminal: a line per tenth of the file and per change of phase.
    const int decile = p.total_bytes ? static_cast<int>(10 * p.done_bytes / p.total_bytes) : -1;
    if (decile != last_decile || p.phase != last_phase) std::fprintf(stderr, "%s\n", line.c_str());
    last_decile = decile;
    last_phase = p.phase;
  };
  auto r = fetch::download_model(req, progress, &g_cancel);
  if (!a.quiet && tty) std::fprintf(stderr, "\n");
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!r.ok()) {
    const int rc = report(r.error());
    return g_cancel ? 130 : rc;
  }
  if (!a.quiet) {
    if (r->already_present) {
      std::fprintf(stderr, "pull: %s is already downloaded\n", r->path.c_str());
    } else {
      std::fprintf(stderr, "pull: %s, %s%s in %d attempt%s\n", r->path.c_str(),
                   fetch::format_size(static_cast<double>(r->n_bytes)).c_str(),
                   r->n_resumed_bytes
                       ? (" (" + fetch::format_size(static_cast<double>(r->n_resumed_bytes)) + " resumed)").c_str()
                       : "",
                   r->n_attempts, r->n_attempts == 1 ? "" : "s");
      std::fprintf(stderr, "pull: sha256 %s (%s)\n", r->sha256.c_str(),
                   r->sha256_source.empty() ? "the server publishes none to check against; recorded"
                                            : ("matches " + r->sha256_source).c_str());
    }
    if (!r->model_warning.empty())
      std::fprintf(stderr, "pull: warning: kvchat cannot run this model: %s\n", r->model_warning.c_str());
  }
  std::printf("%s\n", r->path.c_str());
  return 0;
}

}  // namespace

void register_pull(CLI::App& app) {
  auto a = std::make_shared<PullArgs>();
  auto* cmd = app.add_subcommand("pull", "download a GGUF model into DATA_DIR/models (resumes, checks the sha256)");
  cmd->add_option("source", a->source,
                  "an http(s):// URL, or a Hugging Face OWNER/REPO/FILE.gguf "
                  "(https://huggingface.co/OWNER/REPO/resolve/main/FILE.gguf)");
  cmd->add_option("-o,--output", a->output, "file name in DATA_DIR/models (default: the URL's last part)");
  cmd->add_option("--sha256", a->sha256, "the file's expected sha256 (default: the one the server publishes, if any)");
  cmd->add_option("--retries", a->retries, "attempts before giving up on a dropped connection (default 5)")
      ->check(CLI::Range(1, 100));
  cmd->add_flag("--list", a->list, "list the small models kvchat suggests (assets/models/catalog.json)");
  cmd->add_flag("-q,--quiet", a->quiet, "no progress on stderr");
  add_data_dir_option(*cmd, a->data_dir);
  cmd->callback([a] {
    if (int rc = run_pull(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli
