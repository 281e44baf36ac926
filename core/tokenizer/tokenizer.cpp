// Tokenizer: vocabulary validation, special-token splitting and the sentencepiece adapter.
#include "core/tokenizer/tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "core/tokenizer/bpe.h"
#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/model_proto.h"
#include "core/util/assert.h"

namespace kvc::tokenizer {

struct Tokenizer::Impl {
  Vocabulary vocab;
  sentencepiece::SentencePieceProcessor sp;             // SentencePiece vocabularies
  std::optional<BpeModel> bpe;                          // byte-level BPE vocabularies
  std::unordered_map<std::string_view, int32_t> id_of;  // views into vocab.tokens
  // Control, unknown and user-defined pieces, longest first (ties by id): the split order.
  std::vector<int32_t> special_ids;
  std::vector<std::string> bytes_of;       // (n_vocab) what each token contributes to decoded text
  std::vector<uint8_t> end_of_generation;  // (n_vocab) 1 for EOS and end-of-turn tokens
  size_t max_bytes_per_token = 0;          // 0: unbounded
};

namespace {

constexpr std::string_view k_space_symbol = "\xe2\x96\x81";  // U+2581, SentencePiece's space

Error vocab_error(std::string message) {
  return make_error(ErrorCode::invalid_file, "tokenizer: " + std::move(message));
}

std::string quoted(std::string_view piece) {
  std::string q = "\"";
  for (const char c : piece) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static constexpr char k_hex[] = "0123456789ABCDEF";
      q += "\\x";
      q += k_hex[u >> 4];
      q += k_hex[u & 15];
    } else {
      q += c;
    }
  }
  return q + "\"";
}

Status check_id(const char* what, const char* key, int32_t id, size_t n_tokens) {
  if (id == -1 || (id >= 0 && static_cast<size_t>(id) < n_tokens)) return {};
  return vocab_error(std::string(what) + " id " + std::to_string(id) + " (" + key +
                     ") is out of range for a vocabulary of " + std::to_string(n_tokens) +
                     " tokens; it must be -1 (absent) or in [0, " + std::to_string(n_tokens) + ")");
}

