// The parser of the Jinja expressions inside one tag, used by the statement parser (jinja_parser.cpp).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/jinja_ast.h"
#include "core/chat/jinja_lexer.h"

namespace kvc::chat::jinja {

// Whether the token is one of these names (the tags that end a block, test arguments).
bool is_one_of(const Token& t, std::initializer_list<std::string_view> names);
// "a string", or the token quoted, for error messages.
std::string describe(const Token& t);

// Depth guard: one level per nested block and per nested sub-expression.
class DepthGuard {
 public:
  DepthGuard(int& depth, int max_depth, int line) : depth_(depth) {
    if (++depth_ > max_depth) {
      fail("the template nests blocks or expressions deeper than " + std::to_string(max_depth) + " levels", line);
    }
  }
  ~DepthGuard() { --depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int& depth_;
};

// Expressions of one tag, from tokens[begin], by precedence climbing in Jinja2's order (`depth`
// is shared with the statement parser):
//   expression := or ["if" or ["else" expression]]      or := and ("or" and)*
//   and := not ("and" not)*                               not := "not" not | compare
//   compare := add (("=="|"!="|"<"|"<="|">"|">="|"in"|"not in") add)*
//   add := concat (("+"|"-") concat)*                     concat := mul ("~" mul)*
//   mul := pow (("*"|"/"|"//"|"%") pow)*                   pow := unary ("**" unary)*
//   unary := ("-"|"+") unary | primary postfix* (filter | test | call)*
class ExprParser {
 public:
  ExprParser(const std::vector<Token>& tokens, size_t begin, int line, int& depth, int max_depth)
      : t_(tokens), pos_(begin), line_(line), depth_(depth), max_depth_(max_depth) {}

  bool at_end() const { return pos_ >= t_.size(); }
  const Token* peek(size_t ahead = 0) const { return pos_ + ahead < t_.size() ? &t_[pos_ + ahead] : nullptr; }
  bool next_is_op(std::string_view op) const { return peek() && peek()->is_op(op); }
  bool next_is_name(std::string_view n) const { return peek() && peek()->is_name(n); }
  const Token& take() {
    if (at_end()) fail("the tag ends where an expression should continue", line_);
    return t_[pos_++];
  }
  void expect_op(std::string_view op);
  void expect_name(std::string_view n);
  std::string take_name(const char* what);
  void expect_end();
  std::string found() const { return at_end() ? " at the end of the tag" : ", found " + describe(*peek()); }

  // expression: a conditional; `with_condition` false where "if" starts a for loop's filter.
  ExprPtr expression(bool with_condition = true);

  // A tuple without brackets (`1, 2` in a set, `a, b` as loop targets) is a list.
  ExprPtr tuple_or_expression();
  // Names assigned by for and set: `x`, `k, v`, `(k, v)`.
  std::vector<std::string> targets();

  // Filters after a filter block's tag ({% filter upper %}, {% set x | trim %}): applied to k_block_input.
  ExprPtr filter_chain(bool leading_pipe);

 private:
  ExprPtr node(Expr::Kind k);
  void add(Expr& parent, ExprPtr child);  // attaches a child, checking the expression's height
  void grow(Expr& parent, const Expr& child);
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b);

  ExprPtr or_expr();
  ExprPtr and_expr();
  ExprPtr not_expr();
  ExprPtr compare();
  ExprPtr math1();
  ExprPtr concat();
  ExprPtr math2();
  ExprPtr power();
  // Jinja2: a sign applies before the filters that follow it ("-x|abs" is abs(-x)).
  ExprPtr unary();
  ExprPtr unary_no_filter();

  ExprPtr primary();           // a literal, a name, ( ), [ ] or { }
  ExprPtr postfix(ExprPtr e);  // .name, [index or slice], (call) after a primary
  ExprPtr subscript(ExprPtr base);

  // "(" args ")" after `callee`, or after a filter's or test's name (callee then heads args).
  void arguments(Expr& e);
  ExprPtr call(ExprPtr callee);
  ExprPtr filter(ExprPtr input);
  ExprPtr filters(ExprPtr e);  // | filter, is [not] test, (call) after a postfix expression

  const std::vector<Token>& t_;
  size_t pos_;
  int line_;
  int& depth_;
  int max_depth_;
};

}  // namespace kvc::chat::jinja
