// Options, model loading, progress and error reporting shared by kvchat-cli's commands.
#include "app/cli/cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/model/context_budget.h"
#include "storage/data_dir.h"

namespace kvc::cli {

void add_model_options(CLI::App& cmd, ModelOptions& o, bool model_required) {
  auto* m = cmd.add_option("-m,--model", o.model, "GGUF model file (default: the built-in demo model)");
  if (model_required) m->required();
  cmd.add_option("-t,--threads", o.threads, "compute threads (default: one per physical core)")
      ->check(CLI::Range(0, 1024));
  cmd.add_option("--backend", o.backend,
                 "compute backend: cpu, cuda (the first GPU) or auto (cuda when a GPU is usable). Default cpu: "
                 "the CUDA backend is built and tested without a GPU but has not yet been run on one")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  cmd.add_option("-c,--ctx-size", o.n_ctx,
                 "context length in tokens (default: the model's trained context, cut to what --ctx-memory holds)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  cmd.add_option(
         "--ctx-memory", o.ctx_memory_mib,
         "MiB that one context's KV cache (F16) may take; sizes the default context (inspect shows the estimate)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd.add_option("-b,--batch-size", o.n_batch, "tokens evaluated per forward pass during prefill")
      ->check(CLI::Range(int64_t{1}, int64_t{8192}));
  add_data_dir_option(cmd, o.data_dir);
  cmd.add_flag("-q,--quiet", o.quiet, "no progress or timings on stderr");
}

void add_data_dir_option(CLI::App& cmd, std::string& data_dir) {
  cmd.add_option("--data-dir", data_dir,
                 "kvchat's data directory; models/ in it is searched for -m names (default: $KVCHAT_DATA_DIR or "
                 "~/.local/share/kvchat)");
}

std::string resolve_model_path(const std::string& path, const std::string& data_dir) {
  std::error_code ec;
  if (path.empty() || std::filesystem::exists(path, ec)) return path;
  const auto in_data = storage::resolve_data_dir(data_dir) / "models" / path;
  return std::filesystem::exists(in_data, ec) ? in_data.string() : path;
}

void add_kv_type_option(CLI::App& cmd, std::string& kv_type) {
  cmd.add_option("--kv-type", kv_type,
                 "KV cache format for K and V: " + std::string(kv::k_kv_format_names) +
                     " (int8/int4 take about 0.53x/0.28x of f16's memory and disk; *h: outlier-aware)")
      ->capture_default_str();
}

Result<kv::KvFormat> parse_kv_type(std::string_view flag, const std::string& name) {
  if (auto f = kv::parse_kv_format(name)) return *f;
  return make_error(ErrorCode::invalid_argument,
                    std::string(flag) + " must be " + std::string(kv::k_kv_format_names) + ", got '" + name + "'");
}

void add_generate_options(CLI::App& cmd, sampling::GenerateOptions& o, const std::string& n_help) {
  cmd.add_option("-n,--n-predict", o.max_tokens, n_help)->capture_default_str();
  sampling::SamplingParams& p = o.sampling;
  cmd.add_option("--temp", p.temperature, "sampling temperature; 0 = greedy")->capture_default_str();
  cmd.add_option("--top-k", p.top_k, "keep the k most likely tokens; 0 = off")->capture_default_str();
  cmd.add_option("--top-p", p.top_p, "nucleus sampling: keep the smallest set with this much probability; 1 = off")
      ->capture_default_str();
  cmd.add_option("--min-p", p.min_p, "drop tokens less likely than min-p times the best; 0 = off")
      ->capture_default_str();
  cmd.add_option("--repeat-penalty", p.repeat_penalty, "penalty for recently seen tokens; 1 = off")
      ->capture_default_str();
  cmd.add_option("--repeat-last-n", p.repeat_last_n, "how many recent tokens the penalty looks at")
      ->capture_default_str();
  cmd.add_option("-s,--seed", p.seed, "random seed; the same seed gives the same output; -1 = a random one")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
}

Result<Loaded> load_model(const ModelOptions& o) {
  std::string path = resolve_model_path(o.model, o.data_dir);
  if (path.empty()) {
    auto demo = ensure_demo_model(o.data_dir, o.quiet);
    if (!demo.ok()) return demo.error();
    path = *demo;
  }
  Loaded l;
  auto be = backend::create_backend(o.backend, o.threads);
  if (!be.ok()) return be.error();
  l.backend = std::move(*be);
  Progress bar("loading " + path, o.quiet);
  model::LoadOptions lo;
  lo.n_ctx = o.n_ctx;
  lo.progress = [&](size_t done, size_t total) {
    bar.update(total ? static_cast<double>(done) / static_cast<double>(total) : 1.0);
  };
  auto m = model::Model::load(path, *l.backend, lo);
  if (!m.ok()) return m.error();
  bar.done();
  l.model = std::move(*m);
  return l;
}

int64_t context_length(const ModelOptions& o, const model::Model& m) {
  if (o.n_ctx > 0) return o.n_ctx;
  return model::default_context(m.config(), o.ctx_memory_mib << 20);
}

Progress::Progress(std::string label, bool quiet)
    : label_(std::move(label)),
      quiet_(quiet),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(double fraction) {
  if (quiet_ || !tty_) return;
  const int pct = static_cast<int>(fraction * 100.0);
  if (pct == last_percent_) return;
  // Draw only once the work has taken a moment, so quick steps do not flicker.
  if (std::chrono::steady_clock::now() - start_ < std::chrono::milliseconds(300) && pct < 100) return;
  last_percent_ = pct;
  const int width = 30;
  const int filled = pct * width / 100;
  std::fprintf(stderr, "\r%s [%.*s%*s] %3d%%", label_.c_str(), filled, "##############################", width - filled,
               "", pct);
  std::fflush(stderr);
}

void Progress::done() {
  if (quiet_) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_ && last_percent_ >= 0) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s: done in %.2f s\n", label_.c_str(), s);
}

Result<std::string> read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();  // an empty file sets text's failbit, and is no error
  if (!in.is_open() || in.bad()) {
    return make_error(ErrorCode::io, "cannot read " + what + " " + path + ": check that it exists and is readable");
  }
  return text.str();
}

int report(const Error& e) {
  std::fprintf(stderr, "kvchat-cli: %s\n", e.what().c_str());
  switch (e.code) {
    case ErrorCode::invalid_argument: return 2;
    case ErrorCode::io:
    case ErrorCode::invalid_file:
    case ErrorCode::unsupported: return 3;
    default: return 1;
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

std::string human_bytes(double n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (n >= 1024.0 && u < 4) {
    n /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", n, units[u]);
  return buf;
}

}  // namespace kvc::cli
