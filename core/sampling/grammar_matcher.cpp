// GrammarMatcher: stack expansion, byte steps, and the token mask from a walk of the sorted
// vocabulary that shares the work of common prefixes, cached per matcher state.
#include "core/sampling/grammar_matcher.h"

#include <algorithm>
#include <limits>

#include "core/util/assert.h"

namespace kvc::sampling {

TokenVocabulary::TokenVocabulary(std::vector<std::string> bytes, std::vector<TokenKind> kinds)
    : bytes_(std::move(bytes)), kinds_(std::move(kinds)) {
  KVC_ASSERT(bytes_.size() == kinds_.size());
  for (size_t i = 0; i < bytes_.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    switch (kinds_[i]) {
      case TokenKind::text:
        if (!bytes_[i].empty()) sorted_.push_back(id);
        break;
      case TokenKind::special: specials_.push_back(id); break;
      case TokenKind::end_of_generation: end_tokens_.push_back(id); break;
    }
  }
  std::sort(sorted_.begin(), sorted_.end(),
            [this](int32_t a, int32_t b) { return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)]; });
  lcp_.assign(sorted_.size(), 0);
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const std::string& cur = bytes_[static_cast<size_t>(sorted_[i])];
    max_len_ = std::max(max_len_, cur.size());
    if (i == 0) continue;
    const std::string& prev = bytes_[static_cast<size_t>(sorted_[i - 1])];
    size_t n = 0;
    while (n < cur.size() && n < prev.size() && cur[n] == prev[n]) ++n;
    lcp_[i] = static_cast<uint32_t>(n);
  }
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : g_(std::move(grammar)), vocab_(std::move(vocab)) {
  KVC_ASSERT(g_ && vocab_ && g_->validate().ok());
  for (const uint32_t start : g_->alternatives(g_->root())) {
    std::vector<uint32_t> stack{start};
    expand(stack, state_);
  }
  normalize(state_);
}

// Moves `stack` down to positions whose top is a byte set or a special token (or to empty, the
// end of the root), one stack per path through the alternatives, into out.
void GrammarMatcher::expand(std::vector<uint32_t>& stack, GrammarState& out) const {
  for (;;) {
    if (stack.empty()) {
      out.stacks.push_back(stack);
      return;
    }
    if (stack.size() > k_max_depth) return;
    const uint32_t p = stack.back();
    const Grammar::Element& e = g_->at(p);
    if (e.kind == Grammar::Kind::end) {
      stack.pop_back();
      continue;
    }
    if (e.kind != Grammar::Kind::ref) {
      out.stacks.push_back(stack);
      return;
    }
    // A reference: continue after it once the rule is done (nothing to come back to when it
    // is the last element, so repetition does not grow the stack), and enter each alternative.
    stack.pop_back();
    if (g_->at(p + 1).kind != Grammar::Kind::end) stack.push_back(p + 1);
    const std::vector<uint32_t>& alts = g_->alternatives(e.value);
    for (size_t a = 0; a + 1 < alts.size(); ++a) {
      std::vector<uint32_t> copy = stack;
      copy.push_back(alts[a]);
      expand(copy, out);
    }
    stack.push_back(alts.back());
  }
}

void GrammarMatcher::normalize(GrammarState& s) const {
  std::sort(s.stacks.begin(), s.stacks.end());
  s.stacks.erase(std::unique(s.stacks.begin(), s.stacks.end()), s.stacks.end());
}

void GrammarMatcher::advance(const GrammarState& in, uint8_t byte, GrammarState& out) const {
  out.stacks.clear();
  for (const std::vector<uint32_t>& stack : in.stacks) {
    if (stack.empty()) continue;
    const Grammar::Element& e = g_->at(stack.back());
    if (e.kind != Grammar::Kind::set || !g_->byte_set(e.value).has(byte)) continue;
    std::vector<uint32_t> next = stack;
    next.back() += 1;
    expand(next, out);
  }
  if (out.stacks.size() > 1) normalize(out);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  GrammarState cur = state_, next;
  for (const char c : bytes) {
    advance(cur, static_cast<uint8_t>(c), next);
    if (next.stacks.empty()) return false;
    std::swap(cur, next);
  }
  state_ = std::move(cur);
  current_ = nullptr;
  return true;
}

bool GrammarMatcher::advance_token(int32_t id, GrammarState& out) const {
  if (id < 0 || id >= vocab_->n_vocab()) return false;
  switch (vocab_->kind(id)) {
    case TokenKind::text: {
      const std::string_view bytes = vocab_->bytes(id);
      if (bytes.empty()) return false;
      GrammarState cur = state_;
      for (const char c : bytes) {
        advance(cur, static_cast<uint8_t>(c), out);
        if (out.stacks.empty()) return false;
        std::swap(cur, out);
      }
      out = std::move(cur);
      return true;
    }
    case TokenKind::end_of_generation: out = state_; return is_complete();
    case TokenKind::special:
      out.stacks.clear();
      for (const std::vector<uint32_t>& stack : state_.stacks) {
        if (stack.empty()) continue;
        const Grammar::Element& e = g_->at(stack.back());
        if (e.kind != Grammar::Kind::special || static_cast<int32_t>(e.value) != id) continue;
        std::vector<uint32_t> s = stack;
        s.back() += 1;
        expand(s, out);
      }
      normalize(out);
      return !out.stacks.empty();
  }
  return false;
}

