// GGUF reader and writer: round trips, hand-encoded files, typed getters, the shared models.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "core/gguf/tensor_types.h"
#include "gguf_test_bytes.h"
#include "support/test_support.h"

using kvc::ErrorCode;
using kvc::gguf::Array;
using kvc::gguf::GgufFile;
using kvc::gguf::GgufWriter;
using kvc::gguf::Value;
using kvc::gguf::ValueType;
using kvc::kernels::DType;

namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 131 + (i >> 8));
  return v;
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

GgufFile parse_ok(std::vector<uint8_t> bytes) {
  auto f = GgufFile::from_memory(std::move(bytes));
  INFO((f.ok() ? std::string() : f.error().what()));
  REQUIRE(f.ok());
  return std::move(f).value();
}

// Every value type, empty and non-UTF-8 strings, empty and nested arrays.
std::vector<std::pair<std::string, Value>> all_values() {
  const std::string odd_bytes("\xff\xfe\0x", 4);
  Array nested(std::vector<Array>{Array(std::vector<uint32_t>{1, 2, 3}), Array(std::vector<std::string>{"a", ""}),
                                  Array(std::vector<Array>{Array(std::vector<double>{0.25})}),
                                  Array(std::vector<float>{})});
  return {
      {"t.u8", Value(uint8_t{200})},
      {"t.i8", Value(int8_t{-5})},
      {"t.u16", Value(uint16_t{60000})},
      {"t.i16", Value(int16_t{-30000})},
      {"t.u32", Value(uint32_t{4000000000u})},
      {"t.i32", Value(int32_t{-2000000000})},
      {"t.f32", Value(1.5f)},
      {"t.bool", Value(true)},
      {"t.bool_false", Value(false)},
      {"t.string", Value("hello")},
      {"t.empty_string", Value("")},
      {"t.odd_bytes", Value(odd_bytes)},
      {"t.u64", Value(uint64_t{(uint64_t{1} << 63) + 5})},
      {"t.i64", Value(int64_t{-(int64_t{1} << 62)})},
      {"t.f64", Value(3.141592653589793)},
      {"a.u8", Value(Array(std::vector<uint8_t>{0, 255}))},
      {"a.i8", Value(Array(std::vector<int8_t>{-128, 127}))},
      {"a.u16", Value(Array(std::vector<uint16_t>{1, 65535}))},
      {"a.i16", Value(Array(std::vector<int16_t>{-32768, 7}))},
      {"a.u32", Value(Array(std::vector<uint32_t>{0xdeadbeef}))},
      {"a.i32", Value(Array(std::vector<int32_t>{-1, 0, 1}))},
      {"a.f32", Value(Array(std::vector<float>{-0.5f, 1e30f}))},
      {"a.bool", Value(Array(std::vector<bool>{true, false, true}))},
      {"a.string", Value(Array(std::vector<std::string>{"x", "", odd_bytes}))},
      {"a.u64", Value(Array(std::vector<uint64_t>{~uint64_t{0}}))},
      {"a.i64", Value(Array(std::vector<int64_t>{std::numeric_limits<int64_t>::min()}))},
      {"a.f64", Value(Array(std::vector<double>{1e-300, -2.0}))},
      {"a.empty_f32", Value(Array(std::vector<float>{}))},
      {"a.empty_strings", Value(Array(std::vector<std::string>{}))},
      {"a.nested", Value(nested)},
      {"a.empty_nested", Value(Array(std::vector<Array>{}))},
  };
}

}  // namespace

