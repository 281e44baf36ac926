// tokenizer.json reader: BPE model, added tokens, the pre-tokenizer's Split expression, and the
// SentencePiece form (U+2581 for spaces, merges turned back into piece scores).
#include "core/tokenizer/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <array>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/tokenizer/pre_tokenizer.h"

namespace kvc::tokenizer {

namespace {

using nlohmann::json;

Error hf_error(const std::string& message) { return make_error(ErrorCode::invalid_file, "tokenizer.json: " + message); }

// o[key] if it is a string, else "" (tokenizer.json writes null for settings left unset).
std::string text_field(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_string()) return {};
  return o[key].get<std::string>();
}

// The Split expressions of a pre_tokenizer (a Split, or a Sequence holding Splits).
void collect_splits(const json& pre, std::vector<std::string>& out) {
  if (!pre.is_object()) return;
  if (text_field(pre, "type") == "Split" && pre.contains("pattern") && pre["pattern"].contains("Regex")) {
    out.push_back(pre["pattern"]["Regex"].get<std::string>());
  }
  if (pre.contains("pretokenizers") && pre["pretokenizers"].is_array()) {
    for (const json& p : pre["pretokenizers"]) collect_splits(p, out);
  }
}

bool uses_byte_level(const json& pre) {
  if (!pre.is_object()) return false;
  if (text_field(pre, "type") == "ByteLevel") return true;
  if (pre.contains("pretokenizers") && pre["pretokenizers"].is_array()) {
    for (const json& p : pre["pretokenizers"]) {
      if (uses_byte_level(p)) return true;
    }
  }
  return false;
}

// SentencePiece's whitespace mark, U+2581.
constexpr std::string_view k_space_mark = "\xE2\x96\x81";

// The normalizers of a normalizer (one, or a Sequence of them).
void collect_normalizers(const json& n, std::vector<json>& out) {
  if (!n.is_object()) return;
  if (text_field(n, "type") == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    for (const json& m : n["normalizers"]) collect_normalizers(m, out);
    return;
  }
  out.push_back(n);
}

std::string string_pattern(const json& n) {
  return n.contains("pattern") ? text_field(n["pattern"], "String") : std::string();
}

// How a SentencePiece model exported to tokenizer.json (a BPE model over "\u2581"-escaped text:
// Llama 2, Mistral, Gemma) marks spaces, and whether it adds a space before the text: a
// normalizer Replace(" ", "\u2581") with an optional Prepend("\u2581"), or a Metaspace
// pre-tokenizer with its prepend_scheme. Empty when the file is not of that kind.
struct SentencePieceForm {
  bool escapes_spaces = false;
  bool add_space_prefix = false;
};

SentencePieceForm sentencepiece_form(const json& tj) {
  SentencePieceForm form;
  std::vector<json> norms;
  collect_normalizers(tj.value("normalizer", json()), norms);
  for (const json& n : norms) {
    const std::string type = text_field(n, "type");
    if (type == "Replace" && string_pattern(n) == " " && text_field(n, "content") == k_space_mark) {
      form.escapes_spaces = true;
    }
    if (type == "Prepend" && text_field(n, "prepend") == k_space_mark) form.add_space_prefix = true;
  }
  const json pre = tj.value("pre_tokenizer", json());
  if (text_field(pre, "type") == "Metaspace" && text_field(pre, "replacement") == k_space_mark) {
    form.escapes_spaces = true;
    // prepend_scheme "always" / "first" / "never"; older files: add_prefix_space true / false.
    std::string scheme = text_field(pre, "prepend_scheme");
    if (scheme.empty() && pre.contains("add_prefix_space") && pre["add_prefix_space"].is_boolean()) {
      scheme = pre["add_prefix_space"].get<bool>() ? "always" : "never";
    }
    form.add_space_prefix = scheme != "never";
  }
  return form;
}

// Added tokens some models leave unmarked that are control tokens all the same, as llama.cpp's
// converter types them: "<pad>", "<mask>", "<|...|>", DeepSeek's fullwidth "<\uFF5C...\uFF5C>"
// and Gemma's "<unusedN>". Control tokens in a prompt's text stay text unless the caller parses
// special tokens; user-defined ones always become their ids.
bool looks_special(std::string_view t) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.substr(0, open.size()) == open &&
           t.substr(t.size() - close.size()) == close;
  };
  return t == "<pad>" || t == "<mask>" || wrapped("<|", "|>") || wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") ||
         wrapped("<unused", ">");
}

