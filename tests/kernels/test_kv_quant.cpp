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

constexpr int k_groups[] = {32, 16, 8};

// Groups of `group` elements with magnitudes from 0.01 to 1000 (scales stay normal F16
// numbers), a few exact .5 ties, an all-zero group and groups whose max and min magnitudes
// are equal.
std::vector<float> test_row(int64_t n_groups, uint32_t seed, int group = k_kv_group_max) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_groups * group));
  for (int64_t g = 0; g < n_groups; ++g) {
    float* p = x.data() + g * group;
    const float mag = std::pow(10.0f, -2.0f + 5.0f * unit(rng));
    for (int i = 0; i < group; ++i) p[i] = mag * normal(rng);
    switch (g % 6) {
      case 1:
        for (int i = 0; i < group; ++i) p[i] = 0.0f;
        break;
      case 2:
        p[3] = 4.0f;
        p[group / 2 + 1] = -4.0f;
        for (int i = group / 2 + 2; i < group; ++i) p[i] = 0.5f * static_cast<float>(i - group / 2 - 4);
        break;
      case 3:
        p[0] = 127.0f;
        p[1] = 0.5f;
        p[2] = 1.5f;
        p[3] = -2.5f;
        break;  // d = 1: exact ties
      default: break;
    }
  }
  return x;
}

}  // namespace

TEST_CASE("kv row sizes match the documented cost per element", "[kernels]") {
  CHECK(row_bytes(KvType::f16, 32, 256) == 512);
  CHECK(row_bytes(KvType::f16, 0, 12) == 24);  // F16 needs no group
  CHECK(row_bytes(KvType::q8, 32, 256) == 8 * 34);
  CHECK(row_bytes(KvType::q4, 32, 256) == 8 * 18);
  CHECK(row_bytes(KvType::q8, 16, 256) == 16 * 18);
  CHECK(row_bytes(KvType::q4, 16, 256) == 16 * 10);
  CHECK(row_bytes(KvType::q8, 8, 256) == 32 * 10);
  CHECK(row_bytes(KvType::q4, 8, 256) == 32 * 6);
  // bits / 8 + 2 / g bytes per element (core/kv/kv_format.h)
  for (int g : k_groups) {
    INFO("group " << g);
    CHECK(static_cast<double>(row_bytes(KvType::q8, g, 4096)) / 4096.0 == Approx(1.0 + 2.0 / g));
    CHECK(static_cast<double>(row_bytes(KvType::q4, g, 4096)) / 4096.0 == Approx(0.5 + 2.0 / g));
  }
}

TEST_CASE("kv group is the largest of 32, 16, 8 that divides the head size", "[kernels]") {
  CHECK(kv_group_for_head_dim(128) == 32);
  CHECK(kv_group_for_head_dim(64) == 32);
  CHECK(kv_group_for_head_dim(96) == 32);
  CHECK(kv_group_for_head_dim(80) == 16);
  CHECK(kv_group_for_head_dim(48) == 16);
  CHECK(kv_group_for_head_dim(16) == 16);
  CHECK(kv_group_for_head_dim(8) == 8);
  CHECK(kv_group_for_head_dim(40) == 8);
  CHECK(kv_group_for_head_dim(12) == 0);
  CHECK(kv_group_for_head_dim(4) == 0);
  CHECK(kv_group_for_head_dim(0) == 0);
  CHECK(kv_group_valid(8));
  CHECK_FALSE(kv_group_valid(0));
  CHECK_FALSE(kv_group_valid(4));
  CHECK_FALSE(kv_group_valid(64));
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
    encode_row_with(*t, KvType::q8, 32, x, 32, out);
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
      encode_row_with(*t, KvType::q4, 32, x, 32, out);
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
      encode_row_with(*t, KvType::q4, 32, x, 32, out);
      CHECK(out[0] == 0x00);
      CHECK(out[1] == 0xbc);
      CHECK(out[2 + 2] == 0xf0);
      CHECK(out[2 + 0] == 0x88);
      float back[32];
      decode_row_with(*t, KvType::q4, 32, out, 32, back);
      CHECK(back[2] == 8.0f);
      CHECK(back[18] == -7.0f);
      CHECK(back[0] == 0.0f);
    }
  }
}