// Checks everything sentencepiece would otherwise reject with less helpful words (or not at all).
Status validate(Vocabulary& v) {
  if (v.model != "llama" && v.model != "gpt2") {
    return make_error(ErrorCode::unsupported,
                      "tokenizer model \"" + v.model +
                          "\" (tokenizer.ggml.model) is not supported yet; kvchat supports \"llama\" "
                          "(SentencePiece) and \"gpt2\" (byte-level BPE) vocabularies");
  }
  const bool spm = v.model == "llama";
  const size_t n = v.tokens.size();
  if (n == 0) return vocab_error("the vocabulary is empty (tokenizer.ggml.tokens has no entries)");
  if (n > static_cast<size_t>(INT32_MAX)) return vocab_error("the vocabulary has more than 2^31 tokens");
  if (v.scores.size() != n) {
    return vocab_error(std::to_string(n) + " tokens but " + std::to_string(v.scores.size()) +
                       " scores; tokenizer.ggml.scores needs one score per token");
  }
  if (v.types.size() != n) {
    return vocab_error(std::to_string(n) + " tokens but " + std::to_string(v.types.size()) +
                       " types; tokenizer.ggml.token_type needs one type per token");
  }
  KVC_TRY(check_id("BOS", "tokenizer.ggml.bos_token_id", v.bos_id, n));
  KVC_TRY(check_id("EOS", "tokenizer.ggml.eos_token_id", v.eos_id, n));
  KVC_TRY(check_id("EOT", "tokenizer.ggml.eot_token_id", v.eot_id, n));
  KVC_TRY(check_id("EOM", "tokenizer.ggml.eom_token_id", v.eom_id, n));
  KVC_TRY(check_id("unknown-token", "tokenizer.ggml.unknown_token_id", v.unk_id, n));
  KVC_TRY(check_id("padding", "tokenizer.ggml.padding_token_id", v.pad_id, n));

  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(n);
  std::vector<int32_t> unknown_ids;  // tokens of type unknown, in id order
  std::array<int32_t, 256> byte_ids;
  byte_ids.fill(-1);
  size_t n_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string& piece = v.tokens[i];
    const std::string where = "token " + std::to_string(i) + " " + quoted(piece);
    if (piece.empty()) return vocab_error("token " + std::to_string(i) + " is an empty string");
    if (const auto [it, inserted] = seen.emplace(piece, i); !inserted) {
      return vocab_error(where + " duplicates token " + std::to_string(it->second) + "; pieces must be unique");
    }
    if (!std::isfinite(v.scores[i])) return vocab_error(where + " has a score that is not finite");
    const int32_t t = v.types[i];
    if (t < 1 || t > 6) {
      return vocab_error(where + " has type " + std::to_string(t) +
                         " (tokenizer.ggml.token_type); types must be 1..6: normal, unknown, "
                         "control, user-defined, unused, byte");
    }
    if (t == static_cast<int32_t>(TokenType::unknown)) unknown_ids.push_back(static_cast<int32_t>(i));
    if (t == static_cast<int32_t>(TokenType::byte) && spm) {
      const int b = parse_byte_piece(piece);
      if (b < 0) return vocab_error(where + " has type byte but is not spelled <0xXX>");
      if (byte_ids[static_cast<size_t>(b)] >= 0) {
        return vocab_error(where + " repeats the byte of token " + std::to_string(byte_ids[static_cast<size_t>(b)]));
      }
      byte_ids[static_cast<size_t>(b)] = static_cast<int32_t>(i);
      ++n_bytes;
    }
  }
  if (!spm) return {};  // BPE has no unknown piece and no byte pieces to check

  // SentencePiece needs exactly one unknown piece: the token that unknown_token_id names (some
  // converters type it control, as Phi-3's <unk>), else the only unknown-type token. Other
  // unknown-type tokens (Phi-3's [PAD...] padding) become unused, which encoding never
  // produces, as llama.cpp never produces them from text.
  if (v.unk_id == -1 && !unknown_ids.empty()) v.unk_id = unknown_ids.front();
  if (v.unk_id == -1) {
    return vocab_error(
        "no token has type unknown (2) and tokenizer.ggml.unknown_token_id is not set; a "
        "SentencePiece vocabulary needs an unknown token (usually <unk>)");
  }
  const auto unk_type = static_cast<TokenType>(v.types[static_cast<size_t>(v.unk_id)]);
  if (unk_type != TokenType::unknown && unk_type != TokenType::control) {
    return vocab_error(
        "the unknown-token id " + std::to_string(v.unk_id) + " (tokenizer.ggml.unknown_token_id) names " +
        quoted(v.tokens[static_cast<size_t>(v.unk_id)]) + ", which is neither of type unknown nor control" +
        (unknown_ids.empty() ? std::string() : "; the unknown-type token is " + std::to_string(unknown_ids.front())));
  }
  v.types[static_cast<size_t>(v.unk_id)] = static_cast<int32_t>(TokenType::unknown);
  for (const int32_t id : unknown_ids) {
    if (id != v.unk_id) v.types[static_cast<size_t>(id)] = static_cast<int32_t>(TokenType::unused);
  }
  if (n_bytes != 0 && n_bytes != 256) {
    const auto missing = std::find(byte_ids.begin(), byte_ids.end(), -1) - byte_ids.begin();
    return vocab_error("the vocabulary has " + std::to_string(n_bytes) +
                       " byte tokens but byte fallback needs all 256; <0x" +
                       std::string(1, "0123456789ABCDEF"[missing >> 4]) +
                       std::string(1, "0123456789ABCDEF"[missing & 15]) + "> is missing");
  }
  return {};
}

bool is_end_of_turn_name(std::string_view piece) {
  static constexpr std::array<std::string_view, 10> k_names = {"<|im_end|>",
                                                               "<|eot_id|>",
                                                               "<|eom_id|>",
                                                               "<end_of_turn>",
                                                               "<|end|>",
                                                               "<|endoftext|>",
                                                               "<|return|>",
                                                               "<|call|>",
                                                               "<EOT>",
                                                               "<\xef\xbd\x9c"
                                                               "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"};
  return std::find(k_names.begin(), k_names.end(), piece) != k_names.end();
}

