// Values of the Jinja subset that chat templates use: undefined, none, booleans, numbers, strings, lists, dicts,
// functions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kvc::chat::jinja {

class Value;
using Array = std::vector<Value>;

// A dict in insertion order, as Python's: items(), tojson and iteration show keys in the order
// they were set. Keys are strings (chat templates use no others). Lookup is linear: template
// dicts hold a handful of keys.
class Object {
 public:
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(std::string key, Value value);
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  Value& value_at(size_t i);  // the value of the i-th key set
  size_t size() const;

 private:
  std::vector<std::pair<std::string, Value>> items_;
};

// Arguments of a call, a filter or a test: positional, then keyword (`indent=2`).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};

// A global (range, namespace, ...), a macro or a bound method such as loop.cycle.
struct Function {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

struct Undefined {};
struct None {};

// Lists and dicts are shared, as in Python: `{% set ns.x = 1 %}` and `list.append(x)` change the
// one object every name that holds it sees.
class Value {
 public:
  enum class Kind { undefined, none, boolean, integer, number, string, array, object, function };

  Value() = default;                                 // undefined
  Value(None) : v_(None{}) {}                        // NOLINT: implicit by design
  Value(bool b) : v_(b) {}                           // NOLINT
  Value(int64_t i) : v_(i) {}                        // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}      // NOLINT
  Value(double d) : v_(d) {}                         // NOLINT
  Value(std::string s) : v_(std::move(s)) {}         // NOLINT
  Value(std::string_view s) : v_(std::string(s)) {}  // NOLINT
  Value(const char* s) : v_(std::string(s)) {}       // NOLINT
  // Lists and dicts are freed without recursion (jinja_value.cpp): a template can nest them far
  // deeper than recursive destructors could go on the C++ stack.
  Value(Array a);                                                            // NOLINT
  Value(Object o);                                                           // NOLINT
  Value(Function f) : v_(std::make_shared<const Function>(std::move(f))) {}  // NOLINT

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::undefined; }
  bool is_none() const { return kind() == Kind::none; }
  bool is_bool() const { return kind() == Kind::boolean; }
  bool is_int() const { return kind() == Kind::integer; }
  bool is_number() const { return kind() == Kind::integer || kind() == Kind::number; }
  bool is_string() const { return kind() == Kind::string; }
  bool is_array() const { return kind() == Kind::array; }
  bool is_object() const { return kind() == Kind::object; }
  bool is_function() const { return kind() == Kind::function; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_number() const;  // an integer or a float as a double
  const std::string& as_string() const { return std::get<std::string>(v_); }
  Array& as_array() const { return *std::get<std::shared_ptr<Array>>(v_); }
  Object& as_object() const { return *std::get<std::shared_ptr<Object>>(v_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(v_); }
  // Whether two values are the same list or dict object (the `sameas` test).
  bool same_object(const Value& other) const;

  // Python's truth: false, 0, "", [], {}, none and undefined are false.
  bool truthy() const;
  // "string", "list", ... for error messages.
  std::string_view type_name() const;

 private:
  std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<Array>, std::shared_ptr<Object>,
               std::shared_ptr<const Function>>
      v_;
};

// What `{{ v }}` writes: strings as they are; none and undefined as nothing (as llama.cpp does;
// Python would write "None"); True/False; numbers, lists and dicts as Python writes them.
std::string to_output(const Value& v);
// Python's repr: strings quoted ('a'), lists and dicts as ['a', 1] and {'k': 'v'}.
std::string to_repr(const Value& v);
// Python's float formatting: 1.0, 0.5, 1e-05, 1e+16 (shortest round-trip digits).
std::string format_float(double d);
// json.dumps(v, ensure_ascii=False): ", " and ": " separators, or with `indent` >= 0 one item
// a line. Undefined becomes null; a function is an error (the message names it).
bool to_json(const Value& v, int indent, std::string& out, std::string& error);

// A JSON text as a value (objects keep their key order), for the from_json filter; false and
// `error` on malformed JSON.
bool from_json(std::string_view text, Value& out, std::string& error);

// Python's ==, across integers and floats, element by element for lists and dicts.
bool equals(const Value& a, const Value& b);
// Python's <, ==, > for numbers, strings (bytewise) and lists; `ok` false where Python would
// raise (comparing a string with a number).
int compare(const Value& a, const Value& b, bool& ok);

}  // namespace kvc::chat::jinja
