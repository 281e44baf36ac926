// JSON Schema → Grammar: JSON's lexical rules as byte-level rules, then one rule per schema node.
#include "core/sampling/json_schema_grammar.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>

#include "core/util/assert.h"

namespace kvc::sampling {
namespace {

using json = nlohmann::ordered_json;
using Seq = Grammar::Seq;
using RuleId = Grammar::RuleId;

constexpr int k_max_repeat = 4096;  // bounds on minItems / maxItems / lengths, to keep grammars small

Error unsupported(const std::string& what, const std::string& path) {
  return make_error(ErrorCode::unsupported,
                    "json schema: " + what + " at " + (path.empty() ? "/" : path) + " is not supported");
}
Error invalid(const std::string& what, const std::string& path) {
  return make_error(ErrorCode::invalid_argument, "json schema: " + what + " at " + (path.empty() ? "/" : path));
}

class Compiler {
 public:
  // Adds rules to `grammar`; several compilers (one per schema) may share one grammar.
  Compiler(const json& root, Grammar& grammar) : g(grammar), root_(root) {}

  Result<Seq> schema(const json& s, const std::string& path);
  Grammar& g;

 private:
  // Between tokens: nothing or one space (a bound, so generation cannot loop on spaces).
  Seq ws() {
    return {Grammar::ref(lazy(ws_, [&](RuleId r) {
      g.add_alternative(r, {});
      g.add_alternative(r, g.literal(" "));
    }))};
  }
  RuleId char_rule();
  RuleId any_value();
  RuleId any_object();
  Seq any_string();
  Seq list(const char* open, const Seq& item, const char* close, int min, int max);
  Seq string_of(const Seq& content);
  Seq number(bool integer, bool non_negative);
  Result<Seq> object(const json& s, const std::string& path);
  Result<Seq> array(const json& s, const std::string& path);
  Result<Seq> string(const json& s, const std::string& path);
  Result<Seq> pattern(const std::string& p, const std::string& path);
  Result<Seq> typed(const json& s, const std::string& type, const std::string& path);
  Result<Seq> ref(const std::string& target, const std::string& path);
  Seq alternatives(const std::vector<Seq>& alts, const char* name) { return {Grammar::ref(g.add_rule(name, alts))}; }
  template <typename F>
  RuleId lazy(int64_t& slot, F define) {
    if (slot < 0) {
      slot = g.add_rule("common");
      define(static_cast<RuleId>(slot));
    }
    return static_cast<RuleId>(slot);
  }

