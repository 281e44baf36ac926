// grammar_vocabulary: token kinds from the tokenizer's types, one shared table per model.
#include "core/model/grammar_vocabulary.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kvc::model {
namespace {

std::shared_ptr<const sampling::TokenVocabulary> build(const tokenizer::Tokenizer& tok) {
  const auto n = static_cast<size_t>(tok.n_vocab());
  std::vector<std::string> bytes(n);
  std::vector<sampling::TokenKind> kinds(n, sampling::TokenKind::text);
  using T = tokenizer::TokenType;
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const T type = tok.type(id);
    if (tok.is_end_of_generation(id)) {
      kinds[i] = sampling::TokenKind::end_of_generation;
    } else if (type == T::control || type == T::unknown || type == T::unused) {
      kinds[i] = sampling::TokenKind::special;  // never JSON text; only a grammar's special element
    } else {
      bytes[i] = std::string(tok.token_bytes(id));
    }
  }
  return std::make_shared<const sampling::TokenVocabulary>(std::move(bytes), std::move(kinds));
}

}  // namespace

std::shared_ptr<const sampling::TokenVocabulary> grammar_vocabulary(const Model& m) {
  static std::mutex mu;
  static std::map<kv::BlockKey, std::shared_ptr<const sampling::TokenVocabulary>> cache;
  const kv::BlockKey key = m.weights_fingerprint();
  if (key.is_null()) return build(m.tokenizer());
  std::lock_guard lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() >= 4) cache.clear();  // a few models per process at most; a switch rebuilds
  auto v = build(m.tokenizer());
  cache.emplace(key, v);
  return v;
}

}  // namespace kvc::model
