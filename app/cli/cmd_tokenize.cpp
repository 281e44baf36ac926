// kvchat-cli tokenize: print the token ids (or pieces) of a text.
#include <cstdio>

#include "app/cli/cli_common.h"
#include "core/gguf/gguf_file.h"
#include "core/tokenizer/tokenizer.h"

namespace kvc::cli {

namespace {

struct TokenizeArgs {
  std::string model;
  std::string prompt;
  std::string file;
  bool pieces = false;
  bool no_bos = false;
  bool special = false;
  std::string data_dir;
};

int run_tokenize(const TokenizeArgs& a) {
  // Only the tokenizer is needed: read the metadata, never touch the weights.
  const std::string path = resolve_model_path(a.model, a.data_dir);
  auto file = gguf::GgufFile::open(path);
  if (!file.ok()) return report(file.error());
  auto in_file = [&](const Error& e) { return report(make_error(e.code, path + ": " + e.message)); };
  auto vocab = model::vocabulary_from_gguf(*file);
  if (!vocab.ok()) return in_file(vocab.error());
  auto tok = tokenizer::Tokenizer::create(*vocab);
  if (!tok.ok()) return in_file(tok.error());
  std::string text = a.prompt;
  if (!a.file.empty()) {
    auto bytes = read_text_file(a.file, "text file");
    if (!bytes.ok()) return report(bytes.error());
    text = std::move(*bytes);
  }
  const auto ids = tok->encode(text, !a.no_bos && tok->wants_bos(), a.special);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) std::fputc(' ', stdout);
    if (a.pieces) {
      std::printf("%d:'%s'", ids[i], std::string(tok->piece(ids[i])).c_str());
    } else {
      std::printf("%d", ids[i]);
    }
  }
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand("tokenize", "print the token ids of a text, space-separated on one line");
  cmd->add_option("-m,--model", a->model, "GGUF model file, or a vocabulary-only GGUF")->required();
  auto* prompt = cmd->add_option("-p,--prompt", a->prompt, "the text");
  cmd->add_option("-f,--file", a->file, "read the text from this file, byte for byte")->excludes(prompt);
  cmd->add_flag("--pieces", a->pieces, "show each token's piece next to its id");
  cmd->add_flag("--no-bos", a->no_bos,
                "do not add the BOS token (added only where the vocabulary asks for it, as llama.cpp does)");
  cmd->add_flag("--special", a->special, "parse control tokens written in the text");
  add_data_dir_option(*cmd, a->data_dir);
  cmd->callback([a, cmd] {
    if (cmd->count("--prompt") + cmd->count("--file") == 0) {
      throw CLI::RequiredError("tokenize needs the text: -p TEXT or -f FILE");
    }
    if (int rc = run_tokenize(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli
