// Quantized matmul: the scalar reference against an independent float computation, and every
// SIMD variant this CPU has against the scalar reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/vec_dot.h"
#include "support/test_support.h"

using namespace kvc::kernels;

namespace {

constexpr double k_u = 1.0 / (1 << 24);  // unit roundoff of float

// A weight matrix of random but valid blocks: random bytes everywhere, then sane fp16 scales.
struct RandomMatrix {
  DType type;
  int64_t n_rows, n_cols;
  std::vector<uint8_t> bytes;
  MatrixView view() const { return {type, bytes.data(), n_rows, n_cols}; }
};

RandomMatrix random_matrix(DType type, int64_t n_rows, int64_t n_cols, std::mt19937& rng) {
  RandomMatrix m{type, n_rows, n_cols, std::vector<uint8_t>(row_bytes(type, n_cols) * static_cast<size_t>(n_rows))};
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  std::normal_distribution<float> value(0.0f, 0.5f);
  for (auto& b : m.bytes) b = static_cast<uint8_t>(byte(rng));
  const int64_t n_blocks = static_cast<int64_t>(m.bytes.size() / dtype_info(type).block_bytes);
  auto put = [&](size_t off, uint16_t h) { std::memcpy(m.bytes.data() + off, &h, 2); };
  for (int64_t b = 0; b < n_blocks; ++b) {
    const size_t o = static_cast<size_t>(b) * dtype_info(type).block_bytes;
    switch (type) {
      case DType::q4_0:
      case DType::q8_0:
      case DType::q5_0:
      case DType::iq4_nl: put(o, f32_to_fp16(scale(rng))); break;
      case DType::q4_1:
      case DType::q5_1:  // an offset m of either sign, of a few steps
        put(o, f32_to_fp16(scale(rng)));
        put(o + 2, f32_to_fp16(scale(rng) * (byte(rng) % 2 ? 6.0f : -6.0f)));
        break;
      case DType::q4_k:
      case DType::q5_k:
        put(o, f32_to_fp16(scale(rng)));
        put(o + 2, f32_to_fp16(scale(rng)));
        break;
      case DType::q2_k:
        put(o + 80, f32_to_fp16(scale(rng)));
        put(o + 82, f32_to_fp16(scale(rng)));
        break;
      case DType::q3_k: put(o + 108, f32_to_fp16(scale(rng))); break;
      case DType::q6_k: put(o + 208, f32_to_fp16(scale(rng))); break;
      case DType::f32: {
        const float f = value(rng);
        std::memcpy(m.bytes.data() + o, &f, 4);
        break;
      }
      case DType::f16: put(o, f32_to_fp16(value(rng))); break;
      case DType::bf16: put(o, f32_to_bf16(value(rng))); break;
      case DType::q8_k: break;
      case DType::mxfp4:  // 2^(e - 128) in [2^-9, 2^-6]: the fp16 scales' range
        m.bytes[o] = static_cast<uint8_t>(119 + byte(rng) % 4);
        break;
    }
  }
  return m;
}

// Weight element i of row r by the format's formula, as an exact value (w) and as the sum of
// the magnitudes of its terms (mag: |d*sc*q| + |dmin*m| for Q4_K), for error bounds.
struct Elem {
  double w, mag;
};

std::vector<Elem> dequantize_row_for_test(DType type, const uint8_t* row, int64_t n) {
  std::vector<Elem> out(static_cast<size_t>(n));
  auto h = [](const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return static_cast<double>(fp16_to_f32(v));
  };
  auto set = [&](int64_t i, double w, double mag) { out[static_cast<size_t>(i)] = {w, mag}; };
  for (int64_t base = 0; base < n; base += dtype_info(type).block_elems) {
    const uint8_t* blk = row + static_cast<size_t>(base / dtype_info(type).block_elems) * dtype_info(type).block_bytes;
    switch (type) {
      case DType::q8_0:
        for (int j = 0; j < 32; ++j) {
          const double v = h(blk) * static_cast<int8_t>(blk[2 + j]);
          set(base + j, v, std::fabs(v));
        }
        break;
      case DType::q4_0:
        for (int j = 0; j < 16; ++j) {
          const double lo = h(blk) * ((blk[2 + j] & 0xF) - 8), hi = h(blk) * ((blk[2 + j] >> 4) - 8);
          set(base + j, lo, std::fabs(lo));
          set(base + j + 16, hi, std::fabs(hi));
        }
        break;
      case DType::q4_1:
      case DType::q5_1:
      case DType::q5_0: {
        // [d][m (not Q5_0)][qh (Q5 only): 4 bytes][qs: 16]; value j: nibble j % 16 of
        // qs[j % 16] (high for j >= 16), fifth bit j of qh.
        const bool q5 = type != DType::q4_1, has_m = type != DType::q5_0;
        const double d = h(blk), m = has_m ? h(blk + 2) : 0.0;
        const uint8_t* qh = blk + (has_m ? 4 : 2);
        const uint8_t* qs = qh + (q5 ? 4 : 0);
        for (int j = 0; j < 32; ++j) {
          int q = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
          if (q5) q += 16 * ((qh[j / 8] >> (j % 8)) & 1);
          if (type == DType::q5_0) q -= 16;
          set(base + j, d * q + m, std::fabs(d * q) + std::fabs(m));
        }
        break;
      }
      case DType::iq4_nl: {
        static constexpr int k_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        for (int j = 0; j < 32; ++j) {
          const int q = j < 16 ? blk[2 + j] & 0xF : blk[2 + j - 16] >> 4;
          const double v = h(blk) * k_levels[q];
          set(base + j, v, std::fabs(v));
        }
        break;
      }
      case DType::mxfp4: {  // [e][qs: 16]: 2^(e - 128) times the doubled e2m1 value of each nibble
        static constexpr int k_levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
        const double d = std::ldexp(1.0, blk[0] - 128);
        for (int j = 0; j < 32; ++j) {
          const int q = j < 16 ? blk[1 + j] & 0xF : blk[1 + j - 16] >> 4;
          set(base + j, d * k_levels[q], std::fabs(d * k_levels[q]));
        }
        break;
      }
      case DType::q2_k:
      case DType::q3_k: {
        // Value p = 128 n + 32 j + l: bits 2j+1..2j of qs[32 n + l]; Q3_K: minus 4 unless bit
        // 4n + j of hmask[l] is set. Sub-block p / 16.
        const bool q3 = type == DType::q3_k;
        const uint8_t* qs = blk + (q3 ? 32 : 16);
        for (int p = 0; p < 256; ++p) {
          const int half = p / 128, j = (p % 128) / 32, l = p % 32, sub = p / 16;
          int q = (qs[32 * half + l] >> (2 * j)) & 3;
          if (q3) {
            if (!((blk[l] >> (4 * half + j)) & 1)) q -= 4;
            const uint8_t* s = blk + 96;
            const int lo = sub < 8 ? s[sub] & 0xF : s[sub - 8] >> 4;
            const int sc = (lo | (((s[8 + sub % 4] >> (2 * (sub / 4))) & 3) << 4)) - 32;
            const double v = h(blk + 108) * sc * q;
            set(base + p, v, std::fabs(v));
          } else {
            const double d = h(blk + 80) * (blk[sub] & 0xF), m = h(blk + 82) * (blk[sub] >> 4);
            set(base + p, d * q - m, std::fabs(d * q) + std::fabs(m));
          }
        }
        break;
      }
      case DType::q4_k:
      case DType::q5_k: {
        const bool q5 = type == DType::q5_k;
        const double d = h(blk), dmin = h(blk + 2);
        const uint8_t* s = blk + 4;
        const uint8_t* qh = blk + 16;
        const uint8_t* qs = blk + (q5 ? 48 : 16);
        for (int j = 0; j < 8; ++j) {
          const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
          const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
          for (int i = 0; i < 32; ++i) {
            int q = (j % 2 == 0) ? qs[32 * (j / 2) + i] & 0xF : qs[32 * (j / 2) + i] >> 4;
            if (q5) q += 16 * ((qh[i] >> j) & 1);
            set(base + 32 * j + i, d * sc * q - dmin * m, std::fabs(d * sc * q) + std::fabs(dmin * m));
          }
        }
        break;
      }
      case DType::q6_k: {
        const uint8_t* ql = blk;
        const uint8_t* qh = blk + 128;
        const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
        const double d = h(blk + 208);
        for (int half = 0; half < 2; ++half) {
          for (int l = 0; l < 32; ++l) {
            const int64_t p = base + 128 * half + l;
            const int q[4] = {(ql[64 * half + l] & 0xF) | (((qh[32 * half + l] >> 0) & 3) << 4),
                              (ql[64 * half + l + 32] & 0xF) | (((qh[32 * half + l] >> 2) & 3) << 4),
                              (ql[64 * half + l] >> 4) | (((qh[32 * half + l] >> 4) & 3) << 4),
                              (ql[64 * half + l + 32] >> 4) | (((qh[32 * half + l] >> 6) & 3) << 4)};
            for (int k = 0; k < 4; ++k) {
              const double v = d * sc[8 * half + l / 16 + 2 * k] * (q[k] - 32);
              set(p + 32 * k, v, std::fabs(v));
            }
          }
        }
        break;
      }
      case DType::f32: {
        float f;
        std::memcpy(&f, blk, 4);
        set(base, f, std::fabs(f));
        break;
      }
      case DType::f16: set(base, h(blk), std::fabs(h(blk))); break;
      case DType::bf16: {
        uint16_t v;
        std::memcpy(&v, blk, 2);
        set(base, bf16_to_f32(v), std::fabs(bf16_to_f32(v)));
        break;
      }
      case DType::q8_k: break;
    }
  }
  return out;
}

bool is_quantized(DType t) { return t != DType::f32 && t != DType::f16 && t != DType::bf16; }
int64_t act_block(DType t) { return dtype_info(t).block_elems == 256 ? 256 : 32; }

// The activation each kernel consumes, rebuilt by the documented rule: per block of 32 (256),
// amax = max|x|, q = nearest-even(x * (127 / amax)), value = q * (amax / 127). Also the
// largest rounding error per element, amax / 127 / 2 (plus float slack), for the bound.
struct TestActs {
  std::vector<double> value, err;
};

TestActs quantize_for_test(const std::vector<float>& x, int64_t block) {
  TestActs a{std::vector<double>(x.size()), std::vector<double>(x.size())};
  for (size_t b = 0; b < x.size(); b += static_cast<size_t>(block)) {
    float amax = 0.0f;
    for (size_t i = b; i < b + static_cast<size_t>(block); ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    const float d = amax / 127.0f;
    for (size_t i = b; i < b + static_cast<size_t>(block); ++i) {
      a.value[i] = static_cast<double>(d) * static_cast<double>(std::nearbyint(x[i] * id));
      // |x - q*d| <= d*(1/2 + 127u) + 2u|x|: rounding of x*id to q, and d*id = 1 +- 2u.
      a.err[i] = static_cast<double>(d) * (0.5 + 127 * k_u) + 2 * k_u * static_cast<double>(std::fabs(x[i])) + 1e-30;
    }
  }
  return a;
}

std::vector<float> random_acts(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(rng);
  x[static_cast<size_t>(n / 3)] = 9.0f;  // an outlier, as real activations have
  return x;
}

// Sum over i of mag_i * |a_i| for one output: the size of the float terms being summed.
double magnitude(const std::vector<Elem>& w, const std::vector<double>& a, size_t off) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += w[i].mag * std::fabs(a[off + i]);
  return s;
}

const DType k_quant_types[] = {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl, DType::q8_0,
                               DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k,   DType::mxfp4};
const DType k_all_types[] = {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl,
                             DType::q8_0, DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k,
                             DType::q6_k, DType::f32,  DType::f16,  DType::bf16, DType::mxfp4};

}  // namespace

