// Jinja values: truth, Python-style printing and repr, JSON, equality and ordering.
#include "core/chat/jinja_value.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/chat/jinja_lexer.h"

namespace kvc::chat::jinja {

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : items_) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Object::find(std::string_view key) {
  for (auto& [k, v] : items_) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value& Object::value_at(size_t i) { return items_[i].second; }
size_t Object::size() const { return items_.size(); }

void Object::set(std::string key, Value value) {
  if (Value* v = find(key)) {
    *v = std::move(value);
    return;
  }
  items_.emplace_back(std::move(key), std::move(value));
}

namespace {

// Values that still hold lists or dicts, waiting to be freed by the outermost deleter running.
thread_local std::vector<Value>* t_pending = nullptr;

void take_nested(Array& a, std::vector<Value>& out) {
  for (Value& v : a) {
    if (v.is_array() || v.is_object()) out.push_back(std::move(v));
  }
}
void take_nested(Object& o, std::vector<Value>& out) {
  for (size_t i = 0; i < o.size(); ++i) {
    Value& v = o.value_at(i);
    if (v.is_array() || v.is_object()) out.push_back(std::move(v));
  }
}

// Frees a container after moving out the containers it holds; the outermost call frees those in
// a loop, each pushing its own nested containers instead of recursing.
template <typename T>
struct IterativeDelete {
  void operator()(T* p) const {
    std::vector<Value> nested;
    take_nested(*p, nested);
    delete p;
    if (t_pending) {
      for (Value& v : nested) t_pending->push_back(std::move(v));
      return;
    }
    t_pending = &nested;
    while (!nested.empty()) {
      Value v = std::move(nested.back());
      nested.pop_back();
    }  // v's last reference, if it was one, frees its container here and queues what it held
    t_pending = nullptr;
  }
};

}  // namespace

Value::Value(Array a) : v_(std::shared_ptr<Array>(new Array(std::move(a)), IterativeDelete<Array>{})) {}
Value::Value(Object o) : v_(std::shared_ptr<Object>(new Object(std::move(o)), IterativeDelete<Object>{})) {}

double Value::as_number() const { return is_int() ? static_cast<double>(as_int()) : std::get<double>(v_); }

bool Value::same_object(const Value& other) const {
  if (kind() != other.kind()) return false;
  if (is_array()) return &as_array() == &other.as_array();
  if (is_object()) return &as_object() == &other.as_object();
  if (is_function()) return &as_function() == &other.as_function();
  return equals(*this, other);
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return as_bool();
    case Kind::integer: return as_int() != 0;
    case Kind::number: return as_number() != 0.0;
    case Kind::string: return !as_string().empty();
    case Kind::array: return !as_array().empty();
    case Kind::object: return as_object().size() != 0;
    case Kind::function: return true;
  }
  return false;
}

std::string_view Value::type_name() const {
  switch (kind()) {
    case Kind::undefined: return "undefined";
    case Kind::none: return "none";
    case Kind::boolean: return "boolean";
    case Kind::integer: return "integer";
    case Kind::number: return "float";
    case Kind::string: return "string";
    case Kind::array: return "list";
    case Kind::object: return "dict";
    case Kind::function: return "function";
  }
  return "?";
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  // Python writes the shortest round-trip digits, in exponent form below 1e-4 and from 1e16.
  const double a = std::fabs(d);
  const bool sci = a != 0.0 && (a < 1e-4 || a >= 1e16);
  const auto r =
      std::to_chars(buf, buf + sizeof buf, d, sci ? std::chars_format::scientific : std::chars_format::fixed);
  std::string s(buf, r.ptr);
  if (sci) {
    // to_chars writes 1e-05 as "1e-05" already; Python wants at least two exponent digits, as here.
    return s;
  }
  if (s.find('.') == std::string::npos) s += ".0";
  return s;
}

