// moe_route(): gating, selection bias, group limit, top-k and the chosen experts' weights.
#include "kernels/cpu/moe_router.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

namespace kvc::kernels {

namespace {

// A bug check (kernels may not include core/util/assert.h): the caller broke the contract.
void check(bool ok, const char* what) {
  if (!ok) [[unlikely]] {
    std::fprintf(stderr, "kvchat: moe_route: %s\n", what);
    std::abort();
  }
}

// y = softmax(x) over n values: exp(x - max) in float, summed in double, scaled by 1 / sum.
void softmax(const float* x, int n, float* y) {
  float max = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - max);
    sum += static_cast<double>(y[i]);
  }
  const auto inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) y[i] *= inv;
}

// The k best of `score` over [0, n), best first; equal scores keep the lower index first.
void top_k(const float* score, int n, int k, int32_t* out, std::vector<int32_t>& order) {
  order.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return score[a] > score[b] || (score[a] == score[b] && a < b); });
  std::copy(order.begin(), order.begin() + k, out);
}

}  // namespace

void moe_route(const MoeRouting& r, const float* logits, const float* selection_bias, int64_t n_tokens, int32_t* ids,
               float* weights) {
  const int n = r.n_expert, k = r.n_used;
  check(n > 0 && k >= 1 && k <= n, "n_used must lie in [1, n_expert]");
  const bool grouped = r.n_group > 1;
  const int per_group = grouped ? n / r.n_group : n;
  check(!grouped || (n % r.n_group == 0 && per_group >= 2 && r.n_group_used >= 1 && r.n_group_used < r.n_group &&
                     k <= r.n_group_used * per_group),
        "bad expert groups");
  std::vector<float> probs(static_cast<size_t>(n)), select(static_cast<size_t>(n));
  std::vector<float> group_score(static_cast<size_t>(grouped ? r.n_group : 0));
  std::vector<int32_t> order, best_groups(static_cast<size_t>(grouped ? r.n_group_used : 0)), two(2);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* x = logits + t * n;
    int32_t* id = ids + t * k;
    float* w = weights + t * k;
    switch (r.gating) {
      case MoeGating::softmax: softmax(x, n, probs.data()); break;
      case MoeGating::sigmoid:
        for (int i = 0; i < n; ++i) probs[static_cast<size_t>(i)] = 1.0f / (1.0f + std::exp(-x[i]));
        break;
      case MoeGating::softmax_weight: std::copy(x, x + n, probs.begin()); break;
    }
    for (int i = 0; i < n; ++i) {
      select[static_cast<size_t>(i)] = probs[static_cast<size_t>(i)] + (selection_bias ? selection_bias[i] : 0.0f);
    }
    if (grouped) {
      // A group scores the sum of its two best selection scores; only the best groups' experts stay eligible.
      for (int g = 0; g < r.n_group; ++g) {
        const float* s = select.data() + g * per_group;
        top_k(s, per_group, 2, two.data(), order);
        group_score[static_cast<size_t>(g)] = s[two[0]] + s[two[1]];
      }
      top_k(group_score.data(), r.n_group, r.n_group_used, best_groups.data(), order);
      std::vector<bool> keep(static_cast<size_t>(r.n_group), false);
      for (int32_t g : best_groups) keep[static_cast<size_t>(g)] = true;
      for (int i = 0; i < n; ++i) {
        if (!keep[static_cast<size_t>(i / per_group)]) {
          select[static_cast<size_t>(i)] = -std::numeric_limits<float>::infinity();
        }
      }
    }
    top_k(select.data(), n, k, id, order);
    for (int j = 0; j < k; ++j) w[j] = probs[static_cast<size_t>(id[j])];
    if (r.gating == MoeGating::softmax_weight) softmax(w, k, w);
    if (r.norm_weights) {
      float sum = 0;
      for (int j = 0; j < k; ++j) sum += w[j];
      sum = std::max(sum, 6.103515625e-5f);  // 2^-14, the smallest normal F16, as llama.cpp clamps it
      for (int j = 0; j < k; ++j) w[j] /= sum;
    }
    if (r.weights_scale != 0.0f && r.weights_scale != 1.0f) {
      for (int j = 0; j < k; ++j) w[j] *= r.weights_scale;
    }
  }
}

}  // namespace kvc::kernels