  const json& root_;
  int64_t ws_ = -1, char_ = -1, value_ = -1, object_ = -1;
  std::map<std::string, RuleId> refs_;
  int depth_ = 0;
};

// One JSON string character: unescaped ASCII, an escape, or a well-formed UTF-8 sequence.
RuleId Compiler::char_rule() {
  return lazy(char_, [&](RuleId r) {
    const ByteSet cont = ByteSet::range(0x80, 0xbf);
    const ByteSet plain = ByteSet::range(0x20, 0x21).add(0x23, 0x5b).add(0x5d, 0x7f);
    ByteSet hex = ByteSet::range('0', '9');
    hex.add('a', 'f').add('A', 'F');
    ByteSet esc;
    for (const char c : std::string_view("\"\\/bfnrt")) esc.add(static_cast<uint8_t>(c), static_cast<uint8_t>(c));
    g.add_alternative(r, {g.set(plain)});
    g.add_alternative(r, {g.set(ByteSet::of('\\')), g.set(esc)});
    // \uXXXX but not a surrogate (\uD800-\uDFFF: a lone one is not a character).
    const ByteSet not_d = ByteSet::range('0', '9').add('a', 'c').add('A', 'C').add('e', 'f').add('E', 'F');
    g.add_alternative(
        r, {g.set(ByteSet::of('\\')), g.set(ByteSet::of('u')), g.set(not_d), g.set(hex), g.set(hex), g.set(hex)});
    g.add_alternative(r, {g.set(ByteSet::of('\\')), g.set(ByteSet::of('u')), g.set(ByteSet::of('d').add('D', 'D')),
                          g.set(ByteSet::range('0', '7')), g.set(hex), g.set(hex)});
    g.add_alternative(r, {g.set(ByteSet::range(0xc2, 0xdf)), g.set(cont)});
    g.add_alternative(r, {g.set(ByteSet::of(0xe0)), g.set(ByteSet::range(0xa0, 0xbf)), g.set(cont)});
    g.add_alternative(r, {g.set(ByteSet::range(0xe1, 0xec).add(0xee, 0xef)), g.set(cont), g.set(cont)});
    g.add_alternative(r, {g.set(ByteSet::of(0xed)), g.set(ByteSet::range(0x80, 0x9f)), g.set(cont)});
    g.add_alternative(r, {g.set(ByteSet::of(0xf0)), g.set(ByteSet::range(0x90, 0xbf)), g.set(cont), g.set(cont)});
    g.add_alternative(r, {g.set(ByteSet::range(0xf1, 0xf3)), g.set(cont), g.set(cont), g.set(cont)});
    g.add_alternative(r, {g.set(ByteSet::of(0xf4)), g.set(ByteSet::range(0x80, 0x8f)), g.set(cont), g.set(cont)});
  });
}

Seq Compiler::string_of(const Seq& content) {
  Seq s = g.literal("\"");
  s.insert(s.end(), content.begin(), content.end());
  g.append_literal(s, "\"");
  return s;
}

// -?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?([eE][-+]?[0-9]{1,2})? : digits bounded so a number ends
// (and fits a double).
Seq Compiler::number(bool integer, bool non_negative) {
  const Grammar::Element digit = g.set(ByteSet::range('0', '9'));
  Seq head = {g.set(ByteSet::range('1', '9')), Grammar::ref(g.repeat({digit}, 0, 15))};
  Seq s;
  if (!non_negative) s.push_back(Grammar::ref(g.repeat(g.literal("-"), 0, 1)));
  s.push_back(Grammar::ref(g.add_rule("int", {g.literal("0"), head})));
  if (!integer) {
    Seq frac = g.literal(".");
    frac.push_back(Grammar::ref(g.repeat({digit}, 1, 16)));
    Seq exp = {g.set(ByteSet::of('e').add('E', 'E')),
               Grammar::ref(g.repeat({g.set(ByteSet::of('-').add('+', '+'))}, 0, 1)),
               Grammar::ref(g.repeat({digit}, 1, 2))};
    s.push_back(Grammar::ref(g.repeat(frac, 0, 1)));
    s.push_back(Grammar::ref(g.repeat(exp, 0, 1)));
  }
  return s;
}

Seq cat(std::initializer_list<Seq> parts) {
  Seq out;
  for (const Seq& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// open ws close | open ws item (ws "," ws item)* ws close, with n items in [min, max].
Seq Compiler::list(const char* open, const Seq& item, const char* close, int min, int max) {
  std::vector<Seq> alts;
  if (min == 0) alts.push_back(cat({g.literal(open), ws(), g.literal(close)}));
  if (max != 0) {
    const Seq more = cat({ws(), g.literal(","), ws(), item});
    const int lo = std::max(min, 1) - 1;
    const int hi = max < 0 ? -1 : max - 1;
    alts.push_back(
        cat({g.literal(open), ws(), item, Seq{Grammar::ref(g.repeat(more, lo, hi))}, ws(), g.literal(close)}));
  }
  return alternatives(alts, open);
}

// Any JSON object with any members (json_object, and objects without properties).
RuleId Compiler::any_object() {
  return lazy(object_, [&](RuleId o) {
    const Seq member = cat({any_string(), ws(), g.literal(":"), ws(), Seq{Grammar::ref(any_value())}});
    g.add_alternative(o, list("{", member, "}", 0, -1));
  });
}

Seq Compiler::any_string() { return string_of({Grammar::ref(g.repeat({Grammar::ref(char_rule())}, 0, -1))}); }

// Any JSON value (for {} / true schemas and untyped items).
RuleId Compiler::any_value() {
  return lazy(value_, [&](RuleId v) {
    g.add_alternative(v, {Grammar::ref(any_object())});
    g.add_alternative(v, list("[", {Grammar::ref(v)}, "]", 0, -1));
    g.add_alternative(v, any_string());
    g.add_alternative(v, number(false, false));
    for (const char* word : {"true", "false", "null"}) g.add_alternative(v, g.literal(word));
  });
}

bool is_annotation(const std::string& k) {
  for (const char* a : {"title", "description", "default", "examples", "$schema", "$id", "$comment", "strict", "$defs",
                        "definitions"}) {
    if (k == a) return true;
  }
  return false;
}

bool is_known(const std::string& k) {
  for (const char* a :
       {"type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
        "anyOf", "$ref", "minLength", "maxLength", "pattern", "minimum", "exclusiveMinimum"}) {
    if (k == a) return true;
  }
  return is_annotation(k);
}

Result<int> read_count(const json& s, const char* key, int fallback, const std::string& path) {
  const auto it = s.find(key);
  if (it == s.end()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < 0) return invalid(std::string(key) + " must be a count", path);
  if (it->get<int64_t>() > k_max_repeat) {
    return unsupported(std::string(key) + " above " + std::to_string(k_max_repeat), path);
  }
  return static_cast<int>(it->get<int64_t>());
}

Result<Seq> Compiler::schema(const json& s, const std::string& path) {
  if (s.is_boolean()) {
    if (!s.get<bool>()) return unsupported("the schema false (it matches nothing)", path);
    return Seq{Grammar::ref(any_value())};
  }
  if (!s.is_object()) return invalid("a schema must be an object or a boolean", path);
  if (++depth_ > 64) return unsupported("nesting deeper than 64 schemas", path);
  struct Leave {
    int& d;
    ~Leave() { --d; }
  } leave{depth_};
  for (const auto& [k, v] : s.items()) {
    if (!is_known(k)) return unsupported("keyword \"" + k + "\"", path);
  }
  if (const auto it = s.find("$ref"); it != s.end()) {
    if (!it->is_string()) return invalid("$ref must be a string", path);
    return ref(it->get<std::string>(), path);
  }
  if (const auto it = s.find("const"); it != s.end()) return g.literal(it->dump());
  if (const auto it = s.find("enum"); it != s.end()) {
    if (!it->is_array() || it->empty()) return invalid("enum must be a non-empty array", path + "/enum");
    std::vector<Seq> alts;
    for (const json& v : *it) alts.push_back(g.literal(v.dump()));
    return alternatives(alts, "enum");
  }
  if (const auto it = s.find("anyOf"); it != s.end()) {
    if (!it->is_array() || it->empty()) return invalid("anyOf must be a non-empty array", path + "/anyOf");
    std::vector<Seq> alts;
    for (size_t i = 0; i < it->size(); ++i) {
      auto a = schema((*it)[i], path + "/anyOf/" + std::to_string(i));
      if (!a.ok()) return a.error();
      alts.push_back(std::move(*a));
    }
    return alternatives(alts, "anyOf");
  }
  const auto type = s.find("type");
  if (type == s.end()) {
    if (s.contains("properties")) return typed(s, "object", path);
    if (s.contains("items")) return typed(s, "array", path);
    return Seq{Grammar::ref(any_value())};
  }
  if (type->is_string()) return typed(s, type->get<std::string>(), path);
  if (!type->is_array() || type->empty()) return invalid("type must be a string or a non-empty array", path + "/type");
  std::vector<Seq> alts;
  for (const json& t : *type) {
    if (!t.is_string()) return invalid("type must hold strings", path + "/type");
    auto a = typed(s, t.get<std::string>(), path);
    if (!a.ok()) return a.error();
    alts.push_back(std::move(*a));
  }
  return alternatives(alts, "types");
}

Result<Seq> Compiler::typed(const json& s, const std::string& type, const std::string& path) {
  if (type == "object") return object(s, path);
  if (type == "array") return array(s, path);
  if (type == "string") return string(s, path);
  if (type == "boolean") return alternatives({g.literal("true"), g.literal("false")}, "boolean");
  if (type == "null") return g.literal("null");
  if (type == "number" || type == "integer") {
    bool non_negative = false;
    if (const auto it = s.find("minimum"); it != s.end()) {
      if (!it->is_number() || it->get<double>() != 0.0) return unsupported("minimum other than 0", path);
      non_negative = true;
    }
    if (const auto it = s.find("exclusiveMinimum"); it != s.end()) {
      if (!it->is_number() || it->get<double>() != -1.0 || type != "integer") {
        return unsupported("exclusiveMinimum other than -1 on an integer", path);
      }
      non_negative = true;
    }
    return number(type == "integer", non_negative);
  }
  return invalid("unknown type \"" + type + "\"", path + "/type");
}

Result<Seq> Compiler::object(const json& s, const std::string& path) {
  const auto props = s.find("properties");
  const auto extra = s.find("additionalProperties");
  if (props == s.end() || (props->is_object() && props->empty())) {
    if (extra == s.end() || extra->is_boolean()) {
      if (extra != s.end() && !extra->get<bool>()) return g.literal("{}");
      return Seq{Grammar::ref(any_object())};
    }
    auto value = schema(*extra, path + "/additionalProperties");  // a map of string → schema
    if (!value.ok()) return value.error();
    return list("{", cat({any_string(), ws(), g.literal(":"), ws(), *value}), "}", 0, -1);
  }
  if (!props->is_object()) return invalid("properties must be an object", path + "/properties");
  if (extra != s.end() && !extra->is_boolean()) {
    return unsupported("additionalProperties as a schema next to properties", path);
  }
  std::vector<std::string> keys;
  std::vector<Seq> values;
  for (const auto& [k, v] : props->items()) {
    std::string at = path;
    at += "/properties/";
    at += k;
    auto value = schema(v, at);
    if (!value.ok()) return value.error();
    keys.push_back(k);
    values.push_back(Seq{Grammar::ref(g.add_rule("prop", {*value}))});
  }
  std::vector<bool> required(keys.size(), false);
  if (const auto req = s.find("required"); req != s.end()) {
    if (!req->is_array()) return invalid("required must be an array", path + "/required");
    for (const json& r : *req) {
      const auto at = r.is_string() ? std::find(keys.begin(), keys.end(), r.get<std::string>()) : keys.end();
      if (at == keys.end()) return invalid("required names " + r.dump() + ", which is not in properties", path);
      required[static_cast<size_t>(at - keys.begin())] = true;
    }
  }
  // tail[i][h]: properties i.. in order, h: whether one came before (so a comma leads).
  const size_t n = keys.size();
  std::vector<std::array<RuleId, 2>> tail(n + 1);
  tail[n][0] = tail[n][1] = g.add_rule("end", {Seq{}});
  for (size_t i = n; i-- > 0;) {
    for (int h = 0; h < 2; ++h) {
      Seq member = h ? cat({ws(), g.literal(","), ws()}) : Seq{};
      member = cat({member, g.literal(json(keys[i]).dump()), ws(), g.literal(":"), ws(), values[i],
                    Seq{Grammar::ref(tail[i + 1][1])}});
      std::vector<Seq> alts{member};
      if (!required[i]) alts.push_back(Seq{Grammar::ref(tail[i + 1][static_cast<size_t>(h)])});
      tail[i][static_cast<size_t>(h)] = g.add_rule("members", alts);
    }
  }
  return cat({g.literal("{"), ws(), Seq{Grammar::ref(tail[0][0])}, ws(), g.literal("}")});
}

Result<Seq> Compiler::array(const json& s, const std::string& path) {
  Seq item = {Grammar::ref(any_value())};
  if (const auto it = s.find("items"); it != s.end()) {
    auto a = schema(*it, path + "/items");
    if (!a.ok()) return a.error();
    item = Seq{Grammar::ref(g.add_rule("item", {*a}))};
  }
  auto min = read_count(s, "minItems", 0, path);
  if (!min.ok()) return min.error();
  auto max = read_count(s, "maxItems", -1, path);
  if (!max.ok()) return max.error();
  if (*max >= 0 && *max < *min) return invalid("maxItems is below minItems", path);
  return list("[", item, "]", *min, *max);
}

Result<Seq> Compiler::string(const json& s, const std::string& path) {
  if (const auto it = s.find("pattern"); it != s.end()) {
    if (!it->is_string()) return invalid("pattern must be a string", path);
    if (s.contains("minLength") || s.contains("maxLength"))
      return unsupported("pattern with minLength / maxLength", path);
    auto p = pattern(it->get<std::string>(), path + "/pattern");
    if (!p.ok()) return p.error();
    return string_of(*p);
  }
  auto min = read_count(s, "minLength", 0, path);
  if (!min.ok()) return min.error();
  auto max = read_count(s, "maxLength", -1, path);
  if (!max.ok()) return max.error();
  if (*max >= 0 && *max < *min) return invalid("maxLength is below minLength", path);
  return string_of({Grammar::ref(g.repeat({Grammar::ref(char_rule())}, *min, *max))});
}

Result<Seq> Compiler::ref(const std::string& target, const std::string& path) {
  if (const auto it = refs_.find(target); it != refs_.end()) return Seq{Grammar::ref(it->second)};
  if (target.empty() || target[0] != '#') return unsupported("$ref \"" + target + "\" (only local refs: #...)", path);
  const json* node = &root_;
  try {
    node = &root_.at(json::json_pointer(target.substr(1)));
  } catch (const json::exception&) { return invalid("$ref \"" + target + "\" points nowhere", path); }
  const RuleId r = g.add_rule("ref");
  refs_.emplace(target, r);
  auto body = schema(*node, target.substr(1));
  if (!body.ok()) return body.error();
  g.add_alternative(r, *body);
  return Seq{Grammar::ref(r)};
}

// A pattern of the simple kind, as the bytes of the string's content: anchored or not, a
// sequence of literals, [classes] of ASCII, . (printable ASCII), \d, \w, \s (a space), each with
// ?, *, +, {m,n}. Matching a subset of what the pattern allows is fine; more is not.
Result<Seq> Compiler::pattern(const std::string& p, const std::string& path) {
  const auto refuse = [&](const std::string& why) {
    return unsupported("pattern " + json(p).dump() + ": " + why, path);
  };
  // "." and the unanchored ends: printable ASCII that needs no escape (a pattern sees the
  // decoded string, where an escape such as \n would be a line break "." does not match).
  const Seq any_char = {g.set(ByteSet::range(0x20, 0x21).add(0x23, 0x5b).add(0x5d, 0x7e))};
  Seq out;
  size_t i = 0, end = p.size();
  if (i < end && p[i] == '^') {
    ++i;
  } else {
    out.push_back(Grammar::ref(g.repeat(any_char, 0, -1)));
  }
  const bool anchored_end = end > i && p[end - 1] == '$' && (end < 2 || p[end - 2] != '\\');
  if (anchored_end) --end;
  const ByteSet word = ByteSet::range('a', 'z').add('A', 'Z').add('0', '9').add('_', '_');
  const auto class_escape = [&](char c, ByteSet& set) {
    if (c == 'd') {
      set.add('0', '9');
    } else if (c == 'w') {
      set.add(word);
    } else if (c == 's') {
      set.add(' ', ' ');
    } else if (c >= 0x20 && c < 0x7f && !std::isalnum(static_cast<unsigned char>(c))) {
      set.add(static_cast<uint8_t>(c), static_cast<uint8_t>(c));
    } else {
      return false;
    }
    return true;
  };
  const ByteSet forbidden = ByteSet::of('"').add('\\', '\\');  // need escapes inside a JSON string
  while (i < end) {
    const char c = p[i++];
    Seq atom;
    ByteSet set;
    if (c == '(' || c == ')' || c == '|') return refuse("groups and alternation");
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) return refuse("non-ASCII text");
    if (c == '.') {
      atom = any_char;
    } else if (c == '\\') {
      if (i >= end || !class_escape(p[i++], set)) return refuse("an escape other than \\d \\w \\s or punctuation");
    } else if (c == '[') {
      const bool negate = i < end && p[i] == '^';
      if (negate) ++i;
      bool closed = false;
      while (i < end) {
        char a = p[i++];
        if (a == ']') {
          closed = true;
          break;
        }
        if (a == '\\') {
          if (i >= end || !class_escape(p[i++], set))
            return refuse("a class escape other than \\d \\w \\s or punctuation");
          continue;
        }
        if (static_cast<unsigned char>(a) < 0x20 || static_cast<unsigned char>(a) >= 0x7f)
          return refuse("non-ASCII text");
        char b = a;
        if (i + 1 < end && p[i] == '-' && p[i + 1] != ']') {
          b = p[i + 1];
          i += 2;
          if (b < a) return refuse("a reversed range");
        }
        set.add(static_cast<uint8_t>(a), static_cast<uint8_t>(b));
      }
      if (!closed) return refuse("an unclosed [");
      if (negate) {
        ByteSet printable = ByteSet::range(0x20, 0x7e);
        for (size_t w = 0; w < printable.bits.size(); ++w) printable.bits[w] &= ~(set.bits[w] | forbidden.bits[w]);
        set = printable;
      }
    } else if (c == '^' || c == '$') {
      return refuse("^ or $ inside");
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
      return refuse("a quantifier with nothing before it");
    } else {
      set.add(static_cast<uint8_t>(c), static_cast<uint8_t>(c));
    }
    if (atom.empty()) {
      for (size_t w = 0; w < set.bits.size(); ++w) {
        if (set.bits[w] & forbidden.bits[w]) return refuse("a quote or backslash");
      }
      if (set.empty()) return refuse("an empty class");
      atom = {g.set(set)};
    }
    int lo = 1, hi = 1;
    if (i < end && (p[i] == '?' || p[i] == '*' || p[i] == '+')) {
      lo = p[i] == '+' ? 1 : 0;
      hi = p[i] == '?' ? 1 : -1;
      ++i;
    } else if (i < end && p[i] == '{') {
      const size_t close = p.find('}', i);
      if (close == std::string::npos || close >= end) return refuse("an unclosed {");
      const std::string body = p.substr(i + 1, close - i - 1);
      const size_t comma = body.find(',');
      const auto num = [](const std::string& t, int& v) {
        if (t.empty() || t.size() > 4 || t.find_first_not_of("0123456789") != std::string::npos) return false;
        v = std::stoi(t);
        return true;
      };
      if (!num(body.substr(0, comma), lo)) return refuse("a bad {m,n}");
      if (comma == std::string::npos) {
        hi = lo;
      } else if (comma + 1 == body.size()) {
        hi = -1;
      } else if (!num(body.substr(comma + 1), hi) || hi < lo) {
        return refuse("a bad {m,n}");
      }
      i = close + 1;
    }
    if (i < end && (p[i] == '?' || p[i] == '*' || p[i] == '+' || p[i] == '{')) return refuse("stacked quantifiers");
    if (lo == 1 && hi == 1) {
      out.insert(out.end(), atom.begin(), atom.end());
    } else {
      out.push_back(Grammar::ref(g.repeat(atom, lo, hi)));
    }
  }
  if (!anchored_end) out.push_back(Grammar::ref(g.repeat(any_char, 0, -1)));
  return out;
}

void append_pieces(Grammar& g, Seq& seq, std::span<const GrammarPiece> pieces) {
  for (const GrammarPiece& piece : pieces) {
    if (piece.special_token >= 0) {
      seq.push_back(Grammar::special(piece.special_token));
    } else {
      g.append_literal(seq, piece.text);
    }
  }
}

// prefix, then the JSON the schema allows, then suffix, as one sequence of `g`.
Result<Seq> framed_schema(Grammar& g, std::string_view schema_json, std::span<const GrammarPiece> prefix,
                          std::span<const GrammarPiece> suffix) {
  json root = json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return make_error(ErrorCode::invalid_argument, "json schema: the schema is not valid JSON");
  Compiler c(root, g);
  auto body = c.schema(root, "");
  if (!body.ok()) return body.error();
  Seq seq;
  append_pieces(g, seq, prefix);
  seq.insert(seq.end(), body->begin(), body->end());
  append_pieces(g, seq, suffix);
  if (seq.empty()) return make_error(ErrorCode::invalid_argument, "json schema: the grammar matches nothing");
  return seq;
}

Result<std::shared_ptr<const Grammar>> finish(Grammar&& g, const Seq& root) {
  g.set_root(g.add_rule("root", {root}));
  if (Status st = g.validate(); !st.ok()) {
    return make_error(ErrorCode::unsupported, "json schema: a $ref that reaches itself before any text (" +
                                                  st.error().message + ") is not supported");
  }
  return std::shared_ptr<const Grammar>(std::make_shared<Grammar>(std::move(g)));
}

}  // namespace

Result<std::shared_ptr<const Grammar>> json_schema_grammar(std::string_view schema_json,
                                                           std::span<const GrammarPiece> prefix,
                                                           std::span<const GrammarPiece> suffix) {
  Grammar g;
  auto seq = framed_schema(g, schema_json, prefix, suffix);
  if (!seq.ok()) return seq.error();
  return finish(std::move(g), *seq);
}

Result<std::shared_ptr<const Grammar>> json_schema_choice_grammar(std::span<const FramedSchema> alternatives,
                                                                  bool repeat,
                                                                  std::span<const GrammarPiece> separator) {
  if (alternatives.empty()) return make_error(ErrorCode::invalid_argument, "json schema: no alternatives");
  Grammar g;
  std::vector<Seq> alts;
  for (const FramedSchema& a : alternatives) {
    auto seq = framed_schema(g, a.schema_json, a.prefix, a.suffix);
    if (!seq.ok()) return seq.error();
    alts.push_back(std::move(*seq));
  }
  Seq root{Grammar::ref(g.add_rule("alternatives", alts))};
  if (repeat) {  // one, then any number of (separator, one)
    Seq more;
    append_pieces(g, more, separator);
    more.insert(more.end(), root.begin(), root.end());
    root.push_back(Grammar::ref(g.repeat(more, 0, -1)));
  }
  return finish(std::move(g), root);
}

std::shared_ptr<const Grammar> json_object_grammar() {
  auto g = json_schema_grammar(R"({"type": "object"})");
  KVC_ASSERT(g.ok());
  return *g;
}

}  // namespace kvc::sampling
