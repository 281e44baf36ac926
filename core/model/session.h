// One sequence's inference state: its token history, its KV cache and the forward pass.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/kv/kv_cache.h"
#include "core/model/forward.h"
#include "core/model/model.h"
#include "core/model/output_text.h"
#include "core/sampling/generate_options.h"
#include "core/sampling/sampler.h"
#include "core/util/machine_budget.h"
#include "core/util/result.h"

namespace kvc::model {

struct SessionOptions {
  int64_t n_ctx = 0;      // most tokens the sequence may hold; 0: the model's (capped at 4096)
  int64_t n_batch = 256;  // tokens per forward pass during prefill
  kv::KvFormat k_format = kv::KvFormat::f16;
  kv::KvFormat v_format = kv::KvFormat::f16;
  int32_t block_tokens = 16;  // B
  KvBudget budget;            // T0 0: room for n_ctx tokens; T1 0: none
  kv::ColdStore* cold = nullptr;
};

// One conversation's inference on its own KV cache: a convenience over KvCache and Forward
// for the command line and tests (the engine runs many sequences on one shared cache).
// Invariant: the cache's sequence holds exactly tokens() after every call.
class Session {
 public:
  static Result<Session> create(const Model& m, const SessionOptions& options);
  static Result<Session> create(const Model& m, int64_t n_ctx, int64_t n_batch = 256);

  // Makes the session hold exactly `tokens`, reusing the longest cached prefix (its own
  // history, shared blocks, other tiers) and evaluating the rest; returns the logits of the
  // last token (n_vocab floats). At least one token is evaluated, because its logits are needed.
  Result<std::span<const float>> evaluate(std::span<const int32_t> tokens);
  // Appends tokens (evaluated) and returns the last token's logits.
  Result<std::span<const float>> append(std::span<const int32_t> tokens);
  // Logits at every position of `tokens`, all evaluated from an empty history.
  Result<std::span<const float>> evaluate_all(std::span<const int32_t> tokens);
  // Forgets the history (cached blocks stay in the cache for other turns).
  void clear();

  std::span<const int32_t> tokens() const { return cache_->tokens(seq_); }
  int64_t n_ctx() const { return n_ctx_; }
  const Model& model() const { return *m_; }
  kv::KvCache& cache() { return *cache_; }
  const kv::KvCache& cache() const { return *cache_; }
  // What the last evaluate() reused, and how many tokens it computed.
  const kv::PrefixInfo& last_prefix() const { return last_prefix_; }
  int64_t n_reused() const { return last_prefix_.n_cached; }
  int64_t n_evaluated() const { return n_evaluated_; }

 private:
  Session(const Model& m, std::unique_ptr<kv::KvCache> cache, int64_t n_ctx, int64_t n_batch);
  Result<std::span<const float>> run(std::span<const int32_t> tokens, Logits which);

  const Model* m_;
  std::unique_ptr<kv::KvCache> cache_;
  std::unique_ptr<Forward> forward_;
  kv::SeqId seq_ = 0;
  int64_t n_ctx_ = 0;
  kv::PrefixInfo last_prefix_;
  int64_t n_evaluated_ = 0;
  std::vector<float> all_logits_;
  std::vector<std::span<uint8_t* const>> tables_;  // the sequence's block table per KV group
};

// What to generate: the one type with its defaults (core/sampling/generate_options.h).
using GenerateOptions = sampling::GenerateOptions;

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (without a final end-of-generation token)
  std::string text;             // their text, cut before a stop string
  StopReason reason = StopReason::max_tokens;
  int64_t n_prompt = 0;         // prompt tokens
  int64_t n_prompt_reused = 0;  // of which served from the session's cache
  kv::PrefixInfo prefix;        // where they came from (tiers), and lookup / promote times
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