TEST_CASE("scalar reference matmul matches a double-precision dot of the dequantized weights", "[kernels]") {
  std::mt19937 rng(7);
  for (DType type : k_all_types) {
    INFO("type " << dtype_name(type));
    const int64_t n_rows = 9, n_cols = 768, n_tokens = 3;
    const RandomMatrix m = random_matrix(type, n_rows, n_cols, rng);
    const std::vector<float> x = random_acts(n_cols * n_tokens, rng);
    std::vector<float> y(static_cast<size_t>(n_rows * n_tokens));
    matmul_reference(m.view(), x.data(), n_tokens, y.data());
    const TestActs qa = is_quantized(type)
                            ? quantize_for_test(x, act_block(type))
                            : TestActs{std::vector<double>(x.begin(), x.end()), std::vector<double>(x.size())};
    const int64_t n_terms = is_quantized(type) ? 2 * n_cols / act_block(type) : n_cols;
    for (int64_t r = 0; r < n_rows; ++r) {
      const auto w =
          dequantize_row_for_test(type, m.bytes.data() + static_cast<size_t>(r) * row_bytes(type, n_cols), n_cols);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const size_t off = static_cast<size_t>(t * n_cols);
        double exact_x = 0, exact_q = 0, quant_err = 0;
        for (size_t i = 0; i < w.size(); ++i) {
          exact_x += w[i].w * static_cast<double>(x[off + i]);
          exact_q += w[i].w * qa.value[off + i];
          quant_err += std::fabs(w[i].w) * qa.err[off + i];
        }
        // Float accumulation of n_terms products (each rounded a few times) in any order:
        // |error| <= (n_terms + 4) * u * sum of the terms' magnitudes.
        const double round_err = (static_cast<double>(n_terms) + 4) * k_u * magnitude(w, qa.value, off);
        const double got = y[static_cast<size_t>(t * n_rows + r)];
        INFO("row " << r << " token " << t << " got " << got << " exact " << exact_x);
        // Against the float activations: off by at most sum |w_i| * |x_i - a_i|.
        REQUIRE(std::fabs(got - exact_x) <= quant_err + round_err);
        // Against the same quantized activations rebuilt here: float rounding only.
        REQUIRE(std::fabs(got - exact_q) <= round_err);
      }
    }
  }
}

