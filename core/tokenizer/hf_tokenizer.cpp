// tokenizer.json reader: BPE model, added tokens, the pre-tokenizer's Split expression.
#include "core/tokenizer/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <map>

#include "core/tokenizer/pre_tokenizer.h"

namespace kvc::tokenizer {

namespace {

using nlohmann::json;

Error hf_error(const std::string& message) { return make_error(ErrorCode::invalid_file, "tokenizer.json: " + message); }

// The Split expressions of a pre_tokenizer (a Split, or a Sequence holding Splits).
void collect_splits(const json& pre, std::vector<std::string>& out) {
  if (!pre.is_object()) return;
  if (pre.value("type", "") == "Split" && pre.contains("pattern") && pre["pattern"].contains("Regex")) {
    out.push_back(pre["pattern"]["Regex"].get<std::string>());
  }
  if (pre.contains("pretokenizers") && pre["pretokenizers"].is_array()) {
    for (const json& p : pre["pretokenizers"]) collect_splits(p, out);
  }
}

bool uses_byte_level(const json& pre) {
  if (!pre.is_object()) return false;
  if (pre.value("type", "") == "ByteLevel") return true;
  if (pre.contains("pretokenizers") && pre["pretokenizers"].is_array()) {
    for (const json& p : pre["pretokenizers"]) {
      if (uses_byte_level(p)) return true;
    }
  }
  return false;
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
    if (model.value("type", "") != "BPE" || !uses_byte_level(tj.value("pre_tokenizer", json()))) {
      return make_error(ErrorCode::unsupported,
                        "tokenizer.json: only byte-level BPE tokenizers (model BPE with a ByteLevel pre-tokenizer) "
                        "can be converted");
    }
    Vocabulary v;
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
    // Tokens by id: the model's vocabulary, then the added tokens (which may repeat some of it).
    std::map<int64_t, std::pair<std::string, TokenType>> by_id;
    for (const auto& [piece, id] : model.at("vocab").items()) by_id[id.get<int64_t>()] = {piece, TokenType::normal};
    for (const json& a : tj.value("added_tokens", json::array())) {
      by_id[a.at("id").get<int64_t>()] = {a.at("content").get<std::string>(),
                                          a.value("special", false) ? TokenType::control : TokenType::user_defined};
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
    auto pre = PreTokenizer::create(v.pre);
    if (!pre.ok()) return pre.error();
    v.add_bos = options.add_bos.value_or(config.is_object() && config.contains("add_bos_token") &&
                                                 config["add_bos_token"].is_boolean()
                                             ? config["add_bos_token"].get<bool>()
                                             : pre->default_add_bos());
    v.add_space_prefix = false;
    if (chat_template && config.is_object() && config.contains("chat_template") &&
        config["chat_template"].is_string()) {
      *chat_template = config["chat_template"].get<std::string>();
    }
    return v;
  } catch (const json::exception& e) { return hf_error(e.what()); }
}

}  // namespace kvc::tokenizer
