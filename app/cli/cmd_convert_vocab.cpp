// kvchat-cli convert-vocab: a Hugging Face tokenizer.json (byte-level BPE or SentencePiece) to a
// vocabulary-only GGUF.
#include <cstdio>
#include <filesystem>

#include "app/cli/cli_common.h"
#include "core/model/model_builder.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "core/tokenizer/pre_tokenizer.h"

namespace kvc::cli {

namespace {

struct ConvertVocabArgs {
  std::string input;
  std::string config;
  std::string output;
  tokenizer::HfConvertOptions options;
  bool add_bos = false;
  bool no_bos = false;
};

int run_convert_vocab(const ConvertVocabArgs& a) {
  auto json = read_text_file(a.input, "tokenizer.json");
  if (!json.ok()) return report(json.error());
  std::string config_text;
  std::string config_path = a.config;
  // tokenizer_config.json beside tokenizer.json holds BOS/EOS and the chat template.
  if (config_path.empty()) {
    const auto beside = std::filesystem::path(a.input).parent_path() / "tokenizer_config.json";
    if (std::filesystem::exists(beside)) config_path = beside.string();
  }
  if (!config_path.empty()) {
    auto c = read_text_file(config_path, "tokenizer_config.json");
    if (!c.ok()) return report(c.error());
    config_text = std::move(*c);
  }
  tokenizer::HfConvertOptions options = a.options;
  if (a.add_bos) options.add_bos = true;
  if (a.no_bos) options.add_bos = false;
  std::string chat_template;
  auto vocab = tokenizer::vocabulary_from_hf(*json, config_text, options, &chat_template);
  if (!vocab.ok()) return report(vocab.error());
  // What llama.cpp would read back must load here too.
  if (auto tok = tokenizer::Tokenizer::create(*vocab); !tok.ok()) return report(tok.error());
  if (Status st = model::write_vocabulary_file(*vocab, chat_template, a.output); !st.ok()) return report(st.error());
  const std::string kind = vocab->model == "gpt2" ? "byte-level BPE, " + std::to_string(vocab->merges.size()) +
                                                        " merges, pre-tokenizer " + vocab->pre
                                                  : std::string("SentencePiece, scores from the merges, ") +
                                                        (vocab->add_space_prefix ? "" : "no ") + "space prefix";
  std::fprintf(stderr, "wrote %s: %zu tokens, %s, BOS %d, EOS %d%s\n", a.output.c_str(), vocab->tokens.size(),
               kind.c_str(), vocab->bos_id, vocab->eos_id, chat_template.empty() ? "" : ", with its chat template");
  return 0;
}

}  // namespace

void register_convert_vocab(CLI::App& app) {
  auto a = std::make_shared<ConvertVocabArgs>();
  std::string pres;
  for (const auto& n : tokenizer::PreTokenizer::known_names()) pres += (pres.empty() ? "" : ", ") + n;
  auto* cmd = app.add_subcommand(
      "convert-vocab",
      "write a vocabulary-only GGUF from a Hugging Face tokenizer.json (byte-level BPE or SentencePiece)");
  cmd->add_option("input", a->input, "tokenizer.json")->required();
  cmd->add_option("-o,--output", a->output, "the GGUF file to write")->required();
  cmd->add_option("--config", a->config, "tokenizer_config.json (default: the one beside tokenizer.json, if any)");
  cmd->add_option("--pre", a->options.pre,
                  "tokenizer.ggml.pre (default: recognised from the Split expression); one of: " + pres);
  cmd->add_option("--bos", a->options.bos, "BOS token text (default: tokenizer_config.json's bos_token)");
  cmd->add_option("--eos", a->options.eos, "EOS token text (default: tokenizer_config.json's eos_token)");
  auto* ab = cmd->add_flag("--add-bos", a->add_bos, "the model expects BOS at the start");
  cmd->add_flag("--no-add-bos", a->no_bos, "the model expects no BOS")->excludes(ab);
  cmd->callback([a] {
    if (int rc = run_convert_vocab(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli
