// train_vocabulary: an adapter over sentencepiece's in-memory trainer.
#include "core/tokenizer/train_vocabulary.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <unordered_map>

namespace kvc::tokenizer {

Result<Vocabulary> train_vocabulary(const std::string& corpus_path, int vocab_size, std::string* serialized_model) {
  if (!std::ifstream(corpus_path).good()) {
    return make_error(ErrorCode::io, "cannot read the tokenizer corpus " + corpus_path);
  }
  if (vocab_size < 260) {
    return make_error(ErrorCode::invalid_argument,
                      "vocabulary size " + std::to_string(vocab_size) +
                          " is too small: byte fallback alone needs 256 pieces plus <unk>, <s>, </s>");
  }
  // minloglevel=2 silences sentencepiece's INFO and WARNING lines (a process-wide setting of
  // the library; only errors are printed after this).
  const std::unordered_map<std::string, std::string> args = {
      {"input", corpus_path},
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "true"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"character_coverage", "0.9995"},
      {"max_sentence_length", "65536"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"num_threads", "1"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"hard_vocab_limit", "true"},
      {"minloglevel", "2"},
  };
  std::string proto;
  const auto trained = sentencepiece::SentencePieceTrainer::Train(args, nullptr, &proto);
  if (!trained.ok()) {
    return make_error(ErrorCode::invalid_argument, "training a " + std::to_string(vocab_size) +
                                                       "-piece vocabulary on " + corpus_path +
                                                       " failed: " + trained.ToString());
  }

  sentencepiece::SentencePieceProcessor sp;
  if (const auto loaded = sp.LoadFromSerializedProto(proto); !loaded.ok()) {
    return make_error(ErrorCode::internal, "sentencepiece cannot load the model it trained: " + loaded.ToString());
  }
  Vocabulary v;
  v.model = "llama";
  const int n = sp.GetPieceSize();
  for (int id = 0; id < n; ++id) {
    v.tokens.push_back(sp.IdToPiece(id));
    v.scores.push_back(sp.GetScore(id));
    // No user-defined symbols are trained, so every other piece is normal.
    TokenType t = TokenType::normal;
    if (sp.IsUnknown(id))
      t = TokenType::unknown;
    else if (sp.IsControl(id))
      t = TokenType::control;
    else if (sp.IsByte(id))
      t = TokenType::byte;
    else if (sp.IsUnused(id))
      t = TokenType::unused;
    v.types.push_back(static_cast<int32_t>(t));
  }
  v.unk_id = sp.unk_id();
  v.bos_id = sp.bos_id();
  v.eos_id = sp.eos_id();
  v.pad_id = sp.pad_id();
  if (serialized_model) *serialized_model = std::move(proto);
  return v;
}

}  // namespace kvc::tokenizer
