// The tokenizer: a GGUF-style vocabulary, SentencePiece (through the sentencepiece library) or
// byte-level BPE (our own, with PCRE2 pre-tokenizers), plus a streaming decoder.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace kvc::tokenizer {

// GGUF token types (tokenizer.ggml.token_type); 1..6 are SentencePiece's piece types.
enum class TokenType : int32_t {
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

// The vocabulary as a GGUF stores it.
// Invariants (checked by Tokenizer::create, not by this struct): tokens, scores and types have
// the same size; types are 1..6; pieces are non-empty and unique; every id is -1 or in
// [0, tokens.size()). SentencePiece ("llama"): one unknown piece; byte pieces are spelled
// "<0xXX>" and, if any exist, all 256 do. Byte-level BPE ("gpt2"): merges are "left right".
struct Vocabulary {
  std::string model = "llama";  // tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE)
  std::string pre;              // tokenizer.ggml.pre: the BPE pre-tokenizer ("" = llama.cpp's default)
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;       // TokenType values
  std::vector<std::string> merges;  // tokenizer.ggml.merges, BPE only: "left right", rank = index
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;  // tokenizer.ggml.eot_token_id: end of turn (also ends a reply)
  int32_t eom_id = -1;  // tokenizer.ggml.eom_token_id: end of message (likewise)
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = true;           // tokenizer.ggml.add_bos_token
  bool add_eos = false;          // tokenizer.ggml.add_eos_token
  bool add_space_prefix = true;  // tokenizer.ggml.add_space_prefix
};

// The byte value of a piece spelled "<0xXX>" (upper- or lower-case hex), or -1.
int parse_byte_piece(std::string_view piece);

// Tokenizes like llama.cpp (its expected ids for the Llama 2, Phi-3, GPT-2, Llama 3, Qwen,
// DeepSeek, Falcon, StarCoder, Refact and MPT vocabularies are in the tests).
// SentencePiece (`tokenizer.ggml.model = llama`): no normalization, whitespace kept as it is
// (never collapsed or trimmed), and a dummy prefix space before every run of plain text when
// add_space_prefix is on. Byte-level BPE (`gpt2`): see BpeModel and PreTokenizer.
//
// Special tokens. With parse_special, control and unknown pieces written in the text (e.g.
// "<s>", "<|im_end|>") become their ids; user-defined pieces always do. The text is split at
// them, longest piece first, and each piece of plain text between them is tokenized on its own.
// The dummy prefix: llama.cpp (2025 snapshot, llama-vocab.cpp, tokenize, SPM case) adds it to
// EVERY plain-text fragment, i.e. at the start of the text and again after each special token
// ("<|im_start|>user" -> <|im_start|> "▁user"), which is also what Hugging Face's "legacy"
// Llama tokenizer does. We do the same, so that our ids equal llama.cpp's.
// encode_continuation() is for text that continues an existing token stream: it omits the
// dummy prefix before a leading fragment of plain text (there is no start of text there).
//
// Cheap to copy (shares its immutable state); encode/decode are safe to call from many threads.
class Tokenizer {
 public:
  // Validates the vocabulary (sizes, types, ids, byte pieces, merges) with messages naming the
  // GGUF key and token at fault; ErrorCode::unsupported for a model type other than "llama" or
  // "gpt2", or a pre-tokenizer not known.
  static Result<Tokenizer> create(const Vocabulary& vocab);

  // Tokenizes the start of a sequence. add_bos: prepend BOS (when the vocabulary has one; ask
  // wants_bos() whether the model expects it). EOS is never appended (see wants_eos()).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
  // Tokenizes text appended to an existing stream: no BOS, no dummy prefix at its very start.
  std::vector<int32_t> encode_continuation(std::string_view text, bool parse_special) const;

  // Text of the ids: control, unknown and unused tokens give nothing; byte tokens are joined
  // into UTF-8 (invalid sequences become U+FFFD); the dummy-prefix space at the start is removed.
  std::string decode(std::span<const int32_t> ids) const;

  int32_t n_vocab() const;
  int32_t bos() const;     // -1 when absent
  int32_t eos() const;     // -1 when absent
  bool wants_bos() const;  // the vocabulary's add_bos flag
  bool wants_eos() const;  // the vocabulary's add_eos flag
  bool add_space_prefix() const;
  // "llama" (SentencePiece) or "gpt2" (byte-level BPE).
  const std::string& model() const;
  TokenType type(int32_t id) const;
  bool is_control(int32_t id) const;
  // EOS, EOT and EOM as the vocabulary names them, and the end-of-turn tokens of chat models
  // found by their text as llama.cpp does ("<|im_end|>", "<|eot_id|>", "<|eom_id|>",
  // "<end_of_turn>", "<|end|>", "<|endoftext|>", "<|return|>", "<|call|>", "<EOT>",
  // "<｜end▁of▁sentence｜>"). Ids out of range are not.
  bool is_end_of_generation(int32_t id) const;
  std::string_view piece(int32_t id) const;  // the raw piece text ("▁the", "<0x0A>", "<s>")
  // The id of a piece spelled exactly so, or -1.
  int32_t find_piece(std::string_view piece) const;
  // The bytes a token contributes to decoded text, before UTF-8 assembly and prefix removal.
  std::string_view token_bytes(int32_t id) const;
  // The most bytes of input text one token can stand for (its piece, written as text, or the
  // bytes it decodes to); 0 when a token's reach has no bound (SentencePiece without byte
  // pieces merges a run of unknown characters into one <unk>). A text of n bytes is at least
  // ceil(n / max_bytes_per_token()) tokens, which tells that a text cannot fit a context
  // before it is tokenized.
  size_t max_bytes_per_token() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::vector<int32_t> encode_impl(std::string_view text, bool add_bos, bool parse_special, bool prefix_at_start) const;
  std::shared_ptr<const Impl> impl_;
};

// Turns ids into text as they are generated. Bytes of an incomplete UTF-8 sequence (from byte
// fallback tokens) are held back until the sequence completes; an invalid sequence becomes
// U+FFFD. The dummy-prefix space is stripped only from the first byte of the stream.
class StreamDecoder {
 public:
  // strip_leading_space: drop a space at the very start of the stream (only done when the
  // tokenizer adds space prefixes).
  explicit StreamDecoder(Tokenizer tokenizer, bool strip_leading_space = true);

  // The text that became complete with this token (often empty or one piece).
  std::string push(int32_t id);
  // Ends the stream: held-back bytes come out as U+FFFD. The decoder starts a new stream after.
  std::string finish();
  // Number of bytes held back waiting for the rest of a UTF-8 sequence.
  size_t n_pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence, at most 3
  bool strip_leading_space_;
  bool at_start_ = true;
};

// Appends to `out` every complete UTF-8 sequence at the front of `bytes` and removes it from
// `bytes`; invalid bytes become U+FFFD. An incomplete sequence at the end stays in `bytes`,
// unless `final`, when it too becomes U+FFFD.
void drain_utf8(std::string& bytes, std::string& out, bool final);

}  // namespace kvc::tokenizer
