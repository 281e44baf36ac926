// The pre-tokenizer table (the expressions of each vocabulary family's tokenizer.json) and
// the PCRE2 adapter that runs it.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <algorithm>

#include "core/util/assert.h"

namespace kvc::tokenizer {

namespace {

// GPT-2's expression, which many families reuse whole or after other splits.
// The expressions keep one alternative group per line:
// clang-format off
constexpr const char* k_gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* k_llama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* k_qwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* k_gpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* k_tekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek LLM's letters: the cased letters (Lu, Ll, Lt) of many scripts, listed as ranges.
// Six code points are written as \x{...}: their characters have canonical singleton
// decompositions (U+1F7D is U+03CE under NFC, U+212A is "K"), so an editor or a copy that
// normalizes the text would silently change the ranges.
constexpr const char* k_deepseek_letters =
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";
constexpr const char* k_cjk = "[一-龥ࠀ-一가-퟿]+";
constexpr const char* k_bloom = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
// clang-format on

struct Family {
  std::vector<std::string> names;  // the first is the canonical one
  std::vector<const char*> expressions;
  bool ignore_merges = false;
  bool add_bos = false;
};

const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {{"default", ""}, {R"([\p{P}\$\+<=>\^~\|]+)", k_gpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {k_llama3},
       true,
       true},
      {{"dbrx", "smaug-bpe", "chatglm-bpe"}, {k_llama3}},
      {{"qwen2", "qwen2.5", "qwen-2.5", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"}, {k_qwen2}},
      {{"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe", "jina-v1-en", "jina-v2-code", "jina-v2-es",
        "jina-v2-de", "jina-es", "jina-de", "gigachat", "trillion"},
       {k_gpt2}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", k_gpt2}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", k_gpt2, "[0-9][0-9][0-9]"}},
      {{"deepseek-llm"},
       {"[\r\n]", k_deepseek_letters, R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)", R"(\s+$)", k_cjk, R"(\p{N}+)"}},
      {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", k_cjk, R"(\p{N})"}},
      {{"deepseek-v3"},
       {R"(\p{N}{1,3})", "[一-龥぀-ゟ゠-ヿ]+",
        R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {{"gpt-4o", "llama4", "minimax-m2"}, {k_gpt4o}},
      {{"tekken"}, {k_tekken}, true, true},
      {{"bloom", "poro-chat", "gpt3-finnish"}, {k_bloom}},
      {{"viking"}, {k_bloom, R"(\p{N})"}},
  };
  return f;
}

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};

}  // namespace

struct PreTokenizer::Impl {
  std::string name;
  std::vector<std::unique_ptr<pcre2_code, CodeDeleter>> expressions;
  bool ignore_merges = false;
  bool add_bos = false;
};

Result<PreTokenizer> PreTokenizer::create(std::string_view pre) {
  const auto& all = families();
  const auto family = std::find_if(all.begin(), all.end(), [&](const Family& f) {
    return std::find(f.names.begin(), f.names.end(), pre) != f.names.end();
  });
  if (family == all.end()) {
    std::string known;
    for (const auto& n : known_names()) known += (known.empty() ? "" : ", ") + n;
    return make_error(ErrorCode::unsupported, "tokenizer: pre-tokenizer '" + std::string(pre) +
                                                  "' (tokenizer.ggml.pre) is not supported yet; known: " + known);
  }
  auto impl = std::make_shared<Impl>();
  impl->name = family->names.front();
  impl->ignore_merges = family->ignore_merges;
  impl->add_bos = family->add_bos;
  for (const char* expr : family->expressions) {
    int err = 0;
    PCRE2_SIZE err_at = 0;
    // UTF with Unicode classes (\p{L}, \s as Unicode spaces); invalid UTF-8 in the text is
    // allowed and simply never matches; '$' means the end of the piece, as in ECMAScript.
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expr), PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY, &err, &err_at, nullptr);
    KVC_ASSERT(code != nullptr);                  // the table's expressions are constants, tested
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT (unsupported CPU) matching still works
    impl->expressions.emplace_back(code);
  }
  return PreTokenizer(std::move(impl));
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
  std::vector<std::string_view> pieces{text}, next;
  if (text.empty()) return;
  for (const auto& code : impl_->expressions) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code.get(), nullptr);
    KVC_ASSERT(md != nullptr);
    next.clear();
    for (const std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t begin = 0, at = 0;
      while (at < piece.size()) {
        const int rc = pcre2_match(code.get(), subject, piece.size(), at, 0, md, nullptr);
        if (rc < 0) break;  // no further match (or a matching error: the rest stays one word)
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t m0 = ov[0], m1 = ov[1];
        if (m1 == m0) {  // an empty match: step over one UTF-8 character
          at = m0 + 1;
          while (at < piece.size() && (static_cast<unsigned char>(piece[at]) & 0xc0) == 0x80) ++at;
          continue;
        }
        if (m0 > begin) next.push_back(piece.substr(begin, m0 - begin));
        next.push_back(piece.substr(m0, m1 - m0));
        begin = at = m1;
      }
      if (begin < piece.size()) next.push_back(piece.substr(begin));
    }
    pcre2_match_data_free(md);
    pieces.swap(next);
  }
  words.insert(words.end(), pieces.begin(), pieces.end());
}

bool PreTokenizer::ignore_merges() const { return impl_->ignore_merges; }
bool PreTokenizer::default_add_bos() const { return impl_->add_bos; }
const std::string& PreTokenizer::name() const { return impl_->name; }

std::string PreTokenizer::name_for_expression(std::string_view expression) {
  for (const Family& f : families()) {
    if (f.expressions.size() == 1 && expression == f.expressions[0]) return f.names.front();
  }
  return {};
}

std::vector<std::string> PreTokenizer::known_names() {
  std::vector<std::string> names;
  for (const Family& f : families()) {
    for (const auto& n : f.names) {
      if (!n.empty()) names.push_back(n);
    }
  }
  return names;
}

}  // namespace kvc::tokenizer
