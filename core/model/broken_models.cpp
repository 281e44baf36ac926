// The hostile variants of the random model: each edits the good model's metadata or tensor plans.
#include "core/model/broken_models.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "core/gguf/gguf_writer.h"
#include "core/model/model_builder.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/assert.h"

namespace kvc::model {

namespace {

// What a variant edits: the good model as the writer is about to write it.
struct Parts {
  const ModelSpec& spec;
  const tokenizer::Vocabulary& vocab;
  std::string a;  // the architecture's key prefix, "llama."
  gguf::GgufWriter& w;
  std::vector<TensorPlan>& plans;

  // A tensor every good model has.
  TensorPlan& tensor(std::string_view name) {
    auto it = std::find_if(plans.begin(), plans.end(), [&](const TensorPlan& p) { return p.name == name; });
    KVC_ASSERT(it != plans.end());
    return *it;
  }
  int64_t n_vocab() const { return static_cast<int64_t>(vocab.tokens.size()); }
  int64_t head_dim() const { return spec.n_embd / spec.n_head; }
  std::string last_block() const { return "blk." + std::to_string(spec.n_layer - 1) + "."; }
};

constexpr uint32_t k_two_pow_31 = uint32_t{1} << 31;
constexpr size_t k_huge_template_bytes = size_t{100} << 20;

// Edits to the written file's bytes, for what the writer refuses to write.
using FilePatch = Status (*)(std::vector<uint8_t>& file);

struct Variant {
  BrokenVariant info;
  void (*apply)(Parts&);
  FilePatch patch = nullptr;
};

// The position of the u32 type of tensor `name` in the tensor infos: after its name (u64 length,
// bytes), its u32 dimension count and u64 dimensions.
Result<size_t> tensor_type_position(const std::vector<uint8_t>& file, std::string_view name) {
  std::string needle(8, '\0');
  const uint64_t n = name.size();
  std::memcpy(needle.data(), &n, 8);
  needle.append(name);
  const std::string_view bytes(reinterpret_cast<const char*>(file.data()), file.size());
  const size_t at = bytes.find(needle);
  if (at == std::string_view::npos || at + needle.size() + 4 > file.size()) {
    return make_error(ErrorCode::internal, "tensor " + std::string(name) + " is not in the written file");
  }
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, file.data() + at + needle.size(), 4);
  const size_t pos = at + needle.size() + 4 + size_t{8} * n_dims;
  if (n_dims > 4 || pos + 4 > file.size())
    return make_error(ErrorCode::internal, "bad tensor info for " + std::string(name));
  return pos;
}

// clang-format off
const std::array k_variants = {
  // Tensors.
  Variant{{"no-tensors", "no tensors, but 64 KiB of data after the metadata (as when a tensor count is zeroed)"},
          [](Parts& p) { p.plans.clear(); },
          [](std::vector<uint8_t>& file) -> Status {
            file.resize((file.size() + 31) / 32 * 32 + (size_t{64} << 10), 0x5a);
            return {};
          }},
  Variant{{"missing-tensor", "the last block's ffn_down.weight is missing"},
          [](Parts& p) { std::erase_if(p.plans, [&](const TensorPlan& t) { return t.name == p.last_block() + "ffn_down.weight"; }); }},
  Variant{{"extra-tensor", "an extra tensor blk.0.attn_extra.weight that no llama layer has (accepted and ignored)"},
          [](Parts& p) { p.plans.push_back({"blk.0.attn_extra.weight", {p.spec.n_embd, 4}, kernels::DType::f32, 0.0f, 0.02f}); }},
  Variant{{"misshapen-matrix", "blk.0.attn_k.weight has twice the rows that head_count_kv x head size gives"},
          [](Parts& p) { p.tensor("blk.0.attn_k.weight").shape[1] *= 2; }},
  Variant{{"misshapen-vector", "output_norm.weight has twice the model width"},
          [](Parts& p) { p.tensor("output_norm.weight").shape[0] *= 2; }},
  Variant{{"unsupported-type", "blk.0.attn_q.weight has type IQ4_XS, which kvchat does not implement"},
          [](Parts&) {},
          [](std::vector<uint8_t>& file) -> Status {
            auto pos = tensor_type_position(file, "blk.0.attn_q.weight");
            if (!pos.ok()) return pos.error();
            const uint32_t iq4_xs = 23;  // ggml's id
            std::memcpy(file.data() + *pos, &iq4_xs, 4);
            return {};
          }},
  Variant{{"quantized-norm", "blk.0.attn_norm.weight is Q8_0 instead of F32 (accepted: vectors are dequantized on load)"},
          [](Parts& p) { p.tensor("blk.0.attn_norm.weight").type = kernels::DType::q8_0; }},
  // Hyperparameters.
  Variant{{"unknown-arch", "general.architecture is 'hostile'"},
          [](Parts& p) { p.w.set_string("general.architecture", "hostile"); }},
  Variant{{"layers-zero", "block_count is 0"},
          [](Parts& p) { p.w.set_u32(p.a + "block_count", 0); }},
  Variant{{"layers-huge", "block_count is 2^31"},
          [](Parts& p) { p.w.set_u32(p.a + "block_count", k_two_pow_31); }},
  Variant{{"layers-string", "block_count is the string \"2\", not an integer"},
          [](Parts& p) { p.w.set_string(p.a + "block_count", "2"); }},
  Variant{{"heads-zero", "attention.head_count is 0"},
          [](Parts& p) { p.w.set_u32(p.a + "attention.head_count", 0); }},
  Variant{{"heads-huge", "attention.head_count is 2^31"},
          [](Parts& p) { p.w.set_u32(p.a + "attention.head_count", k_two_pow_31); }},
  Variant{{"heads-not-dividing-width", "attention.head_count does not divide embedding_length"},
          [](Parts& p) {
            uint32_t h = 3;
            while (p.spec.n_embd % h == 0) ++h;
            p.w.set_u32(p.a + "attention.head_count", h);
          }},
  Variant{{"kv-heads-zero", "attention.head_count_kv is 0"},
          [](Parts& p) { p.w.set_u32(p.a + "attention.head_count_kv", 0); }},
  Variant{{"kv-heads-not-dividing", "attention.head_count_kv (head_count + 1) does not divide head_count"},
          [](Parts& p) { p.w.set_u32(p.a + "attention.head_count_kv", static_cast<uint32_t>(p.spec.n_head + 1)); }},
  Variant{{"head-size-huge", "attention.key_length (the head size) is 2^31"},
          [](Parts& p) { p.w.set_u32(p.a + "attention.key_length", k_two_pow_31); }},
  Variant{{"rope-dims-odd", "rope.dimension_count is odd"},
          [](Parts& p) { p.w.set_u32(p.a + "rope.dimension_count", static_cast<uint32_t>(p.head_dim() - 1)); }},
  Variant{{"ctx-zero", "context_length is 0"},
          [](Parts& p) { p.w.set_u32(p.a + "context_length", 0); }},
  Variant{{"ctx-huge", "context_length is 2^31"},
          [](Parts& p) { p.w.set_u32(p.a + "context_length", k_two_pow_31); }},
  Variant{{"rope-base-zero", "rope.freq_base is 0"},
          [](Parts& p) { p.w.set_f32(p.a + "rope.freq_base", 0.0f); }},
  Variant{{"rope-base-negative", "rope.freq_base is -10000"},
          [](Parts& p) { p.w.set_f32(p.a + "rope.freq_base", -10000.0f); }},
  Variant{{"rope-base-nan", "rope.freq_base is NaN"},
          [](Parts& p) { p.w.set_f32(p.a + "rope.freq_base", std::numeric_limits<float>::quiet_NaN()); }},
  Variant{{"rms-eps-nan", "attention.layer_norm_rms_epsilon is NaN"},
          [](Parts& p) { p.w.set_f32(p.a + "attention.layer_norm_rms_epsilon", std::numeric_limits<float>::quiet_NaN()); }},
  Variant{{"rms-eps-negative", "attention.layer_norm_rms_epsilon is -1e-5"},
          [](Parts& p) { p.w.set_f32(p.a + "attention.layer_norm_rms_epsilon", -1e-5f); }},
  // The tokenizer and the chat template.
  Variant{{"tokens-missing", "tokenizer.ggml.tokens is missing"},
          [](Parts& p) { p.w.erase("tokenizer.ggml.tokens"); }},
  Variant{{"vocab-size-mismatch", "vocab_size is one more than tokenizer.ggml.tokens has entries"},
          [](Parts& p) { p.w.set_u32(p.a + "vocab_size", static_cast<uint32_t>(p.n_vocab() + 1)); }},
  Variant{{"scores-short", "tokenizer.ggml.scores has one entry fewer than tokenizer.ggml.tokens"},
          [](Parts& p) {
            std::vector<float> s = p.vocab.scores;
            s.pop_back();
            p.w.set_vector("tokenizer.ggml.scores", std::move(s));
          }},
  Variant{{"token-types-short", "tokenizer.ggml.token_type has one entry fewer than tokenizer.ggml.tokens"},
          [](Parts& p) {
            std::vector<int32_t> t = p.vocab.types;
            t.pop_back();
            p.w.set_vector("tokenizer.ggml.token_type", std::move(t));
          }},
  Variant{{"bos-out-of-range", "tokenizer.ggml.bos_token_id is the vocabulary size"},
          [](Parts& p) { p.w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(p.n_vocab())); }},
  Variant{{"eos-out-of-range", "tokenizer.ggml.eos_token_id is the vocabulary size + 1"},
          [](Parts& p) { p.w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(p.n_vocab() + 1)); }},
  Variant{{"pad-out-of-range", "tokenizer.ggml.padding_token_id is 2^31"},
          [](Parts& p) { p.w.set_u32("tokenizer.ggml.padding_token_id", k_two_pow_31); }},
  Variant{{"huge-template", "tokenizer.chat_template is 100 MiB of chatml-like Jinja"},
          [](Parts& p) {
            const std::string chunk = "{% for message in messages %}<|im_start|>{{ message['role'] }}\n";
            std::string t;
            t.reserve(k_huge_template_bytes);
            while (t.size() + chunk.size() <= k_huge_template_bytes) t += chunk;
            t.append(k_huge_template_bytes - t.size(), ' ');
            p.w.set_string("tokenizer.chat_template", std::move(t));
          }},
};
// clang-format on

}  // namespace

