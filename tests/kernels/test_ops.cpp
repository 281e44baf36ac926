// Element-wise and attention kernels: every ISA variant against the scalar reference, and the
// scalar reference against straightforward double-precision formulas written here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/ops_impl.h"
#include "kernels/cpu/quant.h"

using namespace kvc::kernels;

namespace {

const int64_t k_sizes[] = {1, 7, 64, 100, 2048};

// The SIMD tables this CPU can run (the scalar one is the reference they are compared to).
std::vector<const OpsTable*> simd_tables() {
  std::vector<const OpsTable*> r;
  if (cpu_features().avx2) r.push_back(&ops_avx2());
  if (cpu_features().avx512) r.push_back(&ops_avx512());
  return r;
}

std::vector<float> random_floats(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Distance in units in the last place between two finite floats of the same sign.
int64_t ulp_distance(float a, float b) {
  int32_t ia;
  int32_t ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - static_cast<int64_t>(ib));
}

// |got - want| <= rel * |want| + abs for every element; reports the worst element.
void require_close(const float* got, const double* want, int64_t n, double rel, double abs) {
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= rel * std::fabs(want[i]) + abs)) {
      INFO("element " << i << " of " << n << ": got " << got[i] << " want " << want[i]);
      REQUIRE(err <= rel * std::fabs(want[i]) + abs);
    }
  }
}

void require_close(const float* got, const float* want, int64_t n, double rel, double abs) {
  std::vector<double> w(want, want + n);
  require_close(got, w.data(), n, rel, abs);
}

}  // namespace

TEST_CASE("vectorised exp is within 2 ulp of exp over [-87, 88.7]", "[kernels]") {
  // 200k points spanning every binade the ops see (softmax feeds x <= 0, silu feeds -gate).
  const int64_t n = 200001;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = -87.0f + 175.7f * static_cast<float>(i) / static_cast<float>(n - 1);
  std::vector<float> out(static_cast<size_t>(n));
  for (const OpsTable* t : simd_tables()) {
    INFO(isa_name(t->isa));
    t->exp_row(x.data(), out.data(), n);
    int64_t worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const auto want = static_cast<float>(std::exp(static_cast<double>(x[static_cast<size_t>(i)])));
      worst = std::max(worst, ulp_distance(out[static_cast<size_t>(i)], want));
    }
    INFO("worst ulp " << worst);
    REQUIRE(worst <= 2);
  }
}

TEST_CASE("vectorised exp saturates to inf and 0 and keeps NaN", "[kernels]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float x[] = {89.0f, 1000.0f, inf, -104.0f, -1000.0f, -inf, std::nanf(""), 0.0f, -95.0f};
  float out[9];
  for (const OpsTable* t : simd_tables()) {
    INFO(isa_name(t->isa));
    t->exp_row(x, out, 9);
    REQUIRE(out[0] == inf);
    REQUIRE(out[1] == inf);
    REQUIRE(out[2] == inf);
    REQUIRE(out[3] >= 0.0f);
    REQUIRE(out[3] < 1e-44f);
    REQUIRE(out[4] == 0.0f);
    REQUIRE(out[5] == 0.0f);
    REQUIRE(std::isnan(out[6]));
    REQUIRE(out[7] == 1.0f);
    // exp(-95) = 5.5e-42 is subnormal: gradual underflow keeps it within 1% (relative
    // precision there is 2^-14 of the value or better).
    REQUIRE(std::fabs(static_cast<double>(out[8]) - std::exp(-95.0)) < 0.01 * std::exp(-95.0));
  }
}

TEST_CASE("rmsnorm: reference matches the formula, SIMD matches the reference", "[kernels]") {
  for (int64_t n : k_sizes) {
    INFO("n = " << n);
    const auto x = random_floats(n, -3.0f, 3.0f, 1);
    const auto w = random_floats(n, -2.0f, 2.0f, 2);
    const float eps = 1e-5f;
    double sum_sq = 0.0;
    for (float v : x) sum_sq += static_cast<double>(v) * static_cast<double>(v);
    const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + static_cast<double>(eps));
    std::vector<double> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      want[static_cast<size_t>(i)] =
          static_cast<double>(x[static_cast<size_t>(i)]) * inv_rms * static_cast<double>(w[static_cast<size_t>(i)]);
    }
    // Reference: double sum, then three float roundings (inv_rms, two products): < 4 eps.
    std::vector<float> ref(static_cast<size_t>(n));
    ops_scalar().rmsnorm(x.data(), w.data(), n, eps, ref.data());
    require_close(ref.data(), want.data(), n, 5e-7, 0.0);
    // SIMD sums in float over 16-32 lanes: a relative error of about sqrt(n / lanes) * eps
    // in the sum, halved by the square root; 1e-5 leaves room even for n = 2048.
    for (const OpsTable* t : simd_tables()) {
      INFO(isa_name(t->isa));
      std::vector<float> out = x;  // in place: out aliases x
      t->rmsnorm(out.data(), w.data(), n, eps, out.data());
      require_close(out.data(), ref.data(), n, 1e-5, 0.0);
    }
  }
  std::vector<float> x(100, 0.0f);
  std::vector<float> w(100, 1.0f);
  rmsnorm(x.data(), w.data(), 100, 1e-6f, x.data());  // all-zero input: eps keeps it finite
  REQUIRE(std::all_of(x.begin(), x.end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("silu_mul: reference matches the formula, SIMD matches the reference", "[kernels]") {
  for (int64_t n : k_sizes) {
    INFO("n = " << n);
    auto gate = random_floats(n, -20.0f, 20.0f, 3);
    const auto up = random_floats(n, -2.0f, 2.0f, 4);
    std::vector<double> want(static_cast<size_t>(n));
    for (size_t i = 0; i < want.size(); ++i) {
      const auto g = static_cast<double>(gate[i]);
      want[i] = g / (1.0 + std::exp(-g)) * static_cast<double>(up[i]);
    }
    std::vector<float> ref(static_cast<size_t>(n));
    ops_scalar().silu_mul(gate.data(), up.data(), n, ref.data());
    // expf (< 1 ulp), an add, a divide and a multiply: a few eps relative.
    require_close(ref.data(), want.data(), n, 1e-6, 1e-30);
    // The SIMD exp is within 2 ulp of expf; 1 + e and the rest round alike: 1e-6 relative.
    for (const OpsTable* t : simd_tables()) {
      INFO(isa_name(t->isa));
      std::vector<float> out = gate;  // in place: out aliases gate
      t->silu_mul(out.data(), up.data(), n, out.data());
      require_close(out.data(), ref.data(), n, 1e-6, 1e-30);
    }
  }
}

TEST_CASE("silu_mul stays finite for huge gates", "[kernels]") {
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> gate = {-big, -1e30f, -1000.0f, -100.0f, -88.5f, 88.5f, 100.0f, 1e30f, big};
  const std::vector<float> up(gate.size(), 0.5f);
  std::vector<const OpsTable*> tables = simd_tables();
  tables.push_back(&ops_scalar());
  for (const OpsTable* t : tables) {
    INFO(isa_name(t->isa));
    std::vector<float> out(gate.size());
    t->silu_mul(gate.data(), up.data(), static_cast<int64_t>(gate.size()), out.data());
    for (size_t i = 0; i < gate.size(); ++i) {
      INFO("gate " << gate[i] << " -> " << out[i]);
      REQUIRE(std::isfinite(out[i]));
      if (gate[i] > 0) REQUIRE(out[i] == 0.5f * gate[i]);    // silu(g) = g for large g
      if (gate[i] < 0) REQUIRE(std::fabs(out[i]) < 1e-30f);  // silu(g) -> 0 for g << 0
    }
  }
}

TEST_CASE("gelu_tanh_mul and softcap_inplace match their formulas in double precision", "[kernels]") {
  // Gemma's GeGLU and soft-capping (scalar only: they are a small part of a forward pass).
  std::vector<float> gate, up;
  for (int i = -200; i <= 200; ++i) {
    gate.push_back(static_cast<float>(i) * 0.05f);  // [-10, 10]
    up.push_back(1.0f + static_cast<float>(i % 7) * 0.25f);
  }
  std::vector<float> out(gate.size());
  gelu_tanh_mul(gate.data(), up.data(), static_cast<int64_t>(gate.size()), out.data());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double want =
        0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * static_cast<double>(up[i]);
    INFO("gate " << g);
    CHECK(std::abs(static_cast<double>(out[i]) - want) <= 1e-6 * (1.0 + std::abs(want)));
  }
  CHECK(out[200] == 0.0f);  // gelu(0) = 0
  // In place, as the backend calls it.
  std::vector<float> in_place = gate;
  gelu_tanh_mul(in_place.data(), up.data(), static_cast<int64_t>(gate.size()), in_place.data());
  CHECK(in_place == out);

  std::vector<float> x = gate;
  for (float& v : x) v *= 10.0f;  // [-100, 100]
  softcap_inplace(x.data(), static_cast<int64_t>(x.size()), 30.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = 30.0 * std::tanh(static_cast<double>(gate[i]) * 10.0 / 30.0);
    CHECK(std::abs(static_cast<double>(x[i]) - want) <= 1e-5 * 30.0);
    CHECK(std::abs(x[i]) <= 30.0f);
  }
  std::vector<float> y = {1.0f, -2.0f, 0.5f};
  scale_inplace(y.data(), 3, 4.0f);
  CHECK(y == std::vector<float>{4.0f, -8.0f, 2.0f});
}

TEST_CASE("add_inplace is exact on every ISA", "[kernels]") {
  for (int64_t n : k_sizes) {
    const auto x = random_floats(n, -5.0f, 5.0f, 5);
    const auto y = random_floats(n, -5.0f, 5.0f, 6);
    std::vector<const OpsTable*> tables = simd_tables();
    tables.push_back(&ops_scalar());
    for (const OpsTable* t : tables) {
      std::vector<float> out = x;
      t->add_inplace(out.data(), y.data(), n);
      for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == x[i] + y[i]);
    }
  }
}

