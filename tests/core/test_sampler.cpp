// Sampler: greedy, seeding, top-k / top-p / min-p kept sets and their probabilities, penalty, params.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "core/sampling/sampler.h"

using kvc::sampling::Rng;
using kvc::sampling::Sampler;
using kvc::sampling::SamplingParams;

namespace {

SamplingParams plain(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.seed = 42;
  return p;
}

std::vector<float> log_probs(const std::vector<double>& p) {
  std::vector<float> l;
  for (double v : p) l.push_back(static_cast<float>(std::log(v)));
  return l;
}

// Counts of each token over n draws (logits are copied each time: sample() may modify them).
std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int> count(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    auto l = logits;
    const int32_t t = s.sample(l, {});
    REQUIRE(t >= 0);
    REQUIRE(static_cast<size_t>(t) < logits.size());
    ++count[static_cast<size_t>(t)];
  }
  return count;
}

// Every token's frequency lies within 5 standard deviations of its expected probability
// (a false alarm per token has odds below 1 in 10^6), and tokens of probability 0 never appear.
void require_distribution(const std::vector<int>& count, const std::vector<double>& expected, int n) {
  REQUIRE(count.size() == expected.size());
  for (size_t i = 0; i < count.size(); ++i) {
    INFO("token " << i << ": " << count[i] << " of " << n << ", expected p = " << expected[i]);
    if (expected[i] == 0.0) {
      REQUIRE(count[i] == 0);
      continue;
    }
    const double p = expected[i];
    const double sigma = std::sqrt(p * (1 - p) / n);
    REQUIRE(std::fabs(static_cast<double>(count[i]) / n - p) <= 5 * sigma + 1e-12);
  }
}

// The kept distribution computed the textbook way: softmax(logits / T) over the whole
// vocabulary, full sort, top-k, top-p prefix, min-p, renormalize.
std::vector<double> reference_distribution(const std::vector<float>& logits, const SamplingParams& p) {
  const size_t n = logits.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  size_t keep = n;
  if (p.top_k > 0) keep = std::min(keep, static_cast<size_t>(p.top_k));
  std::vector<double> w(n, 0.0);
  double z = 0;
  for (size_t r = 0; r < keep; ++r) {
    w[order[r]] =
        std::exp(static_cast<double>(logits[order[r]] - logits[order[0]]) / static_cast<double>(p.temperature));
    z += w[order[r]];
  }
  if (p.top_p < 1.0f) {
    double cum = 0;
    for (size_t r = 0; r < keep; ++r) {
      cum += w[order[r]] / z;
      if (cum >= static_cast<double>(p.top_p)) {
        keep = r + 1;
        break;
      }
    }
  }
  std::vector<double> out(n, 0.0);
  double kept = 0;
  for (size_t r = 0; r < keep; ++r) {
    if (w[order[r]] >= static_cast<double>(p.min_p) * w[order[0]]) {
      out[order[r]] = w[order[r]];
      kept += w[order[r]];
    }
  }
  for (double& v : out) v /= kept;
  return out;
}

}  // namespace

TEST_CASE("greedy picks the argmax, the lowest id on ties", "[core]") {
  Sampler s(plain(0.0f));
  std::vector<float> l = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  REQUIRE(s.sample(l, {}) == 1);
  l = {std::nanf(""), -2.0f, -1.0f, -1.0f};
  REQUIRE(s.sample(l, {}) == 2);
  SamplingParams neg = plain(-1.0f);  // any temperature <= 0 is greedy
  Sampler s2(neg);
  l = {0.0f, 0.0f, 7.0f};
  REQUIRE(s2.sample(l, {}) == 2);
}

TEST_CASE("the same seed gives the same tokens, another seed others", "[core]") {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(static_cast<double>(i)));
  auto run = [&](uint64_t seed) {
    SamplingParams p = plain(1.0f);
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      auto l = logits;
      out.push_back(s.sample(l, {}));
    }
    return out;
  };
  REQUIRE(run(7) == run(7));
  REQUIRE(run(7) != run(8));

  SamplingParams p = plain(1.0f);
  p.seed = 7;
  Sampler s(p);
  auto l = logits;
  const int32_t first = s.sample(l, {});
  for (int i = 0; i < 10; ++i) {
    l = logits;
    s.sample(l, {});
  }
  s.reset(7);
  l = logits;
  REQUIRE(s.sample(l, {}) == first);
}

