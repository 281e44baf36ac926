// The Jinja interpreter: statements, scoping, loops with `loop`, macros, and expression evaluation with Python
// semantics.
#include "core/chat/jinja_interpreter.h"

#include <climits>
#include <cmath>

#include "core/chat/jinja_builtins.h"
#include "core/chat/jinja_lexer.h"
#include "core/chat/jinja_parser.h"

namespace kvc::chat::jinja {

Value* Frame::find(std::string_view name) {
  for (auto& [k, v] : vars) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Frame::set(std::string_view name, Value v) {
  if (Value* slot = find(name)) {
    *slot = std::move(v);
    return;
  }
  vars.emplace_back(std::string(name), std::move(v));
}

Interpreter::Nesting::Nesting(Interpreter& in) : in_(in) {
  if (++in_.recursion_ > in_.limits_.max_recursion) {
    fail("the template nests statements, expressions and macro calls deeper than " +
         std::to_string(in_.limits_.max_recursion) + " levels");
  }
}

Interpreter::Interpreter(const Limits& limits, const Object& variables, const std::tm& now)
    : limits_(limits), variables_(variables), now_(now) {
  builtins_ = builtin_globals(*this);
}

std::string Interpreter::run(const Body& body) {
  std::string out;
  out_ = &out;
  exec_body(body, root_);
  out_ = nullptr;
  return out;
}

void Interpreter::charge(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) {
    fail("the template did more than " + std::to_string(limits_.max_steps) +
         " steps of work (a loop that does not end?)");
  }
}

void Interpreter::check_string(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) {
    fail("a string of " + std::to_string(bytes) + " bytes passes the limit of " +
         std::to_string(limits_.max_output_bytes));
  }
}

void Interpreter::check_items(size_t items) const {
  if (items > limits_.max_items) {
    fail("a list of " + std::to_string(items) + " items passes the limit of " + std::to_string(limits_.max_items));
  }
}

void Interpreter::emit(std::string_view s) {
  bytes_written_ += s.size();
  if (bytes_written_ > limits_.max_output_bytes) {
    fail("the template's output passed the limit of " + std::to_string(limits_.max_output_bytes >> 20) + " MiB");
  }
  out_->append(s);
}

