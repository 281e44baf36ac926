// Runs a parsed Jinja template: scopes, loops, macros, expressions, within limits on work, depth and output.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/chat/jinja_ast.h"

namespace kvc::chat::jinja {

// Bounds that keep a bad or hostile template from hanging or exhausting memory; passing one is
// a render error naming it.
struct Limits {
  size_t max_output_bytes =
      size_t{32} << 20;            // all text written, captured blocks and macros included; also any one string
  int max_depth = 128;             // nesting of blocks and expressions; macro calls in progress
  int64_t max_steps = 10'000'000;  // loop iterations and expression nodes, plus 1 per 64 bytes of strings built
  size_t max_items = 1'000'000;    // one list (range(), concatenation, append)
  int max_recursion = 2000;  // statements and expressions being run at once, across macro calls: bounds the C++ stack
};

// Variables live in frames: the template's top level, one per loop iteration, one per macro call.
// A name is looked up from the innermost frame out, then in the render's variables, then in the
// built-in globals; `set` writes to the innermost frame (so a loop's sets do not leak, as in Jinja2).
struct Frame {
  Frame* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;
  Value* find(std::string_view name);
  void set(std::string_view name, Value v);
};

class Interpreter {
 public:
  // `variables`: what the template sees (messages, bos_token, ...); `now`: strftime_now's time.
  Interpreter(const Limits& limits, const Object& variables, const std::tm& now);

  // Renders the template; throws TemplateError.
  std::string run(const Body& body);

  // For the built-ins: the time strftime_now formats, the work budget, calls into values.
  const std::tm& now() const { return now_; }
  const Limits& limits() const { return limits_; }
  // Counts n steps of work; fails past max_steps.
  void charge(int64_t n);
  // Fails if a string of `bytes` or a list of `items` would pass the limits.
  void check_string(size_t bytes) const;
  void check_items(size_t items) const;
  Value call(const Value& callee, CallArgs& args, std::string_view what);
  int line() const { return line_; }

 private:
  enum class Flow { normal, break_, continue_ };
  Flow exec_body(const Body& body, Frame& frame);
  Flow exec(const Node& n, Frame& frame);
  void exec_for(const Node& n, Frame& frame, Flow& flow);
  void assign(const Node& n, Frame& frame, Value v);
  void bind(const std::vector<std::string>& targets, Frame& frame, Value v);
  std::string capture(const Body& body, Frame& frame);
  Value define_macro(const Node& n);
  void emit(std::string_view s);

  Value eval(const Expr& e, Frame& frame);
  Value lookup(const std::string& name, Frame& frame);
  Value eval_call(const Expr& e, Frame& frame);
  Value eval_binary(const Expr& e, Frame& frame);
  CallArgs eval_args(const Expr& e, size_t first, Frame& frame);

  // Counts the statements and expressions being run (the C++ recursion) while it lives.
  class Nesting {
   public:
    explicit Nesting(Interpreter& in);
    ~Nesting() { --in_.recursion_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Interpreter& in_;
  };

  Limits limits_;
  const Object& variables_;
  Object builtins_;
  std::tm now_;
  Frame root_;
  std::string* out_ = nullptr;
  size_t bytes_written_ = 0;
  int64_t steps_ = 0;
  int call_depth_ = 0;
  int recursion_ = 0;
  int line_ = 0;
};

}  // namespace kvc::chat::jinja