TEST_CASE("gguf: writer -> reader round trip of every value type and several tensors", "[core]") {
  GgufWriter w;
  const auto values = all_values();
  for (const auto& [k, v] : values) w.set(k, v);
  w.set_alignment(64);
  const auto f32 = pattern(8 * 3 * 4, 1);
  const auto f16 = pattern(5 * 2, 2);
  const auto q8 = pattern(2 * 34, 3);
  const auto q4k = pattern(144, 4);
  const auto q6k = pattern(2 * 210, 5);
  const auto bf16 = pattern(3 * 2, 6);
  w.add_tensor("f32", {8, 3}, DType::f32, f32);
  w.add_tensor("f16", {5}, DType::f16, f16);
  w.add_tensor_view("q8", {32, 2}, DType::q8_0, q8);
  w.add_tensor("q4k", {256, 1, 1, 1}, DType::q4_k, q4k);
  w.add_tensor_stream("q6k", {256, 2}, DType::q6_k, [&](const kvc::gguf::ByteSink& sink) -> kvc::Status {
    for (size_t i = 0; i < q6k.size(); i += 7) {  // odd chunk sizes
      KVC_TRY(sink(std::span<const uint8_t>(q6k).subspan(i, std::min<size_t>(7, q6k.size() - i))));
    }
    return {};
  });
  w.add_tensor("bf16", {3}, DType::bf16, bf16);

  auto bytes = w.write_to_memory();
  REQUIRE(bytes.ok());
  const GgufFile f = parse_ok(*bytes);

  CHECK(f.version() == 3);
  CHECK(f.alignment() == 64);
  CHECK(f.data_offset() % 64 == 0);
  CHECK(f.check_invariants());
  REQUIRE(f.metadata().size() == values.size() + 1);  // + general.alignment
  for (size_t i = 0; i < values.size(); ++i) {
    INFO(values[i].first);
    CHECK(f.metadata()[i].key == values[i].first);
    CHECK(f.metadata()[i].value == values[i].second);
  }
  CHECK(f.metadata().back().key == "general.alignment");

  const std::vector<std::pair<std::string, const std::vector<uint8_t>*>> expect = {
      {"f32", &f32}, {"f16", &f16}, {"q8", &q8}, {"q4k", &q4k}, {"q6k", &q6k}, {"bf16", &bf16}};
  REQUIRE(f.tensors().size() == expect.size());
  for (size_t i = 0; i < expect.size(); ++i) {
    const auto& t = f.tensors()[i];
    INFO(t.name);
    CHECK(t.name == expect[i].first);
    CHECK(t.offset % 64 == 0);
    REQUIRE(t.n_bytes == expect[i].second->size());
    CHECK(std::equal(expect[i].second->begin(), expect[i].second->end(), f.tensor_data(t)));
  }
  const auto* q4 = f.find_tensor("q4k");
  REQUIRE(q4 != nullptr);
  CHECK(q4->shape == std::vector<int64_t>{256, 1, 1, 1});
  CHECK(q4->type == DType::q4_k);
  CHECK(f.find_tensor("f32")->n_elements() == 24);
  CHECK(f.find_tensor("absent") == nullptr);

  SECTION("write(path) writes the same bytes, atomically, and open() maps them") {
    kvc::test::TempDir dir;
    const std::string path = dir.file("model.gguf");
    REQUIRE(w.write(path).ok());
    CHECK(read_all(path) == *bytes);
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 1);  // no temp file left
    auto g = GgufFile::open(path);
    REQUIRE(g.ok());
    CHECK(g->file_bytes() == bytes->size());
    CHECK(g->metadata()[29].value == values[29].second);
    const auto* t = g->find_tensor("q6k");
    CHECK(std::equal(q6k.begin(), q6k.end(), g->tensor_data(*t)));
  }
}

TEST_CASE("gguf: the writer's bytes match a hand encoding of the spec", "[core]") {
  GgufWriter w;
  w.set_u32("k", 7);
  w.set_string_array("s", {"ab"});
  const std::vector<uint8_t> data = pattern(8, 9);
  w.add_tensor("t", {2}, DType::f32, data);

  kvc::test::GgufBytes b;
  b.header(1, 2).key("k", 4).u32(7).key("s", 9).u32(8).u64(1).str("ab");
  b.tensor("t", {2}, 0, 0).pad_to(32);
  auto expected = b.bytes();
  expected.insert(expected.end(), data.begin(), data.end());

  auto bytes = w.write_to_memory();
  REQUIRE(bytes.ok());
  CHECK(*bytes == expected);
}