std::span<const BrokenVariant> broken_variants() {
  static const auto k_infos = [] {
    std::array<BrokenVariant, k_variants.size()> infos{};
    for (size_t i = 0; i < k_variants.size(); ++i) infos[i] = k_variants[i].info;
    return infos;
  }();
  return k_infos;
}

namespace {

const Variant* find_variant(std::string_view name) {
  for (const Variant& v : k_variants) {
    if (v.info.name == name) return &v;
  }
  return nullptr;
}

}  // namespace

Status apply_broken_variant(std::string_view name, const ModelSpec& spec, const tokenizer::Vocabulary& vocab,
                            gguf::GgufWriter& w, std::vector<TensorPlan>& plans) {
  if (const Variant* v = find_variant(name)) {
    Parts parts{spec, vocab, spec.arch + ".", w, plans};
    v->apply(parts);
    return {};
  }
  std::string names;
  for (const Variant& v : k_variants) names += (names.empty() ? "" : ", ") + std::string(v.info.name);
  return make_error(ErrorCode::invalid_argument,
                    "unknown broken-model variant '" + std::string(name) + "' (known: " + names + ")");
}

Status patch_broken_variant(std::string_view name, const std::string& path) {
  const Variant* v = find_variant(name);
  if (v == nullptr || v->patch == nullptr) return {};
  // C stdio: GCC 12 sees false null dereferences in <fstream>'s streambuf.
  std::vector<uint8_t> file;
  if (std::FILE* in = std::fopen(path.c_str(), "rb")) {
    uint8_t buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, in)) > 0;) file.insert(file.end(), buf, buf + n);
    std::fclose(in);
  } else {
    return make_error(ErrorCode::io, "cannot read back " + path);
  }
  KVC_TRY(v->patch(file));
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) return make_error(ErrorCode::io, "cannot write " + path);
  const bool written = std::fwrite(file.data(), 1, file.size(), out) == file.size();
  if (std::fclose(out) != 0 || !written) return make_error(ErrorCode::io, "cannot write " + path);
  return {};
}

}  // namespace kvc::model
