// kvchat-cli mkmodel: files that depend only on the options, near-normal weights with the
// requested deviations, and the architecture options (tied output, rope base, qwen2 biases).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "kernels/cpu/quant.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// A small shape with stories260K's 512-piece vocabulary.
std::string small() {
  return " --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 -q --vocab-from " +
         test::quoted(test::model_path("stories260K.gguf"));
}

struct Moments {
  double mean = 0, std = 0;
  double within_1sd = 0;  // fraction of values within one deviation of the mean
  double max_abs_z = 0;   // largest |value - mean| / std
};

Moments moments_of(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  INFO(name);
  REQUIRE(t);
  std::vector<float> v(static_cast<size_t>(t->n_elements()));
  kernels::dequantize_row(t->type, f.tensor_data(*t), v.data(), t->n_elements());
  Moments m;
  for (const double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (const double x : v) m.std += (x - m.mean) * (x - m.mean);
  m.std = std::sqrt(m.std / static_cast<double>(v.size()));
  for (const double x : v) {
    const double z = std::abs(x - m.mean) / m.std;
    m.within_1sd += z <= 1.0;
    m.max_abs_z = std::max(m.max_abs_z, z);
  }
  m.within_1sd /= static_cast<double>(v.size());
  return m;
}

}  // namespace