TEST_CASE("gguf: a file without tensors has no padding, whatever the alignment", "[core]") {
  // Found by fuzz_gguf: re-encoding a tiny file with general.alignment = 2^30 padded it to 1 GiB.
  GgufWriter w;
  w.set_alignment(uint32_t{1} << 30);
  auto bytes = w.write_to_memory();
  REQUIRE(bytes.ok());
  kvc::test::GgufBytes b;
  b.header(0, 1).key("general.alignment", 4).u32(uint32_t{1} << 30);
  CHECK(*bytes == b.bytes());
  const GgufFile f = parse_ok(*bytes);
  CHECK(f.alignment() == (size_t{1} << 30));
  CHECK(f.tensors().empty());
}

TEST_CASE("gguf: the reader decodes a hand-encoded v2 file", "[core]") {
  kvc::test::GgufBytes b;
  b.header(2, 4, 2).key("general.architecture", 8).str("llama");
  b.key("n", 5).i32(-3);
  b.key("ok", 7).u8(1);
  b.key("scores", 9).u32(6).u64(2).f32(0.5f).f32(-1.0f);
  b.tensor("a", {32, 2}, 8, 0).tensor("b", {3}, 0, 96);  // Q8_0: 2 blocks of 34 bytes
  b.pad_to(32).zeros(96 + 12);
  const GgufFile f = parse_ok(b.bytes());
  CHECK(f.version() == 2);
  CHECK(f.alignment() == 32);
  CHECK(f.get_string("general.architecture").value() == "llama");
  CHECK(f.get_int("n").value() == -3);
  CHECK(f.get_bool("ok").value());
  CHECK(f.get_f32_array("scores").value() == std::vector<float>{0.5f, -1.0f});
  REQUIRE(f.tensors().size() == 2);
  CHECK(f.tensors()[0].type == DType::q8_0);
  CHECK(f.tensors()[0].n_bytes == 68);
  CHECK(f.tensors()[1].n_bytes == 12);
  CHECK(f.tensor_data(f.tensors()[1]) == f.tensor_data(f.tensors()[0]) + 96);
}

TEST_CASE("gguf: typed getters convert what is safe and explain mismatches", "[core]") {
  GgufWriter w;
  w.set_string("llama.block_count", "five");
  w.set_u8("u8", 9);
  w.set_i32("neg", -5);
  w.set_i16("pos", 12);
  w.set_u64("huge", ~uint64_t{0});
  w.set_f32("f", 0.25f);
  w.set_bool("b", true);
  w.set_vector("ids", std::vector<uint32_t>{1, 2, 0x80000000u});
  w.set_vector("small_ids", std::vector<uint16_t>{1, 2});
  const GgufFile f = parse_ok(w.write_to_memory().value());

  auto bc = f.get_uint("llama.block_count");
  REQUIRE(!bc.ok());
  CHECK(bc.error().code == ErrorCode::invalid_file);
  CHECK(bc.error().message == "metadata llama.block_count: expected an unsigned integer, found string");
  CHECK(f.get_uint("u8").value() == 9);
  CHECK(f.get_uint("pos").value() == 12);
  CHECK_THAT(f.get_uint("neg").error().message, Catch::Contains("found i32 -5"));
  CHECK(f.get_int("neg").value() == -5);
  CHECK(f.get_int("u8").value() == 9);
  CHECK_THAT(f.get_int("huge").error().message, Catch::Contains("too large"));
  CHECK(f.get_float("f").value() == 0.25);
  CHECK_THAT(f.get_float("u8").error().message, Catch::Contains("expected a float"));
  CHECK(f.get_bool("b").value());
  CHECK_THAT(f.get_string("b").error().message, Catch::Contains("found bool"));
  CHECK(f.get_i32_array("small_ids").value() == std::vector<int32_t>{1, 2});
  CHECK_THAT(f.get_i32_array("ids").error().message, Catch::Contains("element 2 (2147483648) does not fit"));
  CHECK_THAT(f.get_string_array("ids").error().message, Catch::Contains("found array of u32"));
  CHECK_THAT(f.get_f32_array("f").error().message, Catch::Contains("found f32"));

  auto absent = f.get_uint("llama.context_length");
  REQUIRE(!absent.ok());
  CHECK_THAT(absent.error().message, Catch::Contains("llama.context_length: missing"));
  CHECK(f.get_uint_or("llama.context_length", 2048).value() == 2048);
  CHECK(f.get_uint_or("u8", 1).value() == 9);
  CHECK(!f.get_uint_or("llama.block_count", 5).ok());  // present with the wrong type
  CHECK(f.get_string_or("none", "x").value() == "x");
  CHECK(f.get_int_or("none", -1).value() == -1);
  CHECK(f.get_float_or("none", 0.5).value() == 0.5);
  CHECK(f.get_bool_or("none", false).value() == false);
  CHECK(f.find("none") == nullptr);
  CHECK(f.find("u8")->type() == ValueType::u8);
}

