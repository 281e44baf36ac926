// Byte-level BPE pre-tokenizers: the regular expressions that cut text into words before BPE
// merges, chosen by the vocabulary's tokenizer.ggml.pre, run with PCRE2 (UTF, Unicode classes, JIT).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace kvc::tokenizer {

// Splits text into words as the vocabulary's original tokenizer does. Each expression in turn
// cuts every piece left by the previous ones into its matches and the text between them (the
// Hugging Face "Isolated" split), so no byte is ever dropped; a match never reaches across
// the edge of its piece.
//
//   "Hello world!!"  --llama3-->  "Hello" | " world" | "!!"
//
// Cheap to copy (shares the compiled expressions); split() is safe to call from many threads.
class PreTokenizer {
 public:
  // `pre` is tokenizer.ggml.pre ("" and "default" are llama.cpp's default). Unknown names are
  // ErrorCode::unsupported with the list of known ones.
  static Result<PreTokenizer> create(std::string_view pre);

  // Appends the words of `text` (views into it, in order, covering it exactly) to `words`.
  void split(std::string_view text, std::vector<std::string_view>& words) const;

  // Whether whole words found in the vocabulary skip the merges (Llama 3's ignore_merges).
  bool ignore_merges() const;
  // Whether the vocabulary adds BOS when tokenizer.ggml.add_bos_token is absent.
  bool default_add_bos() const;
  // The canonical name of the pre-tokenizer ("llama3", "qwen2", ...).
  const std::string& name() const;

  // The canonical name of the family whose only expression is `expression` (as a
  // tokenizer.json's Split holds it), or "" when none is.
  static std::string name_for_expression(std::string_view expression);

  // Every tokenizer.ggml.pre value create() accepts.
  static std::vector<std::string> known_names();

 private:
  struct Impl;
  explicit PreTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace kvc::tokenizer