TEST_CASE("softmax: reference matches the formula, SIMD matches the reference", "[kernels]") {
  for (int64_t n : k_sizes) {
    for (float offset : {0.0f, 1000.0f, -1000.0f}) {  // max subtraction: no overflow at 1000
      INFO("n = " << n << ", offset " << offset);
      auto x = random_floats(n, -30.0f, 30.0f, 7);
      for (float& v : x) v += offset;
      double max = x[0];
      for (float v : x) max = std::max(max, static_cast<double>(v));
      double sum = 0.0;
      for (float v : x) sum += std::exp(static_cast<double>(v) - max);
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = std::exp(static_cast<double>(x[i]) - max) / sum;
      // The float x - max is off by up to half an ulp of |x - max| or of |x| (whichever is
      // larger), which exp turns into that much relative error: 60 * 6e-8 = 3.6e-6 at
      // offset 0, 1030 * 6e-8 = 6e-5 at +-1000. Weights below 1e-30 are compared absolutely.
      std::vector<float> ref = x;
      ops_scalar().softmax_inplace(ref.data(), n);
      require_close(ref.data(), want.data(), n, offset == 0.0f ? 5e-6 : 1e-4, 1e-30);
      // Same inputs to exp on both sides; 2 ulp of exp plus a float sum over lanes (the
      // reference sums in double): 1e-5 relative.
      for (const OpsTable* t : simd_tables()) {
        INFO(isa_name(t->isa));
        std::vector<float> out = x;
        t->softmax_inplace(out.data(), n);
        require_close(out.data(), ref.data(), n, 1e-5, 1e-30);
      }
    }
  }
}

TEST_CASE("f32_to_f16_row rounds exactly like f32_to_fp16", "[kernels]") {
  std::mt19937 rng(8);
  std::vector<float> x(4099);
  for (float& v : x) {
    // Random exponents around half's range: subnormal halves, normals, overflow to inf.
    uint32_t bits = rng();
    bits = (bits & 0x807fffffu) | ((100u + rng() % 60u) << 23);
    std::memcpy(&v, &bits, 4);
  }
  x[0] = std::numeric_limits<float>::infinity();
  x[1] = -0.0f;
  x[2] = 65519.99f;  // rounds to 65504, the largest half
  x[3] = 65520.0f;   // rounds to inf
  x[4] = std::nanf("");
  std::vector<const OpsTable*> tables = simd_tables();
  tables.push_back(&ops_scalar());
  for (const OpsTable* t : tables) {
    INFO(isa_name(t->isa));
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{100}, int64_t{2048}, int64_t{4099}}) {
      std::vector<uint16_t> out(static_cast<size_t>(n) + 1, 0xabcd);
      t->f32_to_f16_row(x.data(), out.data(), n);
      REQUIRE(out[static_cast<size_t>(n)] == 0xabcd);  // nothing written past n
      for (int64_t i = 0; i < n; ++i) {
        const auto ui = static_cast<size_t>(i);
        if (std::isnan(x[ui])) {
          REQUIRE(std::isnan(fp16_to_f32(out[ui])));
        } else {
          INFO("x = " << x[ui]);
          REQUIRE(out[ui] == f32_to_fp16(x[ui]));
        }
      }
    }
  }
}

