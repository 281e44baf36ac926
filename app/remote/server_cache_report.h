// What a serving engine's /metrics page says about its KV cache: kvchat's own names, vLLM's
// (v1 and v0), SGLang's and llama-server's, read into the Memory window's remote view.
//
//   engine     KV in use                         prefix cache
//   kvchat     kvchat_kv_used_bytes{tier}        kvchat_kv_hit_tokens_total / + kvchat_kv_missed_tokens_total
//   vLLM v1    vllm:kv_cache_usage_perc          vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total
//   vLLM v0    vllm:gpu_cache_usage_perc         vllm:gpu_prefix_cache_hit_rate
//   SGLang     sglang:token_usage,               sglang:cache_hit_rate
//              sglang:num_used_tokens / sglang:max_total_num_tokens
//   llama.cpp  llamacpp:kv_cache_usage_ratio     (none)
#pragma once

#include "app/remote/prometheus_text.h"
#include "ui/memory_state.h"

namespace kvc::remote {

// Fills the metrics part of `out` (engine, KV usage, prefix cache, queue, kvchat's tiers) from a
// page, and clears what the page does not report; the per-answer fields are left alone.
void read_cache_report(const PromPage& page, ui::RemoteCacheView& out);

}  // namespace kvc::remote
