// The context overflow policy: a cut by whole messages, with hysteresis, replayable from the history.
#include "core/chat/context_window.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/util/assert.h"

namespace kvc::chat {

namespace {

// Window sizes over one input: suffix sums of the stored tokens and the heads, computed once each.
class Sizes {
 public:
  explicit Sizes(const WindowInput& in) : in_(in), sum_(in.n_tokens.size() + 1, 0), heads_(in.n_tokens.size()) {
    for (size_t i = 0; i < in.n_tokens.size(); ++i) sum_[i + 1] = sum_[i] + in.n_tokens[i];
  }

  // Tokens of the window [first, last] (first re-rendered as the head).
  Result<int64_t> window(size_t first, size_t last) {
    if (first == 0) return sum_[last + 1];
    if (!heads_[first]) {
      auto h = in_.n_head_tokens(first);
      if (!h.ok()) return h.error();
      heads_[first] = *h;
    }
    return *heads_[first] + sum_[last + 1] - sum_[first + 1];
  }

 private:
  const WindowInput& in_;
  std::vector<int64_t> sum_;  // sum_[i]: tokens of messages [0, i)
  std::vector<std::optional<int64_t>> heads_;
};

Result<WindowPlan> plan_upto(const WindowPolicy& p, const WindowInput& in, Sizes& sizes, size_t last, size_t first) {
  if (first > last || !in.can_begin[first]) first = 0;
  auto now = sizes.window(first, last);
  if (!now.ok()) return now.error();
  const int64_t room = p.n_ctx - p.n_reserve;  // for the prompt
  if (*now <= room) return WindowPlan{first, *now, false};

  const auto target = static_cast<int64_t>(static_cast<double>(room) * p.refill);
  const auto min_drop = static_cast<int64_t>(static_cast<double>(p.n_ctx) * p.min_drop);
  std::optional<WindowPlan> last_fit;  // the newest cut that fits at all: the most dropped
  for (size_t k = first + 1; k <= last; ++k) {
    if (!in.can_begin[k]) continue;
    auto w = sizes.window(k, last);
    if (!w.ok()) return w.error();
    if (*w <= target && *now - *w >= min_drop) return WindowPlan{k, *w, true};
    if (*w < p.n_ctx) last_fit = WindowPlan{k, *w, true};
  }
  // No cut reaches the target (the newest messages alone are long): keep as few as fit, with
  // less room for the answer if need be.
  if (last_fit) return *last_fit;
  if (*now < p.n_ctx) return WindowPlan{first, *now, false};
  auto alone = sizes.window(last, last);
  if (!alone.ok()) return alone.error();
  return make_error(ErrorCode::invalid_argument, "this message takes " + std::to_string(*alone) +
                                                     " tokens with the system prompt, more than the context of " +
                                                     std::to_string(p.n_ctx) +
                                                     " tokens: shorten it, or raise the context size");
}

}  // namespace

int64_t answer_reserve(int64_t n_ctx, int64_t max_tokens) {
  const int64_t quarter = n_ctx / 4;
  return max_tokens > 0 ? std::min(max_tokens, quarter) : quarter;
}

Result<WindowPlan> plan_window(const WindowPolicy& policy, const WindowInput& input, size_t first) {
  KVC_ASSERT(input.n_tokens.size() == input.can_begin.size());
  KVC_ASSERT(policy.n_ctx > 0 && policy.n_reserve >= 0 && policy.n_reserve < policy.n_ctx);
  if (input.n_tokens.empty()) return make_error(ErrorCode::invalid_argument, "there is no message to answer");
  Sizes sizes(input);
  return plan_upto(policy, input, sizes, input.n_tokens.size() - 1, first);
}

Result<WindowPlan> replay_window(const WindowPolicy& policy, const WindowInput& input) {
  KVC_ASSERT(input.n_tokens.size() == input.can_begin.size());
  KVC_ASSERT(policy.n_ctx > 0 && policy.n_reserve >= 0 && policy.n_reserve < policy.n_ctx);
  if (input.n_tokens.empty()) return make_error(ErrorCode::invalid_argument, "there is no message to answer");
  Sizes sizes(input);
  const size_t last = input.n_tokens.size() - 1;
  size_t first = 0;
  for (size_t j = 0; j < last; ++j) {
    if (!input.can_begin[j]) continue;  // a turn answers each user message
    auto turn = plan_upto(policy, input, sizes, j, first);
    if (turn.ok()) {
      first = turn->first;
    } else if (turn.error().code == ErrorCode::invalid_argument) {
      first = j;
    } else {
      return turn.error();
    }
  }
  return plan_upto(policy, input, sizes, last, first);
}

std::string outside_context_note(int64_t n_messages) {
  if (n_messages <= 0) return "";
  return n_messages == 1 ? "1 earlier message is outside the model's context"
                         : std::to_string(n_messages) + " earlier messages are outside the model's context";
}

}  // namespace kvc::chat
