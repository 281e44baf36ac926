// kvchat-cli generate: stream a continuation of a prompt to stdout.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/cli/cli_common.h"
#include "app/cli/cli_engine.h"
#include "core/sampling/json_schema_grammar.h"

namespace kvc::cli {

namespace {

struct GenerateArgs {
  ModelOptions model;
  std::string prompt;
  std::string prompt_file;
  bool special = false;
  bool no_bos = false;
  std::string kv_type = "f16";
  std::string json_schema_file;  // --json-schema: constrain the output to this schema
  bool json_object = false;      // --grammar-json: constrain the output to a JSON object
  sampling::GenerateOptions generation;
};

int run_generate(const GenerateArgs& a) {
  std::string prompt = a.prompt;
  if (!a.prompt_file.empty()) {
    auto text = read_text_file(a.prompt_file, "prompt file");
    if (!text.ok()) return report(text.error());
    prompt = std::move(*text);
  }
  sampling::GenerateOptions options = a.generation;
  if (a.json_object) options.grammar = sampling::json_object_grammar();
  if (!a.json_schema_file.empty()) {
    auto schema = read_text_file(a.json_schema_file, "JSON schema file");
    if (!schema.ok()) return report(schema.error());
    auto grammar = sampling::json_schema_grammar(*schema);
    if (!grammar.ok()) return report(grammar.error());
    options.grammar = *grammar;
  }
  auto kv_format = parse_kv_type("--kv-type", a.kv_type);
  if (!kv_format.ok()) return report(kv_format.error());
  auto loaded = load_model(a.model);
  if (!loaded.ok()) return report(loaded.error());
  const model::Model& m = *loaded->model;
  auto engine = CliEngine::create(m, context_length(a.model, m), a.model.n_batch, *kv_format);
  if (!engine.ok()) return report(engine.error());

  const std::vector<int32_t> ids = m.tokenizer().encode(prompt, !a.no_bos && m.tokenizer().wants_bos(), a.special);
  if (ids.empty())
    return report(make_error(ErrorCode::invalid_argument, "the prompt is empty: give one with -p or -f"));
  auto r = engine->run(0, ids, options, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  if (!r.ok()) return report(r.error());
  std::fputc('\n', stdout);
  if (!a.model.quiet) {
    const auto n_prompt = static_cast<double>(ids.size());
    std::fprintf(
        stderr, "\nprompt: %zu tokens in %.1f ms (%.1f tok/s) | generated %zu tokens, %.1f tok/s | stop: %s | %s\n",
        ids.size(), r->prefill_ms, r->prefill_ms > 0 ? 1000.0 * n_prompt / r->prefill_ms : 0.0, r->tokens.size(),
        decode_tokens_per_s(*r), model::to_string(r->reason), std::string(m.backend().name()).c_str());
  }
  return 0;
}

}  // namespace

void register_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "continue a prompt; the continuation streams to stdout, logs to stderr");
  add_model_options(*cmd, a->model, false);
  auto* p = cmd->add_option("-p,--prompt", a->prompt, "the prompt text");
  cmd->add_option("-f,--file", a->prompt_file, "read the prompt from a file")->excludes(p);
  cmd->add_flag("--special", a->special, "parse control tokens written in the prompt (e.g. <s>)");
  cmd->add_flag("--no-bos", a->no_bos, "do not start the prompt with the BOS token");
  cmd->add_flag_callback(
      "--ignore-eos", [a] { a->generation.stop_at_eog = false; },
      "go on past the end-of-text token until -n tokens (benchmarks: answers of a known length)");
  add_kv_type_option(*cmd, a->kv_type);
  auto* schema = cmd->add_option("--json-schema", a->json_schema_file,
                                 "constrain the output to JSON valid against this JSON Schema file (strict subset)");
  cmd->add_flag("--grammar-json", a->json_object, "constrain the output to a JSON object")->excludes(schema);
  add_generate_options(*cmd, a->generation, "tokens to generate; -1 = until end of text");
  cmd->callback([a] {
    if (int rc = run_generate(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli
