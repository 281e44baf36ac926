// Grammar: building rules, bounded and unbounded repetition, and the invariant checks.
#include "core/sampling/grammar.h"

#include <cstdio>
#include <functional>

#include "core/util/assert.h"

namespace kvc::sampling {

ByteSet ByteSet::range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.add(lo, hi);
  return s;
}

ByteSet& ByteSet::add(uint8_t lo, uint8_t hi) {
  for (unsigned b = lo; b <= hi; ++b) bits[b >> 6] |= uint64_t{1} << (b & 63);
  return *this;
}

ByteSet& ByteSet::add(const ByteSet& o) {
  for (size_t i = 0; i < bits.size(); ++i) bits[i] |= o.bits[i];
  return *this;
}

ByteSet ByteSet::complement() const {
  ByteSet s;
  for (size_t i = 0; i < bits.size(); ++i) s.bits[i] = ~bits[i];
  return s;
}

Grammar::RuleId Grammar::add_rule(std::string name) {
  rules_.emplace_back();
  names_.push_back(std::move(name));
  return static_cast<RuleId>(rules_.size() - 1);
}

void Grammar::add_alternative(RuleId rule, const Seq& seq) {
  KVC_ASSERT(rule < rules_.size());
  rules_[rule].push_back(static_cast<uint32_t>(elements_.size()));
  for (const Element& e : seq) {
    KVC_ASSERT(e.kind != Kind::end);
    elements_.push_back(e);
  }
  elements_.push_back(Element{Kind::end, 0});
}

Grammar::RuleId Grammar::add_rule(std::string name, const std::vector<Seq>& alternatives) {
  const RuleId r = add_rule(std::move(name));
  for (const Seq& s : alternatives) add_alternative(r, s);
  return r;
}

Grammar::Element Grammar::set(const ByteSet& s) {
  for (size_t i = 0; i < sets_.size(); ++i) {
    if (sets_[i] == s) return Element{Kind::set, static_cast<uint32_t>(i)};
  }
  sets_.push_back(s);
  return Element{Kind::set, static_cast<uint32_t>(sets_.size() - 1)};
}

void Grammar::append_literal(Seq& seq, std::string_view text) {
  for (const char c : text) seq.push_back(set(ByteSet::of(static_cast<uint8_t>(c))));
}

Grammar::RuleId Grammar::repeat(const Seq& item, int min, int max) {
  KVC_ASSERT(min >= 0 && (max < 0 || max >= min));
  Seq head;
  for (int i = 0; i < min; ++i) head.insert(head.end(), item.begin(), item.end());
  if (max < 0) {
    const RuleId star = add_rule("star");
    Seq more = item;
    more.push_back(ref(star));
    add_alternative(star, more);
    add_alternative(star, {});
    head.push_back(ref(star));
  } else if (max > min) {
    // opt_k ::= item opt_{k-1} | "" : up to k more items.
    RuleId opt = add_rule("opt", {Seq{}});
    for (int k = 1; k < max - min; ++k) {
      Seq more = item;
      more.push_back(ref(opt));
      opt = add_rule("opt", {more, Seq{}});
    }
    Seq last = item;
    last.push_back(ref(opt));
    head.push_back(ref(add_rule("opt", {last, Seq{}})));
  }
  return add_rule("repeat", {head});
}

Status Grammar::validate() const {
  const auto invalid = [](const std::string& m) { return make_error(ErrorCode::invalid_argument, "grammar: " + m); };
  if (root_ >= rules_.size()) return invalid("the root rule does not exist");
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (rules_[r].empty()) return invalid("rule " + names_[r] + " has no alternatives");
  }
  for (const Element& e : elements_) {
    if (e.kind == Kind::ref && e.value >= rules_.size()) return invalid("a reference names a missing rule");
    if (e.kind == Kind::set && e.value >= sets_.size()) return invalid("a byte class is missing");
  }
  // Nullable rules (they can match nothing), to a fixpoint.
  std::vector<char> nullable(rules_.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (nullable[r]) continue;
      for (const uint32_t start : rules_[r]) {
        uint32_t p = start;
        while (elements_[p].kind == Kind::ref && nullable[elements_[p].value]) ++p;
        if (elements_[p].kind == Kind::end) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  // Left recursion: a cycle among the refs reachable before the first byte is consumed.
  std::vector<char> color(rules_.size(), 0);  // 0 new, 1 on the path, 2 done
  std::function<bool(size_t)> cyclic = [&](size_t r) {
    color[r] = 1;
    for (const uint32_t start : rules_[r]) {
      for (uint32_t p = start; elements_[p].kind == Kind::ref; ++p) {
        const uint32_t s = elements_[p].value;
        if (color[s] == 1 || (color[s] == 0 && cyclic(s))) return true;
        if (!nullable[s]) break;
      }
    }
    color[r] = 2;
    return false;
  };
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (color[r] == 0 && cyclic(r)) return invalid("rule " + names_[r] + " is left-recursive");
  }
  return {};
}

std::string Grammar::to_string() const {
  std::string out;
  char buf[16];
  for (size_t r = 0; r < rules_.size(); ++r) {
    out += names_[r] + "#" + std::to_string(r) + " ::=";
    for (size_t a = 0; a < rules_[r].size(); ++a) {
      if (a > 0) out += " |";
      for (uint32_t p = rules_[r][a]; elements_[p].kind != Kind::end; ++p) {
        const Element& e = elements_[p];
        if (e.kind == Kind::ref) {
          out += " " + names_[e.value] + "#" + std::to_string(e.value);
        } else if (e.kind == Kind::special) {
          out += " <special " + std::to_string(e.value) + ">";
        } else {
          out += " [";
          for (unsigned b = 0; b < 256; ++b) {
            if (!sets_[e.value].has(static_cast<uint8_t>(b))) continue;
            if (b > 32 && b < 127 && b != ']' && b != '\\') {
              out += static_cast<char>(b);
            } else {
              std::snprintf(buf, sizeof buf, "\\x%02x", b);
              out += buf;
            }
          }
          out += "]";
        }
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace kvc::sampling
