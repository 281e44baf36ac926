// Chrome trace JSON and CSV writers for KV events, and the atomic file write they share.
#include "core/kv/trace_export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <set>

namespace kvc::kv {

namespace {

constexpr const char* k_tier_labels[k_n_tiers] = {"T0", "T1", "T2", "none"};
constexpr const char* k_tier_tracks[k_n_data_tiers] = {"T0 device", "T1 host", "T2 disk"};

const char* label(Tier t) { return k_tier_labels[tier_index(t)]; }

void append_int(std::string& out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

void append_double(std::string& out, double v) {
  char buf[32];
  const int n = std::snprintf(buf, sizeof(buf), "%.3f", v);
  out.append(buf, static_cast<size_t>(n));
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

// Starts {"name":..,"ph":..,"ts":..,"pid":..,"tid":..  ; the caller adds fields and closes it.
void open_event(std::string& out, std::string_view name, char ph, int64_t ts, int64_t pid, int64_t tid) {
  out += out.back() == '[' ? "\n{" : ",\n{";
  out += "\"name\":";
  append_json_string(out, name);
  out += ",\"ph\":\"";
  out += ph;
  out += "\",\"ts\":";
  append_int(out, ts);
  out += ",\"pid\":";
  append_int(out, pid);
  out += ",\"tid\":";
  append_int(out, tid);
}

void metadata(std::string& out, const char* what, int64_t pid, int64_t tid, std::string_view value) {
  open_event(out, what, 'M', 0, pid, tid);
  out += ",\"args\":{\"name\":";
  append_json_string(out, value);
  out += "}}";
}

void sort_index(std::string& out, const char* what, int64_t pid, int64_t tid, int64_t index) {
  open_event(out, what, 'M', 0, pid, tid);
  out += ",\"args\":{\"sort_index\":";
  append_int(out, index);
  out += "}}";
}

std::string block_event_name(const KvEvent& e) {
  const std::string from = label(e.from);
  const std::string to = label(e.to);
  switch (e.type) {
    case KvEventType::block_allocated: return "allocate " + to;
    case KvEventType::block_published: return "publish (now shared)";
    case KvEventType::block_hit: return "hit " + from;
    case KvEventType::block_miss: return "miss";
    case KvEventType::block_promoted: return "promote " + from + "->" + to;
    case KvEventType::block_demoted: return "demote " + from + "->" + to;
    case KvEventType::block_evicted: return "evict from " + from;
    case KvEventType::block_copied_on_write: return "copy-on-write";
    case KvEventType::cold_write_queued: return "cold write queued";
    case KvEventType::cold_write_done: return "cold write done";
    case KvEventType::block_corrupt: return "corrupt block dropped";
    case KvEventType::alloc_failed: return "allocation failed on " + to;
    case KvEventType::seq_preempted: return "preempt " + from + "->" + to;
    case KvEventType::seq_resumed: return "resume " + from + "->" + to;
    default: return std::string(event_type_name(e.type));
  }
}

void event_args(std::string& out, const KvEvent& e) {
  out += ",\"args\":{";
  bool first = true;
  auto field = [&](const char* k) {
    if (!first) out += ',';
    first = false;
    out += '"';
    out += k;
    out += "\":";
  };
  if (!e.key.is_null()) {
    field("key");
    append_json_string(out, e.key.hex());
  }
  if (e.from != Tier::none) {
    field("from");
    append_json_string(out, tier_name(e.from));
  }
  if (e.to != Tier::none) {
    field("to");
    append_json_string(out, tier_name(e.to));
  }
  const std::pair<const char*, int64_t> ints[] = {{"seq_id", e.seq_id}, {"request_id", e.request_id}, {"slot", e.slot}};
  for (const auto& [k, v] : ints) {
    if (v < 0) continue;
    field(k);
    append_int(out, v);
  }
  field("n_tokens");
  append_int(out, e.n_tokens);
  field("n_bytes");
  append_int(out, e.n_bytes);
  out += '}';
}

void request_spans(std::string& out, const RequestMetrics& r) {
  static constexpr const char* k_phase_names[k_n_request_phases] = {"",        "lookup",       "promote",
                                                                    "prefill", "first decode", "decode"};
  const int64_t begin = r.phase_end_us(RequestPhase::started);
  if (begin < 0) return;  // its start was lost: no anchor for the spans
  int64_t end = begin;
  for (int64_t t : r.t_phase_us) end = std::max(end, t);
  std::string name = "request " + std::to_string(r.request_id);
  open_event(out, name, 'X', begin, k_trace_pid_sequences, r.seq_id);
  out += ",\"dur\":";
  append_int(out, end - begin);
  out += ",\"args\":{\"n_prompt_tokens\":";
  append_int(out, r.n_prompt_tokens);
  const std::pair<const char*, int64_t> ints[] = {{"cached_t0", r.n_cached_tokens[0]},
                                                  {"cached_t1", r.n_cached_tokens[1]},
                                                  {"cached_t2", r.n_cached_tokens[2]},
                                                  {"n_computed_tokens", r.n_computed_tokens},
                                                  {"n_generated_tokens", r.n_generated_tokens}};
  for (const auto& [k, v] : ints) {
    out += ",\"";
    out += k;
    out += "\":";
    append_int(out, v);
  }
  out += ",\"ttft_ms\":";
  append_double(out, r.ttft_ms());
  out += "}}";
  for (int p = 1; p < k_n_request_phases; ++p) {
    const int64_t b = r.phase_end_us(static_cast<RequestPhase>(p - 1));
    const int64_t e = r.phase_end_us(static_cast<RequestPhase>(p));
    if (b < 0 || e < b || !r.has(static_cast<RequestPhase>(p))) continue;
    open_event(out, k_phase_names[p], 'X', b, k_trace_pid_sequences, r.seq_id);
    out += ",\"dur\":";
    append_int(out, e - b);
    out += '}';
  }
}

}  // namespace

std::string to_chrome_trace_json(std::span<const KvEvent> events) {
  std::string out;
  out.reserve(256 + events.size() * 160);
  out += "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";

  metadata(out, "process_name", k_trace_pid_tiers, 0, "KV tiers");
  sort_index(out, "process_sort_index", k_trace_pid_tiers, 0, 0);
  for (int t = 0; t < k_n_data_tiers; ++t) {
    metadata(out, "thread_name", k_trace_pid_tiers, t, k_tier_tracks[t]);
    sort_index(out, "thread_sort_index", k_trace_pid_tiers, t, t);
  }
  metadata(out, "thread_name", k_trace_pid_tiers, k_trace_tid_lookups, "lookups (misses)");
  metadata(out, "process_name", k_trace_pid_sequences, 0, "Sequences");
  sort_index(out, "process_sort_index", k_trace_pid_sequences, 0, 1);
  std::set<int64_t> seqs;
  for (const KvEvent& e : events) {
    if (is_request_phase(e.type) || e.type == KvEventType::seq_preempted || e.type == KvEventType::seq_resumed) {
      seqs.insert(e.seq_id);
    }
  }
  for (int64_t s : seqs) {
    metadata(out, "thread_name", k_trace_pid_sequences, s, s >= 0 ? "seq " + std::to_string(s) : "no sequence");
  }

  TurnTimeline timeline(0);  // 0: keep every turn
  for (const KvEvent& e : events) {
    timeline.add(e);
    if (is_request_phase(e.type)) continue;  // drawn as spans below
    if (e.type == KvEventType::tier_usage) {
      if (!is_data_tier(e.to)) continue;
      const std::string tier = label(e.to);
      open_event(out, tier + " used bytes", 'C', e.t_us, k_trace_pid_tiers, 0);
      out += ",\"args\":{\"bytes\":";
      append_int(out, e.n_bytes);
      out += "}}";
      open_event(out, tier + " used blocks", 'C', e.t_us, k_trace_pid_tiers, 0);
      out += ",\"args\":{\"blocks\":";
      append_int(out, e.n_tokens);
      out += "}}";
      continue;
    }
    const bool seq_track = e.type == KvEventType::seq_preempted || e.type == KvEventType::seq_resumed;
    int64_t pid = k_trace_pid_tiers;
    int64_t tid = is_data_tier(e.to)     ? tier_index(e.to)
                  : is_data_tier(e.from) ? tier_index(e.from)
                                         : k_trace_tid_lookups;
    if (seq_track) {
      pid = k_trace_pid_sequences;
      tid = e.seq_id;
    }
    open_event(out, block_event_name(e), 'i', e.t_us, pid, tid);
    out += ",\"s\":\"t\"";
    event_args(out, e);
    out += '}';
  }
  for (const RequestMetrics& r : timeline.turns()) request_spans(out, r);
  out += "\n]}\n";
  return out;
}

std::string to_csv(std::span<const KvEvent> events) {
  std::string out;
  out.reserve(k_csv_header.size() + 1 + events.size() * 96);
  out += k_csv_header;
  out += '\n';
  for (const KvEvent& e : events) {
    append_int(out, e.t_us);
    out += ',';
    out += event_type_name(e.type);
    out += ',';
    out += tier_name(e.from);
    out += ',';
    out += tier_name(e.to);
    out += ',';
    out += e.key.hex();
    for (int64_t v : {e.seq_id, e.request_id, e.n_tokens, e.n_bytes, static_cast<int64_t>(e.slot)}) {
      out += ',';
      append_int(out, v);
    }
    out += '\n';
  }
  return out;
}

std::string turns_to_csv(std::span<const RequestMetrics> turns) {
  std::string out =
      "request_id,seq_id,n_prompt_tokens,cached_t0,cached_t1,cached_t2,n_computed_tokens,"
      "n_generated_tokens,lookup_ms,promote_ms,prefill_ms,first_decode_ms,ttft_ms,decode_tok_s\n";
  for (const RequestMetrics& r : turns) {
    const int64_t ints[] = {r.request_id,         r.seq_id,
                            r.n_prompt_tokens,    r.n_cached_tokens[0],
                            r.n_cached_tokens[1], r.n_cached_tokens[2],
                            r.n_computed_tokens,  r.n_generated_tokens};
    for (int64_t v : ints) {
      append_int(out, v);
      out += ',';
    }
    const double ms[] = {r.lookup_ms(),       r.promote_ms(), r.prefill_ms(),
                         r.first_decode_ms(), r.ttft_ms(),    r.decode_tok_s()};
    for (size_t i = 0; i < std::size(ms); ++i) {
      if (i > 0) out += ',';
      append_double(out, ms[i]);
    }
    out += '\n';
  }
  return out;
}

Status write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string tmp_name = path.filename().string();
  tmp_name += ".tmp-XXXXXX";
  std::string tmp = (dir / tmp_name).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    return make_error(ErrorCode::io, "cannot write " + path.string() + ": cannot create a file in " + dir.string() +
                                         ": " + std::strerror(errno) +
                                         " (does the folder exist, and may you write to it?)");
  }
  auto fail = [&](const char* what) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    return make_error(ErrorCode::io,
                      "cannot write " + path.string() + ": " + what + ": " + reason + " (is the disk full?)");
  };
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write failed");
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) return fail("chmod failed");
  if (::fsync(fd) != 0) return fail("flush to disk failed");
  if (::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    return make_error(ErrorCode::io, "cannot write " + path.string() + ": close failed: " + reason);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return make_error(ErrorCode::io, "cannot replace " + path.string() + ": " + std::strerror(err) +
                                         (err == EISDIR ? " (the path is a folder; name a file)" : ""));
  }
  return {};
}

Status write_chrome_trace(const std::filesystem::path& path, std::span<const KvEvent> events) {
  return write_file_atomic(path, to_chrome_trace_json(events));
}

Status write_csv(const std::filesystem::path& path, std::span<const KvEvent> events) {
  return write_file_atomic(path, to_csv(events));
}

}  // namespace kvc::kv
