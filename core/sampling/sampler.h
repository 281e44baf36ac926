// Token sampling from logits: repetition penalty, greedy or top-k / temperature / top-p / min-p.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/util/result.h"

namespace kvc::sampling {

class GrammarMatcher;

// SamplingParams::seed < 0: each Sampler draws a fresh seed from the system's entropy.
constexpr int64_t k_random_seed = -1;

// Each filter has a value that turns it off: temperature <= 0 (greedy), top_k <= 0,
// top_p >= 1, min_p <= 0, repeat_penalty == 1 or repeat_last_n == 0.
// These defaults are the CLI's, the app's and the API server's (README.md "Generation settings").
struct SamplingParams {
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;           // keep tokens with p >= min_p * (largest p)
  float repeat_penalty = 1.0f;   // off, as in llama.cpp and the OpenAI API
  int repeat_last_n = 64;        // how many of the most recent tokens the penalty looks at
  int64_t seed = k_random_seed;  // >= 0: the same seed gives the same output

  // invalid_argument naming the flag and the accepted range, e.g.
  // "--top-p must be in (0, 1], got 1.5".
  Status validate() const;
  friend bool operator==(const SamplingParams&, const SamplingParams&) = default;
};

// A deterministic PRNG (xoshiro256**, seeded through splitmix64): the same seed gives the
// same stream on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) { seed_with(seed); }
  void seed_with(uint64_t seed);
  uint64_t next();
  double uniform();  // in [0, 1), 53 random bits

 private:
  uint64_t s_[4];
};

// Samples one token per call. Order: the grammar constraint's mask (if any), repetition penalty (llama-style: positive
// logits of penalized tokens are divided by the penalty, negative ones multiplied, once per distinct token among the
// last repeat_last_n), then greedy if temperature <= 0, else top-k, temperature, softmax, top-p, min-p, and a draw from
// what is left. Ties go to the lowest token id (greedy, and the order of top-k / top-p). Buffers are kept between
// calls: sample() allocates only when a call keeps more candidates than every call before it.
class Sampler {
 public:
  // params.validate() must be ok; a seed < 0 is replaced by a random one (seed() tells which).
  explicit Sampler(const SamplingParams& params);
  ~Sampler();
  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;

  // logits: (n_vocab) raw logits of the next token; the penalty is applied to them in
  // place. recent_tokens: the sequence so far, oldest first (ids outside the vocabulary
  // are ignored). Returns a token id in [0, n_vocab); n_vocab must be >= 1.
  int32_t sample(std::span<float> logits, std::span<const int32_t> recent_tokens);

  // From now on sample() returns only tokens `matcher` allows (the logits of the others are
  // -inf before every filter, greedy included) and advances it with each token it returns.
  void constrain(std::unique_ptr<GrammarMatcher> matcher);
  const GrammarMatcher* constraint() const { return matcher_.get(); }
  // The constraint is met and nothing may follow, or no token could continue it: stop here.
  bool constraint_done() const;

  // Restarts the random stream, as a new Sampler with this seed would.
  void reset(uint64_t seed);

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }  // the stream's seed (the drawn one for a random seed)

 private:
  // Invariant after each stage of sample(): candidates_ holds distinct token ids; weight
  // is the unnormalized probability exp((logit - max) / temperature) once computed.
  struct Candidate {
    float logit;
    int32_t id;
    float weight;
  };

  int32_t sample_unconstrained(std::span<float> logits, std::span<const int32_t> recent_tokens);
  void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> recent_tokens);
  void select_top_k(std::span<const float> logits);
  int32_t draw_from_vocabulary(std::span<const float> logits, double total);

  SamplingParams params_;
  uint64_t seed_;
  Rng rng_;
  std::vector<Candidate> candidates_;        // (n_candidates) the tokens still in the running
  std::vector<int32_t> penalized_;           // (repeat_last_n) distinct recent ids
  std::unique_ptr<GrammarMatcher> matcher_;  // null: unconstrained
  bool stuck_ = false;                       // the matcher allowed no token at the last call
};

}  // namespace kvc::sampling
