// One sequence's inference state: its token history, its KV cache and the forward pass.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/model/forward.h"
#include "core/model/model.h"
#include "core/sampling/sampler.h"
#include "core/util/result.h"

namespace kvc::model {

// Invariant: kv_ holds exactly the positions of tokens_ (tokens_.size() <= n_ctx).
class Session {
 public:
  static Result<Session> create(const Model& m, int64_t n_ctx, int64_t n_batch = 256);

  // Makes the session hold exactly `tokens`, reusing the longest common prefix with what it
  // holds and evaluating the rest; returns the logits of the last token (n_vocab floats).
  // At least one token is evaluated, because its logits are needed.
  Result<std::span<const float>> evaluate(std::span<const int32_t> tokens);
  // Appends tokens (evaluated) and returns the last token's logits.
  Result<std::span<const float>> append(std::span<const int32_t> tokens);
  // Logits at every position of `tokens`, evaluated from an empty history.
  Result<std::span<const float>> evaluate_all(std::span<const int32_t> tokens);

  // Forgets the history (the KV cache is overwritten by later evaluations).
  void clear() { tokens_.clear(); }

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t n_ctx() const { return kv_.n_ctx(); }
  const Model& model() const { return *m_; }
  // Tokens reused and evaluated by the last evaluate().
  int64_t n_reused() const { return n_reused_; }
  int64_t n_evaluated() const { return n_evaluated_; }

 private:
  Session(const Model& m, ContiguousKv kv, int64_t n_batch)
      : m_(&m), kv_(std::move(kv)), forward_(std::make_unique<Forward>(m, n_batch)) {}

  const Model* m_;
  ContiguousKv kv_;
  std::unique_ptr<Forward> forward_;
  std::vector<int32_t> tokens_;
  int64_t n_reused_ = 0;
  int64_t n_evaluated_ = 0;
};

struct GenerateOptions {
  int64_t max_tokens = 128;  // < 0: until EOS or the context is full
  sampling::SamplingParams sampling;
  std::vector<std::string> stop_strings;  // generation ends before any of these
  bool stop_at_eog = true;                // end at EOS / end-of-turn tokens
};

enum class StopReason { max_tokens, end_of_generation, stop_string, context_full, cancelled };
const char* to_string(StopReason r);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (without a final end-of-generation token)
  std::string text;             // their text, cut before a stop string
  StopReason reason = StopReason::max_tokens;
  int64_t n_prompt = 0;         // prompt tokens
  int64_t n_prompt_reused = 0;  // of which served from the session's cache
  double prefill_ms = 0;        // evaluating the uncached prompt suffix
  double ttft_ms = 0;           // prompt submitted -> first token sampled
  double decode_ms = 0;         // all later tokens
};

// Streams text as it becomes final; returning false cancels the generation.
using TextCallback = std::function<bool(std::string_view piece)>;

// Evaluates `prompt` in the session (reusing its cache) and samples a continuation.
Result<GenerateResult> generate(Session& s, std::span<const int32_t> prompt, const GenerateOptions& opt,
                                const TextCallback& on_text = {});

}  // namespace kvc::model