Interpreter::Flow Interpreter::exec_body(const Body& body, Frame& frame) {
  for (const NodePtr& n : body) {
    const Flow f = exec(*n, frame);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

std::string Interpreter::capture(const Body& body, Frame& frame) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  const Flow f = exec_body(body, frame);
  out_ = saved;
  if (f != Flow::normal) fail("'{% break %}' or '{% continue %}' leaves a block it cannot leave");
  return buf;
}

Interpreter::Flow Interpreter::exec(const Node& n, Frame& frame) {
  const Nesting nesting(*this);
  line_ = n.line;
  charge(1);
  switch (n.kind) {
    case Node::Kind::text: emit(n.text); return Flow::normal;
    case Node::Kind::output: {
      const Value v = eval(*n.expr, frame);
      if (v.is_string()) {
        emit(v.as_string());
      } else {
        emit(to_output(v));
      }
      return Flow::normal;
    }
    case Node::Kind::if_:
      for (const auto& [cond, body] : n.branches) {
        if (!cond || eval(*cond, frame).truthy()) return exec_body(body, frame);
      }
      return Flow::normal;
    case Node::Kind::for_: {
      Flow flow = Flow::normal;
      exec_for(n, frame, flow);
      return flow;
    }
    case Node::Kind::set: assign(n, frame, eval(*n.expr, frame)); return Flow::normal;
    case Node::Kind::set_block: {
      Value v = capture(n.body, frame);
      if (n.expr) {
        Frame f{&frame, {}};
        f.set(k_block_input, std::move(v));
        v = eval(*n.expr, f);
      }
      frame.set(n.targets[0], std::move(v));
      return Flow::normal;
    }
    case Node::Kind::macro: frame.set(n.name, define_macro(n)); return Flow::normal;
    case Node::Kind::filter_block: {
      Frame f{&frame, {}};
      f.set(k_block_input, capture(n.body, frame));
      const Value v = eval(*n.expr, f);
      emit(v.is_string() ? v.as_string() : to_output(v));
      return Flow::normal;
    }
    case Node::Kind::do_: eval(*n.expr, frame); return Flow::normal;
    case Node::Kind::break_: return Flow::break_;
    case Node::Kind::continue_: return Flow::continue_;
    case Node::Kind::generation: return exec_body(n.body, frame);
  }
  return Flow::normal;
}

void Interpreter::assign(const Node& n, Frame& frame, Value v) {
  if (!n.attribute.empty()) {
    Value target = lookup(n.targets[0], frame);
    if (!target.is_object()) {
      fail("'{% set " + n.targets[0] + "." + n.attribute + " %}' needs a namespace(), but " + n.targets[0] + " is " +
           std::string(target.type_name()));
    }
    check_no_cycle(*this, target, v);
    target.as_object().set(n.attribute, std::move(v));
    return;
  }
  bind(n.targets, frame, std::move(v));
}

void Interpreter::bind(const std::vector<std::string>& targets, Frame& frame, Value v) {
  if (targets.size() == 1) {
    frame.set(targets[0], std::move(v));
    return;
  }
  const Array items = iterate(v);
  if (items.size() != targets.size()) {
    fail("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) + " names");
  }
  for (size_t i = 0; i < items.size(); ++i) frame.set(targets[i], items[i]);
}

// The `loop` variable: one dict per loop whose values change with each iteration (a template that
// keeps `loop` past its iteration sees later values; none does).
//   index0 index revindex revindex0 first last length depth depth0 previtem nextitem cycle
void Interpreter::exec_for(const Node& n, Frame& frame, Flow& flow) {
  const Value seq = eval(*n.expr, frame);
  if (!seq.is_undefined() && !seq.is_none() && !seq.is_array() && !seq.is_object() && !seq.is_string()) {
    fail("cannot loop over " + std::string(seq.type_name()));
  }
  Array items = iterate(seq);
  Frame f{&frame, {}};
  if (n.condition) {  // `for x in xs if c`: loop.length and loop.index count the kept items
    Array kept;
    for (Value& item : items) {
      charge(1);
      f.vars.clear();
      bind(n.targets, f, item);
      if (eval(*n.condition, f).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  flow = Flow::normal;
  if (items.empty()) {
    if (exec_body(n.else_body, frame) == Flow::break_) flow = Flow::break_;
    return;
  }
  const auto length = static_cast<int64_t>(items.size());
  auto index = std::make_shared<int64_t>(0);
  Object loop_vars;
  for (const char* key : {"index0", "index", "revindex", "revindex0", "first", "last", "length", "depth", "depth0",
                          "previtem", "nextitem"}) {
    loop_vars.set(key, Value{});
  }
  loop_vars.set("cycle", Function{"loop.cycle", [index](CallArgs& a) -> Value {
                                    if (a.positional.empty()) fail("loop.cycle() needs at least one value");
                                    return a.positional[static_cast<size_t>(*index) % a.positional.size()];
                                  }});
  const Value loop(std::move(loop_vars));
  Object& lv = loop.as_object();
  // By index, each time: a template may add keys to `loop` (the vector may move).
  const auto slot = [&lv](size_t k) -> Value& { return lv.value_at(k); };
  slot(6) = length;
  slot(7) = 1;
  slot(8) = 0;
  for (int64_t i = 0; i < length; ++i) {
    charge(1);
    *index = i;
    slot(0) = i;
    slot(1) = i + 1;
    slot(2) = length - i;
    slot(3) = length - i - 1;
    slot(4) = i == 0;
    slot(5) = i == length - 1;
    slot(9) = i > 0 ? items[static_cast<size_t>(i - 1)] : Value{};
    slot(10) = i + 1 < length ? items[static_cast<size_t>(i + 1)] : Value{};
    f.vars.clear();  // each iteration starts from the enclosing scope, as in Jinja2
    f.vars.emplace_back("loop", loop);
    bind(n.targets, f, items[static_cast<size_t>(i)]);
    if (exec_body(n.body, f) == Flow::break_) break;
  }
}

Value Interpreter::define_macro(const Node& n) {
  const Node* node = &n;
  return Function{
      n.name, [this, node](CallArgs& args) -> Value {
        if (++call_depth_ > limits_.max_depth) {
          fail("macro calls nest deeper than " + std::to_string(limits_.max_depth) + " (a macro that calls itself?)");
        }
        Frame f{&root_, {}};
        if (args.positional.size() > node->params.size()) {
          fail("the macro " + node->name + " takes " + std::to_string(node->params.size()) + " arguments, not " +
               std::to_string(args.positional.size()));
        }
        for (size_t i = 0; i < node->params.size(); ++i) {
          const auto& [name, def] = node->params[i];
          Value v;
          if (i < args.positional.size()) {
            v = args.positional[i];
          } else if (def) {
            v = eval(*def, f);
          }
          f.set(name, std::move(v));
        }
        for (auto& [key, v] : args.named) {
          bool known = false;
          for (const auto& p : node->params) known = known || p.first == key;
          if (!known) fail("the macro " + node->name + " has no parameter " + key);
          f.set(key, std::move(v));
        }
        const int saved_line = line_;
        std::string s = capture(node->body, f);
        line_ = saved_line;
        --call_depth_;
        return s;
      }};
}

Value Interpreter::lookup(const std::string& name, Frame& frame) {
  for (Frame* f = &frame; f; f = f->parent) {
    if (Value* v = f->find(name)) return *v;
  }
  if (const Value* v = variables_.find(name)) return *v;
  if (const Value* v = builtins_.find(name)) return *v;
  return Value{};
}

CallArgs Interpreter::eval_args(const Expr& e, size_t first, Frame& frame) {
  CallArgs a;
  for (size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i], frame));
  for (const auto& [k, v] : e.kwargs) a.named.emplace_back(k, eval(*v, frame));
  return a;
}

Value Interpreter::call(const Value& callee, CallArgs& args, std::string_view what) {
  if (!callee.is_function()) {
    fail(std::string(what) + (callee.is_undefined() ? " is undefined" : " is a " + std::string(callee.type_name())) +
         ": it cannot be called");
  }
  // NOLINTNEXTLINE(performance-unnecessary-copy-initialization): the call may overwrite where the function was stored
  const Value keep = callee;
  return keep.as_function().call(args);
}

Value Interpreter::eval_call(const Expr& e, Frame& frame) {
  const Expr& callee = *e.args[0];
  if (callee.kind == Expr::Kind::attribute) {
    Value self = eval(*callee.args[0], frame);
    CallArgs args = eval_args(e, 1, frame);
    Value result;
    if (self.is_object()) {  // a function stored in a dict (a namespace holding a macro) comes first
      if (const Value* f = self.as_object().find(callee.name); f && f->is_function())
        return call(*f, args, callee.name);
    }
    if (call_method(*this, self, callee.name, args, result)) return result;
    fail(std::string(self.type_name()) + " has no method '" + callee.name + "'");
  }
  Value f = eval(callee, frame);
  CallArgs args = eval_args(e, 1, frame);
  return call(f, args, callee.kind == Expr::Kind::name ? "'" + callee.name + "'" : std::string("the value"));
}

namespace {

const std::string k_empty;

double to_double(const Value& v) { return v.as_number(); }

// Integer arithmetic fails on overflow (Python's integers have no bound; ours are 64-bit).
int64_t add_int(int64_t x, int64_t y) {
  int64_t r = 0;
  if (__builtin_add_overflow(x, y, &r)) fail("integer overflow");
  return r;
}
int64_t sub_int(int64_t x, int64_t y) {
  int64_t r = 0;
  if (__builtin_sub_overflow(x, y, &r)) fail("integer overflow");
  return r;
}
int64_t mul_int(int64_t x, int64_t y) {
  int64_t r = 0;
  if (__builtin_mul_overflow(x, y, &r)) fail("integer overflow");
  return r;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) {
    fail("cannot apply '" + op + "' to " + std::string(a.type_name()) + " and " + std::string(b.type_name()));
  }
  const bool ints = a.is_int() && b.is_int();
  if (op == "-") return ints ? Value(sub_int(a.as_int(), b.as_int())) : Value(to_double(a) - to_double(b));
  if (op == "*") return ints ? Value(mul_int(a.as_int(), b.as_int())) : Value(to_double(a) * to_double(b));
  if (op == "/") {
    if (to_double(b) == 0) fail("division by zero");
    return to_double(a) / to_double(b);
  }
  if (op == "//" || op == "%") {
    if (to_double(b) == 0) fail(op == "//" ? "division by zero" : "modulo by zero");
    if (ints) {
      const int64_t x = a.as_int();
      const int64_t y = b.as_int();
      if (x == INT64_MIN && y == -1) fail("integer overflow");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;  // Python floors
      return op == "//" ? Value(q) : Value(x - q * y);
    }
    const double q = std::floor(to_double(a) / to_double(b));
    return op == "//" ? Value(q) : Value(to_double(a) - q * to_double(b));
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {  // by squaring
      int64_t base = a.as_int(), e = b.as_int(), r = 1;
      while (e > 0) {
        if (e & 1) r = mul_int(r, base);
        e >>= 1;
        if (e > 0) base = mul_int(base, base);
      }
      return r;
    }
    return std::pow(to_double(a), to_double(b));
  }
  fail("unknown operator '" + op + "'");
}

}  // namespace

Value Interpreter::eval_binary(const Expr& e, Frame& frame) {
  const std::string& op = e.name;
  if (op == "and") {
    Value a = eval(*e.args[0], frame);
    return a.truthy() ? eval(*e.args[1], frame) : a;
  }
  if (op == "or") {
    Value a = eval(*e.args[0], frame);
    return a.truthy() ? a : eval(*e.args[1], frame);
  }
  const Value a = eval(*e.args[0], frame);
  const Value b = eval(*e.args[1], frame);
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    bool ok = true;
    const int c = compare(a, b, ok);
    if (!ok)
      fail("cannot compare " + std::string(a.type_name()) + " and " + std::string(b.type_name()) + " with '" + op +
           "'");
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }
  if (op == "in" || op == "notin") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) fail("'in <string>' needs a string on the left, not " + std::string(a.type_name()));
      found = b.as_string().find(a.as_string()) != std::string::npos;
    } else if (b.is_array()) {
      for (const Value& x : b.as_array()) {
        if (equals(a, x)) {
          found = true;
          break;
        }
      }
    } else if (b.is_object()) {
      found = a.is_string() && b.as_object().find(a.as_string()) != nullptr;
    } else if (!b.is_undefined() && !b.is_none()) {
      fail("'in' needs a string, list or dict on the right, not " + std::string(b.type_name()));
    }
    return op == "in" ? found : !found;
  }
  if (op == "~") {
    std::string s = a.is_string() ? a.as_string() : to_output(a);
    s += b.is_string() ? b.as_string() : to_output(b);
    check_string(s.size());
    charge(static_cast<int64_t>(s.size() / 64));
    return s;
  }
  if (op == "+") {
    // An undefined operand next to a string adds nothing (as llama.cpp has it; Jinja2 would raise).
    if ((a.is_string() || a.is_undefined()) && (b.is_string() || b.is_undefined()) &&
        !(a.is_undefined() && b.is_undefined())) {
      const std::string& x = a.is_string() ? a.as_string() : k_empty;
      const std::string& y = b.is_string() ? b.as_string() : k_empty;
      check_string(x.size() + y.size());
      charge(static_cast<int64_t>((x.size() + y.size()) / 64));
      return x + y;
    }
    if (a.is_array() && b.is_array()) {
      check_items(a.as_array().size() + b.as_array().size());
      charge(static_cast<int64_t>(a.as_array().size() + b.as_array().size()));
      Array r = a.as_array();
      r.insert(r.end(), b.as_array().begin(), b.as_array().end());
      return r;
    }
    if (a.is_number() && b.is_number()) {
      return a.is_int() && b.is_int() ? Value(add_int(a.as_int(), b.as_int())) : Value(a.as_number() + b.as_number());
    }
    fail("cannot add " + std::string(a.type_name()) + " and " + std::string(b.type_name()) +
         " (use ~ to join as text)");
  }
  if (op == "*" && (a.is_string() || b.is_string() || a.is_array() || b.is_array())) {
    const Value& seq = a.is_int() ? b : a;
    const Value& count = a.is_int() ? a : b;
    if (!count.is_int()) fail("a string or list can only be repeated an integer number of times");
    const int64_t times = std::max<int64_t>(count.as_int(), 0);
    if (static_cast<uint64_t>(times) > limits_.max_output_bytes)
      fail("a repetition of " + std::to_string(times) + " times passes the limits");
    if (seq.is_string()) {
      const size_t n = seq.as_string().size() * static_cast<size_t>(times);
      check_string(n);
      charge(static_cast<int64_t>(n / 64));
      std::string s;
      s.reserve(n);
      for (int64_t i = 0; i < times; ++i) s += seq.as_string();
      return s;
    }
    const size_t n = seq.as_array().size() * static_cast<size_t>(times);
    check_items(n);
    charge(static_cast<int64_t>(n));
    Array r;
    for (int64_t i = 0; i < times; ++i) r.insert(r.end(), seq.as_array().begin(), seq.as_array().end());
    return r;
  }
  return arithmetic(op, a, b);
}

