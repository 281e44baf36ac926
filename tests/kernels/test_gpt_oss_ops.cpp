// gpt-oss's kernels against formulas written here: the clamped SwiGLU, the expert FFN with a
// biased router, a softmax over the chosen experts and biased experts, and YaRN rope.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/moe_ffn.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"

using namespace kvc::kernels;

namespace {

// gpt-oss's activation in double: gate capped at 7, up clamped to [-7, 7].
double swiglu_oai(double g, double u) {
  const double x = std::min(g, 7.0), y = std::clamp(u, -7.0, 7.0);
  return x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0);
}

}  // namespace

TEST_CASE("clamped SwiGLU: gate capped at 7, up clamped to +-7, x sigmoid(1.702 x) (up + 1)", "[kernels]") {
  const std::vector<float> gates = {-30.0f, -7.5f, -1.0f, 0.0f, 0.5f, 6.9f, 7.0f, 7.5f, 40.0f};
  const std::vector<float> ups = {-40.0f, -7.0f, -3.0f, -1.0f, 0.0f, 2.0f, 7.0f, 9.0f};
  for (float g : gates) {
    for (float u : ups) {
      float out = 0;
      swiglu_oai_mul(&g, &u, 1, 1.702f, 7.0f, &out);
      INFO("gate " << g << " up " << u << " got " << out);
      CHECK(std::fabs(static_cast<double>(out) - swiglu_oai(g, u)) <= 1e-6 * (1 + std::fabs(swiglu_oai(g, u))));
    }
  }
  // The caps are what make the large inputs' outputs: a gate of 40 acts as 7, an up of 9 as 7.
  float g = 40.0f, u = 9.0f, capped = 0, at_cap = 0;
  swiglu_oai_mul(&g, &u, 1, 1.702f, 7.0f, &capped);
  g = 7.0f;
  u = 7.0f;
  swiglu_oai_mul(&g, &u, 1, 1.702f, 7.0f, &at_cap);
  CHECK(capped == at_cap);
  CHECK(capped == Approx(7.0 / (1.0 + std::exp(-1.702 * 7.0)) * 8.0));
}

TEST_CASE("moe_ffn, gpt-oss style: router bias, softmax over the chosen, biased experts, clamped SwiGLU", "[kernels]") {
  // F32 weights so the reference below is exact but for float rounding; gate/up weights large
  // enough that many gates pass 7 and many ups leave [-7, 7], so the clamp shapes the output.
  const int64_t n_embd = 64, n_expert = 6, k = 2, n_ff = 32, n_tokens = 5;
  std::mt19937 rng(41);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto fill = [&](int64_t n, float std) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = nd(rng) * std;
    return v;
  };
  const std::vector<float> router = fill(n_expert * n_embd, 0.3f), router_b = fill(n_expert, 1.0f);
  const std::vector<float> gate = fill(n_expert * n_ff * n_embd, 1.2f), up = fill(n_expert * n_ff * n_embd, 1.2f);
  const std::vector<float> down = fill(n_expert * n_embd * n_ff, 0.1f);
  const std::vector<float> gate_b = fill(n_expert * n_ff, 1.0f), up_b = fill(n_expert * n_ff, 1.0f);
  const std::vector<float> down_b = fill(n_expert * n_embd, 1.0f);
  const std::vector<float> x = fill(n_tokens * n_embd, 1.0f);
  MoeFfnWeights w;
  w.routing.n_expert = static_cast<int>(n_expert);
  w.routing.n_used = static_cast<int>(k);
  w.routing.gating = MoeGating::softmax_weight;
  w.activation = MoeActivation::swiglu_oai;
  w.n_ff = n_ff;
  w.router = {DType::f32, router.data(), n_expert, n_embd};
  w.router_bias = router_b.data();
  w.gate = {DType::f32, gate.data(), n_expert * n_ff, n_embd};
  w.up = {DType::f32, up.data(), n_expert * n_ff, n_embd};
  w.down = {DType::f32, down.data(), n_expert * n_embd, n_ff};
  w.gate_bias = gate_b.data();
  w.up_bias = up_b.data();
  w.down_bias = down_b.data();
  ThreadPool pool(2);
  MoeFfnScratch scratch;
  std::vector<float> y(static_cast<size_t>(n_tokens * n_embd));
  moe_ffn(w, x.data(), n_tokens, y.data(), pool, scratch);

  int clamped = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x.data() + t * n_embd;
    std::vector<std::pair<double, int>> logits;
    for (int e = 0; e < n_expert; ++e) {
      double l = router_b[static_cast<size_t>(e)];
      for (int64_t i = 0; i < n_embd; ++i) l += double{router[static_cast<size_t>(e * n_embd + i)]} * double{xt[i]};
      logits.push_back({l, e});
    }
    std::sort(logits.begin(), logits.end(), [](auto a, auto b) { return a.first > b.first; });
    // Softmax over the k chosen logits only.
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += std::exp(logits[static_cast<size_t>(j)].first - logits[0].first);
    std::vector<double> want(static_cast<size_t>(n_embd), 0.0);
    for (int j = 0; j < k; ++j) {
      const int e = logits[static_cast<size_t>(j)].second;
      const double wt = std::exp(logits[static_cast<size_t>(j)].first - logits[0].first) / sum;
      std::vector<double> act(static_cast<size_t>(n_ff));
      for (int64_t f = 0; f < n_ff; ++f) {
        double g = gate_b[static_cast<size_t>(e * n_ff + f)], u = up_b[static_cast<size_t>(e * n_ff + f)];
        for (int64_t i = 0; i < n_embd; ++i) {
          g += double{gate[static_cast<size_t>((e * n_ff + f) * n_embd + i)]} * double{xt[i]};
          u += double{up[static_cast<size_t>((e * n_ff + f) * n_embd + i)]} * double{xt[i]};
        }
        clamped += (g > 7.0 || std::fabs(u) > 7.0) ? 1 : 0;
        act[static_cast<size_t>(f)] = swiglu_oai(g, u);
      }
      for (int64_t o = 0; o < n_embd; ++o) {
        double d = down_b[static_cast<size_t>(e * n_embd + o)];
        for (int64_t f = 0; f < n_ff; ++f)
          d += double{down[static_cast<size_t>((e * n_embd + o) * n_ff + f)]} * act[static_cast<size_t>(f)];
        want[static_cast<size_t>(o)] += wt * d;
      }
    }
    for (int64_t o = 0; o < n_embd; ++o) {
      INFO("token " << t << " output " << o);
      CHECK(y[static_cast<size_t>(t * n_embd + o)] == Approx(want[static_cast<size_t>(o)]).epsilon(1e-4).margin(1e-4));
    }
  }
  CHECK(clamped > n_tokens * k * n_ff / 4);  // the caps were in play for a good share of the units
}

