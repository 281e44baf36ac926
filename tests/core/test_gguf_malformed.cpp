// GGUF reader on malformed, truncated and hostile files: each gives a clear error, never a crash.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "gguf_test_bytes.h"
#include "support/test_support.h"

using kvc::ErrorCode;
using kvc::gguf::GgufFile;
using kvc::test::GgufBytes;

namespace {

constexpr uint32_t k_u32 = 4, k_bool = 7, k_string = 8, k_array = 9, k_f32_type = 0;

void expect_error(const std::vector<uint8_t>& bytes, ErrorCode code, const std::vector<std::string>& fragments) {
  auto f = GgufFile::from_memory(bytes);
  REQUIRE(!f.ok());
  INFO(f.error().what());
  CHECK(f.error().code == code);
  for (const auto& s : fragments) CHECK_THAT(f.error().message, Catch::Contains(s));
}

// A valid file with two keys and two tensors; the members record where sections begin.
struct SmallFile {
  GgufBytes b;
  size_t kv0 = 0, kv1 = 0, kv1_value = 0, infos = 0, info1 = 0, data = 0;

  SmallFile() {
    b.header(2, 2);
    kv0 = b.size();
    b.key("general.name", k_string).str(std::string(120, 'n'));
    kv1 = b.size();
    b.key("tokenizer.ggml.tokens", k_array);
    kv1_value = b.size();
    b.u32(k_string).u64(3).str("a").str("").str("bc");
    infos = b.size();
    b.tensor("blk.0.attn_q.weight", {4, 2}, k_f32_type, 0);
    info1 = b.size();
    b.tensor("output_norm.weight", {4}, k_f32_type, 32);
    b.pad_to(32);
    data = b.size();
    b.zeros(32 + 16);
  }
  std::vector<uint8_t> prefix(size_t n) const {
    return {b.bytes().begin(), b.bytes().begin() + static_cast<std::ptrdiff_t>(n)};
  }
};

}  // namespace

TEST_CASE("gguf malformed: the small file is valid", "[core]") {
  SmallFile s;
  auto f = GgufFile::from_memory(s.b.bytes());
  REQUIRE(f.ok());
  CHECK(f->tensors().size() == 2);
  CHECK(f->data_offset() == s.data);
  CHECK(f->get_string_array("tokenizer.ggml.tokens").value() == std::vector<std::string>{"a", "", "bc"});
}

TEST_CASE("gguf malformed: truncation at every byte length is an error", "[core]") {
  SmallFile s;
  for (size_t n = 0; n < s.b.size(); ++n) {
    auto f = GgufFile::from_memory(s.prefix(n));
    INFO("truncated to " << n << " bytes");
    REQUIRE(!f.ok());
    CHECK(f.error().code == ErrorCode::invalid_file);
    CHECK(!f.error().message.empty());
  }
}

TEST_CASE("gguf malformed: truncation at section boundaries names the section", "[core]") {
  SmallFile s;
  expect_error(s.prefix(0), ErrorCode::invalid_file, {"header", "too short"});
  expect_error(s.prefix(6), ErrorCode::invalid_file, {"header", "version", "truncated"});
  expect_error(s.prefix(16), ErrorCode::invalid_file, {"header", "metadata count"});
  // Too short for the smallest 2 keys and 2 tensor infos: caught by the header's bound.
  expect_error(s.prefix(s.kv0 + 4), ErrorCode::invalid_file, {"header", "cannot fit in the remaining 4 bytes"});
  expect_error(s.prefix(s.kv0 + 100), ErrorCode::invalid_file,
               {"metadata key #0 (general.name)", "string value has length 120"});
  expect_error(s.prefix(s.kv1 + 4), ErrorCode::invalid_file, {"metadata key #1: key", "truncated"});
  expect_error(s.prefix(s.kv1_value - 2), ErrorCode::invalid_file,
               {"metadata key #1 (tokenizer.ggml.tokens)", "value type"});
  expect_error(s.prefix(s.kv1_value + 20), ErrorCode::invalid_file,
               {"metadata key #1 (tokenizer.ggml.tokens)", "array of 3 string elements cannot fit"});
  // Past the element count's bound, inside the last string ("bc", cut after "b").
  expect_error(s.prefix(s.kv1_value + 12 + 9 + 8 + 8 + 1), ErrorCode::invalid_file,
               {"metadata key #1 (tokenizer.ggml.tokens)", "string has length 2", "array element 2"});
  expect_error(s.prefix(s.infos + 3), ErrorCode::invalid_file, {"tensor info #0", "name"});
  expect_error(s.prefix(s.info1 - 3), ErrorCode::invalid_file, {"tensor blk.0.attn_q.weight", "data offset"});
  expect_error(s.prefix(s.data + 40), ErrorCode::invalid_file,
               {"tensor output_norm.weight: data [", "lies past the end of the file"});
}