// gpt-oss's harmony tokens, as llama.cpp treats them: the control tokens that frame a message's
// channel (<|start|>, <|channel|>, <|message|>, <|constrain|>) are written out when decoding, so a
// reply's text shows its channels; and where <|return|> and <|call|> end a generation, <|end|>
// only ends one message of the reply (its analysis, before the final answer): it is no
// end-of-generation token, and is written out too.
void harmony_tokens(const std::unordered_map<std::string_view, int32_t>& ids, std::vector<std::string>& bytes_of,
                    std::vector<uint8_t>& end_of_generation) {
  const auto id_of = [&](std::string_view piece) {
    const auto it = ids.find(piece);
    return it == ids.end() ? -1 : it->second;
  };
  for (const std::string_view piece : {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"}) {
    if (const int32_t id = id_of(piece); id >= 0) bytes_of[static_cast<size_t>(id)] = std::string(piece);
  }
  const int32_t ret = id_of("<|return|>");
  const int32_t call = id_of("<|call|>");
  const int32_t end = id_of("<|end|>");
  if (ret < 0 || call < 0 || end < 0) return;
  if (!end_of_generation[static_cast<size_t>(ret)] || !end_of_generation[static_cast<size_t>(call)]) return;
  end_of_generation[static_cast<size_t>(end)] = 0;
  bytes_of[static_cast<size_t>(end)] = "<|end|>";
}

// A part of the text to encode: plain text [begin, end), or a special token.
struct Fragment {
  int32_t special_id = -1;
  size_t begin = 0;
  size_t end = 0;
};

}  // namespace

int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int v = 0;
  for (const char c : piece.substr(3, 2)) {
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'A' && c <= 'F')
      v |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else
      return -1;
  }
  return v;
}

Result<Tokenizer> Tokenizer::create(const Vocabulary& vocab) {
  auto impl = std::make_shared<Impl>();
  impl->vocab = vocab;
  Vocabulary& v = impl->vocab;
  KVC_TRY(validate(v));

  const bool spm = v.model == "llama";
  if (spm) {
    const auto status = impl->sp.LoadFromSerializedProto(serialize_model_proto(v, false));
    if (!status.ok()) { return vocab_error("sentencepiece rejected the vocabulary: " + status.ToString()); }
    KVC_ASSERT(impl->sp.GetPieceSize() == static_cast<int>(v.tokens.size()));
  } else {
    auto bpe = BpeModel::create(v);
    if (!bpe.ok()) return bpe.error();
    impl->bpe.emplace(std::move(*bpe));
  }

  const size_t n = v.tokens.size();
  impl->id_of.reserve(n);
  impl->bytes_of.resize(n);
  impl->end_of_generation.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const std::string& piece = v.tokens[i];
    const auto id = static_cast<int32_t>(i);
    impl->id_of.emplace(piece, id);
    switch (static_cast<TokenType>(v.types[i])) {
      case TokenType::normal: {
        if (!spm) {
          impl->bytes_of[i] = decode_byte_level(piece);
          break;
        }
        std::string text;
        for (size_t p = 0; p < piece.size();) {
          if (piece.compare(p, k_space_symbol.size(), k_space_symbol) == 0) {
            text += ' ';
            p += k_space_symbol.size();
          } else {
            text += piece[p++];
          }
        }
        impl->bytes_of[i] = std::move(text);
        break;
      }
      case TokenType::user_defined:
        impl->bytes_of[i] = piece;
        impl->special_ids.push_back(id);
        break;
      case TokenType::byte:
        if (const int b = parse_byte_piece(piece); b >= 0) impl->bytes_of[i] = std::string(1, static_cast<char>(b));
        break;
      case TokenType::control:
      case TokenType::unknown: impl->special_ids.push_back(id); break;
      case TokenType::unused: break;
    }
    if (id == v.eos_id || id == v.eot_id || id == v.eom_id || is_end_of_turn_name(piece)) {
      impl->end_of_generation[i] = 1;
    }
  }
  harmony_tokens(impl->id_of, impl->bytes_of, impl->end_of_generation);
  // A piece is never shorter than the text it matches: SentencePiece spells a space as the
  // 3 bytes of U+2581, byte-level BPE a byte as 1 or 2, a byte piece "<0x41>" as 6.
  bool has_bytes = false;
  size_t longest = 4;  // one UTF-8 character
  for (size_t i = 0; i < n; ++i) {
    longest = std::max({longest, v.tokens[i].size(), impl->bytes_of[i].size()});
    has_bytes = has_bytes || static_cast<TokenType>(v.types[i]) == TokenType::byte;
  }
  impl->max_bytes_per_token = spm && !has_bytes ? 0 : longest;
  std::stable_sort(impl->special_ids.begin(), impl->special_ids.end(), [&](int32_t a, int32_t b) {
    return v.tokens[static_cast<size_t>(a)].size() > v.tokens[static_cast<size_t>(b)].size();
  });
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  return encode_impl(text, add_bos, parse_special, true);
}

