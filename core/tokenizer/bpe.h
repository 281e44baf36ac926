// Byte-level BPE (tokenizer.ggml.model = gpt2): pre-tokenized words, byte-level spelling, then
// the vocabulary's merges applied lowest rank first.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/pre_tokenizer.h"
#include "core/util/result.h"

namespace kvc::tokenizer {

struct Vocabulary;

// Encodes plain text (no special tokens in it) into ids. Immutable once made; encode() is
// safe to call from many threads.
//
// One word, "Ġlower" (" lower" spelled in the byte-level alphabet):
//   Ġ l o w e r  ->  merge (Ġ,l) rank 12  ->  Ġl o w e r  -> ... ->  Ġlow er  ->  Ġlower
// At each step the adjacent pair of lowest merge rank is joined (the leftmost on a tie), until
// no adjacent pair has a merge. Each final symbol is a token; a symbol the vocabulary lacks
// falls back to its single bytes' tokens (as llama.cpp does).
class BpeModel {
 public:
  // Reads tokenizer.ggml.merges ("left right", rank = index) and the pre-tokenizer; errors name
  // the merge at fault.
  static Result<BpeModel> create(const Vocabulary& vocab);

  void encode(std::string_view text, std::vector<int32_t>& out) const;

  const PreTokenizer& pre_tokenizer() const { return pre_; }

 private:
  BpeModel(PreTokenizer pre) : pre_(std::move(pre)) {}
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t id_of(std::string_view piece) const;
  int rank_of(std::string_view left, std::string_view right) const;

  // Lookups by string_view without building a std::string.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  template <typename V>
  using Map = std::unordered_map<std::string, V, Hash, std::equal_to<>>;

  PreTokenizer pre_;
  Map<int32_t> ids_;  // piece -> id, every token (as llama.cpp looks them up)
  Map<int> ranks_;    // left + '\n' + right -> merge rank
};

}  // namespace kvc::tokenizer
