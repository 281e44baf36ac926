// Engine: continuous batching of many conversations over one shared, tiered KV cache.
//
// Each step() runs ONE forward pass holding the next token of every decoding request plus
// prefill chunks of waiting prompts, up to a token budget, so every weight matrix is read
// once for all of them. When T0 runs short, unpinned cached blocks are demoted first (by the
// cache); if that is not enough, the most recently admitted request is preempted: its
// sequence is parked (its blocks become demotable to T1/T2) and it resumes later from the
// cache, recomputing only what was evicted. Greedy outputs do not depend on batching or
// preemption: every row of the forward pass is computed independently.
//
// A request whose history is on disk while others are running is staged first: a worker of a
// small pool (k_staging_threads) reads its T2 blocks into host RAM (T1) while the engine keeps
// stepping the others; it is admitted when the read is done (docs/ARCHITECTURE.md §3.7:
// staging). A step is three phases: schedule() (admission, the batch, preemption), run() (one
// forward pass) and sample_and_stop() (commit, sampling, stop rules, results).
//
// step() may be called directly (tests, benchmarks) or from the engine thread (start()).
// submit() and cancel() are thread-safe; the callbacks run on the thread calling step().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/kv/kv_cache.h"
#include "core/model/forward.h"
#include "core/model/model.h"
#include "core/model/output_text.h"
#include "core/model/session.h"
#include "core/sampling/generate_options.h"
#include "core/sampling/sampler.h"
#include "core/util/result.h"
#include "core/util/worker_pool.h"

