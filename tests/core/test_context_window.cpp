// The context overflow policy on token counts: cuts by whole turns with hysteresis, replay, and the recompute it
// implies.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "core/chat/context_window.h"

using namespace kvc;

namespace {

struct Input {
  std::vector<int64_t> n_tokens;
  std::unique_ptr<bool[]> can_begin;
  int64_t n_system = 40;
  int n_head_calls = 0;

  chat::WindowInput get() {
    chat::WindowInput in;
    in.n_tokens = n_tokens;
    in.can_begin = std::span<const bool>(can_begin.get(), n_tokens.size());
    in.n_head_tokens = [this](size_t i) -> Result<int64_t> {
      ++n_head_calls;
      return n_system + n_tokens[i];
    };
    return in;
  }
};

// Messages [user, answer] * n_turns then the last user message; the first holds the system prompt.
Input make_input(const std::vector<int64_t>& users, const std::vector<int64_t>& answers, int64_t n_system = 40) {
  Input in;
  in.n_system = n_system;
  for (size_t t = 0; t < users.size(); ++t) {
    in.n_tokens.push_back(users[t] + (t == 0 ? n_system : 0));
    if (t < answers.size()) in.n_tokens.push_back(answers[t]);
  }
  in.can_begin.reset(new bool[in.n_tokens.size()]);
  for (size_t i = 0; i < in.n_tokens.size(); ++i) in.can_begin[i] = i % 2 == 0;
  return in;
}

int64_t sum(const std::vector<int64_t>& v, size_t from) {
  int64_t s = 0;
  for (size_t i = from; i < v.size(); ++i) s += v[i];
  return s;
}

}  // namespace

TEST_CASE("context window: a conversation that fits keeps every message", "[core]") {
  Input in = make_input({10, 12, 8}, {30, 30});
  chat::WindowPolicy p{512, 128};
  auto plan = chat::plan_window(p, in.get(), 0);
  REQUIRE(plan.ok());
  CHECK(plan->first == 0);
  CHECK(plan->n_prompt == sum(in.n_tokens, 0));
  CHECK_FALSE(plan->moved);
  CHECK(in.n_head_calls == 0);
}

TEST_CASE("context window: an overflow drops whole turns, at least a quarter of the context, to half the room",
          "[core]") {
  std::vector<int64_t> users(12, 20), answers(11, 30);
  Input in = make_input(users, answers);
  const int64_t total = sum(in.n_tokens, 0);  // 40 + 12*20 + 11*30 = 610
  REQUIRE(total > 512 - 128);
  chat::WindowPolicy p{512, 128};
  auto plan = chat::plan_window(p, in.get(), 0);
  REQUIRE(plan.ok());
  CHECK(plan->moved);
  CHECK(plan->first % 2 == 0);  // a user message begins the window
  CHECK(plan->n_prompt == in.n_system + sum(in.n_tokens, plan->first) - (plan->first == 0 ? in.n_system : 0));
  CHECK(plan->n_prompt <= (512 - 128) / 2);
  CHECK(total - plan->n_prompt >= 512 / 4);
  // The smallest such cut: one turn later would also do, one earlier would not.
  const size_t before = plan->first - 2;
  CHECK((before == 0 ? total : in.n_system + sum(in.n_tokens, before)) > (512 - 128) / 2);

  SECTION("the cut stays where it is while the window fits") {
    const size_t cut = plan->first;
    in.n_tokens.push_back(30);  // the answer, then another question
    in.n_tokens.push_back(20);
    in.can_begin.reset(new bool[in.n_tokens.size()]);
    for (size_t i = 0; i < in.n_tokens.size(); ++i) in.can_begin[i] = i % 2 == 0;
    auto next = chat::plan_window(p, in.get(), cut);
    REQUIRE(next.ok());
    CHECK(next->first == cut);
    CHECK_FALSE(next->moved);
  }
}

TEST_CASE("context window: a message too long for the context alone is an error that says so", "[core]") {
  Input in = make_input({10, 600}, {30});
  chat::WindowPolicy p{512, 128};
  auto plan = chat::plan_window(p, in.get(), 0);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().code == ErrorCode::invalid_argument);
  CHECK_THAT(plan.error().message, Catch::Contains("640 tokens") && Catch::Contains("context of 512"));

  SECTION("one that fits only without the answer's full room still runs") {
    Input in2 = make_input({10, 400}, {30});
    auto plan2 = chat::plan_window(p, in2.get(), 0);
    REQUIRE(plan2.ok());
    CHECK(plan2->first == 2);
    CHECK(plan2->n_prompt == 440);
  }
}

TEST_CASE("context window: replaying the history gives the cut the turns left, and 60 turns recompute < 2x new",
          "[core]") {
  const chat::WindowPolicy p{512, chat::answer_reserve(512, 48)};
  CHECK(p.n_reserve == 48);
  CHECK(chat::answer_reserve(512, -1) == 128);
  CHECK(chat::answer_reserve(512, 1000) == 128);
  std::vector<int64_t> users, answers;
  size_t cut = 0;
  int64_t n_recomputed = 0, n_new = 0, n_cuts = 0;
  int64_t previous_end = 0;  // tokens of the previous window plus its answer
  for (int turn = 0; turn < 60; ++turn) {
    users.push_back(10 + (turn * 7) % 15);
    Input in = make_input(users, answers);
    auto plan = chat::plan_window(p, in.get(), cut);
    REQUIRE(plan.ok());
    auto replayed = chat::replay_window(p, in.get());
    REQUIRE(replayed.ok());
    CHECK(replayed->first == plan->first);
    CHECK(plan->n_prompt + p.n_reserve <= p.n_ctx);
    if (plan->moved) {
      ++n_cuts;
      CHECK(plan->first > cut);
      n_recomputed += plan->n_prompt - in.n_system - users.back();  // all but the system prompt and the new message
    } else {
      CHECK(plan->first == cut);
      if (turn > 0) CHECK(plan->n_prompt == previous_end + users.back());
    }
    cut = plan->first;
    answers.push_back(40 + (turn * 5) % 17);
    n_new += users.back() + answers.back();
    previous_end = plan->n_prompt + answers.back();
  }
  CHECK(n_cuts >= 3);
  CHECK(n_recomputed <= 2 * n_new);
  CHECK(static_cast<double>(n_recomputed) / static_cast<double>(n_new) < 1.0);  // refill 1/2: under 1x
  CHECK(chat::outside_context_note(12) == "12 earlier messages are outside the model's context");
  CHECK(chat::outside_context_note(1) == "1 earlier message is outside the model's context");
  CHECK(chat::outside_context_note(0).empty());
}
