// Jinja's globals (range, namespace, raise_exception, strftime_now), Python's string/list/dict methods, and sequence
// helpers.
#include "core/chat/jinja_builtins.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "core/chat/jinja_interpreter.h"
#include "core/chat/jinja_lexer.h"

namespace kvc::chat::jinja {

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t code_point_count(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

namespace {

bool is_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Python's slice.indices: clamps start/stop for a sequence of n items.
void slice_indices(int64_t n, const Value* start, const Value* stop, const Value* step, int64_t& b, int64_t& e,
                   int64_t& s) {
  const auto as_int = [](const Value* v, const char* what) {
    if (!v->is_int())
      fail(std::string("a slice's ") + what + " must be an integer, not " + std::string(v->type_name()));
    return v->as_int();
  };
  s = step ? as_int(step, "step") : 1;
  if (s == 0) fail("a slice's step cannot be zero");
  const auto clamp = [&](const Value* v, int64_t def, const char* what) {
    if (!v) return def;
    int64_t i = as_int(v, what);
    if (i < 0) i += n;
    if (s > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  b = clamp(start, s > 0 ? 0 : n - 1, "start");
  e = clamp(stop, s > 0 ? n : -1, "stop");
}

}  // namespace

Value slice(const Value& v, const Value* start, const Value* stop, const Value* step) {
  if (v.is_array()) {
    const Array& a = v.as_array();
    int64_t b = 0, e = 0, s = 1;
    slice_indices(static_cast<int64_t>(a.size()), start, stop, step, b, e, s);
    Array r;
    for (int64_t i = b; s > 0 ? i < e : i > e; i += s) r.push_back(a[static_cast<size_t>(i)]);
    return r;
  }
  const std::string& str = v.as_string();
  const bool ascii = is_ascii(str);
  const std::vector<std::string> cps = ascii ? std::vector<std::string>{} : code_points(str);
  const int64_t n = static_cast<int64_t>(ascii ? str.size() : cps.size());
  int64_t b = 0, e = 0, s = 1;
  slice_indices(n, start, stop, step, b, e, s);
  if (ascii && s == 1) return b < e ? str.substr(static_cast<size_t>(b), static_cast<size_t>(e - b)) : std::string();
  std::string r;
  for (int64_t i = b; s > 0 ? i < e : i > e; i += s) {
    if (ascii) {
      r += str[static_cast<size_t>(i)];
    } else {
      r += cps[static_cast<size_t>(i)];
    }
  }
  return r;
}

Array iterate(const Value& v) {
  if (v.is_array()) return v.as_array();
  if (v.is_object()) {
    Array keys;
    for (const auto& [k, x] : v.as_object().items()) keys.emplace_back(k);
    return keys;
  }
  if (v.is_string()) {
    Array chars;
    for (auto& c : code_points(v.as_string())) chars.emplace_back(std::move(c));
    return chars;
  }
  if (v.is_undefined() || v.is_none()) return {};
  fail("cannot iterate over " + std::string(v.type_name()));
}

// An argument by position or keyword; null if absent.
const Value* arg(CallArgs& a, size_t pos, std::string_view name) {
  for (auto& [k, v] : a.named) {
    if (k == name) return &v;
  }
  return pos < a.positional.size() ? &a.positional[pos] : nullptr;
}

const std::string& need_string(const Value& v, std::string_view what) {
  if (!v.is_string()) fail(std::string(what) + " needs a string, not " + std::string(v.type_name()));
  return v.as_string();
}

std::string string_arg(CallArgs& a, size_t pos, std::string_view name, std::string_view what, std::string def) {
  const Value* v = arg(a, pos, name);
  if (!v || v->is_none() || v->is_undefined()) return def;
  return need_string(*v, what);
}

std::string strip(const std::string& s, std::string_view chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e && chars.find(s[b]) != std::string_view::npos) ++b;
  }
  if (right) {
    while (e > b && chars.find(s[e - 1]) != std::string_view::npos) --e;
  }
  return s.substr(b, e - b);
}

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return s;
}

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string title_case(std::string s) {
  bool start = true;
  for (char& c : s) {
    if (is_alpha(c)) {
      c = start ? ascii_case(std::string(1, c), true)[0] : ascii_case(std::string(1, c), false)[0];
      start = false;
    } else {
      start = true;
    }
  }
  return s;
}

Array split(const std::string& s, const Value* sep, int64_t maxsplit) {
  Array out;
  if (!sep || sep->is_none()) {  // runs of whitespace, no empty pieces
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && k_whitespace.find(s[i]) != std::string_view::npos) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        std::string rest = strip(s.substr(i), k_whitespace, false, true);
        out.emplace_back(std::move(rest));
        break;
      }
      size_t j = i;
      while (j < s.size() && k_whitespace.find(s[j]) == std::string_view::npos) ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string& d = need_string(*sep, "split()");
  if (d.empty()) fail("split(): the separator is empty");
  size_t i = 0;
  for (;;) {
    const size_t j = s.find(d, i);
    if (j == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) {
      out.emplace_back(s.substr(i));
      return out;
    }
    out.emplace_back(s.substr(i, j - i));
    i = j + d.size();
  }
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  std::string r;
  size_t i = 0;
  int64_t n = 0;
  for (;;) {
    const size_t j = s.find(from, i);
    if (j == std::string::npos || (count >= 0 && n == count)) break;
    r.append(s, i, j - i);
    r += to;
    i = j + from.size();
    ++n;
  }
  r.append(s, i, std::string::npos);
  return r;
}

