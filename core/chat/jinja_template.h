// A parsed Jinja template (the subset model chat templates use) and its render: the public face of the interpreter.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "core/chat/jinja_interpreter.h"
#include "core/chat/jinja_value.h"
#include "core/util/result.h"

namespace kvc::chat::jinja {

// What runs: text, {{ }}, {% if/elif/else %}, {% for %} (with `loop`, `else`, a filter `if`,
// break/continue), {% set %} (names, namespace attributes, blocks), {% macro %}, {% filter %},
// {% generation %}, {% raw %}, comments, the whitespace control of Hugging Face's chat templates;
// expressions with Python's operators and semantics, slicing, the common filters, tests and
// string/list/dict methods, and range, namespace, dict, raise_exception, strftime_now.
// What does not: {% include/import/extends/block/call %}, recursive loops, *args.
class Template {
 public:
  // Syntax errors, unknown filters or tests, and nesting past limits.max_depth are errors
  // naming the line: "chat template, line 12: ...".
  static Result<Template> parse(std::string_view source, const Limits& limits = {});

  // Renders with `variables` (messages, bos_token, ...); `now` is what strftime_now formats.
  // raise_exception(), a bad value and a passed limit are errors naming the line.
  Result<std::string> render(const Object& variables, const std::tm& now) const;

 private:
  std::shared_ptr<const Body> body_;
  Limits limits_;
};

}  // namespace kvc::chat::jinja