TEST_CASE("kernels: CPU detection agrees with the kernel's flags, and every SIMD set is under test", "[kernels]") {
  // What CPUID reports must be what Linux reports in /proc/cpuinfo (a wrong detection would run
  // kernels the CPU lacks, or leave the fast ones unused).
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      flags = line.substr(line.find(':') + 1) + " ";
      break;
    }
  }
  if (flags.empty()) KVC_SKIP("no flags line in /proc/cpuinfo to compare CPU detection with");
  auto has = [&](const char* f) { return flags.find(std::string(" ") + f + " ") != std::string::npos; };
  CHECK(cpu_features().avx2 == (has("avx2") && has("fma") && has("f16c")));
  CHECK(cpu_features().avx512 == (has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq")));
  CHECK(cpu_features().avx512_vnni == (cpu_features().avx512 && has("avx512_vnni")));
  // AMX also needs the kernel's permission, so the flags are necessary, not sufficient.
  if (cpu_features().amx_int8) CHECK((has("amx_tile") && has("amx_int8")));
  // The SIMD tests compare each variant the CPU has with the scalar reference; one it lacks is
  // not tested here, which the skip makes visible in the summary.
  std::string missing;
  if (!cpu_features().avx2) missing += " AVX2";
  if (!cpu_features().avx512) missing += " AVX-512";
  if (!cpu_features().avx512_vnni) missing += " AVX-512-VNNI";
  if (!cpu_features().amx_int8) missing += " AMX-INT8";
  if (!missing.empty()) KVC_SKIP("this CPU lacks" << missing << ": those kernel variants are not tested here");
}

TEST_CASE("every ISA quantizes activations bit-identically to the scalar version", "[kernels]") {
  std::vector<const KernelSet*> sets;
  if (cpu_features().avx2) sets.push_back(&kernels_avx2());
  if (cpu_features().avx512_vnni) sets.push_back(&kernels_avx512_vnni());
  if (sets.empty()) KVC_SKIP("this CPU has neither AVX2 nor AVX-512 VNNI");
  std::mt19937 rng(11);
  const int64_t n = 1024;
  std::vector<float> x = random_acts(n, rng);
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero block
  x[600] = 0.5f * (127.0f / 9.0f);                    // values near rounding ties
  const KernelSet& ref = kernels_scalar();
  std::vector<int8_t> q0(n), q1(n);
  std::vector<float> d0(n / 32), d1(n / 32);
  std::vector<int16_t> s0(n / 16), s1(n / 16);
  for (const KernelSet* ks : sets) {
    INFO(ks->name);
    ref.quantize_q8_0(x.data(), n, q0.data(), d0.data());
    ks->quantize_q8_0(x.data(), n, q1.data(), d1.data());
    REQUIRE(q0 == q1);
    REQUIRE(d0 == d1);
    ref.quantize_q8_k(x.data(), n, q0.data(), d0.data(), s0.data());
    ks->quantize_q8_k(x.data(), n, q1.data(), d1.data(), s1.data());
    REQUIRE(q0 == q1);
    REQUIRE(std::equal(d0.begin(), d0.begin() + n / 256, d1.begin()));
    REQUIRE(s0 == s1);
  }
}

namespace {

std::vector<Isa> simd_isas() {
  std::vector<Isa> isas;
  if (cpu_features().avx2) isas.push_back(Isa::avx2);
  if (cpu_features().avx512_vnni) isas.push_back(Isa::avx512_vnni);
  if (cpu_features().amx_int8) isas.push_back(Isa::avx512_amx);
  return isas;
}

// Every SIMD variant on 1 and 3 threads against the scalar reference, for one shape.
void check_against_scalar(DType type, int64_t n_rows, int64_t n_cols, int64_t n_tokens, const std::vector<Isa>& isas,
                          std::mt19937& rng) {
  static ThreadPool pool1(1), pool3(3);
  const RandomMatrix m = random_matrix(type, n_rows, n_cols, rng);
  const std::vector<float> x = random_acts(n_cols * n_tokens, rng);
  std::vector<float> ref(static_cast<size_t>(n_rows * n_tokens));
  matmul_reference(m.view(), x.data(), n_tokens, ref.data());
  const TestActs qa = is_quantized(type) ? quantize_for_test(x, act_block(type))
                                         : TestActs{std::vector<double>(x.begin(), x.end()), {}};
  const int64_t n_terms = is_quantized(type) ? 2 * n_cols / act_block(type) : n_cols;
  std::vector<double> bound(ref.size());
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto w =
        dequantize_row_for_test(type, m.bytes.data() + static_cast<size_t>(r) * row_bytes(type, n_cols), n_cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      // Both sides sum the same exact integer block sums (or the same float products)
      // in different orders: each is within (n_terms + 4) u S of the exact sum.
      bound[static_cast<size_t>(t * n_rows + r)] =
          2 * (static_cast<double>(n_terms) + 4) * k_u * magnitude(w, qa.value, static_cast<size_t>(t * n_cols));
    }
  }
  for (Isa isa : isas) {
    for (ThreadPool* pool : {&pool1, &pool3}) {
      INFO(dtype_name(type) << " " << isa_name(isa) << " rows " << n_rows << " cols " << n_cols << " tokens "
                            << n_tokens << " threads " << pool->n_threads());
      std::vector<float> y(ref.size(), std::nanf(""));
      matmul_isa(isa, m.view(), x.data(), n_tokens, y.data(), *pool);
      for (size_t i = 0; i < y.size(); ++i) {
        INFO("output " << i << " simd " << y[i] << " scalar " << ref[i]);
        REQUIRE(std::fabs(static_cast<double>(y[i]) - static_cast<double>(ref[i])) <= bound[i]);
      }
    }
  }
}

}  // namespace