TEST_CASE("gguf malformed: header", "[core]") {
  expect_error(GgufBytes().raw("GGML").u32(3).u64(0).u64(0).bytes(), ErrorCode::invalid_file,
               {"not a GGUF file", "47 47 4d 4c"});
  expect_error(GgufBytes().header(0, 0, 1).bytes(), ErrorCode::unsupported, {"version 1"});
  expect_error(GgufBytes().header(0, 0, 4).bytes(), ErrorCode::unsupported, {"version 4"});
  expect_error(GgufBytes().header(0, 0, 0x03000000).bytes(), ErrorCode::unsupported, {"big-endian"});
  expect_error(GgufBytes().header(0, uint64_t{1} << 62).bytes(), ErrorCode::invalid_file,
               {"n_kv = 4611686018427387904", "cannot fit"});
  expect_error(GgufBytes().header(~uint64_t{0}, 0).zeros(64).bytes(), ErrorCode::invalid_file, {"n_tensors"});
  CHECK(GgufFile::from_memory(GgufBytes().header(0, 0).bytes()).ok());  // an empty model is well-formed
}

TEST_CASE("gguf malformed: metadata", "[core]") {
  SECTION("string length") {
    expect_error(GgufBytes().header(0, 1).u64(uint64_t{1} << 40).zeros(16).bytes(), ErrorCode::invalid_file,
                 {"metadata key #0", "key has length 1099511627776"});
    expect_error(GgufBytes().header(0, 1).key("general.name", k_string).u64(1000).raw("abc").bytes(),
                 ErrorCode::invalid_file, {"metadata key #0 (general.name)", "length 1000"});
  }
  SECTION("array count") {
    expect_error(GgufBytes()
                     .header(0, 1)
                     .key("tokenizer.ggml.tokens", k_array)
                     .u32(k_string)
                     .u64(uint64_t{1} << 62)
                     .zeros(40)
                     .bytes(),
                 ErrorCode::invalid_file,
                 {"metadata key #0 (tokenizer.ggml.tokens)", "array of 4611686018427387904 string elements",
                  "cannot fit in the remaining 40 bytes"});
    expect_error(GgufBytes().header(0, 1).key("x", k_array).u32(k_u32).u64(3).u32(1).u32(2).bytes(),
                 ErrorCode::invalid_file, {"metadata key #0 (x)", "array of 3 u32"});
  }
  SECTION("nesting depth") {
    auto nested = [](int depth) {
      GgufBytes b;
      b.header(0, 1).key("deep", k_array);
      for (int i = 1; i < depth; ++i) b.u32(k_array).u64(1);
      b.u32(k_u32).u64(1).u32(42);
      return b.bytes();
    };
    CHECK(GgufFile::from_memory(nested(8)).ok());
    expect_error(nested(9), ErrorCode::invalid_file, {"metadata key #0 (deep)", "nested more than 8"});
    expect_error(nested(100000), ErrorCode::invalid_file, {"nested more than 8"});
  }
  SECTION("value types") {
    expect_error(GgufBytes().header(0, 1).key("k", 13).u32(0).bytes(), ErrorCode::invalid_file,
                 {"metadata key #0 (k)", "unknown value type 13"});
    expect_error(GgufBytes().header(0, 1).key("k", k_array).u32(0xffffffff).u64(0).bytes(), ErrorCode::invalid_file,
                 {"metadata key #0 (k)", "unknown element type 4294967295"});
  }
  SECTION("bool") {
    expect_error(GgufBytes().header(0, 1).key("tokenizer.ggml.add_bos_token", k_bool).u8(2).zeros(8).bytes(),
                 ErrorCode::invalid_file, {"tokenizer.ggml.add_bos_token", "value is 2, but a bool must be 0 or 1"});
    expect_error(GgufBytes().header(0, 1).key("flags", k_array).u32(k_bool).u64(3).u8(1).u8(0).u8(7).zeros(8).bytes(),
                 ErrorCode::invalid_file, {"flags", "is 7, but a bool must be 0 or 1", "element 2"});
  }
  SECTION("duplicate key") {
    expect_error(GgufBytes().header(0, 2).key("a.b", k_u32).u32(1).key("a.b", k_u32).u32(2).bytes(),
                 ErrorCode::invalid_file, {"metadata key #1 (a.b)", "duplicate key", "#0"});
  }
  SECTION("alignment") {
    auto aligned = [](uint32_t a) { return GgufBytes().header(0, 1).key("general.alignment", k_u32).u32(a).bytes(); };
    CHECK(GgufFile::from_memory(aligned(64)).value().alignment() == 64);
    expect_error(aligned(0), ErrorCode::invalid_file, {"general.alignment", "alignment 0"});
    expect_error(aligned(3), ErrorCode::invalid_file, {"general.alignment", "alignment 3", "power of two"});
    expect_error(GgufBytes().header(0, 1).key("general.alignment", k_string).str("32").bytes(), ErrorCode::invalid_file,
                 {"general.alignment", "expected u32, found string"});
  }
}

