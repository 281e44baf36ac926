// The syntax tree of a parsed Jinja template: expressions and statements.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/chat/jinja_value.h"

namespace kvc::chat::jinja {

// The name a filter block's input is bound to while its filters run (no template can spell it).
inline constexpr const char* k_block_input = "\x01input";

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// One expression node. Which fields are used depends on the kind:
//   literal      value
//   name         name
//   list, dict   args (a dict's keys and values alternate)
//   attribute    args[0].name
//   index        args[0][args[1]]
//   slice        args[0][args[1]:args[2]:args[3]]   (a missing bound is a null pointer)
//   call         args[0](args[1..], kwargs)
//   filter       args[0] | name(args[1..], kwargs)
//   test         args[0] is [not] name(args[1..])    negated: "is not"
//   unary        name ("not", "-", "+") args[0]
//   binary       args[0] name args[1]; name: or and == != < <= > >= in notin + - ~ * / // % **
//   conditional  args[1] if args[0] else args[2]     (args[2] may be null: undefined)
struct Expr {
  enum class Kind {
    literal,
    name,
    list,
    dict,
    attribute,
    index,
    slice,
    call,
    filter,
    test,
    unary,
    binary,
    conditional
  };
  Kind kind = Kind::literal;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
  int height = 1;  // 1 + the tallest child's height (the parser bounds it)
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

// One statement node:
//   text          text
//   output        expr
//   if            branches: (condition, body); the else branch has a null condition
//   for           targets in expr [if condition] body [else else_body]
//   set           targets (one name, or several to unpack) or attribute: targets[0].attribute = expr
//   set_block     targets[0] = the body's output, through filters (expr chains them, input null)
//   macro         name(params with defaults) body
//   filter_block  the body's output through the filter chain in expr
//   do            expr, its value dropped
//   break, continue
//   generation    body (Hugging Face's {% generation %}: rendered as it is)
struct Node {
  enum class Kind { text, output, if_, for_, set, set_block, macro, filter_block, do_, break_, continue_, generation };
  Kind kind = Kind::text;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::string> targets;
  std::string attribute;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;
};

}  // namespace kvc::chat::jinja
