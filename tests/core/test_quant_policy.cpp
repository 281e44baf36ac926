// The per-tensor type policy against llama-quantize's own choices on the same models (the types
// of tests/data/references/llama-quantize-*.slice.gguf), and the file type names.
#include <catch2/catch.hpp>

#include <string>

#include "core/gguf/gguf_file.h"
#include "core/model/quant_policy.h"
#include "support/test_support.h"

using namespace kvc;
using kernels::DType;
using model::FileType;

namespace {

// Every tensor of llama-quantize's output for `slice` gets the type llama.cpp gave it.
void check_against_llama(const std::string& slice, FileType target, const model::PolicyModel& facts) {
  auto f = gguf::GgufFile::open(test::reference_path(slice).string());
  REQUIRE(f.ok());
  // general.file_type: the file type in llama.cpp's numbering, which we write too.
  const gguf::Value* ft = f->find("general.file_type");
  REQUIRE(ft);
  REQUIRE(ft->as<uint32_t>());
  CHECK(*ft->as<uint32_t>() == model::gguf_file_type(target));
  int n_checked = 0;
  for (const gguf::TensorInfo& t : f->tensors()) {
    const DType ours = model::tensor_type(target, t.name, static_cast<int>(t.shape.size()), t.shape[0], facts);
    INFO(slice << ": " << t.name << " (" << t.shape[0] << " columns): llama.cpp " << kernels::dtype_name(t.type)
               << ", ours " << kernels::dtype_name(ours));
    CHECK(ours == t.type);
    ++n_checked;
  }
  CHECK(n_checked > 30);
}

}  // namespace

TEST_CASE("quant policy: every tensor of tiny-gqa-f16 gets llama-quantize's type in each file type", "[core]") {
  // tiny-gqa: 4 layers, 8 heads / 2 KV heads (GQA 4), separate output, every row a multiple of 256.
  const model::PolicyModel facts{4, 4, true};
  for (const char* name :
       {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"}) {
    INFO(name);
    const auto t = model::parse_file_type(name);
    REQUIRE(t);
    check_against_llama(std::string("llama-quantize-") + name + ".slice.gguf", *t, facts);
  }
}

TEST_CASE("quant policy: tiny-w320-f16's rows of 320 take llama-quantize's fallback types", "[core]") {
  // tiny-w320: 4 layers, 5 heads / 5 KV heads (no GQA), tied output, 320 columns everywhere
  // but ffn_down (768): Q2_K / Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0.
  const model::PolicyModel facts{4, 1, false};
  for (const char* name : {"iq4_nl", "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"}) {
    INFO(name);
    const auto t = model::parse_file_type(name);
    REQUIRE(t);
    check_against_llama(std::string("llama-quantize-w320-") + name + ".slice.gguf", *t, facts);
  }
}

TEST_CASE("quant policy: names, aliases and the F16 fallback for rows no block type holds", "[core]") {
  for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k_m",
                           "q4_k_m", "q5_k_m", "q6_k"}) {
    const auto t = model::parse_file_type(name);
    REQUIRE(t);
    CHECK(model::file_type_name(*t) == name);
    CHECK(model::file_type_list().find(name) != std::string::npos);
  }
  CHECK(model::parse_file_type("Q5_K_M") == FileType::q5_k_m);
  CHECK(model::parse_file_type("q3_k") == FileType::q3_k_m);  // llama-quantize's aliases
  CHECK(model::parse_file_type("Q4_K") == FileType::q4_k_m);
  CHECK(model::parse_file_type("q5_k") == FileType::q5_k_m);
  CHECK_FALSE(model::parse_file_type("q3_k_s"));
  CHECK_FALSE(model::parse_file_type("iq4_xs"));
  const model::PolicyModel facts{4, 4, true};
  // 100 columns: no 32-value block fits; llama.cpp refuses such a tensor, we keep it in F16.
  for (FileType t : {FileType::q4_0, FileType::q2_k, FileType::q5_k_m, FileType::q6_k, FileType::iq4_nl}) {
    CHECK(model::tensor_type(t, "blk.0.ffn_gate.weight", 2, 100, facts) == DType::f16);
  }
  CHECK(model::tensor_type(FileType::q5_k_m, "blk.0.attn_norm.weight", 1, 256, facts) == DType::f32);
  CHECK(model::tensor_type(FileType::bf16, "blk.0.attn_q.weight", 2, 100, facts) == DType::bf16);
  // Tied embeddings: token_embd.weight is the output matrix and gets its type.
  CHECK(model::tensor_type(FileType::q4_k_m, "token_embd.weight", 2, 256, {4, 4, false}) == DType::q6_k);
  CHECK(model::tensor_type(FileType::q8_0, "token_embd.weight", 2, 256, {4, 4, false}) == DType::q8_0);
  CHECK(model::tensor_type(FileType::q4_k_m, "token_embd.weight", 2, 256, facts) == DType::q4_k);
  // Q3_K_M's ffn_down: Q5_K in the first sixteenth of the layers.
  CHECK(model::tensor_type(FileType::q3_k_m, "blk.0.ffn_down.weight", 2, 5632, {22, 8, true}) == DType::q5_k);
  CHECK(model::tensor_type(FileType::q3_k_m, "blk.1.ffn_down.weight", 2, 5632, {22, 8, true}) == DType::q4_k);
}
