// MXFP4 (gpt-oss's expert weights): dequantization and reference quantization bit for bit
// against llama.cpp's (tests/data/references/mxfp4-llama.bin, from tests/data/mxfp4-reference.c),
// the block layout by hand, and the round trip's error.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/quant.h"
#include "support/test_support.h"

using namespace kvc::kernels;

namespace {

// mxfp4-llama.bin (its layout is described in mxfp4-reference.c).
struct LlamaMxfp4 {
  std::vector<uint8_t> deq_blocks;
  std::vector<float> deq_values;
  std::vector<float> q_inputs;
  std::vector<uint8_t> q_blocks;
};

LlamaMxfp4 read_reference() {
  const std::string bytes = kvc::test::read_file(kvc::test::reference_path("mxfp4-llama.bin"));
  size_t at = 0;
  auto take = [&](void* dst, size_t n) {
    REQUIRE(at + n <= bytes.size());
    std::memcpy(dst, bytes.data() + at, n);
    at += n;
  };
  char magic[8];
  take(magic, 8);
  REQUIRE(std::memcmp(magic, "KVMXFP4", 8) == 0);
  LlamaMxfp4 r;
  uint32_t n = 0;
  take(&n, 4);
  r.deq_blocks.resize(n * sizeof(BlockMXFP4));
  r.deq_values.resize(n * 32);
  take(r.deq_blocks.data(), r.deq_blocks.size());
  take(r.deq_values.data(), r.deq_values.size() * 4);
  take(&n, 4);
  r.q_inputs.resize(n * 32);
  r.q_blocks.resize(n * sizeof(BlockMXFP4));
  take(r.q_inputs.data(), r.q_inputs.size() * 4);
  take(r.q_blocks.data(), r.q_blocks.size());
  REQUIRE(at == bytes.size());
  return r;
}

}  // namespace

TEST_CASE("MXFP4 dequantizes every scale byte bit for bit as llama.cpp does", "[kernels]") {
  const LlamaMxfp4 r = read_reference();
  REQUIRE(r.deq_blocks.size() == 256 * sizeof(BlockMXFP4));  // scale bytes 0..255, one block each
  std::vector<float> ours(r.deq_values.size());
  dequantize_row(DType::mxfp4, r.deq_blocks.data(), ours.data(), static_cast<int64_t>(ours.size()));
  for (size_t i = 0; i < ours.size(); ++i) {
    INFO("value " << i << " (scale byte " << i / 32 << "): ours " << ours[i] << ", llama.cpp " << r.deq_values[i]);
    REQUIRE(std::memcmp(&ours[i], &r.deq_values[i], 4) == 0);
  }
}

TEST_CASE("MXFP4 quantization gives llama.cpp's reference quantizer's bytes", "[kernels]") {
  const LlamaMxfp4 r = read_reference();
  std::vector<uint8_t> ours(r.q_blocks.size());
  quantize_row(DType::mxfp4, r.q_inputs.data(), ours.data(), static_cast<int64_t>(r.q_inputs.size()));
  for (size_t b = 0; b < ours.size() / sizeof(BlockMXFP4); ++b) {
    INFO("block " << b);
    REQUIRE(std::memcmp(ours.data() + b * sizeof(BlockMXFP4), r.q_blocks.data() + b * sizeof(BlockMXFP4),
                        sizeof(BlockMXFP4)) == 0);
  }
}

TEST_CASE("MXFP4 hand-built block: E8M0 scale, then value j in the low nibble of byte j, j + 16 in the high",
          "[kernels]") {
  // e2m1 levels 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (sign bit 3), times 2^(e - 127).
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  BlockMXFP4 b{};
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  for (int e : {0, 1, 2, 100, 127, 128, 200}) {  // 254 and 255 overflow to +-inf: the reference test has them
    b.e = static_cast<uint8_t>(e);
    float y[32];
    dequantize_row(DType::mxfp4, &b, y, 32);
    const double scale = std::ldexp(1.0, e - 127);
    for (int j = 0; j < 16; ++j) {
      INFO("e " << e << " j " << j);
      CHECK(static_cast<double>(y[j]) == static_cast<double>(e2m1[j]) * scale);
      CHECK(static_cast<double>(y[j + 16]) == static_cast<double>(e2m1[15 - j]) * scale);
    }
  }
}

TEST_CASE("MXFP4 round trip: the largest value maps within a step, the error is FP4's", "[kernels]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(4096), y(4096);
  for (auto& v : x) v = nd(rng) * 0.02f;
  std::vector<uint8_t> q(row_bytes(DType::mxfp4, 4096));
  REQUIRE(q.size() == 4096 / 32 * 17);
  quantize_row(DType::mxfp4, x.data(), q.data(), 4096);
  dequantize_row(DType::mxfp4, q.data(), y.data(), 4096);
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(y[i]);
    err += d * d;
    ref += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  }
  // Relative RMS error of normal weights in 4-bit floats with a power-of-two scale: ~0.13.
  CHECK(std::sqrt(err / ref) < 0.2);
  CHECK(std::sqrt(err / ref) > 0.03);  // 4 bits lose something: not a copy
  // NaN becomes 0, +-Inf the block's largest finite magnitude (as the other types).
  float odd[32] = {};
  odd[0] = std::nanf("");
  odd[1] = INFINITY;
  odd[2] = 3.0f;
  BlockMXFP4 b;
  quantize_row(DType::mxfp4, odd, &b, 32);
  dequantize_row(DType::mxfp4, &b, y.data(), 32);
  CHECK(y[0] == 0.0f);
  CHECK(y[1] == 3.0f);
  CHECK(y[2] == 3.0f);
}
