// Token sampling: parameter checks, the PRNG, and the penalty / top-k / top-p / min-p pipeline.
#include "core/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

#include "core/sampling/grammar_matcher.h"
#include "core/util/assert.h"

namespace kvc::sampling {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Error invalid(const std::string& message) { return make_error(ErrorCode::invalid_argument, message); }

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The largest logit, NaN ignored (-inf when there is none).
float max_logit(std::span<const float> logits) {
  float m = -std::numeric_limits<float>::infinity();
  for (const float v : logits) m = v > m ? v : m;
  return m;
}

// Index of the largest logit, lowest index on ties; NaN never wins (0 if all are NaN).
int32_t argmax(std::span<const float> logits) {
  const float m = max_logit(logits);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == m) return static_cast<int32_t>(i);
  }
  return 0;
}

}  // namespace

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature)) {
    return invalid("--temperature must be a finite number (0 or less means greedy), got " + number(temperature));
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) return invalid("--top-p must be in (0, 1], got " + number(top_p));
  if (!(min_p <= 1.0f)) return invalid("--min-p must be in [0, 1] (0 turns it off), got " + number(min_p));
  if (!(repeat_penalty > 0.0f) || !std::isfinite(repeat_penalty)) {
    return invalid("--repeat-penalty must be a positive number (1 turns it off), got " + number(repeat_penalty));
  }
  if (repeat_last_n < 0) {
    return invalid("--repeat-last-n must be 0 or more (0 turns the penalty off), got " + std::to_string(repeat_last_n));
  }
  return {};
}

void Rng::seed_with(uint64_t seed) {
  uint64_t state = seed;
  for (auto& s : s_) s = splitmix64(state);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

namespace {

uint64_t seed_of(int64_t seed) {
  if (seed >= 0) return static_cast<uint64_t>(seed);
  std::random_device entropy;
  return (uint64_t{entropy()} << 32) ^ entropy();
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), seed_(seed_of(params.seed)), rng_(seed_) {
  KVC_ASSERT(params.validate().ok());
  penalized_.reserve(static_cast<size_t>(params.repeat_last_n));
  if (params.top_k > 0) candidates_.reserve(static_cast<size_t>(params.top_k));
}

Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

void Sampler::constrain(std::unique_ptr<GrammarMatcher> matcher) { matcher_ = std::move(matcher); }

bool Sampler::constraint_done() const { return matcher_ && (matcher_->is_finished() || stuck_); }

void Sampler::reset(uint64_t seed) {
  seed_ = seed;
  rng_.seed_with(seed);
}

void Sampler::apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> recent_tokens) {
  if (params_.repeat_penalty == 1.0f || params_.repeat_last_n == 0 || recent_tokens.empty()) return;
  const size_t n = std::min(recent_tokens.size(), static_cast<size_t>(params_.repeat_last_n));
  penalized_.assign(recent_tokens.end() - static_cast<std::ptrdiff_t>(n), recent_tokens.end());
  std::sort(penalized_.begin(), penalized_.end());
  penalized_.erase(std::unique(penalized_.begin(), penalized_.end()), penalized_.end());
  for (const int32_t id : penalized_) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    float& l = logits[static_cast<size_t>(id)];
    l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
  }
}

namespace {
// Higher logit first, then lower id: the order of top-k and top-p.
template <typename C>
bool better(const C& a, const C& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}
}  // namespace

// Fills candidates_ with the top_k best tokens (0 < top_k < n_vocab), best first.
void Sampler::select_top_k(std::span<const float> logits) {
  candidates_.clear();
  const auto k = static_cast<size_t>(params_.top_k);
  const auto cmp = [](const Candidate& a, const Candidate& b) { return better(a, b); };
  // A heap of the k best so far whose top is the worst of them; a token that does not
  // reach the worst kept logit (or is NaN) costs one compare.
  float worst = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (candidates_.size() < k) {
      candidates_.push_back(Candidate{std::isnan(v) ? worst : v, static_cast<int32_t>(i), 0.0f});
      std::push_heap(candidates_.begin(), candidates_.end(), cmp);
      if (candidates_.size() == k) worst = candidates_.front().logit;
      continue;
    }
    if (!(v > worst)) continue;  // equal logits keep the lower id already held
    std::pop_heap(candidates_.begin(), candidates_.end(), cmp);
    candidates_.back() = Candidate{v, static_cast<int32_t>(i), 0.0f};
    std::push_heap(candidates_.begin(), candidates_.end(), cmp);
    worst = candidates_.front().logit;
  }
  std::sort(candidates_.begin(), candidates_.end(), cmp);
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> recent_tokens) {
  KVC_ASSERT(!logits.empty());
  if (!matcher_) return sample_unconstrained(logits, recent_tokens);
  if (!matcher_->mask_logits(logits)) {
    // No token continues the grammar: end the text with an end-of-generation token where the
    // vocabulary has one (the caller also sees constraint_done()).
    stuck_ = true;
    const int32_t end = matcher_->end_token();
    return end >= 0 && static_cast<size_t>(end) < logits.size() ? end : sample_unconstrained(logits, recent_tokens);
  }
  const int32_t id = sample_unconstrained(logits, recent_tokens);
  // Only allowed tokens are left, unless all of them had -inf or NaN logits from the model.
  if (!matcher_->accept_token(id)) stuck_ = true;
  return id;
}