TEST_CASE("SIMD matmul variants match the scalar reference", "[kernels]") {
  const std::vector<Isa> isas = simd_isas();
  if (isas.empty()) KVC_SKIP("this CPU has neither AVX2 nor AVX-512 VNNI");
  std::mt19937 rng(3);
  for (DType type : k_all_types) {
    // Odd shapes: rows not a multiple of any tile, 11 blocks of 32 (4 + 4 + 2 + 1: every step),
    // float rows not a multiple of the vector width.
    const int64_t n_cols = is_quantized(type) ? (act_block(type) == 256 ? 512 : 352) : 301;
    for (int64_t n_rows : {1, 7, 37})
      for (int64_t n_tokens : {1, 3, 17}) check_against_scalar(type, n_rows, n_cols, n_tokens, isas, rng);
  }
}

TEST_CASE("prefill (row tiles prepared once) matches the scalar reference on odd shapes", "[kernels]") {
  const std::vector<Isa> isas = simd_isas();
  if (isas.empty()) KVC_SKIP("this CPU has neither AVX2 nor AVX-512 VNNI");
  std::mt19937 rng(13);
  // Token counts just above the decode tile (4) and not multiples of any prefill tile; rows
  // that leave a partial row tile; columns with and without a tail after whole sixteen- and
  // four-block groups (Q8_0 form: 96 = tail only, 416 = 3 groups + 1 block, 512 = one group
  // of sixteen, 1184 = 2 of sixteen + 1 of four + 1 block) and an odd number of super-blocks
  // (K form: 768 = 3, the mins' single-block step).
  for (DType type : k_quant_types) {
    const std::vector<int64_t> cols =
        act_block(type) == 256 ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{96, 416, 512, 1184};
    for (int64_t n_cols : cols)
      for (int64_t n_rows : {5, 18})
        for (int64_t n_tokens : {5, 11}) check_against_scalar(type, n_rows, n_cols, n_tokens, isas, rng);
  }
}