namespace {

// One F32-or-other tensor described by `info`, with `n_data` bytes of data after the padding.
std::vector<uint8_t> one_tensor(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset, size_t n_data,
                                size_t n_tensors = 1) {
  GgufBytes b;
  b.header(n_tensors, 0).tensor("blk.3.attn_q.weight", dims, type, offset);
  b.pad_to(32).zeros(n_data);
  return b.bytes();
}

}  // namespace

TEST_CASE("gguf malformed: tensor infos", "[core]") {
  CHECK(GgufFile::from_memory(one_tensor({4, 2}, k_f32_type, 0, 32)).ok());
  SECTION("dimensions") {
    expect_error(one_tensor({}, k_f32_type, 0, 32), ErrorCode::invalid_file,
                 {"tensor blk.3.attn_q.weight", "has 0 dimensions"});
    expect_error(one_tensor({1, 1, 1, 1, 1}, k_f32_type, 0, 32), ErrorCode::invalid_file, {"has 5 dimensions"});
    expect_error(one_tensor({4, 0}, k_f32_type, 0, 32), ErrorCode::invalid_file, {"dimension 1 is 0"});
    expect_error(one_tensor({uint64_t{1} << 32, uint64_t{1} << 32}, k_f32_type, 0, 32), ErrorCode::invalid_file,
                 {"blk.3.attn_q.weight", "element count overflows"});
    expect_error(one_tensor({~uint64_t{0}}, k_f32_type, 0, 32), ErrorCode::invalid_file, {"overflows"});
    // 2^61 F32 elements fit in int64 but their 2^63 bytes lie past any file.
    expect_error(one_tensor({uint64_t{1} << 61}, k_f32_type, 0, 32), ErrorCode::invalid_file, {"past the end"});
  }
  SECTION("types") {
    expect_error(one_tensor({256}, 23, 0, 256), ErrorCode::unsupported,
                 {"tensor blk.3.attn_q.weight has type IQ4_XS (23), which kvchat does not support yet; supported: "
                  "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4"});
    expect_error(one_tensor({256}, 15, 0, 292), ErrorCode::unsupported, {"Q8_K (15)"});
    expect_error(one_tensor({256}, 4, 0, 256), ErrorCode::invalid_file, {"unknown type id 4"});
    expect_error(one_tensor({256}, 1000, 0, 256), ErrorCode::invalid_file, {"unknown type id 1000"});
    expect_error(one_tensor({33, 2}, 8, 0, 256), ErrorCode::invalid_file, {"row length 33", "Q8_0", "block of 32"});
  }
  SECTION("offsets") {
    expect_error(one_tensor({4, 2}, k_f32_type, 64, 32), ErrorCode::invalid_file,
                 {"tensor blk.3.attn_q.weight: data [0x", "lies past the end of the file (0x"});
    expect_error(one_tensor({4, 2}, k_f32_type, 4, 64), ErrorCode::invalid_file, {"data offset 0x4", "alignment 32"});
    expect_error(one_tensor({4, 2}, k_f32_type, ~uint64_t{0} - 31, 64), ErrorCode::invalid_file, {"past the end"});
  }
  SECTION("overlap and duplicates") {
    GgufBytes b;
    b.header(2, 0).tensor("a", {16}, k_f32_type, 0).tensor("b", {8}, k_f32_type, 32);
    b.pad_to(32).zeros(128);
    expect_error(b.bytes(), ErrorCode::invalid_file, {"tensor b: data", "overlaps tensor a"});
    GgufBytes d;
    d.header(2, 0).tensor("a", {8}, k_f32_type, 0).tensor("a", {8}, k_f32_type, 32);
    d.pad_to(32).zeros(64);
    expect_error(d.bytes(), ErrorCode::invalid_file, {"tensor a", "duplicate tensor name"});
  }
  SECTION("a data section past the end of the file") {
    GgufBytes b;
    b.header(1, 0).tensor("a", {1}, k_f32_type, 0);
    expect_error(b.bytes(), ErrorCode::invalid_file, {"data section would start"});
  }
}

TEST_CASE("gguf malformed: open() names the path and the reason", "[core]") {
  kvc::test::TempDir dir;
  auto missing = GgufFile::open(dir.file("nope.gguf"));
  REQUIRE(!missing.ok());
  CHECK(missing.error().code == ErrorCode::io);
  CHECK_THAT(missing.error().message, Catch::Contains("nope.gguf") && Catch::Contains("No such file or directory"));
  auto folder = GgufFile::open(dir.path().string());
  REQUIRE(!folder.ok());
  CHECK_THAT(folder.error().message, Catch::Contains("not a regular file"));
  {
    std::FILE* fp = std::fopen(dir.file("empty.gguf").c_str(), "wb");
    REQUIRE(fp != nullptr);
    std::fclose(fp);
  }
  auto empty = GgufFile::open(dir.file("empty.gguf"));
  REQUIRE(!empty.ok());
  CHECK(empty.error().code == ErrorCode::invalid_file);
  CHECK_THAT(empty.error().message, Catch::Contains("empty.gguf: header"));
}
