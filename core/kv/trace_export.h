// Exports of the KV event stream: Chrome trace JSON (opens in Perfetto / chrome://tracing) and CSV.
//
// Chrome trace layout (one track per tier and per sequence):
//
//   pid 1 "KV tiers"    tid 0 "T0 device" · tid 1 "T1 host" · tid 2 "T2 disk" · tid 3 "lookups"
//                       "i" instants for block events, on the tier the block lands in (else leaves);
//                       "C" counters "T0 used bytes" / "T0 used blocks" ... from tier_usage events
//   pid 2 "Sequences"   tid = seq_id, named "seq N"
//                       "X" spans: "request R" enclosing lookup / promote / prefill / first decode / decode;
//                       "i" instants for preempt / resume
//
// Every trace event has name, ph, ts (microseconds, the events' own clock), pid and tid.
// CSV: one header row, then one row per event in input order; columns never change order:
//   t_us,type,from,to,key,seq_id,request_id,n_tokens,n_bytes,slot
// with type as event_type_name(), tiers as tier_name(), key as 32 hex digits (zeros when null).
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "core/kv/kv_events.h"
#include "core/kv/kv_metrics.h"
#include "core/util/result.h"

namespace kvc::kv {

constexpr int k_trace_pid_tiers = 1;
constexpr int k_trace_pid_sequences = 2;
constexpr int k_trace_tid_lookups = 3;  // block events without a tier (misses)

std::string to_chrome_trace_json(std::span<const KvEvent> events);

inline constexpr std::string_view k_csv_header = "t_us,type,from,to,key,seq_id,request_id,n_tokens,n_bytes,slot";
std::string to_csv(std::span<const KvEvent> events);

// One row per turn, for spreadsheets and the cache benchmark:
//   request_id,seq_id,n_prompt_tokens,cached_t0,cached_t1,cached_t2,n_computed_tokens,
//   n_generated_tokens,lookup_ms,promote_ms,prefill_ms,first_decode_ms,ttft_ms,decode_tok_s
std::string turns_to_csv(std::span<const RequestMetrics> turns);

// Writes contents to a temporary file next to path, flushes it to disk and renames it over
// path, so a reader never sees a half-written file. Errors name the path and what to check.
Status write_file_atomic(const std::filesystem::path& path, std::string_view contents);

Status write_chrome_trace(const std::filesystem::path& path, std::span<const KvEvent> events);
Status write_csv(const std::filesystem::path& path, std::span<const KvEvent> events);

}  // namespace kvc::kv