int32_t Sampler::sample_unconstrained(std::span<float> logits, std::span<const int32_t> recent_tokens) {
  apply_repetition_penalty(logits, recent_tokens);
  if (params_.temperature <= 0.0f) return argmax(logits);
  const float m = max_logit(logits);
  if (!std::isfinite(m)) return argmax(logits);  // all -inf or NaN, or an +inf: no distribution
  const float inv_t = 1.0f / params_.temperature;
  auto weight_of = [m, inv_t](float logit) { return std::exp((logit - m) * inv_t); };  // best: 1

  // Softmax with temperature, unnormalized, over top-k's candidates or the whole vocabulary.
  const bool use_top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < logits.size();
  double total = 0.0;
  size_t n_considered = 0;
  if (use_top_k) {
    select_top_k(logits);
    for (Candidate& c : candidates_) {
      c.weight = weight_of(c.logit);
      total += static_cast<double>(c.weight);
    }
    n_considered = candidates_.size();
  } else {
    for (const float v : logits) {
      if (!std::isnan(v)) total += static_cast<double>(weight_of(v));
    }
    n_considered = logits.size();
  }

  // Tokens that neither top-p nor min-p can keep go before any sorting, so a large
  // vocabulary is never sorted whole. Exact: tokens below (1 - top_p) * total / n hold less
  // than (1 - top_p) of the mass together, so top-p's prefix ends before them; min-p keeps
  // weight >= min_p * (largest weight = 1), whatever top-p removed.
  double threshold = 0.0;
  if (params_.top_p < 1.0f) {
    threshold = (1.0 - static_cast<double>(params_.top_p)) * total / static_cast<double>(n_considered);
  }
  if (params_.min_p > 0.0f) threshold = std::max(threshold, static_cast<double>(params_.min_p));

  if (!use_top_k) {
    if (threshold <= 0.0) return draw_from_vocabulary(logits, total);
    // Weight >= threshold, as a logit bound with a little slack; the exact test follows.
    const float cut = m + params_.temperature * static_cast<float>(std::log(threshold)) - 1e-3f;
    candidates_.clear();
    for (size_t i = 0; i < logits.size(); ++i) {
      if (logits[i] >= cut) candidates_.push_back(Candidate{logits[i], static_cast<int32_t>(i), weight_of(logits[i])});
    }
  }
  // Weight 0 (a -inf logit: a token the grammar forbids) is never drawn, even with no threshold.
  std::erase_if(candidates_, [threshold](const Candidate& c) {
    return !(c.weight > 0.0f) || static_cast<double>(c.weight) < threshold;
  });

  if (params_.top_p < 1.0f) {
    if (!use_top_k) {
      std::sort(candidates_.begin(), candidates_.end(),
                [](const Candidate& a, const Candidate& b) { return better(a, b); });
    }
    const double target = static_cast<double>(params_.top_p) * total;
    double cum = 0.0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      cum += static_cast<double>(candidates_[i].weight);
      if (cum >= target) {
        candidates_.resize(i + 1);
        break;
      }
    }
  }

  double kept = 0.0;
  for (const Candidate& c : candidates_) kept += static_cast<double>(c.weight);
  double u = rng_.uniform() * kept;
  for (const Candidate& c : candidates_) {
    u -= static_cast<double>(c.weight);
    if (u < 0.0) return c.id;
  }
  return candidates_.back().id;  // rounding left u at or just above 0
}

// No filter left: draws token i with probability weight_i / total, walking the vocabulary
// in id order (the same weights as summed into total).
int32_t Sampler::draw_from_vocabulary(std::span<const float> logits, double total) {
  const float m = max_logit(logits);
  const float inv_t = 1.0f / params_.temperature;
  double u = rng_.uniform() * total;
  int32_t last = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    const float w = std::exp((logits[i] - m) * inv_t);
    if (w == 0.0f) continue;
    last = static_cast<int32_t>(i);
    u -= static_cast<double>(w);
    if (u < 0.0) return last;
  }
  return last;  // rounding left u at or just above 0
}

}  // namespace kvc::sampling
