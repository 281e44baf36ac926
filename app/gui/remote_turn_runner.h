// RemoteTurnRunner: the app's turns answered by an OpenAI-compatible server (kvchat-cli serve,
// vLLM, SGLang, llama-server, Ollama) instead of the local engine, behind the same TurnRunner.
//
// It sends the turn's messages (TurnRequest::system_prompt and messages), streams the answer
// back through on_delta, measures TTFT and tokens/s on this side, and describes the server's
// cache for the Memory window from its /metrics and each answer's usage.cached_tokens.
#pragma once

#include <string>

#include "app/gui/turn_runner.h"
#include "app/remote/remote_client.h"

namespace kvc::app {

class RemoteTurnRunner final : public TurnRunner {
 public:
  RemoteTurnRunner(remote::Endpoint endpoint, std::string model);

  Result<TurnResult> run(const TurnRequest& request, const std::function<bool(const TurnDelta&)>& on_delta) override;
  void prefetch(int64_t, const std::vector<int32_t>&) override {}  // the server keeps its own cache
  void fill_memory(ui::MemoryState& out) override { out.remote = view_; }
  std::vector<kv::KvEvent> kv_events() const override { return {}; }
  uint64_t memory_version() const override { return version_; }
  void release_streams(int64_t, std::span<const std::vector<int32_t>>, std::span<const std::vector<int32_t>>) override {
  }
  void refresh_memory() override;

 private:
  remote::Endpoint endpoint_;
  std::string model_;
  ui::RemoteCacheView view_;  // the caller's (controller worker's) thread only
  uint64_t version_ = 0;
};

}  // namespace kvc::app