TEST_CASE("a token's outputs do not depend on how many tokens share the call", "[kernels]") {
  // The KV cache relies on this: logits from a prefill and from one token at a time are
  // bit-identical. Decode (up to 4 tokens) and prefill take different code paths.
  std::vector<Isa> isas = simd_isas();
  if (isas.empty()) KVC_SKIP("this CPU has neither AVX2 nor AVX-512 VNNI");
  isas.push_back(Isa::scalar);
  std::mt19937 rng(19);
  ThreadPool pool(3);
  for (DType type : k_quant_types) {
    const int64_t n_rows = 13, n_tokens = 9;
    for (int64_t n_cols : act_block(type) == 256 ? std::vector<int64_t>{768} : std::vector<int64_t>{416, 1184}) {
      const RandomMatrix m = random_matrix(type, n_rows, n_cols, rng);
      const std::vector<float> x = random_acts(n_cols * n_tokens, rng);
      for (Isa isa : isas) {
        INFO(dtype_name(type) << " " << isa_name(isa) << " columns " << n_cols);
        std::vector<float> all(static_cast<size_t>(n_rows * n_tokens));
        matmul_isa(isa, m.view(), x.data(), n_tokens, all.data(), pool);
        for (int64_t split : {1, 2, 4, 5}) {
          INFO("tokens per call " << split);
          std::vector<float> parts(all.size(), std::nanf(""));
          for (int64_t t = 0; t < n_tokens; t += split) {
            const int64_t n = std::min(split, n_tokens - t);
            matmul_isa(isa, m.view(), x.data() + t * n_cols, n, parts.data() + t * n_rows, pool);
          }
          for (size_t i = 0; i < all.size(); ++i) {
            INFO("output " << i);
            REQUIRE(std::memcmp(&parts[i], &all[i], sizeof(float)) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("a product split into pieces across threads, over two chunks of tokens, equals the one-thread product",
          "[kernels]") {
  // Rows are handed out in pieces (a thread done early takes half of another's), each piece a call of
  // the tile function with the same activations, which a thread arranges once per chunk of
  // tokens and keeps: every output must come out as one thread computes it, bit for bit, also
  // right after a product of other activations of the same shape.
  const std::vector<Isa> isas = simd_isas();
  if (isas.empty()) KVC_SKIP("this CPU has neither AVX2 nor AVX-512 VNNI");
  std::mt19937 rng(23);
  ThreadPool pool1(1), pool3(3);
  const int64_t n_rows = 301, n_cols = 4096, n_tokens = 512;  // 1 MiB of activations per chunk: two of 256 tokens
  const std::vector<float> x = random_acts(n_cols * n_tokens, rng), other = random_acts(n_cols * n_tokens, rng);
  for (DType type : {DType::q4_0, DType::q8_0, DType::q4_k, DType::q6_k}) {
    const RandomMatrix m = random_matrix(type, n_rows, n_cols, rng);
    for (Isa isa : isas) {
      INFO(dtype_name(type) << " " << isa_name(isa));
      std::vector<float> one(static_cast<size_t>(n_rows * n_tokens)), three(one.size(), std::nanf(""));
      matmul_isa(isa, m.view(), x.data(), n_tokens, one.data(), pool1);
      matmul_isa(isa, m.view(), other.data(), n_tokens, three.data(), pool3);
      matmul_isa(isa, m.view(), x.data(), n_tokens, three.data(), pool3);
      for (size_t i = 0; i < one.size(); ++i) {
        INFO("output " << i);
        REQUIRE(std::memcmp(&one[i], &three[i], sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("with power-of-two scales and integer activations every SIMD variant equals the scalar reference bit for bit",
          "[kernels]") {
  // Weight scales and mins of 2^-12 and activations that quantize to themselves (integers in
  // [-8, 8] with one +-127 per block, so d = 1) make every float operation of every kernel
  // exact: the outputs then differ only if an integer sum does. One super-block (K form) or
  // three blocks (Q8_0 form) keep the sums below 2^24 of their granularity.
  const std::vector<Isa> isas = simd_isas();
  if (isas.empty()) KVC_SKIP("this CPU has neither AVX2 nor AVX-512 VNNI");
  ThreadPool pool(2);
  const uint16_t pow2 = f32_to_fp16(1.0f / 4096.0f), neg_pow2 = f32_to_fp16(-1.0f / 4096.0f);
  for (DType type : k_quant_types) {
    std::mt19937 rng(29);
    const int64_t n_rows = 7, n_cols = act_block(type) == 256 ? 256 : 96;
    RandomMatrix m = random_matrix(type, n_rows, n_cols, rng);
    const size_t bb = dtype_info(type).block_bytes;
    auto put = [&](size_t off, uint16_t h) { std::memcpy(m.bytes.data() + off, &h, 2); };
    for (size_t o = 0; o < m.bytes.size(); o += bb) {
      switch (type) {
        case DType::q4_1:
        case DType::q5_1:
          put(o, pow2);
          put(o + 2, (o / bb) % 2 ? pow2 : neg_pow2);
          break;
        case DType::q4_k:
        case DType::q5_k:
          put(o, pow2);
          put(o + 2, pow2);
          break;
        case DType::q2_k:
          put(o + 80, pow2);
          put(o + 82, pow2);
          break;
        case DType::q3_k: put(o + 108, pow2); break;
        case DType::q6_k: put(o + 208, pow2); break;
        case DType::mxfp4: m.bytes[o] = 128 - 12; break;  // 2^-12
        default: put(o, pow2); break;                     // Q4_0, Q5_0, IQ4_NL, Q8_0: d first
      }
    }
    for (int64_t n_tokens : {1, 3, 5, 11}) {  // decode tiles and prefill tiles
      std::uniform_int_distribution<int> small(-8, 8);
      std::vector<float> x(static_cast<size_t>(n_cols * n_tokens));
      for (auto& v : x) v = static_cast<float>(small(rng));
      for (size_t b = 0; b < x.size(); b += static_cast<size_t>(act_block(type)))
        x[b + 5] = (b / 7) % 2 ? 127.0f : -127.0f;
      std::vector<float> ref(static_cast<size_t>(n_rows * n_tokens));
      matmul_reference(m.view(), x.data(), n_tokens, ref.data());
      for (Isa isa : isas) {
        INFO(dtype_name(type) << " " << isa_name(isa) << " tokens " << n_tokens);
        std::vector<float> y(ref.size(), std::nanf(""));
        matmul_isa(isa, m.view(), x.data(), n_tokens, y.data(), pool);
        for (size_t i = 0; i < y.size(); ++i) {
          INFO("output " << i << " simd " << y[i] << " scalar " << ref[i]);
          REQUIRE(std::memcmp(&y[i], &ref[i], sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("prefill of extreme values keeps integer sums exact", "[kernels]") {
  // All weights and activations at the ends of their ranges, where an int16 step would
  // saturate first: the largest |dot| each lane can hold.
  const std::vector<Isa> isas = simd_isas();
  if (isas.empty()) KVC_SKIP("this CPU has neither AVX2 nor AVX-512 VNNI");
  ThreadPool pool(3);
  const int64_t n_rows = 6, n_cols = 512, n_tokens = 7;
  for (DType type : k_quant_types) {
    std::mt19937 rng(17);
    RandomMatrix m = random_matrix(type, n_rows, n_cols, rng);
    const size_t bb = dtype_info(type).block_bytes;
    for (size_t o = 0; o < m.bytes.size(); o += bb) {
      switch (type) {  // every weight at its largest positive value, the scales at their largest
        case DType::q4_0: std::memset(&m.bytes[o + 2], 0xFF, 16); break;
        case DType::q4_1: std::memset(&m.bytes[o + 4], 0xFF, 16); break;
        case DType::q5_0: std::memset(&m.bytes[o + 2], 0xFF, 20); break;
        case DType::q5_1: std::memset(&m.bytes[o + 4], 0xFF, 20); break;
        case DType::iq4_nl: std::memset(&m.bytes[o + 2], 0x00, 16); break;  // level -127
        case DType::mxfp4: std::memset(&m.bytes[o + 1], 0x77, 16); break;   // level 12
        case DType::q8_0: std::memset(&m.bytes[o + 2], 0x7F, 32); break;
        case DType::q2_k: std::memset(&m.bytes[o], 0xFF, 80); break;
        case DType::q3_k: std::memset(&m.bytes[o], 0x00, 108); break;  // q = -4, scales -32
        case DType::q4_k: std::memset(&m.bytes[o + 4], 0xFF, 140); break;
        case DType::q5_k: std::memset(&m.bytes[o + 4], 0xFF, 172); break;
        case DType::q6_k:
          std::memset(&m.bytes[o], 0xFF, 192);
          std::memset(&m.bytes[o + 192], 0x7F, 16);
          break;
        default: break;
      }
    }
    // Every activation q at +127 (even tokens) or -127 (odd tokens); every weight term has
    // one sign, so no cancellation hides a wrapped sum.
    std::vector<float> x(static_cast<size_t>(n_cols * n_tokens));
    for (size_t i = 0; i < x.size(); ++i) x[i] = (i / static_cast<size_t>(n_cols)) % 2 ? -1.0f : 1.0f;
    std::vector<float> ref(static_cast<size_t>(n_rows * n_tokens));
    matmul_reference(m.view(), x.data(), n_tokens, ref.data());
    for (Isa isa : isas) {
      INFO(dtype_name(type) << " " << isa_name(isa));
      std::vector<float> y(ref.size(), std::nanf(""));
      matmul_isa(isa, m.view(), x.data(), n_tokens, y.data(), pool);
      for (size_t i = 0; i < y.size(); ++i) {
        INFO("output " << i << " simd " << y[i] << " scalar " << ref[i]);
        REQUIRE(std::fabs(y[i] - ref[i]) <= 1e-4f * std::fabs(ref[i]) + 1e-6f);
      }
    }
  }
}

TEST_CASE("matmul uses the best ISA and writes every output", "[kernels]") {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const RandomMatrix m = random_matrix(DType::q4_0, 50, 256, rng);
  const std::vector<float> x = random_acts(256 * 5, rng);
  std::vector<float> a(250, std::nanf("")), b(250, std::nanf(""));
  matmul(m.view(), x.data(), 5, a.data(), pool);
  matmul_isa(best_isa(), m.view(), x.data(), 5, b.data(), pool);
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == b[i]);  // NaN would fail too
}

TEST_CASE("matmul over zero columns gives zeros and zero rows or tokens write nothing", "[kernels]") {
  ThreadPool pool(2);
  const float x[4] = {1, 2, 3, 4};
  for (DType type : k_all_types) {
    const uint8_t w[1] = {0};
    std::vector<float> y(3, std::nanf(""));
    matmul({type, w, 3, 0}, x, 1, y.data(), pool);
    for (float v : y) REQUIRE(v == 0.0f);
    matmul({type, w, 0, 0}, x, 1, y.data(), pool);
    matmul({type, w, 3, 0}, x, 0, y.data(), pool);
  }
}