// A token setting of tokenizer_config.json: a string, or an object with "content".
std::string token_text(const json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return {};
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return {};
}

}  // namespace

Result<Vocabulary> vocabulary_from_hf(std::string_view tokenizer_json, std::string_view config_json,
                                      const HfConvertOptions& options, std::string* chat_template) {
  try {
    const json tj = json::parse(tokenizer_json);
    const json config = config_json.empty() ? json::object() : json::parse(config_json);
    const json& model = tj.at("model");
    const bool byte_level = uses_byte_level(tj.value("pre_tokenizer", json()));
    const SentencePieceForm spm = sentencepiece_form(tj);
    if (text_field(model, "type") != "BPE" || (!byte_level && !spm.escapes_spaces)) {
      return make_error(ErrorCode::unsupported,
                        "tokenizer.json: only BPE tokenizers can be converted: byte-level ones (a ByteLevel "
                        "pre-tokenizer: Llama 3, Qwen, GPT-2) and SentencePiece ones (spaces written as U+2581 by a "
                        "Replace normalizer or a Metaspace pre-tokenizer: Llama 2, Mistral, Gemma)");
    }
    Vocabulary v;
    if (byte_level) {
      v.model = "gpt2";
      v.pre = options.pre;
      if (v.pre.empty()) {
        std::vector<std::string> splits;
        collect_splits(tj.at("pre_tokenizer"), splits);
        if (splits.size() == 1) v.pre = PreTokenizer::name_for_expression(splits[0]);
        if (v.pre.empty()) {
          return make_error(ErrorCode::unsupported,
                            "tokenizer.json: its pre-tokenizer is not one kvchat recognises; name it with --pre "
                            "(one of the tokenizer.ggml.pre values `kvchat-cli convert-vocab --help` lists)");
        }
      }
    } else {
      if (!options.pre.empty()) {
        return make_error(ErrorCode::invalid_argument,
                          "--pre names a byte-level BPE pre-tokenizer; this tokenizer.json is a SentencePiece one");
      }
      v.model = "llama";
    }
    // Tokens by id: the model's vocabulary, then the added tokens (which may repeat some of it).
    std::map<int64_t, std::pair<std::string, TokenType>> by_id;
    for (const auto& [piece, id] : model.at("vocab").items()) by_id[id.get<int64_t>()] = {piece, TokenType::normal};
    for (const json& a : tj.value("added_tokens", json::array())) {
      std::string content = a.at("content").get<std::string>();
      const bool control = a.value("special", false) || looks_special(content);
      by_id[a.at("id").get<int64_t>()] = {std::move(content), control ? TokenType::control : TokenType::user_defined};
    }
    if (by_id.empty() || by_id.begin()->first < 0 || by_id.rbegin()->first >= (int64_t{1} << 24)) {
      return hf_error("token ids must lie in [0, 2^24)");
    }
    const auto n = static_cast<size_t>(by_id.rbegin()->first + 1);
    v.tokens.resize(n);
    v.types.assign(n, static_cast<int32_t>(TokenType::unused));
    v.scores.assign(n, 0.0f);
    for (size_t i = 0; i < n; ++i) v.tokens[i] = "[PAD" + std::to_string(i) + "]";
    for (const auto& [id, t] : by_id) {
      v.tokens[static_cast<size_t>(id)] = t.first;
      v.types[static_cast<size_t>(id)] = static_cast<int32_t>(t.second);
    }
    for (const json& m : model.at("merges")) {
      if (m.is_string()) {
        v.merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2) {
        v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      } else {
        return hf_error("merge " + std::to_string(v.merges.size()) + " is neither \"left right\" nor [left, right]");
      }
    }
    auto id_of = [&](const std::string& text, const char* what) -> Result<int32_t> {
      if (text.empty()) return -1;
      for (size_t i = 0; i < n; ++i) {
        if (v.tokens[i] == text) return static_cast<int32_t>(i);
      }
      return hf_error(std::string(what) + " token \"" + text + "\" is not in the vocabulary");
    };
    auto bos = id_of(options.bos.empty() ? token_text(config, "bos_token") : options.bos, "BOS");
    if (!bos.ok()) return bos.error();
    auto eos = id_of(options.eos.empty() ? token_text(config, "eos_token") : options.eos, "EOS");
    if (!eos.ok()) return eos.error();
    v.bos_id = *bos;
    v.eos_id = *eos;
    std::optional<bool> config_add_bos;
    if (config.is_object() && config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
      config_add_bos = config["add_bos_token"].get<bool>();
    }
    if (byte_level) {
      auto pre = PreTokenizer::create(v.pre);
      if (!pre.ok()) return pre.error();
      v.add_bos = options.add_bos.value_or(config_add_bos.value_or(pre->default_add_bos()));
      v.add_space_prefix = false;
    } else {
      // SentencePiece merges the adjacent pair whose joined piece scores highest, where Hugging
      // Face applies the merge of lowest rank; its exporter lists the merges in the order of the
      // joined pieces' scores, so a piece's score is minus the rank of the first merge that makes
      // it. Pieces no merge makes (single characters, bytes) score below every merge.
      std::unordered_map<std::string, float> score;
      score.reserve(v.merges.size());
      for (size_t r = 0; r < v.merges.size(); ++r) {
        const std::string& m = v.merges[r];
        const size_t sp = m.find(' ');
        if (sp == std::string::npos) return hf_error("merge " + std::to_string(r) + " has no space in it");
        score.try_emplace(m.substr(0, sp) + m.substr(sp + 1), -static_cast<float>(r));
      }
      const auto lowest = -static_cast<float>(v.merges.size());
      const std::string unk = text_field(model, "unk_token");
      for (size_t i = 0; i < n; ++i) {
        auto& type = v.types[i];
        if (type != static_cast<int32_t>(TokenType::normal)) continue;
        const auto it = score.find(v.tokens[i]);
        v.scores[i] = it != score.end() ? it->second : lowest - static_cast<float>(i);
        if (parse_byte_piece(v.tokens[i]) >= 0) type = static_cast<int32_t>(TokenType::byte);
        if (!unk.empty() && v.tokens[i] == unk) type = static_cast<int32_t>(TokenType::unknown);
      }
      // Byte fallback needs all 256 byte pieces. Gemma 2's tokenizer.json spells the tab's slot
      // among them "\t" (its SentencePiece model and llama.cpp's GGUF have "<0x09>"): a
      // one-character piece that sits where its byte's piece belongs becomes that byte piece.
      std::array<int64_t, 256> byte_id;
      byte_id.fill(-1);
      for (size_t i = 0; i < n; ++i) {
        if (v.types[i] == static_cast<int32_t>(TokenType::byte)) {
          byte_id[static_cast<size_t>(parse_byte_piece(v.tokens[i]))] = static_cast<int64_t>(i);
        }
      }
      for (size_t b = 1; b + 1 < 128; ++b) {
        const int64_t slot = byte_id[b - 1] + 1;
        if (byte_id[b] >= 0 || byte_id[b - 1] < 0 || byte_id[b + 1] != slot + 1) continue;
        auto& piece = v.tokens[static_cast<size_t>(slot)];
        if (piece != std::string(1, static_cast<char>(b))) continue;
        static constexpr char k_hex[] = "0123456789ABCDEF";
        piece = std::string("<0x") + k_hex[b >> 4] + k_hex[b & 15] + ">";
        v.types[static_cast<size_t>(slot)] = static_cast<int32_t>(TokenType::byte);
      }
      // The unknown piece may also be an added token (Gemma lists it among its special ones).
      if (!unk.empty()) {
        auto u = id_of(unk, "unknown");
        if (!u.ok()) return u.error();
        v.unk_id = *u;
        v.types[static_cast<size_t>(*u)] = static_cast<int32_t>(TokenType::unknown);
      }
      v.merges.clear();  // a SentencePiece GGUF has scores, not merges
      v.add_bos = options.add_bos.value_or(config_add_bos.value_or(true));
      v.add_space_prefix = spm.add_space_prefix;
      const std::string pad = token_text(config, "pad_token");
      if (!pad.empty()) {
        auto p = id_of(pad, "padding");
        if (p.ok()) v.pad_id = *p;
      }
    }
    if (chat_template && config.is_object() && config.contains("chat_template") &&
        config["chat_template"].is_string()) {
      *chat_template = config["chat_template"].get<std::string>();
    }
    return v;
  } catch (const json::exception& e) { return hf_error(e.what()); }
}

}  // namespace kvc::tokenizer
