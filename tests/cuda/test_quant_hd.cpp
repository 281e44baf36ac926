// The host/device element code of kernels/cuda (quant_hd.h, kv_hd.h, hd.h), compiled by g++,
// against the CPU reference kernels: bit-exact where the operation order is the same, within
// a stated float-rounding bound for the block dot products.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/kv_format.h"
#include "kernels/cpu/quant.h"
#include "kernels/cuda/kv_hd.h"
#include "kernels/cuda/quant_hd.h"
#include "support/test_support.h"

using namespace kvc;
namespace kc = kvc::kernels::cuda;
using kernels::DType;
using kernels::KvType;

namespace {

using test::random_floats;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

const DType k_quant_types[] = {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl,
                               DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k};

// Byte offsets of a block's fp16 fields (scales, mins), as quant.h lays them out.
std::vector<int> half_offsets(DType t) {
  switch (t) {
    case DType::q4_1:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k: return {0, 2};
    case DType::q2_k: return {80, 82};
    case DType::q3_k: return {108};
    case DType::q6_k: return {208};
    default: return {0};
  }
}

}  // namespace

TEST_CASE("hd half conversions equal the CPU's on every half and on random floats", "[cuda][kernels]") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float a = kc::hd_fp16_to_f32(bits), b = kernels::fp16_to_f32(bits);
    if (std::isnan(b)) {
      REQUIRE(std::isnan(a));
    } else {
      REQUIRE(same_bits(a, b));
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    REQUIRE(kc::hd_f32_to_fp16(f) == kernels::f32_to_fp16(f));
  }
}

TEST_CASE("quant_hd: element, chunk and block dequantization equal dequantize_row bit for bit", "[cuda][kernels]") {
  const int64_t n = 1024;  // 4 K-quant blocks, 32 Q8_0/Q4_0 blocks
  const auto x = random_floats(static_cast<size_t>(n), 11, 0.5f);
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl, DType::q2_k,
                  DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k, DType::f16, DType::bf16, DType::f32}) {
    INFO(kernels::dtype_name(t));
    std::vector<uint8_t> row(kernels::row_bytes(t, n));
    kernels::quantize_row(t, x.data(), row.data(), n);
    std::vector<float> ref(static_cast<size_t>(n));
    kernels::dequantize_row(t, row.data(), ref.data(), n);
    for (int64_t i = 0; i < n; ++i) REQUIRE(same_bits(kc::weight_value(t, row.data(), i), ref[static_cast<size_t>(i)]));
    float chunk[32];
    for (int64_t c = 0; c < n / 32; ++c) {
      kc::dequantize_chunk32(t, row.data(), c, chunk);
      for (int i = 0; i < 32; ++i) REQUIRE(same_bits(chunk[i], ref[static_cast<size_t>(32 * c + i)]));
    }
    const int be = kc::block_elems(t);
    REQUIRE(static_cast<size_t>(kc::block_bytes(t)) == kernels::dtype_info(t).block_bytes);
    if (be > 1) {
      std::vector<float> blk(static_cast<size_t>(be));
      for (int64_t b = 0; b < n / be; ++b) {
        kc::dequantize_block(t, row.data() + b * kc::block_bytes(t), blk.data());
        for (int i = 0; i < be; ++i)
          REQUIRE(same_bits(blk[static_cast<size_t>(i)], ref[static_cast<size_t>(b * be + i)]));
      }
    }
  }
}

TEST_CASE("quant_hd: random block bytes (every scale and bit pattern) dequantize as the CPU does", "[cuda][kernels]") {
  std::mt19937 rng(5);
  for (DType t : k_quant_types) {
    INFO(kernels::dtype_name(t));
    const int be = kc::block_elems(t);
    const int bb = kc::block_bytes(t);
    std::vector<uint8_t> blocks(static_cast<size_t>(bb) * 64);
    for (auto& b : blocks) b = static_cast<uint8_t>(rng());
    // Keep the f16 scales finite (exponent below 31): everything else is any byte.
    for (int i = 0; i < 64; ++i) {
      uint8_t* b = blocks.data() + static_cast<size_t>(i) * bb;
      for (int at : half_offsets(t)) b[at + 1] &= 0x7b;
    }
    std::vector<float> ref(static_cast<size_t>(be) * 64);
    kernels::dequantize_row(t, blocks.data(), ref.data(), be * 64);
    for (int64_t i = 0; i < be * 64; ++i) {
      REQUIRE(same_bits(kc::weight_value(t, blocks.data(), i), ref[static_cast<size_t>(i)]));
    }
  }
}

TEST_CASE("quant_hd: dot_block is the dot of the dequantized block within float rounding", "[cuda][kernels]") {
  for (DType t : k_quant_types) {
    INFO(kernels::dtype_name(t));
    const int be = kc::block_elems(t);
    const int n_blocks = 16;
    const auto w = random_floats(static_cast<size_t>(be * n_blocks), 21, 0.3f);
    const auto x = random_floats(static_cast<size_t>(be * n_blocks), 22);
    std::vector<uint8_t> row(kernels::row_bytes(t, be * n_blocks));
    kernels::quantize_row(t, w.data(), row.data(), be * n_blocks);
    std::vector<float> wd(w.size());
    kernels::dequantize_row(t, row.data(), wd.data(), be * n_blocks);
    for (int b = 0; b < n_blocks; ++b) {
      double ref = 0, mag = 0, wmax = 0;
      for (int i = 0; i < be; ++i) {
        const size_t k = static_cast<size_t>(b * be + i);
        ref += static_cast<double>(wd[k]) * static_cast<double>(x[k]);
        wmax = std::max(wmax, std::abs(static_cast<double>(wd[k])));
      }
      for (int i = 0; i < be; ++i)
        mag += (std::abs(static_cast<double>(wd[static_cast<size_t>(b * be + i)])) + wmax) *
               std::abs(static_cast<double>(x[static_cast<size_t>(b * be + i)]));
      const float got = kc::dot_block(t, row.data() + static_cast<size_t>(b) * kc::block_bytes(t), x.data() + b * be);
      // Float sums of be terms, scales applied per sub-block (|scale * level| <= |w| + min <= 2 max|w|):
      // the error stays below be * 2^-24 * 4 * sum (|w| + max|w|) |x|.
      const double bound = be * 2.4e-7 * mag;
      INFO("block " << b << " got " << got << " ref " << ref << " bound " << bound);
      REQUIRE(std::abs(static_cast<double>(got) - ref) <= bound);
    }
  }
}

TEST_CASE("kv_hd: encoded rows are the CPU reference's bytes and decode to its values, groups 32/16/8",
          "[cuda][kernels]") {
  struct Case {
    int head_dim, group;
  };
  // 4 heads each; the group is the one the layout picks for the head size.
  for (Case c : {Case{64, 32}, Case{48, 16}, Case{40, 8}, Case{8, 8}}) {
    REQUIRE(kernels::kv_group_for_head_dim(c.head_dim) == c.group);
    const int64_t n = 4 * c.head_dim;
    for (KvType t : {KvType::f16, KvType::q8, KvType::q4}) {
      INFO(kernels::kv_type_name(t) << " head_dim " << c.head_dim << " group " << c.group);
      REQUIRE(kc::kv_row_bytes(t, c.group, n) == kernels::row_bytes(t, c.group, n));
      for (uint32_t seed = 0; seed < 20; ++seed) {
        auto x = random_floats(static_cast<size_t>(n), 100 + seed, seed % 2 ? 3.0f : 0.02f);
        if (seed == 3) std::fill(x.begin() + c.group, x.begin() + 2 * c.group, 0.0f);  // an all-zero group
        if (seed == 4) {
          x[0] = 1.0f;
          x[1] = -1.0f;
        }  // a tie between signs
        std::vector<uint8_t> ours(static_cast<size_t>(kc::kv_row_bytes(t, c.group, n)));
        std::vector<uint8_t> ref(ours.size());
        kc::kv_encode_row(t, c.group, x.data(), n, ours.data());
        kernels::encode_row_reference(t, c.group, x.data(), n, ref.data());
        REQUIRE(ours == ref);
        std::vector<float> dec(static_cast<size_t>(n));
        kernels::decode_row_reference(t, c.group, ref.data(), n, dec.data());
        for (int64_t i = 0; i < n; ++i)
          REQUIRE(same_bits(kc::kv_value(t, c.group, ref.data(), i), dec[static_cast<size_t>(i)]));
      }
    }
  }
}

TEST_CASE("kv_hd: random group bytes decode as the CPU reference does, groups 32/16/8", "[cuda][kernels]") {
  std::mt19937 rng(9);
  for (int group : {32, 16, 8}) {
    for (KvType t : {KvType::q8, KvType::q4}) {
      INFO(kernels::kv_type_name(t) << " group " << group);
      const int64_t n = 8 * group;
      std::vector<uint8_t> row(static_cast<size_t>(kernels::row_bytes(t, group, n)));
      for (auto& b : row) b = static_cast<uint8_t>(rng());
      const int64_t gb = kernels::kv_group_bytes(t, group);
      for (int64_t g = 0; g < n / group; ++g) row[static_cast<size_t>(g * gb + 1)] &= 0x7b;  // finite F16 scales
      std::vector<float> dec(static_cast<size_t>(n));
      kernels::decode_row_reference(t, group, row.data(), n, dec.data());
      for (int64_t i = 0; i < n; ++i)
        REQUIRE(same_bits(kc::kv_value(t, group, row.data(), i), dec[static_cast<size_t>(i)]));
    }
  }
}

TEST_CASE("kv_hd: Q4 groups of 8 and 16 pack element j low and j + g/2 high (kv_format.h)", "[cuda][kernels]") {
  for (int group : {8, 16}) {
    INFO("group " << group);
    const int half = group / 2;
    // d = 1.0 (F16 0x3c00); element j gets level n_j = j, so x_j = j - 8.
    uint8_t g[2 + 8] = {0x00, 0x3c};
    for (int j = 0; j < half; ++j) g[2 + j] = static_cast<uint8_t>(j | (j + half) << 4);
    for (int i = 0; i < group; ++i) REQUIRE(kc::kv_value(KvType::q4, group, g, i) == static_cast<float>(i - 8));
    // Encoding those values gives back the same bytes: the largest magnitude is -8 (n = 0), d = 1.
    float x[16] = {};
    for (int i = 0; i < group; ++i) x[i] = static_cast<float>(i - 8);
    uint8_t enc[2 + 8] = {};
    kc::kv_encode_group(KvType::q4, group, x, enc);
    REQUIRE(std::memcmp(enc, g, static_cast<size_t>(2 + half)) == 0);
  }
}
