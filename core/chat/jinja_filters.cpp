// Jinja's built-in filters and tests ({{ x | trim }}, {% if x is defined %}) for the subset chat templates use.
#include <algorithm>
#include <climits>
#include <cmath>
#include <unordered_map>

#include "core/chat/jinja_builtins.h"
#include "core/chat/jinja_interpreter.h"
#include "core/chat/jinja_lexer.h"

namespace kvc::chat::jinja {
namespace {

std::string html_escape(const std::string& s) {
  std::string r;
  for (const char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&#34;"; break;
      case '\'': r += "&#39;"; break;
      default: r += c;
    }
  }
  return r;
}

std::string indent(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string r;
  size_t i = 0;
  bool at_first = true;
  while (i <= s.size()) {
    const size_t j = std::min(s.find('\n', i), s.size());
    const std::string line = s.substr(i, j - i);
    const bool pad_it = (at_first ? first : true) && (blank || !line.empty());
    if (pad_it) r += pad;
    r += line;
    if (j < s.size()) r += '\n';
    at_first = false;
    if (j >= s.size()) break;
    i = j + 1;
  }
  return r;
}

using FilterFn = Value (*)(Interpreter&, Value&, CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

// select / reject / selectattr / rejectattr: keep the items for which the test (or truth) holds.
Value select_items(Interpreter& in, const Value& seq, CallArgs& a, bool by_attribute, bool keep) {
  size_t next = 0;
  std::string attr;
  if (by_attribute) {
    if (a.positional.empty()) fail("selectattr()/rejectattr() need an attribute name");
    attr = need_string(a.positional[0], "selectattr()");
    next = 1;
  }
  std::string test;
  if (a.positional.size() > next) test = need_string(a.positional[next], "the test name");
  if (!test.empty() && !is_test(test)) fail("unknown test '" + test + "'");
  CallArgs test_args;
  for (size_t i = next + 1; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  Array out;
  for (const Value& v : iterate(seq)) {
    in.charge(1);
    const Value x = by_attribute ? attribute_of(v, attr) : v;
    const bool ok = test.empty() ? x.truthy() : apply_test(in, test, x, test_args);
    if (ok == keep) out.push_back(v);
  }
  return out;
}

Value sorted(Interpreter& in, const Value& seq, CallArgs& a) {
  Array items = iterate(seq);
  const Value* rev = arg(a, 0, "reverse");
  const Value* attr = arg(a, 2, "attribute");
  const bool reverse = rev && rev->truthy();
  const std::string path = attr && attr->is_string() ? attr->as_string() : "";
  bool ok = true;
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = path.empty() ? x : attribute_of(x, path);
    const Value ky = path.empty() ? y : attribute_of(y, path);
    bool cmp_ok = true;
    const int c = compare(kx, ky, cmp_ok);
    ok = ok && cmp_ok;
    return reverse ? c > 0 : c < 0;
  });
  if (!ok) fail("sort: the items cannot be compared with each other");
  in.charge(static_cast<int64_t>(items.size()));
  return items;
}

const std::unordered_map<std::string_view, FilterFn>& filters() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"trim",
       [](Interpreter&, Value& v, CallArgs& a) -> Value {
         return strip(need_string(v, "trim"), string_arg(a, 0, "chars", "trim", std::string(k_whitespace)), true, true);
       }},
      {"length",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         if (v.is_string()) return static_cast<int64_t>(code_point_count(v.as_string()));
         if (v.is_array()) return static_cast<int64_t>(v.as_array().size());
         if (v.is_object()) return static_cast<int64_t>(v.as_object().size());
         if (v.is_undefined() || v.is_none()) return int64_t{0};
         fail("length: " + std::string(v.type_name()) + " has no length");
       }},
      {"tojson",
       [](Interpreter& in, Value& v, CallArgs& a) -> Value {
         const Value* ind = arg(a, 0, "indent");
         const Value* sort_keys = arg(a, 99, "sort_keys");
         if (sort_keys && sort_keys->truthy()) fail("tojson: sort_keys is not supported");
         std::string out, error;
         if (!to_json(v, ind && ind->is_int() ? static_cast<int>(ind->as_int()) : -1, out, error)) fail(error);
         in.check_string(out.size());
         return out;
       }},
      {"from_json",
       [](Interpreter& in, Value& v, CallArgs&) -> Value {
         Value out;
         std::string error;
         in.charge(static_cast<int64_t>(need_string(v, "from_json").size() / 64));
         if (!from_json(v.as_string(), out, error)) fail(error);
         return out;
       }},
      {"join",
       [](Interpreter& in, Value& v, CallArgs& a) -> Value {
         return join(in, v, string_arg(a, 0, "d", "join", ""), arg(a, 1, "attribute"));
       }},
      {"default",
       [](Interpreter&, Value& v, CallArgs& a) -> Value {
         const Value* def = arg(a, 0, "default_value");
         const Value* boolean = arg(a, 1, "boolean");
         const bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
         return use_default ? (def ? *def : Value("")) : v;
       }},
      {"upper", [](Interpreter&, Value& v, CallArgs&) -> Value { return ascii_case(need_string(v, "upper"), true); }},
      {"lower", [](Interpreter&, Value& v, CallArgs&) -> Value { return ascii_case(need_string(v, "lower"), false); }},
      {"capitalize",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         std::string s = ascii_case(need_string(v, "capitalize"), false);
         if (!s.empty()) s[0] = ascii_case(s.substr(0, 1), true)[0];
         return s;
       }},
      {"title", [](Interpreter&, Value& v, CallArgs&) -> Value { return title_case(need_string(v, "title")); }},
      {"replace",
       [](Interpreter& in, Value& v, CallArgs& a) -> Value {
         const Value* count = arg(a, 2, "count");
         std::string r =
             replace_all(need_string(v, "replace"), string_arg(a, 0, "old", "replace", ""),
                         string_arg(a, 1, "new", "replace", ""), count && count->is_int() ? count->as_int() : -1);
         in.check_string(r.size());
         return r;
       }},
      {"first",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         Array items = iterate(v);
         return items.empty() ? Value{} : items.front();
       }},
      {"last",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         Array items = iterate(v);
         return items.empty() ? Value{} : items.back();
       }},
      {"list", [](Interpreter&, Value& v, CallArgs&) -> Value { return iterate(v); }},
      {"items",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         Array r;
         if (v.is_undefined() || v.is_none()) return r;
         if (!v.is_object()) fail("items: " + std::string(v.type_name()) + " is not a dict");
         for (const auto& [k, x] : v.as_object().items()) r.emplace_back(Array{Value(k), x});
         return r;
       }},
      {"dictsort",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         if (!v.is_object()) fail("dictsort: " + std::string(v.type_name()) + " is not a dict");
         auto items = v.as_object().items();
         std::stable_sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
         Array r;
         for (const auto& [k, x] : items) r.emplace_back(Array{Value(k), x});
         return r;
       }},
      {"select", [](Interpreter& in, Value& v, CallArgs& a) { return select_items(in, v, a, false, true); }},
      {"reject", [](Interpreter& in, Value& v, CallArgs& a) { return select_items(in, v, a, false, false); }},
      {"selectattr", [](Interpreter& in, Value& v, CallArgs& a) { return select_items(in, v, a, true, true); }},
      {"rejectattr", [](Interpreter& in, Value& v, CallArgs& a) { return select_items(in, v, a, true, false); }},
      {"map",
       [](Interpreter& in, Value& v, CallArgs& a) -> Value {
         Array out;
         if (const Value* attr = arg(a, 99, "attribute")) {
           const Value* def = arg(a, 99, "default");
           for (const Value& x : iterate(v)) {
             Value r = attribute_of(x, need_string(*attr, "map(attribute=)"));
             out.push_back(r.is_undefined() && def ? *def : r);
           }
           return out;
         }
         if (a.positional.empty()) fail("map() needs a filter name or attribute=");
         const std::string name = need_string(a.positional[0], "map()");
         if (!is_filter(name)) fail("map(): unknown filter '" + name + "'");
         CallArgs rest;
         rest.positional.assign(a.positional.begin() + 1, a.positional.end());
         for (const Value& x : iterate(v)) {
           CallArgs each = rest;
           out.push_back(apply_filter(in, name, x, each));
         }
         return out;
       }},
      {"string", [](Interpreter&, Value& v, CallArgs&) -> Value { return v.is_string() ? v : Value(to_output(v)); }},
      {"int",
       [](Interpreter&, Value& v, CallArgs& a) -> Value {
         const Value* def = arg(a, 0, "default");
         if (v.is_int()) return v;
         if (v.is_number()) return static_cast<int64_t>(v.as_number());
         if (v.is_bool()) return static_cast<int64_t>(v.as_bool());
         if (v.is_string()) {
           try {
             size_t used = 0;
             const std::string s = strip(v.as_string(), k_whitespace, true, true);
             const long long r = std::stoll(s, &used);
             if (used == s.size()) return static_cast<int64_t>(r);
           } catch (...) {}
         }
         return def ? *def : Value(int64_t{0});
       }},
      {"float",
       [](Interpreter&, Value& v, CallArgs& a) -> Value {
         const Value* def = arg(a, 0, "default");
         if (v.is_number()) return v.as_number();
         if (v.is_string()) {
           try {
             size_t used = 0;
             const std::string s = strip(v.as_string(), k_whitespace, true, true);
             const double r = std::stod(s, &used);
             if (used == s.size()) return r;
           } catch (...) {}
         }
         return def ? *def : Value(0.0);
       }},
      {"abs",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         if (v.is_int()) {
           if (v.as_int() == INT64_MIN) fail("abs: integer overflow");
           return v.as_int() < 0 ? -v.as_int() : v.as_int();
         }
         if (v.is_number()) return std::fabs(v.as_number());
         fail("abs: " + std::string(v.type_name()) + " is not a number");
       }},
      {"round",
       [](Interpreter&, Value& v, CallArgs& a) -> Value {
         if (!v.is_number()) fail("round: " + std::string(v.type_name()) + " is not a number");
         const Value* p = arg(a, 0, "precision");
         const double scale = std::pow(10.0, p && p->is_int() ? static_cast<double>(p->as_int()) : 0.0);
         const std::string method = string_arg(a, 1, "method", "round", "common");
         const double x = v.as_number() * scale;
         const double r = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::round(x);
         return r / scale;
       }},
      {"unique",
       [](Interpreter& in, Value& v, CallArgs&) -> Value {
         Array out;
         for (const Value& x : iterate(v)) {
           in.charge(static_cast<int64_t>(out.size()));
           if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equals(x, y); })) out.push_back(x);
         }
         return out;
       }},
      {"reverse",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         if (v.is_string()) {
           auto cps = code_points(v.as_string());
           std::string r;
           for (auto it = cps.rbegin(); it != cps.rend(); ++it) r += *it;
           return r;
         }
         Array items = iterate(v);
         std::reverse(items.begin(), items.end());
         return items;
       }},
      {"sort", [](Interpreter& in, Value& v, CallArgs& a) { return sorted(in, v, a); }},
      {"safe", [](Interpreter&, Value& v, CallArgs&) { return v; }},
      {"escape",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         return html_escape(v.is_string() ? v.as_string() : to_output(v));
       }},
      {"indent",
       [](Interpreter& in, Value& v, CallArgs& a) -> Value {
         const Value* width = arg(a, 0, "width");
         const Value* first = arg(a, 1, "first");
         const Value* blank = arg(a, 2, "blank");
         std::string pad =
             width && width->is_string()
                 ? width->as_string()
                 : std::string(static_cast<size_t>(
                                   width && width->is_int() ? std::clamp<int64_t>(width->as_int(), 0, 1024) : 4),
                               ' ');
         std::string r = indent(need_string(v, "indent"), pad, first && first->truthy(), blank && blank->truthy());
         in.check_string(r.size());
         return r;
       }},
      {"wordcount",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         return static_cast<int64_t>(split(need_string(v, "wordcount"), nullptr, -1).size());
       }},
      {"sum",
       [](Interpreter&, Value& v, CallArgs& a) -> Value {
         const Value* attr = arg(a, 0, "attribute");
         const Value* start = arg(a, 1, "start");
         Value total = start ? *start : Value(int64_t{0});
         for (const Value& x : iterate(v)) {
           const Value y = attr && attr->is_string() ? attribute_of(x, attr->as_string()) : x;
           if (!y.is_number() || !total.is_number()) fail("sum: the items are not numbers");
           total = total.is_int() && y.is_int() ? Value(total.as_int() + y.as_int())
                                                : Value(total.as_number() + y.as_number());
         }
         return total;
       }},
      {"min",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         Array items = iterate(v);
         if (items.empty()) return Value{};
         Value best = items[0];
         for (const Value& x : items) {
           bool ok = true;
           if (compare(x, best, ok) < 0) best = x;
           if (!ok) fail("min: the items cannot be compared");
         }
         return best;
       }},
      {"max",
       [](Interpreter&, Value& v, CallArgs&) -> Value {
         Array items = iterate(v);
         if (items.empty()) return Value{};
         Value best = items[0];
         for (const Value& x : items) {
           bool ok = true;
           if (compare(x, best, ok) > 0) best = x;
           if (!ok) fail("max: the items cannot be compared");
         }
         return best;
       }},
  };
  return table;
}

