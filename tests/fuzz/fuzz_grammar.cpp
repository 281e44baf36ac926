// libFuzzer target for constrained sampling: any bytes as a JSON schema (up to the first NUL),
// compiled to a grammar, and the rest fed to its matcher; the token mask must agree with
// accepting each token on a copy of the matcher, and a complete match must be JSON.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/sampling/grammar_matcher.h"
#include "core/sampling/json_schema_grammar.h"

namespace {

// Every single byte, a few multi-byte tokens sharing prefixes, a special and an end token.
std::shared_ptr<const kvc::sampling::TokenVocabulary> vocabulary() {
  using kvc::sampling::TokenKind;
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  for (const char* t : {"{\"", "\":", "\": ", "true", "null", "\",\"", "[1", "\xc3\xa9", "\xe2\x82", "  "})
    bytes.emplace_back(t);
  std::vector<TokenKind> kinds(bytes.size(), TokenKind::text);
  bytes.emplace_back("<special>");
  kinds.push_back(TokenKind::special);
  bytes.emplace_back("");
  kinds.push_back(TokenKind::end_of_generation);
  return std::make_shared<const kvc::sampling::TokenVocabulary>(bytes, kinds);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto vocab = vocabulary();
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view schema = in.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  auto g = kvc::sampling::json_schema_grammar(schema);
  if (!g.ok()) {
    if (g.error().message.empty()) __builtin_trap();  // a refusal says why
    return 0;
  }
  kvc::sampling::GrammarMatcher m(*g, vocab);
  std::string accepted;
  for (size_t i = 0; i < text.size() && i < 512; ++i) {
    // The mask says exactly which tokens a copy of the matcher would accept.
    if (i % 64 == 0) {
      const std::vector<uint64_t> mask = m.allowed();
      for (int32_t id = 0; id < vocab->n_vocab(); id += 7) {
        kvc::sampling::GrammarMatcher probe = m;
        const bool bit = (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u;
        if (bit != probe.accept_token(id)) __builtin_trap();
      }
    }
    if (m.accept_bytes(text.substr(i, 1))) accepted += text[i];
  }
  if (m.is_complete() && nlohmann::json::parse(accepted, nullptr, false).is_discarded()) __builtin_trap();
  return 0;
}
