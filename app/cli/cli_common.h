// Options and helpers shared by kvchat-cli's commands.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/kv/kv_format.h"
#include "core/model/context_budget.h"
#include "core/model/model.h"
#include "core/sampling/generate_options.h"
#include "core/util/result.h"

namespace kvc::cli {

// Options every model-running command takes.
struct ModelOptions {
  std::string model;            // -m
  int threads = 0;              // -t; 0 = one per physical core
  std::string backend = "cpu";  // --backend: cpu, cuda or auto
  int64_t n_ctx = 0;            // -c; 0 = the model's training context, capped by ctx_memory_mib
  int64_t ctx_memory_mib =
      model::k_default_ctx_kv_budget_bytes >> 20;  // --ctx-memory: one context's F16 KV may take this much
  int64_t n_batch = 256;
  std::string data_dir;  // --data-dir
  bool quiet = false;    // --quiet: no progress or timings on stderr
};

void add_model_options(CLI::App& cmd, ModelOptions& o, bool model_required = true);
// --data-dir, for commands that take no other model options.
void add_data_dir_option(CLI::App& cmd, std::string& data_dir);
// A model named by path, or by file name inside the data directory's models/ folder.
std::string resolve_model_path(const std::string& path, const std::string& data_dir);
// --kv-type: the KV cache's format for K and V (f16 unless given; kv::k_kv_formats).
void add_kv_type_option(CLI::App& cmd, std::string& kv_type);
// The format a --kv-type (or --k-type, ... named by `flag`) value names; an error listing the choices.
Result<kv::KvFormat> parse_kv_type(std::string_view flag, const std::string& name);

// -n (max_tokens, with n_help) and the sampling flags, straight into the one options type;
// their defaults are GenerateOptions' (README.md "Generation settings").
void add_generate_options(CLI::App& cmd, sampling::GenerateOptions& o, const std::string& n_help);

// A backend and a model loaded on it, with a progress bar on stderr.
struct Loaded {
  std::unique_ptr<backend::Backend> backend;
  std::unique_ptr<model::Model> model;
};
Result<Loaded> load_model(const ModelOptions& o);

// The context length to use: -c, else the model's trained context cut to what --ctx-memory
// holds (model::default_context).
int64_t context_length(const ModelOptions& o, const model::Model& m);

// A single-line progress bar on stderr for work that may take more than a second; silent
// when stderr is not a terminal, except for a final line.
class Progress {
 public:
  Progress(std::string label, bool quiet);
  void update(double fraction);
  void done();

 private:
  std::string label_;
  bool quiet_;
  bool tty_;
  int last_percent_ = -1;
  std::chrono::steady_clock::time_point start_;
};

// Prints "kvchat-cli: <error>" and a hint, returns the exit code for the error.
int report(const Error& e);

// The whole file, byte for byte; an io error naming `what` (e.g. "prompt file") if unreadable.
Result<std::string> read_text_file(const std::string& path, const std::string& what = "file");

// The median of a sample (0 for none), for benchmark repeats.
double median(std::vector<double> v);

// Formats bytes as "12.3 MiB".
std::string human_bytes(double n_bytes);

// Command entry points, each registering itself on the app; run() is called when chosen.
void register_generate(CLI::App& app);
void register_chat(CLI::App& app);
void register_inspect(CLI::App& app);
void register_bench(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_logits(CLI::App& app);
void register_quantize(CLI::App& app);
void register_mkmodel(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_bench_cache(CLI::App& app);
void register_convert_vocab(CLI::App& app);
void register_serve(CLI::App& app);
void register_render_chat(CLI::App& app);
void register_pull(CLI::App& app);
void register_export(CLI::App& app);

// The demo model: built on first use under the data directory from assets/demo/corpus.txt.
Result<std::string> ensure_demo_model(const std::string& data_dir, bool quiet);

}  // namespace kvc::cli
