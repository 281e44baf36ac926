// A turn runner that answers every turn with the same recorded text, streamed in small pieces,
// around the real engine runner (which still serves prefetch, the memory view and exports).
//
// The models tests and screenshots can run cannot be made to answer in rich Markdown, so
// `kvchat --replay-answer FILE` streams FILE instead, through the real controller, store and
// views; the reply's tokens are the model's tokenization of the text.
#pragma once

#include <memory>
#include <string>

#include "app/gui/turn_runner.h"
#include "core/tokenizer/tokenizer.h"

namespace kvc::app {

class ReplayTurnRunner final : public TurnRunner {
 public:
  // Streams `answer` n_chunk_bytes at a time (whole UTF-8 characters), pausing pause_ms between.
  ReplayTurnRunner(std::unique_ptr<TurnRunner> inner, tokenizer::Tokenizer tokenizer, std::string answer,
                   size_t n_chunk_bytes = 12, int pause_ms = 8);

  Result<TurnResult> run(const TurnRequest& request, const std::function<bool(const TurnDelta&)>& on_delta) override;
  void prefetch(int64_t conversation_id, const std::vector<int32_t>& tokens) override {
    inner_->prefetch(conversation_id, tokens);
  }
  void fill_memory(ui::MemoryState& out) override { inner_->fill_memory(out); }
  std::vector<kv::KvEvent> kv_events() const override { return inner_->kv_events(); }
  uint64_t memory_version() const override { return inner_->memory_version(); }
  void refresh_memory() override { inner_->refresh_memory(); }
  void release_streams(int64_t id, std::span<const std::vector<int32_t>> dead,
                       std::span<const std::vector<int32_t>> live) override {
    inner_->release_streams(id, dead, live);
  }

 private:
  std::unique_ptr<TurnRunner> inner_;
  tokenizer::Tokenizer tokenizer_;
  std::string answer_;
  size_t n_chunk_bytes_;
  int pause_ms_;
};

}  // namespace kvc::app
