// Tests of the Chrome trace JSON and CSV exports of KV events, and of the atomic file writer.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/kv/trace_export.h"
#include "support/test_support.h"

using namespace kvc::kv;

namespace {

KvEvent ev(KvEventType type, int64_t t_us, int64_t request_id, int64_t seq_id, int64_t n_tokens = 0,
           Tier from = Tier::none, Tier to = Tier::none, int64_t n_bytes = 0) {
  KvEvent e;
  e.type = type;
  e.t_us = t_us;
  e.request_id = request_id;
  e.seq_id = seq_id;
  e.n_tokens = n_tokens;
  e.from = from;
  e.to = to;
  e.n_bytes = n_bytes;
  return e;
}

// Two turns on two sequences with block traffic on every tier, a preemption and counters.
std::vector<KvEvent> scenario() {
  using T = KvEventType;
  const BlockKey k0 = chain_key(BlockKey{}, std::vector<int32_t>{1, 2, 3, 4});
  const BlockKey k1 = chain_key(k0, std::vector<int32_t>{5, 6, 7, 8});
  std::vector<KvEvent> v = {
      ev(T::request_started, 1000, 1, 0, 40),
      ev(T::block_hit, 1010, 1, 0, 16, Tier::t0),
      ev(T::block_hit, 1020, 1, 0, 16, Tier::t2),
      ev(T::block_miss, 1030, 1, 0, 8),
      ev(T::lookup_done, 1100, 1, 0, 32),
      ev(T::block_promoted, 1500, 1, 0, 0, Tier::t2, Tier::t0, 65536),
      ev(T::promote_done, 2000, 1, 0, 0, Tier::none, Tier::none, 65536),
      ev(T::block_allocated, 2100, 1, 0, 0, Tier::none, Tier::t0),
      ev(T::tier_usage, 2200, -1, -1, 3, Tier::none, Tier::t0, 196608),
      ev(T::prefill_done, 6000, 1, 0, 8),
      ev(T::first_token, 6500, 1, 0),
      ev(T::block_published, 6600, 1, 0, 16, Tier::none, Tier::t0),
      ev(T::request_started, 7000, 2, 1, 20),
      ev(T::block_demoted, 7100, -1, -1, 0, Tier::t0, Tier::t1, 65536),
      ev(T::block_evicted, 7200, -1, -1, 0, Tier::t1, Tier::none, 65536),
      ev(T::tier_usage, 7300, -1, -1, 1, Tier::none, Tier::t1, 65536),
      ev(T::seq_preempted, 7400, 2, 1, 20, Tier::t0, Tier::t1, 32768),
      ev(T::request_finished, 9000, 1, 0, 12),
  };
  v[1].key = k0;
  v[2].key = k1;
  v[7].slot = 5;
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin < s.size()) {
    size_t end = s.find(sep, begin);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

std::string read_all(const std::string& path) {
  std::string out;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

}  // namespace

TEST_CASE("chrome trace: valid JSON with the trace event structure", "[core][trace_export]") {
  const std::vector<KvEvent> events = scenario();
  const nlohmann::json doc = nlohmann::json::parse(to_chrome_trace_json(events));
  REQUIRE(doc.is_object());
  REQUIRE(doc.contains("traceEvents"));
  const nlohmann::json& te = doc["traceEvents"];
  REQUIRE(te.is_array());

  std::map<std::string, int> n_by_ph;
  std::map<std::pair<int, int>, std::string> thread_names;
  for (const nlohmann::json& e : te) {
    INFO(e.dump());
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("ts"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e.contains("tid"));
    REQUIRE(e.contains("name"));
    CHECK(e["ts"].is_number());
    CHECK(e["name"].is_string());
    CHECK_FALSE(e["name"].get<std::string>().empty());
    const std::string ph = e["ph"];
    ++n_by_ph[ph];
    if (ph == "X") {
      REQUIRE(e.contains("dur"));
      CHECK(e["dur"].get<int64_t>() >= 0);
      CHECK(e["pid"] == k_trace_pid_sequences);
    }
    if (ph == "C") {
      REQUIRE(e.contains("args"));
      CHECK(e["args"].is_object());
      CHECK_FALSE(e["args"].empty());
      for (const auto& [k, val] : e["args"].items()) CHECK(val.is_number());
    }
    if (ph == "i") CHECK(e["s"] == "t");
    if (ph == "M" && e["name"] == "thread_name") {
      thread_names[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    }
  }
  // Block and sequence events become instants; request phases become spans; usage, counters.
  CHECK(n_by_ph["i"] == 9);
  CHECK(n_by_ph["C"] == 4);  // bytes and blocks for each of the 2 tier_usage samples
  // Request 1: the enclosing span and its 5 phases; request 2 only its (unfinished) span.
  CHECK(n_by_ph["X"] == 7);

  // One named track per tier and per sequence.
  CHECK(thread_names[{k_trace_pid_tiers, 0}] == "T0 device");
  CHECK(thread_names[{k_trace_pid_tiers, 1}] == "T1 host");
  CHECK(thread_names[{k_trace_pid_tiers, 2}] == "T2 disk");
  CHECK(thread_names[{k_trace_pid_sequences, 0}] == "seq 0");
  CHECK(thread_names[{k_trace_pid_sequences, 1}] == "seq 1");
}

TEST_CASE("chrome trace: spans and instants sit where the events say", "[core][trace_export]") {
  const nlohmann::json doc = nlohmann::json::parse(to_chrome_trace_json(scenario()));
  std::map<std::string, nlohmann::json> by_name;
  for (const nlohmann::json& e : doc["traceEvents"]) by_name[e["name"]] = e;

  const nlohmann::json& req = by_name.at("request 1");
  CHECK(req["ts"] == 1000);
  CHECK(req["dur"] == 8000);  // started 1000 .. finished 9000
  CHECK(req["tid"] == 0);
  CHECK(req["args"]["cached_t2"] == 16);
  CHECK(req["args"]["ttft_ms"].get<double>() == Approx(5.5));
  const nlohmann::json& prefill = by_name.at("prefill");
  CHECK(prefill["ts"] == 2000);
  CHECK(prefill["dur"] == 4000);
  CHECK(by_name.at("decode")["dur"] == 2500);

  const nlohmann::json& promote = by_name.at("promote T2->T0");
  CHECK(promote["pid"] == k_trace_pid_tiers);
  CHECK(promote["tid"] == 0);  // lands in T0
  CHECK(promote["args"]["n_bytes"] == 65536);
  const nlohmann::json& hit = by_name.at("hit T2");
  CHECK(hit["tid"] == 2);
  CHECK(hit["args"]["key"] ==
        chain_key(chain_key(BlockKey{}, std::vector<int32_t>{1, 2, 3, 4}), std::vector<int32_t>{5, 6, 7, 8}).hex());
  CHECK(by_name.at("miss")["tid"] == k_trace_tid_lookups);
  CHECK(by_name.at("evict from T1")["tid"] == 1);
  const nlohmann::json& preempt = by_name.at("preempt T0->T1");
  CHECK(preempt["pid"] == k_trace_pid_sequences);
  CHECK(preempt["tid"] == 1);
  CHECK(by_name.at("T0 used bytes")["args"]["bytes"] == 196608);
  CHECK(by_name.at("T1 used blocks")["args"]["blocks"] == 1);

  // No events at all is still a valid, loadable trace.
  const nlohmann::json empty = nlohmann::json::parse(to_chrome_trace_json({}));
  CHECK(empty["traceEvents"].is_array());
}

TEST_CASE("csv: header, one row per event, keys round-trip", "[core][trace_export]") {
  const std::vector<KvEvent> events = scenario();
  const std::string csv = to_csv(events);
  const std::vector<std::string> lines = split(csv, '\n');
  REQUIRE(lines.size() == events.size() + 1);
  CHECK(lines[0] == k_csv_header);
  const size_t n_columns = split(std::string(k_csv_header), ',').size();
  CHECK(n_columns == 10);
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> cols = split(lines[i], ',');
    REQUIRE(cols.size() == n_columns);
    const KvEvent& e = events[i - 1];
    CHECK(std::stoll(cols[0]) == e.t_us);
    KvEventType type{};
    REQUIRE(parse_event_type(cols[1], type));
    CHECK(type == e.type);
    CHECK(cols[2] == tier_name(e.from));
    CHECK(cols[3] == tier_name(e.to));
    CHECK(cols[4].size() == 32);
    CHECK(std::stoll(cols[5]) == e.seq_id);
    CHECK(std::stoll(cols[7]) == e.n_tokens);
    CHECK(std::stoll(cols[8]) == e.n_bytes);
    CHECK(std::stoll(cols[9]) == e.slot);
  }
  const std::vector<std::string> hit = split(lines[2], ',');  // events[1], the first hit
  CHECK(BlockKey::from_hex(hit[4]) == events[1].key);
  CHECK_FALSE(events[1].key.is_null());
  CHECK(split(lines[1], ',')[4] == std::string(32, '0'));  // a null key
}

TEST_CASE("csv: turns table", "[core][trace_export]") {
  TurnTimeline tl;
  tl.add(scenario());
  const std::vector<std::string> lines = split(turns_to_csv(tl.turns()), '\n');
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rfind("request_id,seq_id,n_prompt_tokens,cached_t0", 0) == 0);
  const std::vector<std::string> r1 = split(lines[1], ',');
  REQUIRE(r1.size() == 14);
  CHECK(r1[0] == "1");
  CHECK(r1[5] == "16");                     // cached_t2
  CHECK(std::stod(r1[12]) == Approx(5.5));  // ttft_ms
}

TEST_CASE("write_file_atomic: replaces the file, leaves no temporaries, explains failures", "[core][trace_export]") {
  kvc::test::TempDir dir;
  const std::string path = dir.file("trace.json");
  REQUIRE(write_file_atomic(path, "first").ok());
  CHECK(read_all(path) == "first");
  REQUIRE(write_chrome_trace(path, scenario()).ok());
  CHECK(nlohmann::json::parse(read_all(path))["traceEvents"].size() > 10);
  REQUIRE(write_csv(dir.file("events.csv"), scenario()).ok());
  CHECK(read_all(dir.file("events.csv")).rfind(std::string(k_csv_header), 0) == 0);
  size_t n_files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++n_files;
  CHECK(n_files == 2);

  const kvc::Status missing = write_file_atomic(dir.file("no/such/folder/trace.json"), "x");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == kvc::ErrorCode::io);
  CHECK(missing.error().message.find("no/such/folder") != std::string::npos);
  CHECK(missing.error().message.find("folder exist") != std::string::npos);

  std::filesystem::create_directory(dir.file("a_folder"));
  const kvc::Status is_dir = write_file_atomic(dir.file("a_folder"), "x");
  REQUIRE_FALSE(is_dir.ok());
  CHECK(is_dir.error().message.find("a_folder") != std::string::npos);
  n_files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++n_files;
  CHECK(n_files == 3);  // the two files and the folder: no temporary left behind
}
