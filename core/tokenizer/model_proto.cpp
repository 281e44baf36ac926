// Protobuf wire-format writer for sentencepiece's ModelProto (field numbers from sentencepiece_model.proto).
#include "core/tokenizer/model_proto.h"

#include <bit>
#include <cstdint>

namespace kvc::tokenizer {
namespace {

enum WireType : uint32_t { k_varint = 0, k_length_delimited = 2, k_fixed32 = 5 };

// ModelProto
constexpr uint32_t k_model_pieces = 1;
constexpr uint32_t k_model_trainer_spec = 2;
constexpr uint32_t k_model_normalizer_spec = 3;
// ModelProto.SentencePiece
constexpr uint32_t k_piece_piece = 1;
constexpr uint32_t k_piece_score = 2;
constexpr uint32_t k_piece_type = 3;
// TrainerSpec
constexpr uint32_t k_trainer_model_type = 3;
constexpr uint32_t k_trainer_vocab_size = 4;
constexpr uint32_t k_trainer_byte_fallback = 35;
constexpr uint32_t k_trainer_unk_id = 40;
constexpr uint32_t k_trainer_bos_id = 41;
constexpr uint32_t k_trainer_eos_id = 42;
constexpr uint32_t k_trainer_pad_id = 43;
constexpr uint32_t k_trainer_unk_piece = 45;
constexpr uint32_t k_trainer_bos_piece = 46;
constexpr uint32_t k_trainer_eos_piece = 47;
constexpr uint32_t k_trainer_pad_piece = 48;
constexpr int32_t k_model_type_bpe = 2;
// NormalizerSpec
constexpr uint32_t k_norm_name = 1;
constexpr uint32_t k_norm_add_dummy_prefix = 3;
constexpr uint32_t k_norm_remove_extra_whitespaces = 4;
constexpr uint32_t k_norm_escape_whitespaces = 5;

class Writer {
 public:
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void tag(uint32_t field, WireType wire) { varint((uint64_t{field} << 3) | wire); }
  // int32 and enums: negative values are sign-extended to 64 bits (10 bytes on the wire).
  void int32_field(uint32_t field, int32_t v) {
    tag(field, k_varint);
    varint(static_cast<uint64_t>(static_cast<int64_t>(v)));
  }
  void bool_field(uint32_t field, bool v) {
    tag(field, k_varint);
    varint(v ? 1 : 0);
  }
  void float_field(uint32_t field, float v) {
    tag(field, k_fixed32);
    const auto bits = std::bit_cast<uint32_t>(v);
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  }
  void bytes_field(uint32_t field, std::string_view bytes) {
    tag(field, k_length_delimited);
    varint(bytes.size());
    out_.append(bytes);
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

}  // namespace

std::string serialize_model_proto(const Vocabulary& vocab, bool add_dummy_prefix) {
  Writer model;
  bool has_bytes = false;
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    Writer piece;
    piece.bytes_field(k_piece_piece, vocab.tokens[i]);
    piece.float_field(k_piece_score, vocab.scores[i]);
    piece.int32_field(k_piece_type, vocab.types[i]);
    model.bytes_field(k_model_pieces, piece.str());
    has_bytes = has_bytes || vocab.types[i] == static_cast<int32_t>(TokenType::byte);
  }

  Writer trainer;
  trainer.int32_field(k_trainer_model_type, k_model_type_bpe);
  trainer.int32_field(k_trainer_vocab_size, static_cast<int32_t>(vocab.tokens.size()));
  trainer.bool_field(k_trainer_byte_fallback, has_bytes);
  const auto special = [&](uint32_t id_field, uint32_t piece_field, int32_t id) {
    trainer.int32_field(id_field, id);
    if (id >= 0) trainer.bytes_field(piece_field, vocab.tokens[static_cast<size_t>(id)]);
  };
  special(k_trainer_unk_id, k_trainer_unk_piece, vocab.unk_id);
  special(k_trainer_bos_id, k_trainer_bos_piece, vocab.bos_id);
  special(k_trainer_eos_id, k_trainer_eos_piece, vocab.eos_id);
  special(k_trainer_pad_id, k_trainer_pad_piece, vocab.pad_id);
  model.bytes_field(k_model_trainer_spec, trainer.str());

  Writer normalizer;
  normalizer.bytes_field(k_norm_name, "identity");
  normalizer.bool_field(k_norm_add_dummy_prefix, add_dummy_prefix);
  normalizer.bool_field(k_norm_remove_extra_whitespaces, false);
  normalizer.bool_field(k_norm_escape_whitespaces, true);
  model.bytes_field(k_model_normalizer_spec, normalizer.str());
  return std::move(model.str());
}

}  // namespace kvc::tokenizer