TEST_CASE("the PRNG stream is fixed across platforms", "[core]") {
  // Expected words from an independent Python implementation of splitmix64 seeding and
  // xoshiro256** (its splitmix64 gives the published first output 0xe220a8397b1dcdaf for 0).
  Rng a(0);
  REQUIRE(a.next() == 0x99ec5f36cb75f2b4ull);
  REQUIRE(a.next() == 0xbf6e1f784956452aull);
  REQUIRE(a.next() == 0x1a5f849d4933e6e0ull);
  Rng b(42);
  REQUIRE(b.next() == 0x15780b2e0c2ec716ull);
  REQUIRE(b.next() == 0x6104d9866d113a7eull);
  REQUIRE(b.next() == 0xae17533239e499a1ull);
  double lo = 1, hi = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = a.uniform();
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
  }
  REQUIRE(lo < 0.001);
  REQUIRE(hi > 0.999);
}

TEST_CASE("top-k = 1 is greedy", "[core]") {
  SamplingParams p = plain(1.5f);
  p.top_k = 1;
  Sampler s(p);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> l(500);
    for (auto& v : l) v = nd(rng);
    const auto expected = std::max_element(l.begin(), l.end()) - l.begin();
    REQUIRE(s.sample(l, {}) == expected);
  }
}

TEST_CASE("top-k keeps the k best with renormalized probabilities", "[core]") {
  SamplingParams p = plain(1.0f);
  p.top_k = 2;
  Sampler s(p);
  const auto logits = log_probs({0.1, 0.4, 0.05, 0.3, 0.15});
  const int n = 20000;
  require_distribution(histogram(s, logits, n), {0, 0.4 / 0.7, 0, 0.3 / 0.7, 0}, n);
}

TEST_CASE("top-p keeps the smallest prefix reaching p", "[core]") {
  SamplingParams p = plain(1.0f);
  p.top_p = 0.75f;  // 0.5 < 0.75 <= 0.5 + 0.3: tokens 2 and 0 stay
  Sampler s(p);
  const auto logits = log_probs({0.3, 0.05, 0.5, 0.15});
  const int n = 20000;
  require_distribution(histogram(s, logits, n), {0.3 / 0.8, 0, 0.5 / 0.8, 0}, n);
}

TEST_CASE("min-p drops tokens below min_p times the best probability", "[core]") {
  SamplingParams p = plain(1.0f);
  p.min_p = 0.25f;  // threshold 0.25 * 0.4 = 0.1: tokens of p 0.08 and 0.02 go
  Sampler s(p);
  const auto logits = log_probs({0.08, 0.4, 0.3, 0.02, 0.2});
  const int n = 20000;
  require_distribution(histogram(s, logits, n), {0, 0.4 / 0.9, 0.3 / 0.9, 0, 0.2 / 0.9}, n);
}

TEST_CASE("all filters together match the textbook computation on a wide vocabulary", "[core]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // A heavy tail (many tokens with real mass) plus a dozen strong candidates.
  std::vector<float> logits(6000);
  for (auto& v : logits) v = 2.5f * nd(rng);
  for (int i = 0; i < 12; ++i) logits[static_cast<size_t>(i) * 499] = 9.0f + 0.25f * static_cast<float>(i);
  struct Case {
    int top_k;
    float top_p, min_p, temperature;
  };
  for (const Case c : {Case{0, 0.9f, 0.0f, 1.0f}, Case{40, 0.9f, 0.05f, 0.8f}, Case{0, 1.0f, 0.2f, 1.2f},
                       Case{5, 1.0f, 0.0f, 0.7f}, Case{0, 0.6f, 0.3f, 2.0f}}) {
    INFO("top_k " << c.top_k << " top_p " << c.top_p << " min_p " << c.min_p << " T " << c.temperature);
    SamplingParams p = plain(c.temperature);
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    Sampler s(p);
    const int n = 3000;
    require_distribution(histogram(s, logits, n), reference_distribution(logits, p), n);
  }
}

TEST_CASE("repetition penalty divides positive and multiplies negative logits, once per token", "[core]") {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.1f;
  p.repeat_last_n = 3;
  Sampler s(p);
  std::vector<float> l = {2.0f, 1.9f};
  const std::vector<int32_t> recent0 = {0};
  REQUIRE(s.sample(l, recent0) == 1);  // 2.0 / 1.1 = 1.82 < 1.9
  REQUIRE(l[0] == Approx(2.0f / 1.1f));

  l = {-1.0f, -1.05f};
  REQUIRE(s.sample(l, recent0) == 1);  // -1.0 * 1.1 = -1.1 < -1.05

  l = {2.0f, 1.8f};
  const std::vector<int32_t> thrice = {0, 0, 0};
  REQUIRE(s.sample(l, thrice) == 0);  // once: 1.82 > 1.8 (three times would give 1.50)

  l = {2.0f, 1.9f};
  const std::vector<int32_t> old = {0, 5, 6, 7};  // token 0 lies outside the last 3
  REQUIRE(s.sample(l, old) == 0);

  l = {2.0f, 1.9f};
  const std::vector<int32_t> junk = {-3, 99};  // ids outside the vocabulary are ignored
  REQUIRE(s.sample(l, junk) == 0);

  p.repeat_penalty = 1.0f;
  Sampler off(p);
  l = {2.0f, 1.9f};
  REQUIRE(off.sample(l, recent0) == 0);
}

TEST_CASE("a negative seed draws a random one per sampler, and that seed replays its tokens", "[core]") {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(static_cast<double>(i)));
  auto run = [&](Sampler& s) {
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      auto l = logits;
      out.push_back(s.sample(l, {}));
    }
    return out;
  };
  SamplingParams p = plain(1.0f);
  p.seed = kvc::sampling::k_random_seed;
  REQUIRE(SamplingParams{}.seed == kvc::sampling::k_random_seed);  // the one default: random
  Sampler a(p), b(p);
  REQUIRE(a.seed() != b.seed());  // 2^-64 odds of a false failure
  SamplingParams replay = p;
  replay.seed = static_cast<int64_t>(a.seed() >> 1);
  Sampler c(replay), d(replay);
  REQUIRE(c.seed() == d.seed());
  REQUIRE(run(c) == run(d));
}

TEST_CASE("invalid sampling parameters are rejected with the flag and range", "[core]") {
  REQUIRE(SamplingParams{}.validate().ok());
  SamplingParams p;
  p.top_p = 1.5f;
  REQUIRE_FALSE(p.validate().ok());
  REQUIRE(p.validate().error().code == kvc::ErrorCode::invalid_argument);
  REQUIRE(p.validate().error().message == "--top-p must be in (0, 1], got 1.5");
  p.top_p = 0.0f;
  REQUIRE_FALSE(p.validate().ok());

  auto message_of = [](SamplingParams q) { return q.validate().ok() ? std::string() : q.validate().error().message; };
  SamplingParams q;
  q.min_p = 1.5f;
  REQUIRE(message_of(q).rfind("--min-p", 0) == 0);
  q = {};
  q.temperature = std::nanf("");
  REQUIRE(message_of(q).rfind("--temperature", 0) == 0);
  q = {};
  q.repeat_penalty = 0.0f;
  REQUIRE(message_of(q).rfind("--repeat-penalty", 0) == 0);
  q = {};
  q.repeat_last_n = -1;
  REQUIRE(message_of(q).rfind("--repeat-last-n", 0) == 0);
  q = {};
  q.top_k = -1;  // off, not an error
  q.min_p = 0.0f;
  q.temperature = 0.0f;
  REQUIRE(q.validate().ok());
}