namespace {

// Rope by its definition, in double: pair (a, b) rotated by theta_k = pos * scale * base^(-2k/n_rot).
std::vector<double> rope_formula(const std::vector<float>& x, int n_heads, int head_dim, int64_t pos,
                                 const RopeParams& p) {
  std::vector<double> out(x.begin(), x.end());
  for (int h = 0; h < n_heads; ++h) {
    for (int k = 0; k < p.n_rot / 2; ++k) {
      const double theta = static_cast<double>(pos) * static_cast<double>(p.freq_scale) *
                           std::pow(static_cast<double>(p.freq_base), -2.0 * k / p.n_rot);
      const size_t ia = static_cast<size_t>(h * head_dim + (p.interleaved ? 2 * k : k));
      const size_t ib = static_cast<size_t>(h * head_dim + (p.interleaved ? 2 * k + 1 : k + p.n_rot / 2));
      const double a = x[ia];
      const double b = x[ib];
      out[ia] = a * std::cos(theta) - b * std::sin(theta);
      out[ib] = a * std::sin(theta) + b * std::cos(theta);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("rope matches its formula for both pairings, partial rotation, large positions", "[kernels]") {
  struct Case {
    int n_heads, head_dim, n_rot;
  };
  const Case cases[] = {{4, 64, 64}, {3, 64, 32}, {2, 80, 40}, {2, 20, 18}, {1, 128, 128}};
  std::vector<const OpsTable*> tables = simd_tables();
  tables.push_back(&ops_scalar());
  for (const Case& c : cases) {
    for (bool interleaved : {true, false}) {
      for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{4095}, int64_t{100000}}) {
        RopeParams p;
        p.n_rot = c.n_rot;
        p.interleaved = interleaved;
        p.freq_base = c.head_dim == 128 ? 1000000.0f : 10000.0f;
        p.freq_scale = c.n_heads == 3 ? 0.25f : 1.0f;
        INFO("heads " << c.n_heads << " dim " << c.head_dim << " n_rot " << c.n_rot << " interleaved " << interleaved
                      << " pos " << pos);
        const auto x = random_floats(c.n_heads * c.head_dim, -1.0f, 1.0f, 9);
        const auto want = rope_formula(x, c.n_heads, c.head_dim, pos, p);
        for (const OpsTable* t : tables) {
          INFO(isa_name(t->isa));
          std::vector<float> out = x;
          rope_with(*t, out.data(), c.n_heads, c.head_dim, pos, p);
          // Angles in double, cos/sin rounded to float, two products and a sum: |x| <= 1
          // gives an error below 4 eps; 1e-6 absolute. Dims past n_rot are untouched.
          require_close(out.data(), want.data(), static_cast<int64_t>(out.size()), 0.0, 1e-6);
          for (int h = 0; h < c.n_heads; ++h) {
            for (int d = c.n_rot; d < c.head_dim; ++d) {
              const auto i = static_cast<size_t>(h * c.head_dim + d);
              REQUIRE(out[i] == x[i]);
            }
          }
        }
        std::vector<float> out = x;
        rope(out.data(), c.n_heads, c.head_dim, pos, p);  // the dispatched entry point
        require_close(out.data(), want.data(), static_cast<int64_t>(out.size()), 0.0, 1e-6);
      }
    }
  }
}

namespace {

struct AttentionCase {
  AttentionShape shape;
  int64_t n_kv = 0;
  std::vector<float> q;     // (n_head, head_dim)
  std::vector<uint16_t> k;  // (n_kv, kv_stride), kv head h at h * head_dim
  std::vector<uint16_t> v;  // (n_kv, kv_stride)
};

AttentionCase make_attention_case(int n_head, int n_kv_head, int head_dim, int64_t n_kv, float q_range, uint32_t seed) {
  AttentionCase c;
  c.shape.n_head = n_head;
  c.shape.n_kv_head = n_kv_head;
  c.shape.head_dim = head_dim;
  c.shape.kv_stride = static_cast<int64_t>(n_kv_head) * head_dim + 3;  // padded rows
  c.shape.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  c.n_kv = n_kv;
  c.q = random_floats(n_head * head_dim, -q_range, q_range, seed);
  const auto kf = random_floats(n_kv * c.shape.kv_stride, -1.0f, 1.0f, seed + 1);
  const auto vf = random_floats(n_kv * c.shape.kv_stride, -1.0f, 1.0f, seed + 2);
  c.k.resize(kf.size());
  c.v.resize(vf.size());
  for (size_t i = 0; i < kf.size(); ++i) {
    c.k[i] = f32_to_fp16(kf[i]);
    c.v[i] = f32_to_fp16(vf[i]);
  }
  return c;
}

// softmax(q.k * scale) . v per query head, in double, on the F16 values as stored.
std::vector<double> attention_naive(const AttentionCase& c) {
  const AttentionShape& s = c.shape;
  std::vector<double> out(static_cast<size_t>(s.n_head * s.head_dim), 0.0);
  for (int i = 0; i < s.n_head; ++i) {
    const int h = i / (s.n_head / s.n_kv_head);
    std::vector<double> score(static_cast<size_t>(c.n_kv));
    for (int64_t t = 0; t < c.n_kv; ++t) {
      double dot = 0.0;
      for (int d = 0; d < s.head_dim; ++d) {
        dot += static_cast<double>(c.q[static_cast<size_t>(i * s.head_dim + d)]) *
               static_cast<double>(fp16_to_f32(c.k[static_cast<size_t>(t * s.kv_stride + h * s.head_dim + d)]));
      }
      score[static_cast<size_t>(t)] = dot * static_cast<double>(s.scale);
    }
    double max = -std::numeric_limits<double>::infinity();
    for (double x : score) max = std::max(max, x);
    double sum = 0.0;
    for (double& x : score) sum += (x = std::exp(x - max));
    for (int64_t t = 0; t < c.n_kv; ++t) {
      for (int d = 0; d < s.head_dim; ++d) {
        out[static_cast<size_t>(i * s.head_dim + d)] +=
            score[static_cast<size_t>(t)] / sum *
            static_cast<double>(fp16_to_f32(c.v[static_cast<size_t>(t * s.kv_stride + h * s.head_dim + d)]));
      }
    }
  }
  return out;
}

std::vector<float> run_attention(const OpsTable& t, const AttentionCase& c, int begin, int end) {
  const AttentionShape& s = c.shape;
  std::vector<float> out(static_cast<size_t>(s.n_head * s.head_dim), 0.0f);
  std::vector<float> scratch(static_cast<size_t>(s.n_head / s.n_kv_head * c.n_kv));  // documented size
  attention_f16_with(t, c.q.data(), c.k.data(), c.v.data(), c.n_kv, s, begin, end, out.data(), scratch.data());
  return out;
}

}  // namespace

TEST_CASE("attention matches a double-precision naive version for GQA, MQA and MHA", "[kernels]") {
  struct Heads {
    int n_head, n_kv_head, head_dim;
  };
  const Heads heads[] = {{8, 2, 64}, {4, 1, 64}, {4, 4, 64}, {8, 2, 20}, {6, 1, 36}};
  std::vector<const OpsTable*> tables = simd_tables();
  tables.push_back(&ops_scalar());
  for (const Heads& hd : heads) {
    for (int64_t n_kv : {int64_t{1}, int64_t{5}, int64_t{300}}) {
      for (float q_range : {1.0f, 40.0f}) {  // 40: scores up to ~+-100, softmax near one-hot
        INFO(hd.n_head << "/" << hd.n_kv_head << " heads, head_dim " << hd.head_dim << ", n_kv " << n_kv << ", q range "
                       << q_range);
        const AttentionCase c = make_attention_case(hd.n_head, hd.n_kv_head, hd.head_dim, n_kv, q_range, 10);
        const auto want = attention_naive(c);
        // Float scores carry ~head_dim * eps * |q||k| * scale of error (1e-6 at q range 1,
        // 4e-5 at 40); exp turns that into a relative error of the weights; outputs are
        // convex combinations of |v| <= 1, so the absolute error is about that large.
        const double bound = q_range > 1.0f ? 2e-4 : 1e-5;
        for (const OpsTable* t : tables) {
          INFO(isa_name(t->isa));
          const auto out = run_attention(*t, c, 0, hd.n_kv_head);
          require_close(out.data(), want.data(), static_cast<int64_t>(out.size()), 0.0, bound);
        }
      }
    }
  }
}

TEST_CASE("attention over a split of kv heads equals attention over all of them", "[kernels]") {
  std::vector<const OpsTable*> tables = simd_tables();
  tables.push_back(&ops_scalar());
  const AttentionCase c = make_attention_case(8, 4, 64, 37, 1.0f, 11);
  const size_t group_floats = 2 * 64;
  for (const OpsTable* t : tables) {
    INFO(isa_name(t->isa));
    const auto whole = run_attention(*t, c, 0, 4);
    const auto first = run_attention(*t, c, 0, 1);
    const auto rest = run_attention(*t, c, 1, 4);
    for (size_t i = 0; i < whole.size(); ++i) {
      REQUIRE(whole[i] == (i < group_floats ? first[i] : rest[i]));
      // Each call writes only the query heads of its kv heads (run_attention zero-fills).
      if (i < group_floats) REQUIRE(rest[i] == 0.0f);
      if (i >= group_floats) REQUIRE(first[i] == 0.0f);
    }
  }
  // The public entry points: dispatched and reference.
  std::vector<float> out(8 * 64);
  std::vector<float> ref(8 * 64);
  std::vector<float> scratch(2 * 37);
  attention_f16(c.q.data(), c.k.data(), c.v.data(), 37, c.shape, 0, 4, out.data(), scratch.data());
  attention_f16_reference(c.q.data(), c.k.data(), c.v.data(), 37, c.shape, 0, 4, ref.data(), scratch.data());
  require_close(out.data(), ref.data(), 8 * 64, 0.0, 1e-5);
}

TEST_CASE("attention over a long context stays accurate", "[kernels]") {
  const AttentionCase c = make_attention_case(4, 1, 64, 8200, 3.0f, 12);
  const auto want = attention_naive(c);
  std::vector<const OpsTable*> tables = simd_tables();
  tables.push_back(&ops_scalar());
  for (const OpsTable* t : tables) {
    INFO(isa_name(t->isa));
    const auto out = run_attention(*t, c, 0, 1);
    require_close(out.data(), want.data(), static_cast<int64_t>(out.size()), 0.0, 1e-5);
  }
}

TEST_CASE("attention decode timing at 1200 positions", "[.bench]") {
  // Decode shape of a 1B model: 32 query heads, 4 kv heads, head_dim 64.
  const AttentionCase c = make_attention_case(32, 4, 64, 1200, 1.0f, 13);
  std::vector<const OpsTable*> tables = simd_tables();
  tables.push_back(&ops_scalar());
  for (const OpsTable* t : tables) {
    std::vector<float> out(32 * 64);
    std::vector<float> scratch(8 * 1200);
    // Best of 5 batches: the machine is shared, the minimum is the kernel's own cost.
    const int n_iter = t->isa == Isa::scalar ? 5 : 100;
    double best_us = 1e30;
    for (int batch = 0; batch < 5; ++batch) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < n_iter; ++i) {
        attention_f16_with(*t, c.q.data(), c.k.data(), c.v.data(), c.n_kv, c.shape, 0, 4, out.data(), scratch.data());
      }
      const std::chrono::duration<double, std::micro> us = std::chrono::steady_clock::now() - start;
      best_us = std::min(best_us, us.count() / n_iter);
    }
    std::printf("attention_f16 %-7s n_kv 1200, 32/4 heads, dim 64: %8.1f us per call\n", isa_name(t->isa), best_us);
  }
  REQUIRE(true);
}