void check_no_cycle(Interpreter& in, const Value& container, const Value& v) {
  if (!v.is_array() && !v.is_object()) return;
  std::vector<const Value*> stack = {&v};
  std::unordered_set<const void*> seen;
  while (!stack.empty()) {
    const Value* x = stack.back();
    stack.pop_back();
    in.charge(1);
    if (x->same_object(container)) fail("a list or dict cannot hold itself");
    const void* id =
        x->is_array() ? static_cast<const void*>(&x->as_array()) : static_cast<const void*>(&x->as_object());
    if (!seen.insert(id).second) continue;
    if (x->is_array()) {
      for (const Value& e : x->as_array()) {
        if (e.is_array() || e.is_object()) stack.push_back(&e);
      }
    } else {
      for (const auto& [k, e] : x->as_object().items()) {
        if (e.is_array() || e.is_object()) stack.push_back(&e);
      }
    }
  }
}

namespace {

bool starts_or_ends(const std::string& s, const Value& affix, bool starts) {
  const auto one = [&](const Value& v) {
    const std::string& a = need_string(v, starts ? "startswith()" : "endswith()");
    if (a.size() > s.size()) return false;
    return starts ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_array()) {
    for (const Value& v : affix.as_array()) {
      if (one(v)) return true;
    }
    return false;
  }
  return one(affix);
}

}  // namespace

std::string join(Interpreter& in, const Value& seq, const std::string& sep, const Value* attribute) {
  std::string r;
  bool first = true;
  for (const Value& v : iterate(seq)) {
    if (!first) r += sep;
    first = false;
    Value x = v;
    if (attribute && attribute->is_string())
      x = v.is_object() && v.as_object().find(attribute->as_string()) ? *v.as_object().find(attribute->as_string())
                                                                      : Value{};
    r += x.is_string() ? x.as_string() : to_output(x);
    in.check_string(r.size());
  }
  return r;
}

Value attribute_of(const Value& v, const std::string& path) {
  Value cur = v;
  size_t i = 0;
  while (i <= path.size()) {
    const size_t j = std::min(path.find('.', i), path.size());
    const std::string key = path.substr(i, j - i);
    if (!cur.is_object()) return Value{};
    const Value* next = cur.as_object().find(key);
    if (!next) return Value{};
    cur = *next;
    i = j + 1;
  }
  return cur;
}

namespace {

// Python's str.format with {}, {0} and {name} fields (no format specs) and {{ }} escapes.
std::string format(const std::string& f, CallArgs& a) {
  std::string r;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
      r += c;
      ++i;
      continue;
    }
    if (c == '}') fail("format(): a single '}' in the format string");
    if (c != '{') {
      r += c;
      continue;
    }
    const size_t end = f.find('}', i);
    if (end == std::string::npos) fail("format(): a '{' without its '}'");
    const std::string field = f.substr(i + 1, end - i - 1);
    if (field.find_first_of(":!") != std::string::npos) fail("format(): format specs ({x:...}) are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      v = arg(a, auto_index++, "");
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      v = field.size() <= 6 ? arg(a, static_cast<size_t>(std::stoul(field)), "") : nullptr;
    } else {
      v = arg(a, SIZE_MAX, field);
    }
    if (!v) fail("format(): no value for the field {" + field + "}");
    r += v->is_string() ? v->as_string() : to_output(*v);
    i = end;
  }
  return r;
}