TEST_CASE("YaRN rope: pair k turns by the blend of its original and scaled frequency, cos and sin scaled",
          "[kernels]") {
  // gpt-oss's settings: 64 rotated dims (neox halves), base 150000, factor 32 over 4096
  // positions: pairs up to 8 keep their rotation, from 18 on are scaled by 1/32, in between a
  // linear blend; the magnitude 1 + 0.1 ln 32.
  RopeParams p;
  p.n_rot = 64;
  p.freq_base = 150000.0f;
  p.freq_scale = 1.0f / 32.0f;
  p.interleaved = false;
  p.yarn = true;
  p.yarn_low = 8.0f;
  p.yarn_high = 18.0f;
  p.attn_factor = 1.0f + 0.1f * std::log(32.0f);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t pos : {int64_t{1}, int64_t{37}, int64_t{5000}, int64_t{100000}}) {
    std::vector<float> x(64 * 2);
    for (float& v : x) v = nd(rng);
    std::vector<float> got = x;
    rope(got.data(), 2, 64, pos, p);
    for (int h = 0; h < 2; ++h) {
      for (int kk = 0; kk < 32; ++kk) {
        const double f = std::pow(150000.0, -2.0 * kk / 64.0);
        const double ramp = 1.0 - std::clamp((kk - 8.0) / 10.0, 0.0, 1.0);
        const double theta = static_cast<double>(pos) * (f / 32.0 * (1.0 - ramp) + f * ramp);
        const double m = 1.0 + 0.1 * std::log(32.0);
        const double a = x[static_cast<size_t>(h * 64 + kk)], b = x[static_cast<size_t>(h * 64 + kk + 32)];
        const double ra = m * (a * std::cos(theta) - b * std::sin(theta));
        const double rb = m * (b * std::cos(theta) + a * std::sin(theta));
        INFO("pos " << pos << " pair " << kk);
        CHECK(got[static_cast<size_t>(h * 64 + kk)] == Approx(ra).margin(1e-4));
        CHECK(got[static_cast<size_t>(h * 64 + kk + 32)] == Approx(rb).margin(1e-4));
      }
    }
  }
}