namespace {

void repr_string(const std::string& s, std::string& out) {
  // Python picks double quotes when the text holds a single quote and no double quote.
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  out += q;
  for (const char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == q) {
          out += '\\';
          out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += q;
}

constexpr int k_max_value_depth = 64;

void repr(const Value& v, std::string& out, bool top, int depth = 0) {
  if (depth > k_max_value_depth)
    fail("a list or dict nested deeper than 64 levels (or holding itself) cannot be printed");
  switch (v.kind()) {
    case Value::Kind::undefined: out += top ? "" : "None"; return;
    case Value::Kind::none: out += top ? "" : "None"; return;
    case Value::Kind::string:
      if (top) {
        out += v.as_string();
      } else {
        repr_string(v.as_string(), out);
      }
      return;
    case Value::Kind::array: {
      out += '[';
      bool first = true;
      for (const Value& e : v.as_array()) {
        if (!first) out += ", ";
        first = false;
        repr(e, out, false, depth + 1);
      }
      out += ']';
      return;
    }
    case Value::Kind::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.as_object().items()) {
        if (!first) out += ", ";
        first = false;
        repr_string(k, out);
        out += ": ";
        repr(e, out, false, depth + 1);
      }
      out += '}';
      return;
    }
    case Value::Kind::boolean: out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::integer: out += std::to_string(v.as_int()); return;
    case Value::Kind::number: out += format_float(v.as_number()); return;
    case Value::Kind::function: out += "<function " + v.as_function().name + ">"; return;
  }
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

bool json(const Value& v, int indent, int depth, std::string& out, std::string& error) {
  if (depth > 64) {
    error = "tojson: the value is nested deeper than 64 levels";
    return false;
  }
  const auto newline = [&](int level) {
    out += '\n';
    out.append(static_cast<size_t>(indent * level), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none: out += "null"; return true;
    case Value::Kind::boolean: out += v.as_bool() ? "true" : "false"; return true;
    case Value::Kind::integer: out += std::to_string(v.as_int()); return true;
    case Value::Kind::number: {
      const double d = v.as_number();
      out += std::isfinite(d) ? format_float(d) : (std::isnan(d) ? "NaN" : (d > 0 ? "Infinity" : "-Infinity"));
      return true;
    }
    case Value::Kind::string: json_string(v.as_string(), out); return true;
    case Value::Kind::array: {
      const Array& a = v.as_array();
      if (a.empty()) {
        out += "[]";
        return true;
      }
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        if (!json(a[i], indent, depth + 1, out, error)) return false;
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return true;
    }
    case Value::Kind::object: {
      const auto& items = v.as_object().items();
      if (items.empty()) {
        out += "{}";
        return true;
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        json_string(items[i].first, out);
        out += ": ";
        if (!json(items[i].second, indent, depth + 1, out, error)) return false;
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return true;
    }
    case Value::Kind::function:
      error = "tojson: a function (" + v.as_function().name + ") has no JSON form";
      return false;
  }
  return false;
}

}  // namespace

std::string to_output(const Value& v) {
  std::string out;
  repr(v, out, true);
  return out;
}

std::string to_repr(const Value& v) {
  std::string out;
  repr(v, out, false);
  return out;
}

bool to_json(const Value& v, int indent, std::string& out, std::string& error) {
  return json(v, indent, 0, out, error);
}

namespace {

Value from_json_value(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return None{};
    case nlohmann::ordered_json::value_t::boolean: return j.get<bool>();
    case nlohmann::ordered_json::value_t::number_integer: return j.get<int64_t>();
    case nlohmann::ordered_json::value_t::number_unsigned: return static_cast<int64_t>(j.get<uint64_t>());
    case nlohmann::ordered_json::value_t::number_float: return j.get<double>();
    case nlohmann::ordered_json::value_t::string: return j.get<std::string>();
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(from_json_value(e));
      return a;
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (const auto& [k, v] : j.items()) o.set(k, from_json_value(v));
      return o;
    }
    default: return Value{};
  }
}

}  // namespace

bool from_json(std::string_view text, Value& out, std::string& error) {
  // Nesting is bounded before parsing: the conversion below recurses.
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  if (max_depth > k_max_value_depth) {
    error = "from_json: the JSON nests deeper than 64 levels";
    return false;
  }
  const auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    error = "from_json: the text is not valid JSON";
    return false;
  }
  out = from_json_value(j);
  return true;
}

namespace {

bool equals_at(const Value& a, const Value& b, int depth);

}  // namespace

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

namespace {

bool equals_at(const Value& a, const Value& b, int depth) {
  if (depth > k_max_value_depth)
    fail("lists or dicts nested deeper than 64 levels (or holding themselves) cannot be compared");
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return a.as_number() == b.as_number();
  }
  // Python: True == 1; Jinja chat templates never rely on it, so booleans compare as booleans.
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none: return true;
    case Value::Kind::boolean: return a.as_bool() == b.as_bool();
    case Value::Kind::string: return a.as_string() == b.as_string();
    case Value::Kind::array: {
      const Array& x = a.as_array();
      const Array& y = b.as_array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals_at(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::object: {
      const Object& x = a.as_object();
      const Object& y = b.as_object();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* w = y.find(k);
        if (!w || !equals_at(v, *w, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::function: return &a.as_function() == &b.as_function();
    default: return false;
  }
}

int compare_at(const Value& a, const Value& b, bool& ok, int depth) {
  if (depth > k_max_value_depth) fail("lists nested deeper than 64 levels (or holding themselves) cannot be compared");
  ok = true;
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    const double x = a.as_number();
    const double y = b.as_number();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_bool() && b.is_bool()) return static_cast<int>(a.as_bool()) - static_cast<int>(b.as_bool());
  if (a.is_array() && b.is_array()) {
    const Array& x = a.as_array();
    const Array& y = b.as_array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      const int c = compare_at(x[i], y[i], ok, depth + 1);
      if (!ok || c != 0) return c;
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  ok = false;
  return 0;
}

}  // namespace

int compare(const Value& a, const Value& b, bool& ok) { return compare_at(a, b, ok, 0); }

}  // namespace kvc::chat::jinja
