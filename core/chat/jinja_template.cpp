// Parsing and rendering a Jinja template, with the interpreter's failures turned into kvc::Error.
#include "core/chat/jinja_template.h"

#include <exception>
#include <new>

#include "core/chat/jinja_builtins.h"
#include "core/chat/jinja_lexer.h"
#include "core/chat/jinja_parser.h"

namespace kvc::chat::jinja {
namespace {

Error template_error(const TemplateError& e, int line) {
  const int at = e.line > 0 ? e.line : line;
  return make_error(e.raised ? ErrorCode::invalid_argument : ErrorCode::invalid_file,
                    "chat template" + (at > 0 ? ", line " + std::to_string(at) : std::string()) + ": " + e.message);
}

// Unknown filter and test names are errors when the template is loaded, not when it first meets them.
void check_names(const Expr& e) {
  if (e.kind == Expr::Kind::filter && !is_filter(e.name)) fail("unknown filter '" + e.name + "'", e.line);
  if (e.kind == Expr::Kind::test && !is_test(e.name)) fail("unknown test '" + e.name + "'", e.line);
  for (const ExprPtr& a : e.args) {
    if (a) check_names(*a);
  }
  for (const auto& [k, v] : e.kwargs) check_names(*v);
}

void check_names(const Body& body) {
  for (const NodePtr& n : body) {
    for (const Expr* e : {n->expr.get(), n->condition.get()}) {
      if (e) check_names(*e);
    }
    for (const auto& [cond, b] : n->branches) {
      if (cond) check_names(*cond);
      check_names(b);
    }
    for (const auto& [name, def] : n->params) {
      if (def) check_names(*def);
    }
    check_names(n->body);
    check_names(n->else_body);
  }
}

}  // namespace

Result<Template> Template::parse(std::string_view source, const Limits& limits) {
  try {
    auto body = std::make_shared<Body>(jinja::parse(lex(source), limits.max_depth));
    check_names(*body);
    Template t;
    t.body_ = std::move(body);
    t.limits_ = limits;
    return t;
  } catch (const TemplateError& e) {
    return template_error(e, 0);
  } catch (const std::exception& e) {  // out of memory or a library's failure: reported, never a crash
    return make_error(ErrorCode::internal, std::string("chat template: ") + e.what());
  }
}

Result<std::string> Template::render(const Object& variables, const std::tm& now) const {
  Interpreter in(limits_, variables, now);
  try {
    return in.run(*body_);
  } catch (const TemplateError& e) { return template_error(e, in.line()); } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::out_of_memory, "chat template, line " + std::to_string(in.line()) +
                                                    ": the render needs more memory than there is");
  } catch (const std::exception& e) {  // a library's own failure: reported, never a crash
    return make_error(ErrorCode::internal, "chat template, line " + std::to_string(in.line()) + ": " + e.what());
  }
}

}  // namespace kvc::chat::jinja