TEST_CASE("gguf: the writer refuses what the reader would refuse, before writing", "[core]") {
  kvc::test::TempDir dir;
  const std::string path = dir.file("m.gguf");
  auto expect_refused = [&](const GgufWriter& w, const std::string& fragment) {
    const kvc::Status s = w.write(path);
    REQUIRE(!s.ok());
    CHECK(s.error().code == ErrorCode::invalid_argument);
    CHECK_THAT(s.error().message, Catch::Contains(fragment));
    CHECK(!std::filesystem::exists(path));
    CHECK(std::filesystem::is_empty(dir.path()));
  };
  {
    GgufWriter w;
    w.set_alignment(3);
    expect_refused(w, "alignment 3");
  }
  {
    GgufWriter w;
    w.add_tensor("w", {100}, DType::q4_k, std::vector<uint8_t>(144));
    expect_refused(w, "row length 100");
  }
  {
    GgufWriter w;
    w.add_tensor("w", {4}, DType::f32, std::vector<uint8_t>(15));
    expect_refused(w, "has 15 bytes of data");
  }
  {
    GgufWriter w;
    w.add_tensor("w", {4}, DType::f32, std::vector<uint8_t>(16));
    w.add_tensor("w", {4}, DType::f32, std::vector<uint8_t>(16));
    expect_refused(w, "duplicate tensor name");
  }
  {
    GgufWriter w;
    w.add_tensor_stream("huge", {int64_t{1} << 61, 2}, DType::f32,
                        [](const kvc::gguf::ByteSink&) { return kvc::Status(); });
    expect_refused(w, "byte size overflows");
  }
  {
    GgufWriter w;
    w.add_tensor("w", {}, DType::f32, {});
    expect_refused(w, "0 dimensions");
  }
  {
    GgufWriter w;
    Array a(std::vector<uint8_t>{1});
    for (int i = 0; i < 8; ++i) a = Array(std::vector<Array>{a});  // 9 levels
    w.set_array("deep", a);
    expect_refused(w, "nested more than 8");
  }
  {
    GgufWriter w;
    w.add_tensor_stream("s", {4}, DType::f32, [](const kvc::gguf::ByteSink& sink) {
      const uint8_t b[8] = {};
      return sink(b);
    });
    expect_refused(w, "producer wrote 8 bytes");
  }
}

TEST_CASE("gguf: a failed write leaves the previous file intact", "[core]") {
  kvc::test::TempDir dir;
  const std::string path = dir.file("m.gguf");
  GgufWriter good;
  good.set_string("v", "old");
  REQUIRE(good.write(path).ok());
  const auto before = read_all(path);

  GgufWriter bad;
  bad.set_string("v", "new");
  bad.add_tensor_stream("s", {1024}, DType::f32, [](const kvc::gguf::ByteSink& sink) -> kvc::Status {
    const std::vector<uint8_t> half(2048);
    KVC_TRY(sink(half));
    return kvc::make_error(ErrorCode::io, "source disk went away");
  });
  const kvc::Status s = bad.write(path);
  REQUIRE(!s.ok());
  CHECK(s.error().message == "source disk went away");
  CHECK(read_all(path) == before);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 1);

  const kvc::Status no_dir = good.write(dir.file("missing/m.gguf"));
  REQUIRE(!no_dir.ok());
  CHECK(no_dir.error().code == ErrorCode::io);
  CHECK_THAT(no_dir.error().message, Catch::Contains("missing/m.gguf") && Catch::Contains("No such file"));
}

