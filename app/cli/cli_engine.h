// The engine behind kvchat-cli's generate and chat: the same continuous-batching engine and
// KV cache the app (and `serve`) run, stepped on the calling thread, one request at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "core/engine/engine.h"
#include "core/kv/kv_cache.h"
#include "core/model/model.h"
#include "core/util/result.h"

namespace kvc::cli {

class CliEngine {
 public:
  // A cache of K and V in `format` with room for n_ctx positions in T0 and an engine whose
  // forward passes hold at most n_batch tokens. Errors: the model cannot use the format.
  static Result<CliEngine> create(const model::Model& m, int64_t n_ctx, int64_t n_batch,
                                  kv::KvFormat format = kv::KvFormat::f16);

  // Runs one request to its end, streaming its text to on_text (return false to stop). A
  // conversation's requests share its sequence, so a turn reuses everything before it.
  // Errors: the request failed (too long for the context, say).
  Result<engine::RequestResult> run(int64_t conversation, std::vector<int32_t> prompt,
                                    const engine::RequestOptions& options,
                                    const std::function<bool(std::string_view)>& on_text);

  int64_t n_ctx() const { return n_ctx_; }

 private:
  CliEngine() = default;
  std::unique_ptr<kv::KvCache> cache_;
  std::unique_ptr<engine::Engine> engine_;
  int64_t n_ctx_ = 0;
};

// Decode speed of a finished request: tokens after the first over the time after the first.
double decode_tokens_per_s(const engine::RequestResult& r);

}  // namespace kvc::cli