TEST_CASE("kv q4 and q8 bytes of groups of 8 and 16 match hand-computed ones", "[kernels]") {
  for (const KvOpsTable* t : all_tables()) {
    INFO(isa_name(t->isa));
    {
      // Two groups of 8. Group 0: m = -8 -> d = 1; element j in the low nibble of byte j,
      // element j + 4 in the high one. Group 1: all zero -> d = 0 / -8 = -0 (F16 0x8000),
      // every nibble 8.
      float x[16] = {-8.0f, 0.5f, 3.0f, 0.0f, 7.0f, -2.5f, 1.0f, -1.0f};
      uint8_t out[12];
      std::memset(out, 0xee, sizeof out);
      encode_row_with(*t, KvType::q4, 8, x, 16, out);
      // n: -8 -> 0, 0.5 -> 8 (tie to even), 3 -> 11, 0 -> 8 | 7 -> 15, -2.5 -> 6, 1 -> 9, -1 -> 7
      const uint8_t want[12] = {0x00, 0x3c, 0xf0, 0x68, 0x9b, 0x78, 0x00, 0x80, 0x88, 0x88, 0x88, 0x88};
      CHECK(std::memcmp(out, want, sizeof want) == 0);
      float back[16];
      decode_row_with(*t, KvType::q4, 8, out, 16, back);
      const float want_back[8] = {-8.0f, 0.0f, 3.0f, 0.0f, 7.0f, -2.0f, 1.0f, -1.0f};
      for (int i = 0; i < 8; ++i) CHECK(back[i] == want_back[i]);
      for (int i = 8; i < 16; ++i) CHECK(back[i] == 0.0f);
    }
    {
      // One group of 16 in q8: amax = 127 -> d = 1, q = round-half-even(x); then q4 of the
      // same group: m = 127 -> d = -127/8 = -15.875 (F16-exact, 0xcbf0).
      float x[16] = {};
      x[0] = 127.0f;
      x[3] = 2.5f;
      x[15] = -3.7f;
      uint8_t q8[18];
      encode_row_with(*t, KvType::q8, 16, x, 16, q8);
      uint8_t want8[18] = {};
      want8[1] = 0x3c;
      want8[2 + 0] = 127;
      want8[2 + 3] = 2;
      want8[2 + 15] = static_cast<uint8_t>(-4);
      CHECK(std::memcmp(q8, want8, sizeof want8) == 0);
      uint8_t q4[10];
      encode_row_with(*t, KvType::q4, 16, x, 16, q4);
      CHECK(q4[0] == 0xf0);
      CHECK(q4[1] == 0xcb);
      // 127 / -15.875 = -8 -> n 0 (low nibble of byte 0); x[8] = 0 -> n 8 (its high nibble).
      CHECK(q4[2 + 0] == 0x80);
      // x[7] = 0 and x[15] = -3.7 / -15.875 = 0.23 -> 0: both n 8.
      CHECK(q4[2 + 7] == 0x88);
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
  // The bound holds for every group size: nothing in it depends on g.
  for (int group : k_groups) {
    const int64_t n_groups = 600 * 32 / group;
    const int64_t n = n_groups * group;
    const std::vector<float> x = test_row(n_groups, 7, group);
    for (const KvOpsTable* t : all_tables()) {
      INFO(isa_name(t->isa) << " group " << group);
      std::vector<float> back(static_cast<size_t>(n));
      for (KvType type : {KvType::f16, KvType::q8, KvType::q4}) {
        INFO(kv_type_name(type));
        std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes(type, group, n)));
        encode_row_with(*t, type, group, x.data(), n, bytes.data());
        decode_row_with(*t, type, group, bytes.data(), n, back.data());
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
            const int64_t g = i / group;
            const double d = scale_of(bytes.data() + g * kv_group_bytes(type, group));
            const double steps = type == KvType::q4 && d != 0.0 && xi / d > 7.5
                                     ? 8.0 * (1.0 + std::ldexp(1.0, -11)) - 7.0
                                     : 0.5 + std::ldexp(1.0, -15);
            bound = std::fabs(d) * steps + std::ldexp(std::fabs(xi), -24);
          }
          if (!(err <= bound)) {
            INFO("element " << i << " x " << xi << " back " << static_cast<double>(back[static_cast<size_t>(i)])
                            << " bound " << bound);
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
}

TEST_CASE("kv SIMD encoders produce the scalar reference's bytes", "[kernels]") {
  for (int group : k_groups) {
    const int64_t n_groups = 300 * 32 / group;
    const int64_t n = n_groups * group;
    std::vector<float> x = test_row(n_groups, 11, group);
    // Values that round to exactly .5 after scaling, and subnormal-range scales.
    for (int i = 0; i < 64; ++i) x[static_cast<size_t>(32 * 10 + i)] = 1e-6f * static_cast<float>(i - 30);
    for (KvType type : {KvType::f16, KvType::q8, KvType::q4}) {
      INFO(kv_type_name(type) << " group " << group);
      const int64_t n_bytes = row_bytes(type, group, n);
      std::vector<uint8_t> want(static_cast<size_t>(n_bytes));
      encode_row_reference(type, group, x.data(), n, want.data());
      std::vector<float> want_back(static_cast<size_t>(n));
      decode_row_reference(type, group, want.data(), n, want_back.data());
      for (const KvOpsTable* t : all_tables()) {
        INFO(isa_name(t->isa));
        std::vector<uint8_t> got(static_cast<size_t>(n_bytes), 0xee);
        encode_row_with(*t, type, group, x.data(), n, got.data());
        CHECK(std::memcmp(got.data(), want.data(), static_cast<size_t>(n_bytes)) == 0);
        std::vector<float> back(static_cast<size_t>(n));
        decode_row_with(*t, type, group, want.data(), n, back.data());
        CHECK(std::memcmp(back.data(), want_back.data(), back.size() * sizeof(float)) == 0);
      }
      // The public entry points agree as well.
      std::vector<uint8_t> active(static_cast<size_t>(n_bytes));
      encode_row(type, group, x.data(), n, active.data());
      CHECK(active == want);
    }
  }
}

TEST_CASE("kv encoders map NaN and infinities to in-range bytes without crashing", "[kernels]") {
  float x[64];
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>(i) * 0.1f;
  x[3] = std::nanf("");
  x[40] = __builtin_inff();
  for (const KvOpsTable* t : all_tables()) {
    for (int group : k_groups) {
      for (KvType type : {KvType::q8, KvType::q4}) {
        uint8_t out[8 * 10];
        encode_row_with(*t, type, group, x, 64, out);
        float back[64];
        decode_row_with(*t, type, group, out, 64, back);
        // Every group decodes to finite values: the ones holding the NaN or the infinity too
        // (their bytes stay in range), and the others as they would without them: within
        // half a step of their own scale (amax / 127 or amax / 7).
        for (int g = 0; g < 64 / group; ++g) {
          bool finite_group = true;
          float amax = 0;
          for (int i = g * group; i < (g + 1) * group; ++i) {
            finite_group = finite_group && std::isfinite(x[i]);
            if (std::isfinite(x[i])) amax = std::max(amax, std::abs(x[i]));
          }
          const float half_step = 0.5f * amax / (type == KvType::q8 ? 127.0f : 7.0f) * 1.01f + 1e-6f;
          for (int i = g * group; i < (g + 1) * group; ++i) {
            CAPTURE(isa_name(t->isa), group, static_cast<int>(type), g, i, back[i]);
            CHECK(std::isfinite(back[i]));
            if (finite_group) CHECK(std::abs(back[i] - x[i]) <= half_step);
          }
        }
      }
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
  CHECK(l->group == 32);
  // Unsupported shapes are a normal "no" (a model file can ask for them), not a crash.
  CHECK_FALSE(make_kv_block_layout(3, 4, 12, 16, KvType::q8, KvType::f16).has_value());
  CHECK_FALSE(make_kv_block_layout(3, 4, 12, 16, KvType::f16, KvType::q4).has_value());
  const auto f16_12 = make_kv_block_layout(3, 4, 12, 16, KvType::f16, KvType::f16);
  REQUIRE(f16_12.has_value());
  CHECK(f16_12->group == 0);
  CHECK(f16_12->k_row_bytes == 4 * 12 * 2);
  CHECK_FALSE(make_kv_block_layout(0, 4, 64, 16, KvType::f16, KvType::f16).has_value());
  CHECK_FALSE(make_kv_block_layout(3, 4, 64, 0, KvType::f16, KvType::f16).has_value());
}

TEST_CASE("kv block layouts of head sizes 80, 48 and 8 take groups of 16, 16 and 8", "[kernels]") {
  // head_dim 80, 2 kv heads: q8 = 5 groups of 18 bytes per head, q4 = 5 of 10.
  const auto l80 = make_kv_block_layout(2, 2, 80, 16, KvType::q8, KvType::q4);
  REQUIRE(l80.has_value());
  CHECK(l80->check_invariants());
  CHECK(l80->group == 16);
  CHECK(l80->k_row_bytes == 2 * 5 * 18);
  CHECK(l80->v_row_bytes == 2 * 5 * 10);
  CHECK(l80->k_head_offset(1) == 90);
  CHECK(l80->v_head_offset(1) == 50);
  const auto l48 = make_kv_block_layout(1, 3, 48, 16, KvType::q4, KvType::q4);
  REQUIRE(l48.has_value());
  CHECK(l48->group == 16);
  CHECK(l48->k_row_bytes == 3 * 3 * 10);
  // stories260K: head_dim 8, 4 kv heads -> one group of 8 per head: 10 (q8) and 6 (q4) bytes.
  const auto l8 = make_kv_block_layout(5, 4, 8, 16, KvType::q8, KvType::q4);
  REQUIRE(l8.has_value());
  CHECK(l8->check_invariants());
  CHECK(l8->group == 8);
  CHECK(l8->k_row_bytes == 4 * 10);
  CHECK(l8->v_row_bytes == 4 * 6);
  CHECK(l8->v_head_offset(3) == 18);
  // A layout whose group does not follow from its head size breaks the invariants.
  KvBlockLayout bad = *l80;
  bad.group = 8;
  CHECK_FALSE(bad.check_invariants());
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
  encode_row_reference(KvType::q4, 32, k.data(), 64, want_k.data());
  encode_row_reference(KvType::f16, 32, v.data(), 64, want_v.data());
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