// Aliases Jinja2 defines.
std::string_view canonical_filter(std::string_view name) {
  if (name == "count") return "length";
  if (name == "d") return "default";
  if (name == "e") return "escape";
  return name;
}

bool is_type_iterable(const Value& v) { return v.is_array() || v.is_object() || v.is_string(); }

const std::unordered_map<std::string_view, TestFn>& tests() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", [](Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }},
      {"boolean", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }},
      {"true", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"false", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"integer", [](Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }},
      {"float", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == Value::Kind::number; }},
      {"number", [](Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }},
      {"string", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](Interpreter&, const Value& v, CallArgs&) { return v.is_object(); }},
      {"iterable", [](Interpreter&, const Value& v, CallArgs&) { return is_type_iterable(v); }},
      {"sequence", [](Interpreter&, const Value& v, CallArgs&) { return is_type_iterable(v); }},
      {"callable", [](Interpreter&, const Value& v, CallArgs&) { return v.is_function(); }},
      {"odd", [](Interpreter&, const Value& v, CallArgs&) { return v.is_int() && v.as_int() % 2 != 0; }},
      {"even", [](Interpreter&, const Value& v, CallArgs&) { return v.is_int() && v.as_int() % 2 == 0; }},
      {"divisibleby",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value* d = arg(a, 0, "num");
         if (!v.is_int() || !d || !d->is_int() || d->as_int() == 0) fail("divisibleby needs integers (and not 0)");
         return v.as_int() % d->as_int() == 0;
       }},
      {"lower", [](Interpreter&, const Value& v,
                   CallArgs&) { return v.is_string() && ascii_case(v.as_string(), false) == v.as_string(); }},
      {"upper", [](Interpreter&, const Value& v,
                   CallArgs&) { return v.is_string() && ascii_case(v.as_string(), true) == v.as_string(); }},
      {"sameas",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value* o = arg(a, 0, "other");
         return o && v.same_object(*o);
       }},
      {"equalto",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value* o = arg(a, 0, "other");
         return o && equals(v, *o);
       }},
      {"ne",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value* o = arg(a, 0, "other");
         return !o || !equals(v, *o);
       }},
      {"in",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value* o = arg(a, 0, "seq");
         if (!o) return false;
         if (o->is_string()) return v.is_string() && o->as_string().find(v.as_string()) != std::string::npos;
         if (o->is_object()) return v.is_string() && o->as_object().find(v.as_string()) != nullptr;
         for (const Value& x : iterate(*o)) {
           if (equals(v, x)) return true;
         }
         return false;
       }},
  };
  return table;
}