std::vector<int32_t> Tokenizer::encode_continuation(std::string_view text, bool parse_special) const {
  return encode_impl(text, false, parse_special, false);
}

std::vector<int32_t> Tokenizer::encode_impl(std::string_view text, bool add_bos, bool parse_special,
                                            bool prefix_at_start) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  if (add_bos && m.vocab.bos_id >= 0) out.push_back(m.vocab.bos_id);

  // Split at special pieces as llama.cpp does: for each piece, longest first, cut every
  // occurrence out of the fragments of plain text that remain.
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({-1, 0, text.size()});
  std::array<bool, 256> present{};
  for (const char c : text) present[static_cast<unsigned char>(c)] = true;
  std::vector<Fragment> next;
  for (const int32_t id : m.special_ids) {
    const auto type = static_cast<TokenType>(m.vocab.types[static_cast<size_t>(id)]);
    if (!parse_special && type != TokenType::user_defined) continue;
    const std::string_view piece = m.vocab.tokens[static_cast<size_t>(id)];
    if (!present[static_cast<unsigned char>(piece[0])] || piece.size() > text.size()) continue;
    bool split = false;
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.special_id >= 0 || f.end - f.begin < piece.size()) {
        next.push_back(f);
        continue;
      }
      size_t begin = f.begin;
      for (size_t at; (at = text.substr(0, f.end).find(piece, begin)) != std::string_view::npos;) {
        if (at > begin) next.push_back({-1, begin, at});
        next.push_back({id, at, at + piece.size()});
        begin = at + piece.size();
        split = true;
      }
      if (begin < f.end) next.push_back({-1, begin, f.end});
    }
    if (split) fragments.swap(next);
  }

  std::string buffer;
  std::vector<int> ids;
  for (const Fragment& f : fragments) {
    if (f.special_id >= 0) {
      out.push_back(f.special_id);
      continue;
    }
    if (m.bpe) {
      m.bpe->encode(text.substr(f.begin, f.end - f.begin), out);
      continue;
    }
    buffer.clear();
    if (m.vocab.add_space_prefix && (prefix_at_start || f.begin != 0)) buffer += ' ';
    buffer.append(text.substr(f.begin, f.end - f.begin));
    const auto status = m.sp.Encode(buffer, &ids);
    KVC_ASSERT(status.ok());  // Encode fails only on an unloaded model
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  StreamDecoder decoder(*this, true);
  std::string text;
  for (const int32_t id : ids) text += decoder.push(id);
  text += decoder.finish();
  return text;
}

int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->vocab.tokens.size()); }
int32_t Tokenizer::bos() const { return impl_->vocab.bos_id; }
int32_t Tokenizer::eos() const { return impl_->vocab.eos_id; }
bool Tokenizer::wants_bos() const { return impl_->vocab.add_bos; }
bool Tokenizer::wants_eos() const { return impl_->vocab.add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->vocab.add_space_prefix; }
const std::string& Tokenizer::model() const { return impl_->vocab.model; }

TokenType Tokenizer::type(int32_t id) const {
  KVC_ASSERT(id >= 0 && id < n_vocab());
  return static_cast<TokenType>(impl_->vocab.types[static_cast<size_t>(id)]);
}

bool Tokenizer::is_control(int32_t id) const { return id >= 0 && id < n_vocab() && type(id) == TokenType::control; }

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->end_of_generation[static_cast<size_t>(id)] != 0;
}

std::string_view Tokenizer::piece(int32_t id) const {
  KVC_ASSERT(id >= 0 && id < n_vocab());
  return impl_->vocab.tokens[static_cast<size_t>(id)];
}

int32_t Tokenizer::find_piece(std::string_view piece) const {
  const auto it = impl_->id_of.find(piece);
  return it == impl_->id_of.end() ? -1 : it->second;
}

size_t Tokenizer::max_bytes_per_token() const { return impl_->max_bytes_per_token; }

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return {};
  return impl_->bytes_of[static_cast<size_t>(id)];
}

}  // namespace kvc::tokenizer
