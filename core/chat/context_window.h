// The context overflow policy: which whole messages of a conversation the model sees when it no longer fits.
//
// A conversation is a list of messages (their stored tokens); the prompt of a turn is a window
// of it, always holding the system prompt and the newest messages:
//
//   stored:  [sys u0] a0 [u1] a1 [u2] a2 ... [u_n]          (u_n: the message being answered)
//   window:  [sys u_k] a_k [u_k+1] ... [u_n] + room for the answer
//            ^ u_k re-rendered as the first turn after the system prompt (head(k))
//
// When the window would not fit, the cut k moves forward by whole turns, with hysteresis: it
// drops at least min_drop of the context and refills the window to at most `refill` of the
// room left for prompts, then stays where it is until the next overflow. Between cuts each
// turn's prompt extends the previous one, so the KV prefix cache serves all but the new tokens;
// at a cut the window is computed once, except the system prompt's blocks (a common prefix of
// every window). The mean recompute per turn is then at most about (kept / dropped) times the
// new tokens per turn, under 1x with refill 1/2. Nothing is removed from storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "core/util/result.h"

namespace kvc::chat {

struct WindowPolicy {
  int64_t n_ctx = 0;       // positions of the model's context
  int64_t n_reserve = 0;   // kept free for the answer (answer_reserve)
  double refill = 0.5;     // after a cut the prompt fills at most this part of n_ctx - n_reserve
  double min_drop = 0.25;  // a cut drops at least this part of n_ctx
};

// Room kept for the answer: max_tokens (<= 0: unbounded), at most a quarter of the context.
// A longer answer still runs, to the end of the context.
int64_t answer_reserve(int64_t n_ctx, int64_t max_tokens);

// The messages of a conversation, oldest first; the last is the user message being answered.
struct WindowInput {
  std::span<const int64_t> n_tokens;  // each message's stored tokens
  std::span<const bool> can_begin;    // may the window begin here (a user message)
  // Tokens of message i when it begins the window: the system prompt and message i rendered
  // as a first turn (for i = 0 the stored tokens). An error (the template refused) ends planning.
  std::function<Result<int64_t>(size_t i)> n_head_tokens;
};

struct WindowPlan {
  size_t first = 0;      // the window's first message; the ones before are outside the context
  int64_t n_prompt = 0;  // tokens of the window
  bool moved = false;    // this turn moved the cut (an overflow)
};

// The window for the turn answering input's last message, given the cut `first` where the
// previous turn left it (0: none). Errors: the last message, with the system prompt, does not
// fit the context on its own (invalid_argument, saying so); the head renderer's error.
Result<WindowPlan> plan_window(const WindowPolicy& policy, const WindowInput& input, size_t first);

// The cut as the policy leaves it after every turn of the conversation in order (each user
// message answered in turn, from no cut): for a caller that keeps no cut of its own (the
// server, whose clients resend the history), or whose stored cut is not on this branch. A turn
// whose message alone did not fit leaves the cut at that message.
Result<WindowPlan> replay_window(const WindowPolicy& policy, const WindowInput& input);

// What the chat shows where the model's view begins: "12 earlier messages are outside the
// model's context" (empty for none). One text for the app, the CLI and the server.
std::string outside_context_note(int64_t n_messages);

}  // namespace kvc::chat