namespace kvc::engine {

using RequestId = int64_t;

// What to generate: the one type for a request's settings (core/sampling/generate_options.h).
using RequestOptions = sampling::GenerateOptions;

struct RequestResult;

struct Request {
  // Requests of one conversation share its sequence, so a new turn also reuses the
  // previous turn's partial last block; 0: a one-off sequence.
  int64_t conversation = 0;
  std::vector<int32_t> prompt;  // the conversation's whole token stream plus the new segment
  RequestOptions options;
  // Called with text as it becomes final; return false to cancel.
  std::function<bool(std::string_view)> on_text;
  // Called once when the request has ended (finished, failed or cancelled), after its last
  // on_text, with its final result. Runs on the stepping thread, like on_text.
  std::function<void(const RequestResult&)> on_done;
};

enum class RequestState { waiting, running, finished, failed, cancelled };

struct RequestResult {
  RequestState state = RequestState::waiting;
  std::vector<int32_t> tokens;   // generated ids (an end-of-generation token is not included)
  std::vector<double> token_ms;  // when each of them was sampled, ms after submission (inter-token latency)
  std::string text;
  model::StopReason reason = model::StopReason::max_tokens;
  kv::PrefixInfo prefix;  // what the first admission found in the cache
  int64_t n_preemptions = 0;
  double ttft_ms = 0;          // submit -> first token, split into:
  double queue_ms = 0;         //   waiting for admission
  double lookup_ms = 0;        //   prefix lookup in the cache
  double promote_ms = 0;       //   bringing cached blocks to T0
  double prefill_ms = 0;       //   computing the uncached prompt tokens
  double first_decode_ms = 0;  //   sampling the first token
  double total_ms = 0;
  Error error;  // when failed
};

struct EngineOptions {
  int64_t token_budget = 256;        // tokens per forward pass (decodes + prefill chunks)
  int64_t max_running = 16;          // sequences admitted at once
  int64_t n_ctx = 0;                 // most positions of one sequence; 0: only T0 limits it
  kv::KvEventLog* events = nullptr;  // request phases and the cache's block events go here
  // Runs on the stepping thread after every step and every prefetch, with idle = true when
  // nothing is running: the one place where readers on other threads get a consistent look
  // at the cache (they copy what they need into a Snapshot; they may skip busy calls to save
  // time, but should not skip an idle one, the last before the engine sleeps). Must not call
  // the engine.
  std::function<void(const kv::KvCache&, bool idle)> observer;
};

struct EngineStats {
  int64_t n_steps = 0;
  int64_t n_staged_requests = 0;  // requests whose disk blocks were read off the engine thread
  int64_t n_staged_blocks = 0;
  int64_t n_preemptions = 0;
  int64_t n_tokens_prefilled = 0;
  int64_t n_tokens_decoded = 0;
  int64_t max_batch_rows = 0;
};

class Engine {
 public:
  Engine(const model::Model& m, kv::KvCache& cache, const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  RequestId submit(Request r);
  void cancel(RequestId id);
  // Brings the cached blocks of `tokens` (a conversation's stream, say when it is opened) to
  // T0 on the stepping thread, ahead of its next request; that request then reports the
  // blocks under the tier they were found on. Queued; returns at once.
  void prefetch(int64_t conversation, std::vector<int32_t> tokens);
  // A conversation was deleted: its sequence goes (unless a request of it is running) and so
  // do the cached blocks `keys` (those no other conversation reaches), from RAM and then
  // from the cold store. Queued.
  void forget_conversation(int64_t conversation, std::vector<kv::BlockKey> keys);
  // Runs the observer once more on the stepping thread, soon (say, after what it reads
  // besides the cache changed). Returns at once.
  void notify_observer();
  // Drops the stored result of an ended request (a long-running engine calls this once it
  // has read the result; results are kept until then).
  void forget(RequestId id);

  // One scheduling step; false when there was nothing to do.
  bool step();
  // Steps until every submitted request has ended; check (if set) runs after each step.
  Status run_until_idle(const std::function<Status()>& check = {});

  // Runs step() on a thread of its own until stop(); the thread sleeps when idle.
  void start();
  void stop();

  // A copy of the request's state and output so far (nullopt: unknown id).
  std::optional<RequestResult> result(RequestId id) const;
  EngineStats stats() const;
  Status check_invariants() const;

 private:
  // A read of a request's T2 blocks on a staging worker; done is set (then mu_ taken and
  // wake_ notified) when the worker no longer touches it.
  struct Staging {
    std::vector<kv::BlockKey> keys;
    std::vector<kv::ColdRead> results;
    std::vector<uint8_t> payloads;  // key i's block at [offsets[i], offsets[i + 1])
    std::vector<size_t> offsets;    // keys.size() + 1 (KV groups' blocks differ in size)
    std::atomic<bool> done{false};
    std::chrono::steady_clock::time_point started;
  };

  struct Active {
    RequestId id = 0;
    Request request;
    kv::SeqId seq = 0;
    std::vector<int32_t> tokens;  // prompt + generated: what the sequence must hold
    int64_t n_in_kv = 0;          // positions of `tokens` whose KV is in the sequence
    bool admitted = false;
    std::unique_ptr<sampling::Sampler> sampler;
    std::unique_ptr<model::OutputText> text;
    std::chrono::steady_clock::time_point submitted;
    std::chrono::steady_clock::time_point prefilled;  // when the prompt's last token was in
    std::unique_ptr<Staging> staging;                 // while its disk blocks are read
    bool staged = false;                              // staging was considered once (done or not needed)
    bool announced = false;                           // start_staging emitted request_started and lookup_done
    double staged_ms = 0;
    RequestResult result;
  };

  // One row group of a step's forward pass: a request's next n tokens.
  struct Entry {
    Active* a;
    int64_t n;
  };

  void take_inbox();
  struct Forget;
  void apply_forgets(std::vector<Forget>& forgets);
  // Admits waiting requests and builds the batch (reserving T0, preempting when short);
  // nullopt when nothing is running, empty when this step's preemptions or failures left no row.
  // Nothing when no request runs; `admissible`: some waiting request is not held back behind
  // an earlier one of its conversation.
  std::optional<std::vector<Entry>> schedule(bool& admissible);
  // The forward pass over the batch: the logits of each entry's last row.
  std::span<const float> run(std::span<const Entry> batch, std::vector<model::SeqInput>& inputs);
  // Commits the batch's KV, samples where a prompt or a decode step is complete, applies the
  // stop rules and ends the requests that stopped.
  void sample_and_stop(std::span<const Entry> batch, std::span<const model::SeqInput> inputs,
                       std::span<const float> logits);
  // Waits until a staging read no longer touches its Staging.
  void wait_staged(Staging& st);
  // Starts staging `a` if it is worth it (others are running, its history is on disk).
  bool start_staging(Active& a);
  // Requests whose read finished go back to the front of the queue; true if any did.
  bool collect_staged();
  void observe(bool idle) const;
  Status admit(Active& a);
  void preempt(Active& a);
  // Ends `a`: its text flushed, its sequence parked (or freed), its result published; then
  // its on_done runs, unless `deliver` is false (the caller runs it later).
  void finish(Active& a, RequestState state, model::StopReason reason, bool deliver = true);
  void publish(const Active& a);
  kv::SeqId sequence_for(int64_t conversation);
  void emit(const Active& a, kv::KvEventType type, int64_t n_tokens = 0, int64_t t_us = 0);

  const model::Model& m_;
  kv::KvCache& cache_;
  EngineOptions options_;
  model::Forward forward_;

  mutable std::mutex mu_;  // guards inbox_, cancels_, results_, stats_
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Active>> inbox_;
  std::vector<RequestId> cancels_;
  std::map<RequestId, RequestResult> results_;
  EngineStats stats_;
  RequestId next_id_ = 1;

  struct Prefetch {
    int64_t conversation = 0;
    std::vector<int32_t> tokens;
  };
  std::vector<Prefetch> prefetches_;  // guarded by mu_
  struct Forget {
    int64_t conversation = 0;
    std::vector<kv::BlockKey> keys;
  };
  std::vector<Forget> forgets_;     // guarded by mu_
  bool observe_requested_ = false;  // guarded by mu_
  bool staged_ready_ = false;       // guarded by mu_: a staging read finished

  // Engine-thread state.
  std::deque<std::unique_ptr<Active>> waiting_;    // not admitted (new, or preempted)
  std::vector<std::unique_ptr<Active>> staging_;   // reading their disk blocks
  std::vector<std::unique_ptr<Active>> running_;   // admitted, in admission order
  std::map<int64_t, kv::SeqId> conversations_;     // conversation -> its sequence
  std::vector<std::span<uint8_t* const>> tables_;  // run(): each entry's block table per KV group

  std::thread thread_;
  bool stopping_ = false;

  // Staging reads; declared last, so destroyed (its tasks run, its threads joined) first.
  static constexpr size_t k_staging_threads = 2;
  WorkerPool staging_pool_{k_staging_threads};
};

}  // namespace kvc::engine