bool string_method(Interpreter& in, const std::string& s, std::string_view name, CallArgs& a, Value& r) {
  const auto chars = [&](std::string_view what) { return string_arg(a, 0, "chars", what, std::string(k_whitespace)); };
  if (name == "strip") {
    r = strip(s, chars("strip()"), true, true);
  } else if (name == "lstrip") {
    r = strip(s, chars("lstrip()"), true, false);
  } else if (name == "rstrip") {
    r = strip(s, chars("rstrip()"), false, true);
  } else if (name == "split") {
    const Value* max = arg(a, 1, "maxsplit");
    Array parts = split(s, arg(a, 0, "sep"), max && max->is_int() ? max->as_int() : -1);
    in.check_items(parts.size());
    r = std::move(parts);
  } else if (name == "startswith" || name == "endswith") {
    const Value* affix = arg(a, 0, "prefix");
    if (!affix) fail(std::string(name) + "() needs an argument");
    r = starts_or_ends(s, *affix, name == "startswith");
  } else if (name == "replace") {
    const Value* count = arg(a, 2, "count");
    std::string out = replace_all(s, string_arg(a, 0, "old", "replace()", ""), string_arg(a, 1, "new", "replace()", ""),
                                  count && count->is_int() ? count->as_int() : -1);
    in.check_string(out.size());
    r = std::move(out);
  } else if (name == "upper" || name == "lower") {
    r = ascii_case(s, name == "upper");
  } else if (name == "title") {
    r = title_case(s);
  } else if (name == "capitalize") {
    std::string out = ascii_case(s, false);
    if (!out.empty()) out[0] = ascii_case(out.substr(0, 1), true)[0];
    r = std::move(out);
  } else if (name == "find" || name == "rfind" || name == "count") {
    const std::string sub = string_arg(a, 0, "sub", "find()", "");
    if (name == "count") {
      int64_t n = 0;
      for (size_t i = s.find(sub); !sub.empty() && i != std::string::npos; i = s.find(sub, i + sub.size())) ++n;
      r = n;
    } else {
      const size_t i = name == "find" ? s.find(sub) : s.rfind(sub);
      r = i == std::string::npos ? int64_t{-1} : static_cast<int64_t>(code_point_count(s.substr(0, i)));
    }
  } else if (name == "format") {
    r = format(s, a);
    in.check_string(r.as_string().size());
  } else if (name == "join") {
    const Value* seq = arg(a, 0, "iterable");
    if (!seq) fail("join() needs a list");
    r = join(in, *seq, s, nullptr);
  } else if (name == "isdigit" || name == "isspace" || name == "isalpha") {
    bool ok = !s.empty();
    for (const char c : s) {
      if (name == "isdigit") ok = ok && c >= '0' && c <= '9';
      if (name == "isspace") ok = ok && k_whitespace.find(c) != std::string_view::npos;
      if (name == "isalpha") ok = ok && is_alpha(c);
    }
    r = ok;
  } else {
    return false;
  }
  return true;
}

bool array_method(Interpreter& in, const Value& self, std::string_view name, CallArgs& a, Value& r) {
  Array& arr = self.as_array();
  if (name == "append") {
    if (a.positional.size() != 1) fail("append() takes one value");
    check_no_cycle(in, self, a.positional[0]);
    in.check_items(arr.size() + 1);
    arr.push_back(a.positional[0]);
    r = None{};
  } else if (name == "extend") {
    if (a.positional.size() != 1) fail("extend() takes one list");
    Array more = iterate(a.positional[0]);
    for (const Value& x : more) check_no_cycle(in, self, x);
    in.check_items(arr.size() + more.size());
    arr.insert(arr.end(), more.begin(), more.end());
    r = None{};
  } else if (name == "pop") {
    if (arr.empty()) fail("pop() from an empty list");
    int64_t i = a.positional.empty() ? -1 : (a.positional[0].is_int() ? a.positional[0].as_int() : -1);
    if (i < 0) i += static_cast<int64_t>(arr.size());
    if (i < 0 || i >= static_cast<int64_t>(arr.size())) fail("pop(): index out of range");
    r = arr[static_cast<size_t>(i)];
    arr.erase(arr.begin() + i);
  } else if (name == "index") {
    if (a.positional.empty()) fail("index() needs a value");
    for (size_t i = 0; i < arr.size(); ++i) {
      if (equals(arr[i], a.positional[0])) {
        r = static_cast<int64_t>(i);
        return true;
      }
    }
    fail("index(): the value is not in the list");
  } else if (name == "count") {
    if (a.positional.empty()) fail("count() needs a value");
    r = static_cast<int64_t>(
        std::count_if(arr.begin(), arr.end(), [&](const Value& x) { return equals(x, a.positional[0]); }));
  } else {
    return false;
  }
  return true;
}

