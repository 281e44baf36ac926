// kvchat-cli: the headless command line of kvchat.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <new>

#include "app/cli/cli_common.h"

int main(int argc, char** argv) {
  CLI::App app{"kvchat-cli: local LLM chat with a KV cache that never recomputes history"};
  app.set_version_flag("--version", std::string("kvchat-cli ") + KVC_VERSION);
  app.require_subcommand(1);
  kvc::cli::register_generate(app);
  kvc::cli::register_chat(app);
  kvc::cli::register_inspect(app);
  kvc::cli::register_bench(app);
  kvc::cli::register_tokenize(app);
  kvc::cli::register_logits(app);
  kvc::cli::register_quantize(app);
  kvc::cli::register_mkmodel(app);
  kvc::cli::register_perplexity(app);
  kvc::cli::register_bench_cache(app);
  kvc::cli::register_convert_vocab(app);
  kvc::cli::register_serve(app);
  kvc::cli::register_render_chat(app);
  kvc::cli::register_pull(app);
  kvc::cli::register_export(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) { return app.exit(e); } catch (const std::bad_alloc&) {
    // A last resort: sizes from files are checked before anything is allocated for them.
    std::fprintf(stderr, "kvchat-cli: out of memory\n");
    return 1;
  }
  return 0;
}