std::string_view canonical_test(std::string_view name) {
  if (name == "eq" || name == "==") return "equalto";
  if (name == "!=") return "ne";
  return name;
}

// lt, le, gt, ge and their symbols.
bool ordering_test(std::string_view name, const Value& v, CallArgs& a, bool& result) {
  int want = 0;
  bool or_equal = false;
  if (name == "lt" || name == "lessthan" || name == "<") {
    want = -1;
  } else if (name == "le" || name == "<=") {
    want = -1;
    or_equal = true;
  } else if (name == "gt" || name == "greaterthan" || name == ">") {
    want = 1;
  } else if (name == "ge" || name == ">=") {
    want = 1;
    or_equal = true;
  } else {
    return false;
  }
  const Value* o = arg(a, 0, "other");
  if (!o) fail("the test '" + std::string(name) + "' needs a value to compare with");
  bool ok = true;
  const int c = compare(v, *o, ok);
  if (!ok) fail("cannot compare " + std::string(v.type_name()) + " and " + std::string(o->type_name()));
  result = c == want || (or_equal && c == 0);
  return true;
}

}  // namespace

bool is_filter(std::string_view name) { return filters().count(canonical_filter(name)) != 0; }

bool is_test(std::string_view name) {
  const std::string_view n = canonical_test(name);
  static constexpr std::string_view ordering[] = {"lt",          "le", "gt", "ge", "lessthan",
                                                  "greaterthan", "<",  "<=", ">",  ">="};
  return tests().count(n) != 0 || std::find(std::begin(ordering), std::end(ordering), n) != std::end(ordering);
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): the filter may move from its input
Value apply_filter(Interpreter& in, std::string_view name, Value input, CallArgs& args) {
  const auto it = filters().find(canonical_filter(name));
  if (it == filters().end()) fail("unknown filter '" + std::string(name) + "'");
  return it->second(in, input, args);
}

bool apply_test(Interpreter& in, std::string_view name, const Value& v, CallArgs& args) {
  const std::string_view n = canonical_test(name);
  if (const auto it = tests().find(n); it != tests().end()) return it->second(in, v, args);
  bool result = false;
  if (ordering_test(n, v, args, result)) return result;
  fail("unknown test '" + std::string(name) + "'");
}

}  // namespace kvc::chat::jinja
