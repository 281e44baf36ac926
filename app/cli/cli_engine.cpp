// CliEngine: a KV cache and an engine for one command-line process.
#include "app/cli/cli_engine.h"

#include "core/model/kv_setup.h"
#include "core/util/assert.h"

namespace kvc::cli {

Result<CliEngine> CliEngine::create(const model::Model& m, int64_t n_ctx, int64_t n_batch, kv::KvFormat format) {
  CliEngine e;
  model::KvSetup ks;
  ks.k_format = ks.v_format = format;
  ks.t0_tokens = n_ctx;
  auto cache = model::create_kv_cache(m, ks);
  if (!cache.ok()) return cache.error();
  e.cache_ = std::move(*cache);
  engine::EngineOptions eo;
  eo.n_ctx = n_ctx;
  eo.token_budget = n_batch;
  eo.max_running = 1;
  e.engine_ = std::make_unique<engine::Engine>(m, *e.cache_, eo);
  e.n_ctx_ = n_ctx;
  return e;
}

Result<engine::RequestResult> CliEngine::run(int64_t conversation, std::vector<int32_t> prompt,
                                             const engine::RequestOptions& options,
                                             const std::function<bool(std::string_view)>& on_text) {
  engine::Request r;
  r.conversation = conversation;
  r.prompt = std::move(prompt);
  r.options = options;
  r.on_text = on_text;
  const engine::RequestId id = engine_->submit(std::move(r));
  KVC_TRY(engine_->run_until_idle());
  auto result = engine_->result(id);
  KVC_ASSERT(result.has_value());
  engine_->forget(id);
  if (result->state == engine::RequestState::failed) return result->error;
  return std::move(*result);
}

double decode_tokens_per_s(const engine::RequestResult& r) {
  const double ms = r.total_ms - r.ttft_ms;
  return r.tokens.size() > 1 && ms > 0 ? 1000.0 * static_cast<double>(r.tokens.size() - 1) / ms : 0.0;
}

}  // namespace kvc::cli
