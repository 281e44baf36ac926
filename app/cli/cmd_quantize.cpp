// kvchat-cli quantize: convert a GGUF model's weights to Q8_0, Q4_K_M, Q5_K_M, Q3_K_M, Q2_K, F16, ...
#include <cstdio>

#include "app/cli/cli_common.h"
#include "core/model/quantize.h"

namespace kvc::cli {

namespace {

struct QuantizeArgs {
  std::string in, out, type;
  int threads = 0;
  bool quiet = false;
  std::string data_dir;
};

int run_quantize(const QuantizeArgs& a) {
  auto target = model::parse_file_type(a.type);
  if (!target) {
    return report(make_error(ErrorCode::invalid_argument,
                             "unknown type '" + a.type + "'; choose one of " + model::file_type_list()));
  }
  Progress bar("quantizing to " + std::string(model::file_type_name(*target)), a.quiet);
  auto st = model::quantize_model(resolve_model_path(a.in, a.data_dir), a.out, *target, a.threads,
                                  [&](size_t done, size_t total) {
                                    bar.update(total ? static_cast<double>(done) / static_cast<double>(total) : 1.0);
                                  });
  if (!st.ok()) return report(st.error());
  bar.done();
  if (!a.quiet) std::fprintf(stderr, "wrote %s\n", a.out.c_str());
  return 0;
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  auto* cmd = app.add_subcommand("quantize", "convert a model's weights: quantize IN OUT TYPE");
  cmd->add_option("input", a->in, "GGUF model to read")->required();
  cmd->add_option("output", a->out, "GGUF model to write")->required();
  cmd->add_option("type", a->type,
                  "q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k, f16, bf16 or f32")
      ->required();
  cmd->add_option("-t,--threads", a->threads, "threads (default: one per physical core)");
  cmd->add_flag("-q,--quiet", a->quiet, "no progress on stderr");
  add_data_dir_option(*cmd, a->data_dir);
  cmd->callback([a] {
    if (int rc = run_quantize(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli
