// kvchat-cli logits: write float32 logits at every prompt position (row-major) to a file.
#include <cstdio>

#include "app/cli/cli_common.h"
#include "core/model/session.h"

namespace kvc::cli {

namespace {

struct LogitsArgs {
  ModelOptions model;
  std::string prompt;
  std::string out;
  bool special = false;
};

int run_logits(const LogitsArgs& a) {
  auto loaded = load_model(a.model);
  if (!loaded.ok()) return report(loaded.error());
  const model::Model& m = *loaded->model;
  const auto ids = m.tokenizer().encode(a.prompt, m.tokenizer().wants_bos(), a.special);
  auto session = model::Session::create(
      m, std::max<int64_t>(context_length(a.model, m), static_cast<int64_t>(ids.size())), a.model.n_batch);
  if (!session.ok()) return report(session.error());
  auto logits = session->evaluate_all(ids);
  if (!logits.ok()) return report(logits.error());
  // Write to a temporary name, then rename, so a failed run never leaves a truncated file.
  const std::string tmp = a.out + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return report(make_error(ErrorCode::io, "cannot write " + tmp));
  const size_t n = logits->size();
  const bool ok = std::fwrite(logits->data(), sizeof(float), n, f) == n;
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), a.out.c_str()) != 0) {
    std::remove(tmp.c_str());
    return report(make_error(ErrorCode::io, "writing " + a.out + " failed (disk full?)"));
  }
  if (!a.model.quiet) {
    std::fprintf(stderr, "wrote %zu x %lld logits (%zu tokens) to %s\n", ids.size(),
                 static_cast<long long>(m.config().n_vocab), ids.size(), a.out.c_str());
  }
  return 0;
}

}  // namespace

void register_logits(CLI::App& app) {
  auto a = std::make_shared<LogitsArgs>();
  auto* cmd = app.add_subcommand("logits", "write float32 logits at every prompt position (row-major) to a file");
  add_model_options(*cmd, a->model);
  cmd->add_option("-p,--prompt", a->prompt, "the prompt (BOS is added)")->required();
  cmd->add_option("-o,--output", a->out, "output file")->required();
  cmd->add_flag("--special", a->special, "parse control tokens written in the prompt");
  cmd->callback([a] {
    if (int rc = run_logits(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli
