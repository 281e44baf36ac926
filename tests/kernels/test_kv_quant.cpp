// KV row formats: hand-computed bytes, round-trip error within each format's step, every SIMD
// encoder bit-identical to the scalar reference, and the block geometry.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/kv_format.h"
#include "kernels/cpu/kv_ops.h"
#include "kernels/cpu/quant.h"

using namespace kvc::kernels;

namespace {

std::vector<const KvOpsTable*> all_tables() {
  std::vector<const KvOpsTable*> r{&kv_ops_scalar()};
  if (cpu_features().avx2) r.push_back(&kv_ops_avx2());
  if (cpu_features().avx512) r.push_back(&kv_ops_avx512());
  return r;
}

float scale_of(const uint8_t* group) { return fp16_to_f32(static_cast<uint16_t>(group[0] | group[1] << 8)); }

// Groups of 32 with magnitudes from 0.01 to 1000 (scales stay normal F16 numbers), a few
// exact .5 ties, an all-zero group and groups whose max and min magnitudes are equal.
std::vector<float> test_row(int64_t n_groups, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_groups * k_kv_group));
  for (int64_t g = 0; g < n_groups; ++g) {
    float* p = x.data() + g * k_kv_group;
    const float mag = std::pow(10.0f, -2.0f + 5.0f * unit(rng));
    for (int i = 0; i < k_kv_group; ++i) p[i] = mag * normal(rng);
    switch (g % 6) {
      case 1: for (int i = 0; i < k_kv_group; ++i) p[i] = 0.0f; break;
      case 2: p[3] = 4.0f; p[9] = -4.0f; for (int i = 10; i < 20; ++i) p[i] = 0.5f * static_cast<float>(i - 15); break;
      case 3: p[0] = 127.0f; p[1] = 0.5f; p[2] = 1.5f; p[3] = -2.5f; break;  // d = 1: exact ties
      default: break;
    }
  }
  return x;
}

}  // namespace

TEST_CASE("kv row sizes match the documented cost per element", "[kernels]") {
  CHECK(row_bytes(KvType::f16, 256) == 512);
  CHECK(row_bytes(KvType::q8, 256) == 8 * 34);
  CHECK(row_bytes(KvType::q4, 256) == 8 * 18);
  // 1 + 2/32 and 0.5 + 2/32 bytes per element (core/kv/kv_format.h)
  CHECK(static_cast<double>(row_bytes(KvType::q8, 4096)) / 4096.0 == Approx(1.0 + 2.0 / 32));
  CHECK(static_cast<double>(row_bytes(KvType::q4, 4096)) / 4096.0 == Approx(0.5 + 2.0 / 32));
}

TEST_CASE("kv q8 bytes match a hand-computed group", "[kernels]") {
  // amax = 127 gives d = 1 (F16 0x3c00), so q = round-half-even(x).
  float x[32] = {};
  x[0] = 127.0f;
  x[1] = -127.0f;
  x[2] = 0.5f;   // tie -> 0
  x[3] = 1.5f;   // tie -> 2
  x[4] = 2.5f;   // tie -> 2
  x[5] = -3.7f;  // -> -4
  x[31] = 100.2f;
  for (const KvOpsTable* t : all_tables()) {
    INFO(isa_name(t->isa));
    uint8_t out[34];
    std::memset(out, 0xee, sizeof out);
    encode_row_with(*t, KvType::q8, x, 32, out);
    uint8_t want[34] = {};
    want[0] = 0x00;
    want[1] = 0x3c;
    want[2 + 0] = 127;
    want[2 + 1] = static_cast<uint8_t>(-127);
    want[2 + 2] = 0;
    want[2 + 3] = 2;
    want[2 + 4] = 2;
    want[2 + 5] = static_cast<uint8_t>(-4);
    want[2 + 31] = 100;
    CHECK(std::memcmp(out, want, sizeof want) == 0);
  }
}

TEST_CASE("kv q4 bytes match hand-computed groups", "[kernels]") {
  for (const KvOpsTable* t : all_tables()) {
    INFO(isa_name(t->isa));
    {
      // m = -8 (largest magnitude) -> d = m / -8 = 1 (0x3c00); n = round(x) + 8.
      float x[32] = {};
      x[0] = -8.0f;   // n 0
      x[16] = 7.0f;   // n 15 -> byte 0 = 0xf0
      x[1] = 0.5f;    // tie -> 0 -> n 8
      x[17] = -2.5f;  // tie -> -2 -> n 6 -> byte 1 = 0x68
      x[15] = 7.6f;   // clamped to 7 -> n 15, high nibble is x[31] = 0 -> n 8: byte 15 = 0x8f
      uint8_t out[18];
      encode_row_with(*t, KvType::q4, x, 32, out);
      uint8_t want[18];
      std::memset(want, 0x88, sizeof want);
      want[0] = 0x00;
      want[1] = 0x3c;
      want[2 + 0] = 0xf0;
      want[2 + 1] = 0x68;
      want[2 + 15] = 0x8f;
      CHECK(std::memcmp(out, want, sizeof want) == 0);
    }
    {
      // A tie between +8 and -8 takes the positive one: d = -1 (0xbc00); 8 -> n 0 and -8 ->
      // 8 clamped to 7 -> n 15 (the documented worst case, error |d|).
      float x[32] = {};
      x[2] = 8.0f;
      x[18] = -8.0f;
      uint8_t out[18];
      encode_row_with(*t, KvType::q4, x, 32, out);
      CHECK(out[0] == 0x00);
      CHECK(out[1] == 0xbc);
      CHECK(out[2 + 2] == 0xf0);
      CHECK(out[2 + 0] == 0x88);
      float back[32];
      decode_row_with(*t, KvType::q4, out, 32, back);
      CHECK(back[2] == 8.0f);
      CHECK(back[18] == -7.0f);
      CHECK(back[0] == 0.0f);
    }
  }
}

TEST_CASE("kv row round trip stays within the format's step", "[kernels]") {
  // Derivation: the F16 scale d is used for both directions. x * (1/d) carries a relative
  // error below 2^-22, so for |x / d| <= 128 the chosen q is within 0.5 + 128 * 2^-22 of x / d,
  // and d * q rounds once more (2^-24 relative):  |x - x'| <= |d| (0.5 + 2^-15) + |x| 2^-24.
  // Q8 never clamps by more than 127 * 2^-11 < 0.5 steps. Q4 elements of the sign opposite
  // to m with |x / d| > 7.5 clamp to 7 steps: error <= |d| (8 (1 + 2^-11) - 7) + |x| 2^-24.
  // F16: half an ulp of F16, |x - x'| <= max(2^-11 |x|, 2^-25).
  const int64_t n_groups = 600;
  const int64_t n = n_groups * k_kv_group;
  const std::vector<float> x = test_row(n_groups, 7);
  for (const KvOpsTable* t : all_tables()) {
    INFO(isa_name(t->isa));
    std::vector<float> back(static_cast<size_t>(n));
    for (KvType type : {KvType::f16, KvType::q8, KvType::q4}) {
      INFO(kv_type_name(type));
      std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes(type, n)));
      encode_row_with(*t, type, x.data(), n, bytes.data());
      decode_row_with(*t, type, bytes.data(), n, back.data());
      double sq_err = 0.0;
      double sq_x = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const double xi = x[static_cast<size_t>(i)];
        const double err = std::fabs(xi - static_cast<double>(back[static_cast<size_t>(i)]));
        sq_err += err * err;
        sq_x += xi * xi;
        double bound = 0.0;
        if (type == KvType::f16) {
          bound = std::fmax(std::ldexp(std::fabs(xi), -11), std::ldexp(1.0, -25));  // subnormal: half of 2^-24
        } else {
          const int64_t g = i / k_kv_group;
          const double d = scale_of(bytes.data() + g * kv_group_bytes(type));
          const double steps = type == KvType::q4 && d != 0.0 && xi / d > 7.5 ? 8.0 * (1.0 + std::ldexp(1.0, -11)) - 7.0
                                                                              : 0.5 + std::ldexp(1.0, -15);
          bound = std::fabs(d) * steps + std::ldexp(std::fabs(xi), -24);
        }
        if (!(err <= bound)) {
          INFO("element " << i << " x " << xi << " back " << static_cast<double>(back[static_cast<size_t>(i)]) << " bound " << bound);
          REQUIRE(err <= bound);
        }
      }
      // The error is also not trivially zero: the formats do quantize (a broken pass-through
      // would pass the bound for F16 only).
      if (type != KvType::f16) CHECK(sq_err > 0.0);
      // RMS error relative to the RMS value, for the record: about 0.006 (q8), 0.1 (q4).
      const double rel_rms = std::sqrt(sq_err / sq_x);
      CHECK(rel_rms < (type == KvType::q4 ? 0.15 : type == KvType::q8 ? 0.01 : 0.001));
    }
  }
}

TEST_CASE("kv SIMD encoders produce the scalar reference's bytes", "[kernels]") {
  const int64_t n_groups = 300;
  const int64_t n = n_groups * k_kv_group;
  std::vector<float> x = test_row(n_groups, 11);
  // Values that round to exactly .5 after scaling, and subnormal-range scales.
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(32 * 10 + i)] = 1e-6f * static_cast<float>(i - 30);
  for (KvType type : {KvType::f16, KvType::q8, KvType::q4}) {
    INFO(kv_type_name(type));
    const int64_t n_bytes = row_bytes(type, n);
    std::vector<uint8_t> want(static_cast<size_t>(n_bytes));
    encode_row_reference(type, x.data(), n, want.data());
    std::vector<float> want_back(static_cast<size_t>(n));
    decode_row_reference(type, want.data(), n, want_back.data());
    for (const KvOpsTable* t : all_tables()) {
      INFO(isa_name(t->isa));
      std::vector<uint8_t> got(static_cast<size_t>(n_bytes), 0xee);
      encode_row_with(*t, type, x.data(), n, got.data());
      CHECK(std::memcmp(got.data(), want.data(), static_cast<size_t>(n_bytes)) == 0);
      std::vector<float> back(static_cast<size_t>(n));
      decode_row_with(*t, type, want.data(), n, back.data());
      CHECK(std::memcmp(back.data(), want_back.data(), back.size() * sizeof(float)) == 0);
    }
    // The public entry points agree as well.
    std::vector<uint8_t> active(static_cast<size_t>(n_bytes));
    encode_row(type, x.data(), n, active.data());
    CHECK(active == want);
  }
}

TEST_CASE("kv encoders map NaN and infinities to in-range bytes without crashing", "[kernels]") {
  float x[64];
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>(i) * 0.1f;
  x[3] = std::nanf("");
  x[40] = __builtin_inff();
  for (const KvOpsTable* t : all_tables()) {
    for (KvType type : {KvType::q8, KvType::q4}) {
      uint8_t out[2 * 34];
      encode_row_with(*t, type, x, 64, out);
      float back[64];
      decode_row_with(*t, type, out, 64, back);
      // The finite group that holds the NaN still decodes to finite values.
      for (int i = 0; i < 32; ++i) CHECK(std::isfinite(back[i]));
    }
  }
}

TEST_CASE("kv block layout places each layer's K and V rows side by side", "[kernels]") {
  const auto l = make_kv_block_layout(3, 4, 64, 16, KvType::q8, KvType::q4);
  REQUIRE(l.has_value());
  CHECK(l->check_invariants());
  CHECK(l->k_row_bytes == 4 * 2 * 34);
  CHECK(l->v_row_bytes == 4 * 2 * 18);
  CHECK(l->layer_bytes == 16 * (272 + 144));
  CHECK(l->block_bytes == 3 * 16 * (272 + 144));
  CHECK(l->k_row_offset(0, 0) == 0);
  CHECK(l->k_row_offset(0, 5) == 5 * 272);
  CHECK(l->v_row_offset(0, 0) == 16 * 272);
  CHECK(l->k_row_offset(2, 1) == 2 * 16 * (272 + 144) + 272);
  CHECK(l->v_row_offset(2, 15) == 2 * 16 * (272 + 144) + 16 * 272 + 15 * 144);
  CHECK(l->k_head_offset(3) == 3 * 68);
  CHECK(l->v_head_offset(3) == 3 * 36);
  CHECK(kv_slot(*l, 0).block == 0);
  CHECK(kv_slot(*l, 17).block == 1);
  CHECK(kv_slot(*l, 17).row == 1);
  // Unsupported shapes are a normal "no" (a model file can ask for them), not a crash.
  CHECK_FALSE(make_kv_block_layout(3, 4, 80, 16, KvType::q8, KvType::f16).has_value());
  CHECK(make_kv_block_layout(3, 4, 80, 16, KvType::f16, KvType::f16).has_value());
  CHECK_FALSE(make_kv_block_layout(0, 4, 64, 16, KvType::f16, KvType::f16).has_value());
  CHECK_FALSE(make_kv_block_layout(3, 4, 64, 0, KvType::f16, KvType::f16).has_value());
}

TEST_CASE("kv_store writes exactly one row of K and one of V", "[kernels]") {
  const auto l = make_kv_block_layout(2, 2, 32, 16, KvType::q4, KvType::f16);
  REQUIRE(l.has_value());
  std::vector<uint8_t> block(static_cast<size_t>(l->block_bytes), 0xaa);
  std::vector<float> k(64);
  std::vector<float> v(64);
  for (int i = 0; i < 64; ++i) {
    k[static_cast<size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
    v[static_cast<size_t>(i)] = static_cast<float>(i) * 0.25f;
  }
  kv_store(*l, block.data(), 1, 3, k.data(), v.data());
  std::vector<uint8_t> want_k(static_cast<size_t>(l->k_row_bytes));
  std::vector<uint8_t> want_v(static_cast<size_t>(l->v_row_bytes));
  encode_row_reference(KvType::q4, k.data(), 64, want_k.data());
  encode_row_reference(KvType::f16, v.data(), 64, want_v.data());
  for (int64_t i = 0; i < l->block_bytes; ++i) {
    const int64_t ko = i - l->k_row_offset(1, 3);
    const int64_t vo = i - l->v_row_offset(1, 3);
    uint8_t want = 0xaa;
    if (ko >= 0 && ko < l->k_row_bytes) want = want_k[static_cast<size_t>(ko)];
    if (vo >= 0 && vo < l->v_row_bytes) want = want_v[static_cast<size_t>(vo)];
    if (block[static_cast<size_t>(i)] != want) {
      INFO("byte " << i);
      REQUIRE(block[static_cast<size_t>(i)] == want);
    }
  }
}