TEST_CASE("gguf: stories260K.gguf", "[core]") {
  const std::string path = kvc::test::model_path("stories260K.gguf");
  auto f = GgufFile::open(path);
  INFO((f.ok() ? std::string() : f.error().what()));
  REQUIRE(f.ok());
  CHECK(f->version() == 3);
  CHECK(f->metadata().size() == 19);
  REQUIRE(f->tensors().size() == 48);
  for (const auto& t : f->tensors()) CHECK(t.type == DType::f32);
  CHECK(f->check_invariants());
  CHECK(f->data_offset() == 14176);  // tensor infos end at 14152, padded to 32
  const auto* emb = f->find_tensor("token_embd.weight");
  REQUIRE(emb != nullptr);
  CHECK(emb->shape == std::vector<int64_t>{64, 512});
  CHECK(emb->n_bytes == 64 * 512 * 4);
  CHECK(f->get_string("general.architecture").value() == "llama");
  CHECK(f->get_uint("llama.embedding_length").value() == 64);
  CHECK(f->get_uint("llama.block_count").value() == 5);
  CHECK(f->get_uint("llama.attention.head_count_kv").value() == 4);
  CHECK(std::abs(f->get_float("llama.attention.layer_norm_rms_epsilon").value() - 1e-5) < 1e-10);
  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  REQUIRE(tokens.ok());
  REQUIRE(tokens->size() == 512);
  CHECK((*tokens)[0] == "<unk>");
  CHECK((*tokens)[1] == "<s>");
  CHECK((*tokens)[2] == "</s>");
  CHECK(f->get_f32_array("tokenizer.ggml.scores")->size() == 512);
  CHECK(f->get_i32_array("tokenizer.ggml.token_type")->size() == 512);

  // The mapped tensor bytes are the file's bytes at data_offset + offset.
  const auto file = read_all(path);
  const auto* out_norm = f->find_tensor("output_norm.weight");
  REQUIRE(out_norm != nullptr);
  CHECK(out_norm->offset == 131072);
  CHECK(std::equal(f->tensor_data(*out_norm), f->tensor_data(*out_norm) + out_norm->n_bytes,
                   file.begin() + static_cast<std::ptrdiff_t>(f->data_offset() + out_norm->offset)));
}

TEST_CASE("gguf: tiny-gqa-q4_k_m.gguf mixes Q4_K and Q6_K", "[core]") {
  auto f = GgufFile::open(kvc::test::model_path("tiny-gqa-q4_k_m.gguf"));
  REQUIRE(f.ok());
  CHECK(f->version() == 3);
  REQUIRE(f->tensors().size() == 39);
  int n_q4k = 0, n_q6k = 0, n_f32 = 0;
  for (const auto& t : f->tensors()) {
    n_q4k += t.type == DType::q4_k;
    n_q6k += t.type == DType::q6_k;
    n_f32 += t.type == DType::f32;
  }
  CHECK(n_q4k == 25);
  CHECK(n_q6k == 5);
  CHECK(n_f32 == 9);
  const auto* out = f->find_tensor("output.weight");
  REQUIRE(out != nullptr);
  CHECK(out->type == DType::q6_k);
  CHECK(out->shape == std::vector<int64_t>{256, 32000});
  CHECK(out->n_bytes == 32000 * 210);
  CHECK(f->get_string_array("tokenizer.ggml.tokens")->size() == 32000);
  CHECK(f->get_bool("tokenizer.ggml.add_bos_token").value());
  CHECK(f->check_invariants());
}
