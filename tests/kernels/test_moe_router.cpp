// moe_route: each step of the router pinned on logits whose result changes when the step is left out.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernels/cpu/moe_router.h"

using namespace kvc::kernels;

namespace {

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed route(const MoeRouting& r, const std::vector<float>& logits, const std::vector<float>& bias = {}) {
  const auto n_tokens = static_cast<int64_t>(logits.size()) / r.n_expert;
  Routed out{std::vector<int32_t>(static_cast<size_t>(n_tokens * r.n_used)),
             std::vector<float>(static_cast<size_t>(n_tokens * r.n_used))};
  moe_route(r, logits.data(), bias.empty() ? nullptr : bias.data(), n_tokens, out.ids.data(), out.weights.data());
  return out;
}

MoeRouting routing(int n_expert, int n_used, MoeGating g) {
  MoeRouting r;
  r.n_expert = n_expert;
  r.n_used = n_used;
  r.gating = g;
  return r;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

TEST_CASE("moe router: softmax over all experts, the best k, their probabilities", "[kernels]") {
  // Logits 1, 2, 3, 0: experts 2 and 1, weighted by their share of the softmax over all four
  // (left out, the weights would be the logits 3 and 2; taken over the chosen two only, 0.73 and 0.27).
  const Routed r = route(routing(4, 2, MoeGating::softmax), {1, 2, 3, 0});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(0.0);
  CHECK(r.ids == std::vector<int32_t>{2, 1});
  CHECK(r.weights[0] == Approx(std::exp(3.0) / z).epsilon(1e-6));
  CHECK(r.weights[1] == Approx(std::exp(2.0) / z).epsilon(1e-6));
}

TEST_CASE("moe router: each token routes on its own row", "[kernels]") {
  const Routed r = route(routing(4, 1, MoeGating::softmax), {1, 2, 3, 0, 5, 0, 0, 0, 0, 0, 0, 9});
  CHECK(r.ids == std::vector<int32_t>{2, 0, 3});
}

TEST_CASE("moe router: sigmoid gating weighs each chosen expert by sigmoid of its logit", "[kernels]") {
  const Routed r = route(routing(4, 2, MoeGating::sigmoid), {1, 2, 3, 0});
  CHECK(r.ids == std::vector<int32_t>{2, 1});
  CHECK(r.weights[0] == Approx(sigmoid(3.0)).epsilon(1e-6));  // softmax would give 0.64, none 3
  CHECK(r.weights[1] == Approx(sigmoid(2.0)).epsilon(1e-6));
}

TEST_CASE("moe router: softmax_weight selects on the logits and softmaxes the chosen k only", "[kernels]") {
  // gpt-oss: the weights are a softmax over the two chosen logits (3 and 2): 0.731 and 0.269;
  // a softmax over all four would give 0.644 and 0.237, none the logits themselves.
  const Routed r = route(routing(4, 2, MoeGating::softmax_weight), {1, 2, 3, 0});
  CHECK(r.ids == std::vector<int32_t>{2, 1});
  const double z = std::exp(3.0) + std::exp(2.0);
  CHECK(r.weights[0] == Approx(std::exp(3.0) / z).epsilon(1e-6));
  CHECK(r.weights[1] == Approx(std::exp(2.0) / z).epsilon(1e-6));
}

TEST_CASE("moe router: the selection bias changes the choice, not the weights", "[kernels]") {
  // DeepSeek-V3 / GLM (exp_probs_b): expert 0 is chosen for its bias, weighted by its unbiased
  // sigmoid (without the bias: experts 2 and 1; with the bias in the weights: 5.73).
  const Routed r = route(routing(4, 2, MoeGating::sigmoid), {1, 2, 3, 0}, {5, 0, 0, 0});
  CHECK(r.ids == std::vector<int32_t>{0, 2});
  CHECK(r.weights[0] == Approx(sigmoid(1.0)).epsilon(1e-6));
  CHECK(r.weights[1] == Approx(sigmoid(3.0)).epsilon(1e-6));
}

TEST_CASE("moe router: group-limited selection keeps the best groups by the sum of their two best", "[kernels]") {
  // 8 experts in 4 groups of 2, 2 groups used. Group scores (sum of the two best): 0, 17,
  // 13.5, 0, so groups 1 and 2 stay, and the best two of their experts are 2 and 3. Without
  // groups the choice would be 0 and 2; scoring a group by its best expert alone keeps group 0
  // (10) and gives 0 and 2 again.
  MoeRouting r = routing(8, 2, MoeGating::softmax_weight);
  r.n_group = 4;
  r.n_group_used = 2;
  const Routed out = route(r, {10, -10, 9, 8, 7, 6.5f, 0, 0});
  CHECK(out.ids == std::vector<int32_t>{2, 3});
}

TEST_CASE("moe router: normalised weights sum to one, then the scale multiplies them", "[kernels]") {
  // Softmax over four, the best two normalised: 0.731 and 0.269 (unnormalised 0.644 and 0.237).
  MoeRouting r = routing(4, 2, MoeGating::softmax);
  r.norm_weights = true;
  Routed out = route(r, {1, 2, 3, 0});
  const double z = std::exp(3.0) + std::exp(2.0);
  CHECK(out.ids == std::vector<int32_t>{2, 1});
  CHECK(out.weights[0] == Approx(std::exp(3.0) / z).epsilon(1e-6));
  CHECK(out.weights[1] == Approx(std::exp(2.0) / z).epsilon(1e-6));
  // The scale after the norm (DeepSeek's routed_scaling_factor): the weights sum to 2.5, not 1.
  r.weights_scale = 2.5f;
  out = route(r, {1, 2, 3, 0});
  CHECK(out.weights[0] == Approx(2.5 * std::exp(3.0) / z).epsilon(1e-6));
  CHECK(out.weights[1] == Approx(2.5 * std::exp(2.0) / z).epsilon(1e-6));
  // Without the norm the scale multiplies the softmax probabilities themselves.
  r.norm_weights = false;
  out = route(r, {1, 2, 3, 0});
  const double all = z + std::exp(1.0) + std::exp(0.0);
  CHECK(out.weights[0] == Approx(2.5 * std::exp(3.0) / all).epsilon(1e-6));
  // A scale of 1 (and 0, the key's absence) leaves the weights as they are.
  r.weights_scale = 1.0f;
  CHECK(route(r, {1, 2, 3, 0}).weights[0] == Approx(std::exp(3.0) / all).epsilon(1e-6));
  r.weights_scale = 0.0f;
  CHECK(route(r, {1, 2, 3, 0}).weights[0] == Approx(std::exp(3.0) / all).epsilon(1e-6));
}

TEST_CASE("moe router: the norm's sum is clamped at 2^-14, as llama.cpp clamps it", "[kernels]") {
  // Sigmoid of -30 is ~1e-13: the two weights divided by 2^-14, not by their own tiny sum.
  MoeRouting r = routing(3, 2, MoeGating::sigmoid);
  r.norm_weights = true;
  const Routed out = route(r, {-30, -31, -40});
  CHECK(out.weights[0] == Approx(sigmoid(-30.0) / 6.103515625e-5).epsilon(1e-4));
  CHECK(out.weights[0] < 1e-8f);
}

TEST_CASE("moe router: equal scores choose the lower expert id first", "[kernels]") {
  const Routed r = route(routing(6, 3, MoeGating::softmax), {0, 1, 0, 1, 1, 0});
  CHECK(r.ids == std::vector<int32_t>{1, 3, 4});
}