TEST_CASE("mkmodel: the same options give the same bytes on any thread count, the seed changes them", "[app][e2e]") {
  test::TempDir tmp;
  const std::string common = "mkmodel --type q4_k_m" + small();
  for (const auto& [file, extra] : {std::pair{"a", " -t 1"}, {"b", " -t 3"}, {"c", " -t 2 --seed 2"}}) {
    const auto r = test::cli(common + extra + " -o " + test::quoted(tmp.file(std::string(file) + ".gguf")), tmp);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  const std::string a = test::read_file(tmp.file("a.gguf"));
  CHECK(a.size() > 100000);
  CHECK(a == test::read_file(tmp.file("b.gguf")));
  CHECK(a != test::read_file(tmp.file("c.gguf")));
}

TEST_CASE("mkmodel: near-normal weights with the requested deviations, norms near 1", "[app][e2e]") {
  test::TempDir tmp;
  const auto r = test::cli("mkmodel --type f32 --std 0.03 --qk-std 0.09 --norm-std 0.01" + small() + " -o " +
                               test::quoted(tmp.file("m.gguf")),
                           tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = gguf::GgufFile::open(tmp.file("m.gguf"));
  REQUIRE(f.ok());
  for (const auto& [name, std] : {std::pair{"blk.0.ffn_up.weight", 0.03},
                                  {"token_embd.weight", 0.03},
                                  {"blk.1.attn_q.weight", 0.09},
                                  {"blk.1.attn_k.weight", 0.09},
                                  {"blk.0.attn_v.weight", 0.03}}) {
    const Moments m = moments_of(*f, name);
    INFO(name << ": mean " << m.mean << " std " << m.std << " within 1 sd " << m.within_1sd << " max |z| "
              << m.max_abs_z);
    CHECK(std::abs(m.mean) < 0.1 * std);  // the smallest tensor has 2,048 values: 2.2 % of std per sd
    CHECK(m.std == Approx(std).epsilon(0.06));
    // A normal law has 68.3 % within one deviation, a uniform one 57.7 %; the sum of four
    // uniforms (what mkmodel draws) 66.6 %, and it never passes 2 sqrt(3) = 3.46 deviations.
    CHECK(m.within_1sd > 0.64);
    CHECK(m.within_1sd < 0.70);
    CHECK(m.max_abs_z > 2.5);
    CHECK(m.max_abs_z < 3.47);
  }
  const Moments norm = moments_of(*f, "blk.0.attn_norm.weight");
  CHECK(norm.mean == Approx(1.0).epsilon(0.01));
  CHECK(norm.std < 0.02);
}

TEST_CASE("mkmodel: --arch llama3 writes Llama 3-shaped rope factors, qwen3 its Q/K norms and head size",
          "[app][e2e]") {
  test::TempDir tmp;
  const auto r =
      test::cli("mkmodel --type f16 --arch llama3 --rope-base 500000 --rope-scale-factor 8 --rope-orig-ctx 64" +
                    small() + " -o " + test::quoted(tmp.file("l3.gguf")),
                tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = gguf::GgufFile::open(tmp.file("l3.gguf"));
  REQUIRE(f.ok());
  CHECK(*f->get_string("general.architecture") == "llama");  // Llama 3 is llama plus the factors
  const gguf::TensorInfo* t = f->find_tensor("rope_freqs.weight");
  REQUIRE(t);
  REQUIRE(t->shape == std::vector<int64_t>{8});  // one per rotated pair of a 16-wide head
  std::vector<float> ff(8);
  kernels::dequantize_row(t->type, f->tensor_data(*t), ff.data(), 8);
  // High-frequency pairs keep their speed, low-frequency ones are slowed by the factor, and
  // the factors never decrease from one pair to the next.
  CHECK(ff.front() == 1.0f);
  CHECK(ff.back() == 8.0f);
  CHECK(std::is_sorted(ff.begin(), ff.end()));
  CHECK(std::any_of(ff.begin(), ff.end(), [](float x) { return x > 1.0f && x < 8.0f; }));

  const auto q = test::cli(
      "mkmodel --type f16 --arch qwen3 --head-dim 32" + small() + " -o " + test::quoted(tmp.file("q3.gguf")), tmp);
  INFO(q.err);
  REQUIRE(q.exit_code == 0);
  auto g = gguf::GgufFile::open(tmp.file("q3.gguf"));
  REQUIRE(g.ok());
  CHECK(*g->get_uint("qwen3.attention.key_length") == 32);
  CHECK(g->find_tensor("blk.0.attn_q.weight")->shape == std::vector<int64_t>{64, 128});  // 4 heads x 32 rows
  CHECK(g->find_tensor("blk.1.attn_k_norm.weight")->shape == std::vector<int64_t>{32});
  CHECK(g->find_tensor("blk.1.attn_q.bias") == nullptr);
  const auto bad =
      test::cli("mkmodel --arch llama --head-dim 32" + small() + " -o " + test::quoted(tmp.file("x.gguf")), tmp);
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Catch::Contains("--head-dim is for --arch qwen3"));
}

TEST_CASE("mkmodel: --tied, --rope-base and --arch qwen2 write what llama.cpp expects", "[app][e2e]") {
  test::TempDir tmp;
  const auto r = test::cli("mkmodel --type q8_0 --arch qwen2 --tied --rope-base 1000000" + small() + " -o " +
                               test::quoted(tmp.file("q.gguf")),
                           tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = gguf::GgufFile::open(tmp.file("q.gguf"));
  REQUIRE(f.ok());
  CHECK(*f->get_string("general.architecture") == "qwen2");
  auto base = f->get_float("qwen2.rope.freq_base");
  REQUIRE(base.ok());
  CHECK(*base == 1e6);
  CHECK(f->find("llama.rope.freq_base") == nullptr);
  CHECK(f->find_tensor("output.weight") == nullptr);  // tied: the output reuses token_embd
  for (const char* b : {"blk.1.attn_q.bias", "blk.1.attn_k.bias", "blk.1.attn_v.bias"}) {
    INFO(b);
    const gguf::TensorInfo* t = f->find_tensor(b);
    REQUIRE(t);
    CHECK(t->type == kernels::DType::f32);
  }
  CHECK(f->find_tensor("blk.1.attn_q.bias")->shape == std::vector<int64_t>{64});
  CHECK(f->find_tensor("blk.1.attn_k.bias")->shape == std::vector<int64_t>{32});
  // A typo in the architecture is refused with the choices.
  const auto bad = test::cli("mkmodel --arch qwen9" + small() + " -o " + test::quoted(tmp.file("x.gguf")), tmp);
  CHECK(bad.exit_code != 0);
  CHECK_THAT(
      bad.err,
      Catch::Contains(
          "llama, llama3, qwen2, qwen3, qwen3moe, gpt-oss, deepseek2, phi3, smollm3, gemma2, gemma3, gemma4 or lfm2"));
}

TEST_CASE("mkmodel: the lfm2-1.2b preset writes LFM2's layer pattern, its conv taps and token_embd_norm",
          "[app][e2e]") {
  test::TempDir tmp;
  // LFM2-1.2B's shape with 7 layers of a small width: conv, conv, attention, conv, conv, attention, conv.
  const auto r = test::cli(
      "mkmodel --preset lfm2-1.2b --type q8_0 --dim 64 --layers 7 --heads 2 --kv-heads 1 --ffn 64 -q --vocab-from " +
          test::quoted(test::model_path("stories260K.gguf")) + " -o " + test::quoted(tmp.file("lfm2.gguf")),
      tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = gguf::GgufFile::open(tmp.file("lfm2.gguf"));
  REQUIRE(f.ok());
  CHECK(*f->get_string("general.architecture") == "lfm2");
  CHECK(*f->get_i32_array("lfm2.attention.head_count_kv") == std::vector<int32_t>{0, 0, 1, 0, 0, 1, 0});
  CHECK(*f->get_int("lfm2.shortconv.l_cache") == 3);
  CHECK(*f->get_int("lfm2.vocab_size") == 65536);
  CHECK(f->find_tensor("token_embd_norm.weight") != nullptr);  // the output norm, as llama.cpp names it
  CHECK(f->find_tensor("output_norm.weight") == nullptr);
  REQUIRE(f->find_tensor("blk.0.shortconv.conv.weight"));
  CHECK(f->find_tensor("blk.0.shortconv.conv.weight")->shape == std::vector<int64_t>{3, 64});
  CHECK(f->find_tensor("blk.0.attn_q.weight") == nullptr);
  CHECK(f->find_tensor("blk.2.attn_q_norm.weight") != nullptr);
  CHECK(f->find_tensor("blk.2.shortconv.in_proj.weight") == nullptr);
  const auto inspect = test::cli("inspect " + test::quoted(tmp.file("lfm2.gguf")), tmp);
  INFO(inspect.err);
  CHECK(inspect.exit_code == 0);
  CHECK_THAT(inspect.out, Catch::Contains("2 of 7 layers store K and V; the 5 conv layers keep a state a sequence"));
}

TEST_CASE("mkmodel: a preset writes its model's architecture, vocabulary size and tying, and options given override it",
          "[app][e2e]") {
  test::TempDir tmp;
  // Qwen3 1.7B's shape, made small by the options given (which win over the preset's).
  const auto r = test::cli(
      "mkmodel --preset qwen3-1.7b --type q8_0 --dim 64 --layers 1 --heads 2 --kv-heads 1 "
      "--ffn 64 --head-dim 32 -q --vocab-from " +
          test::quoted(test::model_path("stories260K.gguf")) + " -o " + test::quoted(tmp.file("q3.gguf")),
      tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = gguf::GgufFile::open(tmp.file("q3.gguf"));
  REQUIRE(f.ok());
  CHECK(*f->get_string("general.architecture") == "qwen3");
  CHECK(*f->get_int("qwen3.vocab_size") == 151936);  // padded from stories260K's 512 pieces
  CHECK(*f->get_int("qwen3.context_length") == 40960);
  CHECK(*f->get_int("qwen3.block_count") == 1);  // --layers, not the preset's 28
  CHECK(*f->get_int("qwen3.attention.head_count_kv") == 1);
  CHECK(*f->get_float("qwen3.rope.freq_base") == 1e6);
  CHECK(f->find_tensor("output.weight") == nullptr);  // tied
  const gguf::TensorInfo* embd = f->find_tensor("token_embd.weight");
  REQUIRE(embd);
  CHECK(embd->shape == std::vector<int64_t>{64, 151936});
  // The padding tokens are unused pieces after the vocabulary's own, and the file still loads.
  const auto inspect = test::cli("inspect " + test::quoted(tmp.file("q3.gguf")), tmp);
  INFO(inspect.err);
  CHECK(inspect.exit_code == 0);
  CHECK_THAT(inspect.out, Catch::Contains("151936 tokens"));

  const auto unknown = test::cli("mkmodel --preset llama9 -o " + test::quoted(tmp.file("x.gguf")), tmp);
  CHECK(unknown.exit_code != 0);
  CHECK_THAT(unknown.err, Catch::Contains("tinyllama, llama3.2-1b, llama3.2-3b, qwen3-1.7b, mistral-7b"));
  const auto small_pad =
      test::cli("mkmodel --pad-vocab 100" + small() + " -o " + test::quoted(tmp.file("x.gguf")), tmp);
  CHECK(small_pad.exit_code != 0);
  CHECK_THAT(small_pad.err, Catch::Contains("--pad-vocab 100 is smaller than the 512 tokens"));
  CHECK_FALSE(std::filesystem::exists(tmp.file("x.gguf")));
}

TEST_CASE("mkmodel: the qwen3-30b-a3b preset writes Qwen3-30B-A3B's experts as 3-D tensors, an F32 router",
          "[app][e2e]") {
  test::TempDir tmp;
  // Its 128 experts of 768 (8 per token), 2 of its 48 layers, Q4_0; width and heads made small.
  const auto r = test::cli(
      "mkmodel --preset qwen3-30b-a3b --type q4_0 --layers 2 --dim 64 --heads 2 --kv-heads 1 --head-dim 32 "
      "--router-std 0.5 -q --vocab-from " +
          test::quoted(test::model_path("stories260K.gguf")) + " -o " + test::quoted(tmp.file("moe.gguf")),
      tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = gguf::GgufFile::open(tmp.file("moe.gguf"));
  REQUIRE(f.ok());
  CHECK(*f->get_string("general.architecture") == "qwen3moe");
  CHECK(*f->get_int("qwen3moe.expert_count") == 128);
  CHECK(*f->get_int("qwen3moe.expert_used_count") == 8);
  CHECK(*f->get_int("qwen3moe.expert_feed_forward_length") == 768);
  CHECK(*f->get_int("qwen3moe.feed_forward_length") == 6144);
  CHECK(*f->get_int("qwen3moe.block_count") == 2);
  CHECK(*f->get_int("qwen3moe.vocab_size") == 151936);
  CHECK(*f->get_float("qwen3moe.attention.layer_norm_rms_epsilon") == Approx(1e-6));
  CHECK(f->find_tensor("output.weight") != nullptr);  // not tied
  for (const char* name : {"ffn_gate_exps", "ffn_up_exps"}) {
    const gguf::TensorInfo* t = f->find_tensor(std::string("blk.1.") + name + ".weight");
    REQUIRE(t);
    CHECK(t->shape == std::vector<int64_t>{64, 768, 128});
    CHECK(t->type == kernels::DType::q4_0);
  }
  const gguf::TensorInfo* down = f->find_tensor("blk.1.ffn_down_exps.weight");
  REQUIRE(down);
  CHECK(down->shape == std::vector<int64_t>{768, 64, 128});
  const gguf::TensorInfo* router = f->find_tensor("blk.0.ffn_gate_inp.weight");
  REQUIRE(router);
  CHECK(router->shape == std::vector<int64_t>{64, 128});
  CHECK(router->type == kernels::DType::f32);  // as converters and llama-quantize keep it
  CHECK(f->find_tensor("blk.0.ffn_gate.weight") == nullptr);
  // --router-std sets the router's deviation; the experts keep --std.
  CHECK(moments_of(*f, "blk.0.ffn_gate_inp.weight").std == Approx(0.5).epsilon(0.05));
  const auto inspect = test::cli("inspect " + test::quoted(tmp.file("moe.gguf")), tmp);
  INFO(inspect.err);
  CHECK(inspect.exit_code == 0);
  // Bad expert counts are refused with the option named.
  const auto bad = test::cli(
      "mkmodel --arch qwen3moe --experts 4 --experts-used 5" + small() + " -o " + test::quoted(tmp.file("x.gguf")),
      tmp);
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Catch::Contains("--experts-used must lie in [1, --experts]"));
}

TEST_CASE("mkmodel: the glm-4.7-flash preset writes GLM-4.7-Flash's latent attention, routing and MTP block",
          "[app][e2e]") {
  test::TempDir tmp;
  // 3 of its 47 layers (+ its MTP block), 8 narrow experts; the attention and routing are the preset's.
  const auto r = test::cli(
      "mkmodel --preset glm-4.7-flash --type q8_0 --layers 3 --dim 64 --ffn 64 --experts 8 "
      "--expert-ffn 32 --pad-vocab 1024 -q --vocab-from " +
          test::quoted(test::model_path("stories260K.gguf")) + " -o " + test::quoted(tmp.file("glm.gguf")),
      tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = gguf::GgufFile::open(tmp.file("glm.gguf"));
  REQUIRE(f.ok());
  const std::string a = "deepseek2.";
  CHECK(*f->get_string("general.architecture") == "deepseek2");
  CHECK(*f->get_int(a + "block_count") == 4);  // the layers and the MTP block, as the converter counts
  CHECK(*f->get_int(a + "nextn_predict_layers") == 1);
  CHECK(*f->get_int(a + "attention.head_count") == 20);
  CHECK(*f->get_int(a + "attention.q_lora_rank") == 768);
  CHECK(*f->get_int(a + "attention.kv_lora_rank") == 512);
  CHECK(*f->get_int(a + "attention.key_length_mla") == 256);  // 192 + 64 rope values
  CHECK(*f->get_int(a + "attention.value_length_mla") == 256);
  CHECK(*f->get_int(a + "expert_used_count") == 4);
  CHECK(*f->get_int(a + "expert_shared_count") == 1);
  CHECK(*f->get_int(a + "expert_gating_func") == 2);  // sigmoid
  CHECK(*f->get_float(a + "expert_weights_scale") == Approx(1.8));
  CHECK(*f->get_float(a + "rope.freq_base") == Approx(1e6));
  CHECK(f->find(a + "rope.scaling.type") == nullptr);  // no YaRN
  CHECK(f->find_tensor("blk.1.exp_probs_b.bias") != nullptr);
  const gguf::TensorInfo* eh = f->find_tensor("blk.3.nextn.eh_proj.weight");
  REQUIRE(eh);
  CHECK(eh->shape == std::vector<int64_t>{128, 64});
  CHECK(f->find_tensor("blk.3.ffn_up_exps.weight") != nullptr);  // the block's own MoE layer
  // kvchat runs the three layers and names the block it leaves unread.
  const auto inspect = test::cli("inspect " + test::quoted(tmp.file("glm.gguf")), tmp);
  INFO(inspect.err);
  CHECK(inspect.exit_code == 0);
  CHECK_THAT(inspect.out, Catch::Contains("3 layers"));
  CHECK_THAT(inspect.out, Catch::Contains("1 multi-token-prediction block after the layers (blk.3)"));
  CHECK_THAT(inspect.out, Catch::Contains("sigmoid router, weights normalised"));
  // --nextn-layers is deepseek2's.
  const auto bad =
      test::cli("mkmodel --arch llama --nextn-layers 1" + small() + " -o " + test::quoted(tmp.file("x.gguf")), tmp);
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Catch::Contains("--nextn-layers is for --arch deepseek2"));
}

TEST_CASE("mkmodel: the gemma3-1b preset writes Gemma 3 1B's layer pattern, window, heads and vocabulary size",
          "[app][e2e]") {
  test::TempDir tmp;
  // Gemma 3 1B's 26 layers, window and vocabulary, made small in width by the options given.
  const auto r =
      test::cli("mkmodel --preset gemma3-1b --type q8_0 --dim 64 --ffn 64 --head-dim 32 -q --vocab-from " +
                    test::quoted(test::model_path("stories260K.gguf")) + " -o " + test::quoted(tmp.file("g3.gguf")),
                tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = gguf::GgufFile::open(tmp.file("g3.gguf"));
  REQUIRE(f.ok());
  CHECK(*f->get_string("general.architecture") == "gemma3");
  CHECK(*f->get_int("gemma3.block_count") == 26);
  CHECK(*f->get_int("gemma3.attention.head_count") == 4);
  CHECK(*f->get_int("gemma3.attention.head_count_kv") == 1);
  CHECK(*f->get_int("gemma3.attention.key_length") == 32);  // --head-dim, not the preset's 256
  CHECK(*f->get_int("gemma3.attention.sliding_window") == 512);
  CHECK(*f->get_int("gemma3.context_length") == 32768);
  CHECK(*f->get_int("gemma3.vocab_size") == 262144);
  CHECK(*f->get_float("gemma3.rope.freq_base") == 1e6);
  CHECK_FALSE(f->get_float("gemma3.rope.scaling.factor").ok());  // 1B: no linear scaling
  CHECK(f->find_tensor("output.weight") == nullptr);             // tied
  // Five local layers to a global one: 22 local, 4 global, as inspect reads the file.
  const auto inspect = test::cli("inspect " + test::quoted(tmp.file("g3.gguf")), tmp);
  INFO(inspect.err);
  REQUIRE(inspect.exit_code == 0);
  CHECK_THAT(inspect.out, Catch::Contains("22 local layers (window 512"));
  CHECK_THAT(inspect.out, Catch::Contains(") and 4 global"));
  // The 4B preset scales the global layers' rope by 1/8.
  const auto r4 = test::cli(
      "mkmodel --preset gemma3-4b --type q8_0 --dim 64 --layers 6 --heads 2 --kv-heads 1 --ffn 64 --head-dim 32 "
      "--pad-vocab 0 -q --vocab-from " +
          test::quoted(test::model_path("stories260K.gguf")) + " -o " + test::quoted(tmp.file("g4.gguf")),
      tmp);
  INFO(r4.err);
  REQUIRE(r4.exit_code == 0);
  auto f4 = gguf::GgufFile::open(tmp.file("g4.gguf"));
  REQUIRE(f4.ok());
  CHECK(*f4->get_int("gemma3.attention.sliding_window") == 1024);
  CHECK(*f4->get_float("gemma3.rope.scaling.factor") == 8.0);
}

TEST_CASE("mkmodel: the gemma4-e2b preset writes Gemma 4 E2B's pattern, head sizes, sharing and per-layer embeddings",
          "[app][e2e]") {
  test::TempDir tmp;
  // E2B made small: 10 layers keep the preset's share of storing layers in whole periods of five
  // (layers 0-4 store, 5-9 read layers 3 and 4), the shared layers' FFN double-wide.
  const auto r = test::cli(
      "mkmodel --preset gemma4-e2b --type q8_0 --dim 64 --ffn 64 --head-dim 64 --head-dim-swa 32 --per-layer-embd 32 "
      "--layers 10 --pad-vocab 0 -q --vocab-from " +
          test::quoted(test::model_path("stories260K.gguf")) + " -o " + test::quoted(tmp.file("e2b.gguf")),
      tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto f = gguf::GgufFile::open(tmp.file("e2b.gguf"));
  REQUIRE(f.ok());
  CHECK(*f->get_string("general.architecture") == "gemma4");
  CHECK(*f->get_int("gemma4.block_count") == 10);
  CHECK(*f->get_int("gemma4.attention.shared_kv_layers") == 5);
  CHECK(*f->get_int("gemma4.attention.key_length") == 64);
  CHECK(*f->get_int("gemma4.attention.key_length_swa") == 32);
  CHECK(*f->get_int("gemma4.rope.dimension_count_swa") == 32);
  CHECK(*f->get_int("gemma4.attention.sliding_window") == 512);
  CHECK(*f->get_int("gemma4.attention.head_count_kv") == 1);
  CHECK(*f->get_int("gemma4.embedding_length_per_layer_input") == 32);
  CHECK(*f->get_float("gemma4.final_logit_softcapping") == 30.0);
  CHECK(*f->get_i32_array("gemma4.feed_forward_length") ==
        std::vector<int32_t>{64, 64, 64, 64, 64, 128, 128, 128, 128, 128});
  CHECK(f->find_tensor("per_layer_token_embd.weight")->shape == std::vector<int64_t>{10 * 32, 512});
  CHECK(f->find_tensor("rope_freqs.weight")->shape == std::vector<int64_t>{32});
  CHECK(f->find_tensor("output.weight") == nullptr);  // tied
  // inspect: which layers share, and what it saves (5 storing layers: 4 local of 32 and 1 global of
  // 64, K and V in F16, against 8 local and 2 global without sharing).
  const auto inspect = test::cli("inspect " + test::quoted(tmp.file("e2b.gguf")), tmp);
  INFO(inspect.err);
  REQUIRE(inspect.exit_code == 0);
  CHECK_THAT(inspect.out, Catch::Contains("layers 5+ read the K/V of the last local and the last global storing"));
  CHECK_THAT(inspect.out, Catch::Contains("sharing: 768 instead of 1536 bytes/token in F16 (saves 50.0%"));
  CHECK_THAT(inspect.out, Catch::Contains("heads of 32 (local) and 64 (global)"));
}
