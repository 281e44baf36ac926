// A gpt-oss model (MXFP4 experts) through kvchat-cli: inspect names the types, generate and chat
// run it, quantize writes MXFP4 experts, mkmodel's gpt-oss-20b preset has the released shape.
#include <catch2/catch.hpp>

#include <string>

#include "core/gguf/gguf_file.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

std::string oss_model() { return test::model_path("tiny-gpt-oss-mxfp4.gguf"); }

}  // namespace

TEST_CASE("kvchat-cli: a gpt-oss MXFP4 model is inspected, generates and chats", "[app][e2e]") {
  test::TempDir tmp;
  const auto inspect = test::cli("inspect " + test::quoted(oss_model()), tmp);
  INFO(inspect.out << inspect.err);
  REQUIRE(inspect.exit_code == 0);
  CHECK_THAT(inspect.out, Catch::Contains("gpt-oss"));
  CHECK_THAT(inspect.out, Catch::Contains("MXFP4"));
  CHECK_THAT(inspect.out, Catch::Contains("attention sinks"));
  CHECK_THAT(inspect.out, Catch::Contains("1 local layer (window 32) and 1 global"));
  CHECK_THAT(inspect.out, Catch::Contains("YaRN rope 32x over 4096"));
  CHECK_THAT(inspect.out, Catch::Contains("experts:   8 per layer, 2 per token"));
  const auto gen = test::cli("generate -m " + test::quoted(oss_model()) + " -t 2 -p 'Once upon a time' -n 12", tmp);
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  CHECK_THAT(gen.err, Catch::Contains("generated 12 tokens"));
  const auto chat = test::cli("chat -m " + test::quoted(oss_model()) + " -t 2 -n 6", tmp, "Hello there\nAnd then?\n");
  INFO(chat.err);
  CHECK(chat.exit_code == 0);
  CHECK_THAT(chat.err, Catch::Contains("[6 tokens"));
}

TEST_CASE("kvchat-cli quantize mxfp4_moe: the experts become MXFP4, the other matrices Q8_0", "[app][e2e]") {
  test::TempDir tmp;
  const std::string out = tmp.file("oss-mxfp4.gguf");
  const auto q = test::cli(
      "quantize " + test::quoted(test::model_path("tiny-gpt-oss-f16.gguf")) + " " + test::quoted(out) + " mxfp4_moe",
      tmp);
  INFO(q.out << q.err);
  REQUIRE(q.exit_code == 0);
  auto f = gguf::GgufFile::open(out);
  REQUIRE(f.ok());
  CHECK(f->find_tensor("blk.0.ffn_gate_exps.weight")->type == kernels::DType::mxfp4);
  CHECK(f->find_tensor("blk.1.ffn_down_exps.weight")->type == kernels::DType::mxfp4);
  CHECK(f->find_tensor("blk.0.attn_q.weight")->type == kernels::DType::q8_0);
  CHECK(f->find_tensor("output.weight")->type == kernels::DType::q8_0);
  CHECK(f->find_tensor("blk.0.ffn_gate_inp.weight")->type == kernels::DType::f32);
  CHECK(f->find_tensor("blk.0.attn_sinks.weight")->type == kernels::DType::f32);
  CHECK(f->find_tensor("blk.0.ffn_gate_exps.bias")->type == kernels::DType::f32);  // 2-D, but a bias
  const auto gen = test::cli("generate -m " + test::quoted(out) + " -t 2 -p 'Once upon a time' -n 4", tmp);
  INFO(gen.err);
  CHECK(gen.exit_code == 0);
}

TEST_CASE("kvchat-cli mkmodel --preset gpt-oss-20b: gpt-oss-20b's attention and keys, experts in MXFP4", "[app][e2e]") {
  // One layer and two narrow experts keep the file small; the rest is the preset's.
  test::TempDir tmp;
  const std::string out = tmp.file("oss.gguf");
  const auto r = test::cli(
      "mkmodel -q -t 2 --preset gpt-oss-20b --layers 1 --experts 2 --experts-used 2 --expert-ffn 64 --pad-vocab 1024 "
      "--type mxfp4_moe -o " +
          test::quoted(out),
      tmp);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto f = gguf::GgufFile::open(out);
  REQUIRE(f.ok());
  const gguf::TensorInfo* gate = f->find_tensor("blk.0.ffn_gate_exps.weight");
  REQUIRE(gate);
  CHECK(gate->type == kernels::DType::mxfp4);
  CHECK(gate->shape == std::vector<int64_t>{2880, 64, 2});
  CHECK(f->find_tensor("blk.0.attn_q.weight")->shape == std::vector<int64_t>{2880, 4096});
  CHECK(f->find_tensor("blk.0.attn_k.weight")->shape == std::vector<int64_t>{2880, 512});
  CHECK(f->find_tensor("blk.0.attn_sinks.weight")->shape == std::vector<int64_t>{64});
  CHECK(f->find_tensor("blk.0.attn_q.weight")->type == kernels::DType::q8_0);
  CHECK(*f->get_uint("gpt-oss.attention.sliding_window") == 128);
  CHECK(*f->get_uint("gpt-oss.rope.scaling.original_context_length") == 4096);
  CHECK(*f->get_float("gpt-oss.rope.scaling.factor") == 32.0);
  CHECK(*f->get_float("gpt-oss.rope.freq_base") == 150000.0);
  CHECK(*f->get_string("gpt-oss.rope.scaling.type") == "yarn");
  const auto inspect = test::cli("inspect " + test::quoted(out), tmp);
  INFO(inspect.out << inspect.err);
  REQUIRE(inspect.exit_code == 0);
  CHECK_THAT(inspect.out, Catch::Contains("experts:   2 per layer, 2 per token"));
}