Value Interpreter::eval(const Expr& e, Frame& frame) {
  const Nesting nesting(*this);
  charge(1);
  switch (e.kind) {
    case Expr::Kind::literal: return e.value;
    case Expr::Kind::name: return lookup(e.name, frame);
    case Expr::Kind::list: {
      Array a;
      a.reserve(e.args.size());
      for (const ExprPtr& x : e.args) a.push_back(eval(*x, frame));
      return a;
    }
    case Expr::Kind::dict: {
      Object o;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        const Value k = eval(*e.args[i], frame);
        // Keys are strings; an integer key is kept as its digits, and found by the same integer.
        if (!k.is_string() && !k.is_int())
          fail("dict keys must be strings or integers, not " + std::string(k.type_name()));
        o.set(k.is_string() ? k.as_string() : std::to_string(k.as_int()), eval(*e.args[i + 1], frame));
      }
      return o;
    }
    case Expr::Kind::attribute: {
      const Value base = eval(*e.args[0], frame);
      if (base.is_object()) {
        if (const Value* v = base.as_object().find(e.name)) return *v;
      }
      return Value{};
    }
    case Expr::Kind::index: {
      const Value base = eval(*e.args[0], frame);
      const Value key = eval(*e.args[1], frame);
      if (base.is_object()) {
        if (!key.is_string() && !key.is_int()) return Value{};
        const Value* v = base.as_object().find(key.is_string() ? key.as_string() : std::to_string(key.as_int()));
        return v ? *v : Value{};
      }
      if (base.is_array() || base.is_string()) {
        if (!key.is_int())
          fail(std::string(base.type_name()) + " indices must be integers, not " + std::string(key.type_name()));
        const Value one = key.as_int() == -1 ? Value{} : Value(key.as_int() + 1);
        const Value r = slice(base, &key, key.as_int() == -1 ? nullptr : &one, nullptr);
        if (base.is_array()) return r.as_array().empty() ? Value{} : r.as_array()[0];
        return r.as_string().empty() ? Value{} : r;
      }
      return Value{};
    }
    case Expr::Kind::slice: {
      const Value base = eval(*e.args[0], frame);
      Value bounds[3];
      const Value* ptr[3] = {nullptr, nullptr, nullptr};
      for (int i = 0; i < 3; ++i) {
        if (e.args[1 + static_cast<size_t>(i)]) {
          bounds[i] = eval(*e.args[1 + static_cast<size_t>(i)], frame);
          if (!bounds[i].is_none()) ptr[i] = &bounds[i];
        }
      }
      if (!base.is_array() && !base.is_string()) {
        if (base.is_undefined() || base.is_none()) return Value{};
        fail("cannot slice " + std::string(base.type_name()));
      }
      Value r = slice(base, ptr[0], ptr[1], ptr[2]);
      charge(static_cast<int64_t>(r.is_array() ? r.as_array().size() : r.as_string().size() / 64));
      return r;
    }
    case Expr::Kind::call: {
      if (++call_depth_ > limits_.max_depth) fail("calls nest deeper than " + std::to_string(limits_.max_depth));
      Value v = eval_call(e, frame);
      --call_depth_;
      return v;
    }
    case Expr::Kind::filter: {
      Value input = eval(*e.args[0], frame);
      CallArgs args = eval_args(e, 1, frame);
      return apply_filter(*this, e.name, std::move(input), args);
    }
    case Expr::Kind::test: {
      // An undefined value's attributes are undefined too, so `x.y is defined` never fails.
      const Value input = eval(*e.args[0], frame);
      CallArgs args = eval_args(e, 1, frame);
      const bool r = apply_test(*this, e.name, input, args);
      return e.negated ? !r : r;
    }
    case Expr::Kind::unary: {
      Value v = eval(*e.args[0], frame);
      if (e.name == "not") return !v.truthy();
      if (!v.is_number()) fail("cannot apply unary '" + e.name + "' to " + std::string(v.type_name()));
      if (e.name == "+") return v;
      return v.is_int() ? Value(sub_int(0, v.as_int())) : Value(-v.as_number());
    }
    case Expr::Kind::binary: return eval_binary(e, frame);
    case Expr::Kind::conditional:
      if (eval(*e.args[0], frame).truthy()) return eval(*e.args[1], frame);
      return e.args[2] ? eval(*e.args[2], frame) : Value{};
  }
  return Value{};
}

}  // namespace kvc::chat::jinja