bool GrammarMatcher::accept_token(int32_t id) {
  GrammarState next;
  if (!advance_token(id, next)) return false;
  if (next == state_) return true;  // an end token, or a loop back to the same state: the mask stays
  state_ = std::move(next);
  current_ = nullptr;
  return true;
}

bool GrammarMatcher::can_accept_token(int32_t id) const {
  if (id < 0 || id >= vocab_->n_vocab()) return false;
  if (current_) return ((*current_)[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u;
  GrammarState next;
  return advance_token(id, next);
}

bool GrammarMatcher::is_complete() const { return !state_.stacks.empty() && state_.stacks.front().empty(); }

bool GrammarMatcher::is_finished() const { return state_.stacks.size() == 1 && state_.stacks.front().empty(); }

namespace {

std::string key_of(const GrammarState& s) {
  std::string key;
  for (const std::vector<uint32_t>& stack : s.stacks) {
    for (const uint32_t p : stack) key.append(reinterpret_cast<const char*>(&p), sizeof p);
    key.append(4, '\xff');  // no position is 0xffffffff
  }
  return key;
}

}  // namespace

int32_t GrammarMatcher::intern(const GrammarState& s) {
  std::string key = key_of(s);
  if (const auto it = ids_.find(key); it != ids_.end()) return it->second;
  const auto id = static_cast<int32_t>(states_.size());
  states_.push_back(s);
  next_.emplace_back().fill(k_unknown);
  masks_.emplace_back();
  ids_.emplace(std::move(key), id);
  return id;
}

int32_t GrammarMatcher::step(int32_t state, uint8_t byte) {
  int32_t t = next_[static_cast<size_t>(state)][byte];
  if (t != k_unknown) return t;
  advance(states_[static_cast<size_t>(state)], byte, scratch_);
  t = scratch_.stacks.empty() ? k_dead : intern(scratch_);
  next_[static_cast<size_t>(state)][byte] = t;
  return t;
}

const std::vector<uint64_t>& GrammarMatcher::allowed() {
  if (current_) return *current_;
  if (states_.size() >= k_max_states) {  // a bound on memory: start the tables afresh
    states_.clear();
    ids_.clear();
    next_.clear();
    masks_.clear();
  }
  const int32_t id = intern(state_);
  if (masks_[static_cast<size_t>(id)].empty()) {
    std::vector<uint64_t> mask;
    compute_mask(id, mask);
    masks_[static_cast<size_t>(id)] = std::move(mask);  // compute_mask may have grown masks_
    ++n_masks_;
  }
  current_ = &masks_[static_cast<size_t>(id)];
  return *current_;
}

void GrammarMatcher::compute_mask(int32_t root, std::vector<uint64_t>& mask) {
  const TokenVocabulary& v = *vocab_;
  mask.assign((static_cast<size_t>(v.n_vocab()) + 63) / 64, 0);
  const auto set_bit = [&mask](int32_t id) { mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); };
  levels_.assign(v.max_len_ + 1, k_dead);
  levels_[0] = root;
  // levels_[d]: the state after the first d bytes of the token at i; valid up to `valid`.
  size_t valid = 0;
  for (size_t i = 0; i < v.sorted_.size();) {
    const int32_t id = v.sorted_[i];
    const std::string& bytes = v.bytes_[static_cast<size_t>(id)];
    size_t d = std::min<size_t>(v.lcp_[i], valid);
    bool ok = true;
    for (; d < bytes.size(); ++d) {
      levels_[d + 1] = step(levels_[d], static_cast<uint8_t>(bytes[d]));
      if (levels_[d + 1] == k_dead) {
        ok = false;
        break;
      }
    }
    if (ok) {
      set_bit(id);
      valid = bytes.size();
      ++i;
      continue;
    }
    // Its first d + 1 bytes fail: so does every following token that starts with them.
    valid = d;
    for (++i; i < v.sorted_.size() && v.lcp_[i] > d; ++i) {}
  }
  const GrammarState& st = states_[static_cast<size_t>(root)];
  for (const int32_t id : v.specials_) {
    for (const std::vector<uint32_t>& stack : st.stacks) {
      if (stack.empty()) continue;
      const Grammar::Element& e = g_->at(stack.back());
      if (e.kind == Grammar::Kind::special && static_cast<int32_t>(e.value) == id) set_bit(id);
    }
  }
  if (!st.stacks.empty() && st.stacks.front().empty()) {
    for (const int32_t id : v.end_tokens_) set_bit(id);
  }
}

bool GrammarMatcher::mask_logits(std::span<float> logits) {
  const std::vector<uint64_t>& mask = allowed();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), static_cast<size_t>(vocab_->n_vocab()));
  bool any = false;
  for (size_t w = 0; w < mask.size() && !any; ++w) any = mask[w] != 0;
  if (!any) return false;
  for (size_t i = 0; i < n; ++i) {
    if (!((mask[i >> 6] >> (i & 63)) & 1u)) logits[i] = neg_inf;
  }
  for (size_t i = n; i < logits.size(); ++i) logits[i] = neg_inf;  // padding rows past the vocabulary
  return true;
}

}  // namespace kvc::sampling
