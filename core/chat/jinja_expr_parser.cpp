// Jinja expressions: literals, names, lists, dicts, attributes, subscripts and slices, calls, filters, tests and
// operators.
#include "core/chat/jinja_expr_parser.h"

#include <algorithm>
#include <initializer_list>

namespace kvc::chat::jinja {

bool is_one_of(const Token& t, std::initializer_list<std::string_view> names) {
  for (const auto n : names) {
    if (t.is_name(n)) return true;
  }
  return false;
}

std::string describe(const Token& t) {
  if (t.type == Token::Type::string) return "a string";
  return "'" + t.text + "'";
}

void ExprParser::expect_op(std::string_view op) {
  if (!next_is_op(op)) fail("expected '" + std::string(op) + "'" + found(), line_);
  ++pos_;
}

void ExprParser::expect_name(std::string_view n) {
  if (!next_is_name(n)) fail("expected '" + std::string(n) + "'" + found(), line_);
  ++pos_;
}

std::string ExprParser::take_name(const char* what) {
  if (!peek() || peek()->type != Token::Type::name) fail(std::string("expected ") + what + found(), line_);
  return t_[pos_++].text;
}

void ExprParser::expect_end() {
  if (!at_end()) fail("unexpected " + describe(*peek()) + " at the end of the tag", line_);
}

ExprPtr ExprParser::expression(bool with_condition) {
  DepthGuard g(depth_, max_depth_, line_);
  ExprPtr e = or_expr();
  while (with_condition && next_is_name("if")) {
    ++pos_;
    auto c = node(Expr::Kind::conditional);
    add(*c, or_expr());
    add(*c, std::move(e));
    if (next_is_name("else")) {
      ++pos_;
      add(*c, expression());
    } else {
      add(*c, nullptr);
    }
    e = std::move(c);
  }
  return e;
}

ExprPtr ExprParser::tuple_or_expression() {
  ExprPtr first = expression();
  if (!next_is_op(",")) return first;
  auto list = node(Expr::Kind::list);
  add(*list, std::move(first));
  while (next_is_op(",")) {
    ++pos_;
    if (at_end()) break;
    add(*list, expression());
  }
  return list;
}

std::vector<std::string> ExprParser::targets() {
  std::vector<std::string> names;
  const bool paren = next_is_op("(");
  if (paren) ++pos_;
  names.push_back(take_name("a variable name"));
  while (next_is_op(",")) {
    ++pos_;
    names.push_back(take_name("a variable name"));
  }
  if (paren) expect_op(")");
  return names;
}

ExprPtr ExprParser::filter_chain(bool leading_pipe) {
  auto input = node(Expr::Kind::name);
  input->name = k_block_input;
  ExprPtr e = std::move(input);
  bool first = true;
  while (!at_end()) {
    if (!first || leading_pipe) expect_op("|");
    first = false;
    e = filter(std::move(e));
  }
  return e;
}

// Heights are counted as children are attached: a chain built by a loop (a + b + c ..., x.a.b.c,
// x|f|g) nests as deep as a recursion would, and the interpreter and destructors recurse on it.
void ExprParser::grow(Expr& parent, const Expr& child) {
  parent.height = std::max(parent.height, child.height + 1);
  if (parent.height > 4 * max_depth_) {
    fail("an expression nests deeper than " + std::to_string(4 * max_depth_) + " levels", line_);
  }
}

void ExprParser::add(Expr& parent, ExprPtr child) {
  if (child) grow(parent, *child);
  parent.args.push_back(std::move(child));
}

ExprPtr ExprParser::node(Expr::Kind k) {
  auto e = std::make_unique<Expr>();
  e->kind = k;
  e->line = line_;
  return e;
}

ExprPtr ExprParser::binary(std::string op, ExprPtr a, ExprPtr b) {
  auto e = node(Expr::Kind::binary);
  e->name = std::move(op);
  add(*e, std::move(a));
  add(*e, std::move(b));
  return e;
}

ExprPtr ExprParser::or_expr() {
  ExprPtr e = and_expr();
  while (next_is_name("or")) {
    ++pos_;
    e = binary("or", std::move(e), and_expr());
  }
  return e;
}

ExprPtr ExprParser::and_expr() {
  ExprPtr e = not_expr();
  while (next_is_name("and")) {
    ++pos_;
    e = binary("and", std::move(e), not_expr());
  }
  return e;
}

ExprPtr ExprParser::not_expr() {
  if (next_is_name("not")) {
    DepthGuard g(depth_, max_depth_, line_);
    ++pos_;
    auto e = node(Expr::Kind::unary);
    e->name = "not";
    add(*e, not_expr());
    return e;
  }
  return compare();
}

ExprPtr ExprParser::compare() {
  ExprPtr e = math1();
  for (;;) {
    const Token* t = peek();
    if (!t) return e;
    if (t->type == Token::Type::op && (t->text == "==" || t->text == "!=" || t->text == "<" || t->text == "<=" ||
                                       t->text == ">" || t->text == ">=")) {
      ++pos_;
      e = binary(t->text, std::move(e), math1());
    } else if (t->is_name("in")) {
      ++pos_;
      e = binary("in", std::move(e), math1());
    } else if (t->is_name("not") && peek(1) && peek(1)->is_name("in")) {
      pos_ += 2;
      e = binary("notin", std::move(e), math1());
    } else {
      return e;
    }
  }
}

ExprPtr ExprParser::math1() {
  ExprPtr e = concat();
  while (next_is_op("+") || next_is_op("-")) {
    std::string op = take().text;
    e = binary(std::move(op), std::move(e), concat());
  }
  return e;
}

ExprPtr ExprParser::concat() {
  ExprPtr e = math2();
  while (next_is_op("~")) {
    ++pos_;
    e = binary("~", std::move(e), math2());
  }
  return e;
}

ExprPtr ExprParser::math2() {
  ExprPtr e = power();
  while (next_is_op("*") || next_is_op("/") || next_is_op("//") || next_is_op("%")) {
    std::string op = take().text;
    e = binary(std::move(op), std::move(e), power());
  }
  return e;
}

ExprPtr ExprParser::power() {
  ExprPtr e = unary();
  while (next_is_op("**")) {
    ++pos_;
    e = binary("**", std::move(e), unary());
  }
  return e;
}

ExprPtr ExprParser::unary() {
  if (next_is_op("-") || next_is_op("+")) {
    DepthGuard g(depth_, max_depth_, line_);
    auto e = node(Expr::Kind::unary);
    e->name = take().text;
    add(*e, unary_no_filter());
    return filters(std::move(e));
  }
  return filters(postfix(primary()));
}

ExprPtr ExprParser::unary_no_filter() {
  if (next_is_op("-") || next_is_op("+")) {
    DepthGuard g(depth_, max_depth_, line_);
    auto e = node(Expr::Kind::unary);
    e->name = take().text;
    add(*e, unary_no_filter());
    return e;
  }
  return postfix(primary());
}

ExprPtr ExprParser::primary() {
  const Token& t = take();
  switch (t.type) {
    case Token::Type::string: {
      auto e = node(Expr::Kind::literal);
      e->value = t.text;
      // Adjacent string literals join, as in Python.
      while (peek() && peek()->type == Token::Type::string) e->value = e->value.as_string() + take().text;
      return e;
    }
    case Token::Type::integer: {
      auto e = node(Expr::Kind::literal);
      e->value = t.integer;
      return e;
    }
    case Token::Type::number: {
      auto e = node(Expr::Kind::literal);
      e->value = t.number;
      return e;
    }
    case Token::Type::name: {
      auto e = node(Expr::Kind::literal);
      if (t.text == "true" || t.text == "True") {
        e->value = true;
      } else if (t.text == "false" || t.text == "False") {
        e->value = false;
      } else if (t.text == "none" || t.text == "None") {
        e->value = None{};
      } else {
        e->kind = Expr::Kind::name;
        e->name = t.text;
      }
      return e;
    }
    case Token::Type::op: break;
  }
  DepthGuard g(depth_, max_depth_, line_);
  if (t.text == "(") {
    if (next_is_op(")")) {
      ++pos_;
      return node(Expr::Kind::list);
    }
    ExprPtr e = expression();
    if (next_is_op(",")) {  // a tuple: a list here
      auto list = node(Expr::Kind::list);
      add(*list, std::move(e));
      while (next_is_op(",")) {
        ++pos_;
        if (next_is_op(")")) break;
        add(*list, expression());
      }
      e = std::move(list);
    }
    expect_op(")");
    return e;
  }
  if (t.text == "[") {
    auto list = node(Expr::Kind::list);
    while (!next_is_op("]")) {
      add(*list, expression());
      if (!next_is_op(",")) break;
      ++pos_;
    }
    expect_op("]");
    return list;
  }
  if (t.text == "{") {
    auto dict = node(Expr::Kind::dict);
    while (!next_is_op("}")) {
      add(*dict, expression());
      expect_op(":");
      add(*dict, expression());
      if (!next_is_op(",")) break;
      ++pos_;
    }
    expect_op("}");
    return dict;
  }
  fail("unexpected " + describe(t) + " where a value should be", line_);
}

ExprPtr ExprParser::postfix(ExprPtr e) {
  for (;;) {
    if (next_is_op(".")) {
      ++pos_;
      auto a = node(Expr::Kind::attribute);
      a->name = take_name("an attribute name after '.'");
      add(*a, std::move(e));
      e = std::move(a);
    } else if (next_is_op("[")) {
      ++pos_;
      e = subscript(std::move(e));
    } else if (next_is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr ExprParser::subscript(ExprPtr base) {
  DepthGuard g(depth_, max_depth_, line_);
  ExprPtr parts[3];
  int n = 0;
  bool is_slice = false;
  for (;;) {
    if (!next_is_op(":") && !next_is_op("]")) parts[n] = expression();
    if (next_is_op(":")) {
      is_slice = true;
      if (++n > 2) fail("a slice takes at most start:stop:step", line_);
      ++pos_;
      continue;
    }
    break;
  }
  expect_op("]");
  if (!is_slice) {
    if (!parts[0]) fail("an empty subscript '[]'", line_);
    auto e = node(Expr::Kind::index);
    add(*e, std::move(base));
    add(*e, std::move(parts[0]));
    return e;
  }
  auto e = node(Expr::Kind::slice);
  add(*e, std::move(base));
  for (auto& p : parts) add(*e, std::move(p));
  return e;
}

void ExprParser::arguments(Expr& e) {
  DepthGuard g(depth_, max_depth_, line_);
  expect_op("(");
  while (!next_is_op(")")) {
    if (next_is_op("*") || next_is_op("**")) fail("*args and **kwargs are not supported", line_);
    if (peek() && peek()->type == Token::Type::name && peek(1) && peek(1)->is_op("=")) {
      std::string key = take().text;
      ++pos_;
      ExprPtr value = expression();
      grow(e, *value);
      e.kwargs.emplace_back(std::move(key), std::move(value));
    } else {
      if (!e.kwargs.empty()) fail("a positional argument follows a keyword argument", line_);
      add(e, expression());
    }
    if (!next_is_op(",")) break;
    ++pos_;
  }
  expect_op(")");
}

ExprPtr ExprParser::call(ExprPtr callee) {
  auto e = node(Expr::Kind::call);
  add(*e, std::move(callee));
  arguments(*e);
  return e;
}

ExprPtr ExprParser::filter(ExprPtr input) {
  auto f = node(Expr::Kind::filter);
  f->name = take_name("a filter name after '|'");
  add(*f, std::move(input));
  if (next_is_op("(")) arguments(*f);
  return f;
}

ExprPtr ExprParser::filters(ExprPtr e) {
  for (;;) {
    if (next_is_op("|")) {
      ++pos_;
      e = filter(std::move(e));
    } else if (next_is_name("is")) {
      ++pos_;
      auto t = node(Expr::Kind::test);
      if (next_is_name("not")) {
        ++pos_;
        t->negated = true;
      }
      t->name = take_name("a test name after 'is'");
      add(*t, std::move(e));
      if (next_is_op("(")) {
        arguments(*t);
      } else if (const Token* a = peek();
                 a && !is_one_of(*a, {"else", "or", "and", "if", "in", "not", "is"}) &&
                 (a->type != Token::Type::op || a->text == "[" || a->text == "{" || a->text == "-")) {
        // One argument without brackets: `is sameas false`, `is divisibleby 3`.
        if (a->type == Token::Type::op && a->text == "-") {
          add(*t, unary_no_filter());
        } else {
          add(*t, postfix(primary()));
        }
      }
      e = std::move(t);
    } else if (next_is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}

}  // namespace kvc::chat::jinja
