// Jinja's built-ins: filters, tests, globals, the Python string/list/dict methods chat templates call, and their shared
// helpers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/chat/jinja_value.h"

namespace kvc::chat::jinja {

class Interpreter;

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
// Throw TemplateError on bad arguments; an unknown name is a bug (the parser checked it).
Value apply_filter(Interpreter& in, std::string_view name, Value input, CallArgs& args);
bool apply_test(Interpreter& in, std::string_view name, const Value& v, CallArgs& args);
// `self.name(args)` for a string, list or dict method (strip, split, items, get, append, ...);
// false if `self` has no method of that name.
bool call_method(Interpreter& in, const Value& self, std::string_view name, CallArgs& args, Value& result);
// range, namespace, dict, raise_exception, strftime_now; they call back into `in`.
Object builtin_globals(Interpreter& in);

// Strings are UTF-8; length, indexing, slicing and iteration count code points, as Python's do.
std::vector<std::string> code_points(const std::string& s);
size_t code_point_count(const std::string& s);
// Python's value[start:stop:step] for a list or a string (null bounds: the defaults).
Value slice(const Value& v, const Value* start, const Value* stop, const Value* step);
// The items a for loop or a filter iterates: a list's elements, a dict's keys, a string's
// characters; undefined and none give none (templates loop over optional fields).
Array iterate(const Value& v);

// Fails if putting `v` into `container` (a list or dict) would make it hold itself: reference
// cycles would never be freed, and printing one would not end.
void check_no_cycle(Interpreter& in, const Value& container, const Value& v);

// Helpers shared by the filters and the methods.
inline constexpr std::string_view k_whitespace = " \t\n\r\v\f";
// An argument by position or keyword; null if absent.
const Value* arg(CallArgs& a, size_t pos, std::string_view name);
const std::string& need_string(const Value& v, std::string_view what);
// A string argument, `def` when absent or none.
std::string string_arg(CallArgs& a, size_t pos, std::string_view name, std::string_view what, std::string def);
std::string strip(const std::string& s, std::string_view chars, bool left, bool right);
std::string ascii_case(std::string s, bool upper);  // ASCII letters only, as chat templates need
std::string title_case(std::string s);
bool is_alpha(char c);
// Python's str.split: sep null or none splits on runs of whitespace; maxsplit < 0: no limit.
Array split(const std::string& s, const Value* sep, int64_t maxsplit);
// Python's str.replace; count < 0: every occurrence.
std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count);
// The items' text joined by sep (an item's `attribute` if given), within the string limit.
std::string join(Interpreter& in, const Value& seq, const std::string& sep, const Value* attribute);
// v.a.b for a dotted path; undefined where a step is missing.
Value attribute_of(const Value& v, const std::string& path);

}  // namespace kvc::chat::jinja
