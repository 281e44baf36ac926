// The controller's answering() (the window paces its frames from a send on) and its ignore_eos
// option (bench/app-vs-cli.sh: answers of a known length), on the real store.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "app/gui/chat_controller.h"
#include "core/sampling/generate_options.h"
#include "support/controller_support.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

constexpr int64_t k_max_tokens = 2000;

// The reply to "Once upon a time" of at most k_max_tokens tokens, sampled near-uniformly with a
// fixed seed from a tiny random model of stories260K's vocabulary (stories260K itself never
// samples its end of text; this one does, every few hundred tokens), and whether answering()
// held from the send until the turn ended.
struct Answer {
  ui::TurnStats stats;
  bool answering_at_send = false;
  bool answering_after = true;
};

Answer answer(const test::TempDir& tmp, const std::string& model, const std::string& dir, bool ignore_eos) {
  app::ChatController::Options opt;
  opt.data_dir = tmp.file(dir);
  opt.model_path = model;
  opt.n_threads = 1;
  opt.n_ctx = 4096;
  opt.ignore_eos = ignore_eos;
  app::ChatController c(opt);
  test::settle(c);
  CHECK_FALSE(c.answering());
  sampling::GenerateOptions g;
  g.max_tokens = k_max_tokens;
  g.sampling.temperature = 3;
  g.sampling.top_k = 0;
  g.sampling.top_p = 1;
  g.sampling.min_p = 0;
  g.sampling.seed = 2;
  c.update_settings("", g);
  test::settle(c);
  Answer a;
  c.send("Once upon a time");
  a.answering_at_send = c.answering();  // before the worker has run anything of the turn
  test::settle(c);
  a.answering_after = c.answering();
  auto s = c.snapshot();
  INFO(s->error);
  REQUIRE(s->error.empty());
  REQUIRE(!s->chat.messages.empty());
  a.stats = s->chat.messages.back().stats;
  REQUIRE(a.stats.valid);
  return a;
}

}  // namespace

TEST_CASE("chat controller: answering() holds from send() to the turn's end, and ignore_eos answers run to max tokens",
          "[app]") {
  test::TempDir tmp;
  const std::string model = tmp.file("tiny.gguf");
  auto made = test::cli("mkmodel --dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn 64 --type f16 -q --vocab-from " +
                            test::quoted(test::model_path("stories260K.gguf")) + " -o " + test::quoted(model),
                        tmp);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const Answer plain = answer(tmp, model, "plain", false);
  CHECK(plain.answering_at_send);
  CHECK_FALSE(plain.answering_after);
  // The premise: this answer ends at its end of text before k_max_tokens.
  REQUIRE(plain.stats.stop_reason == "end of generation");
  REQUIRE(plain.stats.n_tokens < k_max_tokens);

  const Answer past = answer(tmp, model, "past-eos", true);
  CHECK(past.answering_at_send);
  CHECK_FALSE(past.answering_after);
  CHECK(past.stats.stop_reason == "max tokens");
  CHECK(past.stats.n_tokens == k_max_tokens);
}

TEST_CASE("chat controller: a send made while a frame holds commands starts only once the frame releases them",
          "[app]") {
  test::TempDir tmp;
  app::ChatController::Options opt;
  opt.data_dir = tmp.file("data");
  opt.model_path = test::model_path("stories260K.gguf");
  opt.n_threads = 1;
  app::ChatController c(opt);
  test::settle(c);
  sampling::GenerateOptions g;
  g.max_tokens = 8;
  c.update_settings("", g);
  test::settle(c);
  c.hold_commands();
  c.send("Once upon a time");
  CHECK(c.busy());  // the window keeps pacing as for a turn: it is asked for
  CHECK(c.answering());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // far longer than the worker needs to start it
  CHECK(c.snapshot()->chat.messages.empty());                   // nothing of the turn ran while held
  c.release_commands();
  test::settle(c);
  const auto s = c.snapshot();
  INFO(s->error);
  REQUIRE(s->error.empty());
  REQUIRE(s->chat.messages.size() == 2);  // the question and its answer
  CHECK(s->chat.messages.back().stats.n_tokens == 8);
  CHECK_FALSE(c.answering());
}
