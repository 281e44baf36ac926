// Grammar: a small context-free grammar over bytes (rules of alternatives of sequences of byte
// classes, rule references and special tokens) that GrammarMatcher runs against token bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace kvc::sampling {

// A set of byte values (a character class of the byte-level grammar).
struct ByteSet {
  std::array<uint64_t, 4> bits{};

  static ByteSet of(uint8_t b) { return range(b, b); }
  static ByteSet range(uint8_t lo, uint8_t hi);
  ByteSet& add(uint8_t lo, uint8_t hi);
  ByteSet& add(const ByteSet& o);
  ByteSet complement() const;
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1u; }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  friend bool operator==(const ByteSet&, const ByteSet&) = default;
};

// The grammar, built rule by rule and then frozen by validate().
//
// Layout: every alternative of every rule is stored in one flat array of elements, each
// alternative ended by an `end` element:
//
//   elements_: [set 0][ref 3][end] [set 1][end] [end] ...
//               ^ rule 0 alt 0      ^ alt 1      ^ rule 1 alt 0 (empty: matches nothing)
//
// A position in elements_ is what the matcher keeps on its stacks.
// Invariants (validate() checks them): every rule has at least one alternative; every ref names
// a rule; no rule reaches itself without consuming a byte (no left recursion), so expanding a
// position always ends; the root is a rule.
class Grammar {
 public:
  using RuleId = uint32_t;
  enum class Kind : uint8_t { set, ref, special, end };
  struct Element {
    Kind kind;
    uint32_t value;  // set: index into sets(); ref: a RuleId; special: a token id; end: 0
  };
  using Seq = std::vector<Element>;

  // A new rule with no alternatives yet (define it later: rules may refer to themselves).
  RuleId add_rule(std::string name);
  void add_alternative(RuleId rule, const Seq& seq);
  // A new rule with these alternatives.
  RuleId add_rule(std::string name, const std::vector<Seq>& alternatives);

  Element set(const ByteSet& s);
  static Element ref(RuleId r) { return Element{Kind::ref, r}; }
  // A special token (e.g. Qwen's <tool_call>) that matches only itself, by id.
  static Element special(int32_t token_id) { return Element{Kind::special, static_cast<uint32_t>(token_id)}; }
  // Appends one byte-set element per byte of `text`.
  void append_literal(Seq& seq, std::string_view text);
  Seq literal(std::string_view text) {
    Seq s;
    append_literal(s, text);
    return s;
  }
  // item repeated min..max times (max < 0: no bound), as a new rule.
  RuleId repeat(const Seq& item, int min, int max);

  void set_root(RuleId r) { root_ = r; }
  RuleId root() const { return root_; }

  // Checks the invariants above; invalid_argument naming the rule at fault.
  Status validate() const;

  size_t n_rules() const { return rules_.size(); }
  const std::vector<uint32_t>& alternatives(RuleId r) const { return rules_[r]; }
  const Element& at(uint32_t pos) const { return elements_[pos]; }
  const ByteSet& byte_set(uint32_t index) const { return sets_[index]; }
  const std::string& rule_name(RuleId r) const { return names_[r]; }
  // A readable GBNF-like listing, for errors and tests.
  std::string to_string() const;

 private:
  std::vector<Element> elements_;
  std::vector<std::vector<uint32_t>> rules_;  // (n_rules) start positions of each alternative
  std::vector<std::string> names_;            // (n_rules)
  std::vector<ByteSet> sets_;
  RuleId root_ = 0;
};

}  // namespace kvc::sampling