bool object_method(Interpreter& in, const Value& self, std::string_view name, CallArgs& a, Value& r) {
  Object& obj = self.as_object();
  if (name == "items") {
    Array out;
    for (const auto& [k, v] : obj.items()) out.emplace_back(Array{Value(k), v});
    r = std::move(out);
  } else if (name == "keys" || name == "values") {
    Array out;
    for (const auto& [k, v] : obj.items()) out.push_back(name == "keys" ? Value(k) : v);
    r = std::move(out);
  } else if (name == "get") {
    if (a.positional.empty()) fail("get() needs a key");
    const Value* v = a.positional[0].is_string() ? obj.find(a.positional[0].as_string()) : nullptr;
    r = v ? *v : (a.positional.size() > 1 ? a.positional[1] : Value(None{}));
  } else if (name == "update") {
    for (const Value& other : a.positional) {
      if (!other.is_object()) fail("update() takes a dict");
      for (const auto& [k, v] : other.as_object().items()) {
        check_no_cycle(in, self, v);
        obj.set(k, v);
      }
    }
    for (auto& [k, v] : a.named) {
      check_no_cycle(in, self, v);
      obj.set(k, v);
    }
    in.check_items(obj.size());
    r = None{};
  } else {
    return false;
  }
  return true;
}

// The template's own format string: -Wformat-nonliteral cannot check it, and need not (strftime
// reads nothing but `t`).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
std::string strftime(const std::tm& t, const std::string& fmt) {
  if (fmt.empty()) return {};
  std::string buf(256 + fmt.size() * 8, '\0');
  const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &t);
  buf.resize(n);
  return buf;
}
#pragma GCC diagnostic pop

}  // namespace

bool call_method(Interpreter& in, const Value& self, std::string_view name, CallArgs& args, Value& result) {
  if (self.is_string()) return string_method(in, self.as_string(), name, args, result);
  if (self.is_array()) return array_method(in, self, name, args, result);
  if (self.is_object()) return object_method(in, self, name, args, result);
  return false;
}

Object builtin_globals(Interpreter& in) {
  Object g;
  Interpreter* ip = &in;
  g.set("range", Function{"range", [ip](CallArgs& a) -> Value {
                            int64_t v[3] = {0, 0, 1};
                            if (a.positional.empty() || a.positional.size() > 3) fail("range() takes 1 to 3 integers");
                            for (const Value& x : a.positional) {
                              if (!x.is_int()) fail("range() takes integers, not " + std::string(x.type_name()));
                            }
                            if (a.positional.size() == 1) {
                              v[1] = a.positional[0].as_int();
                            } else {
                              v[0] = a.positional[0].as_int();
                              v[1] = a.positional[1].as_int();
                              if (a.positional.size() == 3) v[2] = a.positional[2].as_int();
                            }
                            if (v[2] == 0) fail("range(): the step cannot be zero");
                            int64_t span = 0;
                            const bool overflow = v[2] > 0 ? __builtin_sub_overflow(v[1], v[0], &span)
                                                           : __builtin_sub_overflow(v[0], v[1], &span);
                            if (overflow || v[2] == INT64_MIN) fail("range(): the bounds are too far apart");
                            const int64_t step = v[2] > 0 ? v[2] : -v[2];
                            const int64_t n = span <= 0 ? 0 : span / step + (span % step != 0);
                            ip->check_items(static_cast<size_t>(n));
                            ip->charge(n);
                            Array r;
                            r.reserve(static_cast<size_t>(n));
                            for (int64_t i = 0; i < n; ++i) r.emplace_back(v[0] + i * v[2]);
                            return r;
                          }});
  const auto make_dict = [](CallArgs& a) -> Value {
    Object o;
    for (const Value& p : a.positional) {
      if (!p.is_object()) fail("namespace() and dict() take a dict or name=value pairs");
      for (const auto& [k, v] : p.as_object().items()) o.set(k, v);
    }
    for (auto& [k, v] : a.named) o.set(k, v);
    return o;
  };
  g.set("namespace", Function{"namespace", make_dict});
  g.set("dict", Function{"dict", make_dict});
  g.set("raise_exception", Function{"raise_exception", [](CallArgs& a) -> Value {
                                      const std::string msg = a.positional.empty() ? "" : to_output(a.positional[0]);
                                      throw TemplateError{"the template rejects this conversation: " + msg, 0, true};
                                    }});
  g.set("strftime_now", Function{"strftime_now", [ip](CallArgs& a) -> Value {
                                   if (a.positional.empty() || !a.positional[0].is_string())
                                     fail("strftime_now() takes a format string");
                                   return strftime(ip->now(), a.positional[0].as_string());
                                 }});
  return g;
}

}  // namespace kvc::chat::jinja
