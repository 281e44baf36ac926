// The Jinja statement parser: if, for, set, macro, filter and the other tags, by recursive descent over the lexed
// pieces.
#include "core/chat/jinja_parser.h"

#include <initializer_list>

#include "core/chat/jinja_expr_parser.h"

namespace kvc::chat::jinja {
namespace {

// Statements over the pieces.
class Parser {
 public:
  Parser(const std::vector<Piece>& pieces, int max_depth) : pieces_(pieces), max_depth_(max_depth) {}

  Body run() {
    Body b = body({}, nullptr);
    if (i_ < pieces_.size()) {
      const Piece& p = pieces_[i_];
      fail("'{% " + p.tokens[0].text + " %}' has no block to close", p.line);
    }
    return b;
  }

 private:
  // Statements until a tag named in `enders` (left unconsumed; *ender names it) or the end.
  Body body(std::initializer_list<std::string_view> enders, std::string* ender) {
    Body out;
    while (i_ < pieces_.size()) {
      const Piece& p = pieces_[i_];
      if (p.kind == Piece::Kind::text) {
        auto n = make(Node::Kind::text, p.line);
        n->text = p.text;
        out.push_back(std::move(n));
        ++i_;
        continue;
      }
      if (p.kind == Piece::Kind::output) {
        ExprParser e(p.tokens, 0, p.line, depth_, max_depth_);
        if (e.at_end()) fail("an empty '{{ }}'", p.line);
        auto n = make(Node::Kind::output, p.line);
        n->expr = e.expression();
        e.expect_end();
        out.push_back(std::move(n));
        ++i_;
        continue;
      }
      if (p.tokens.empty()) fail("an empty '{% %}'", p.line);
      const Token& head = p.tokens[0];
      if (head.type != Token::Type::name) fail("a tag must start with a name, found " + describe(head), p.line);
      if (is_one_of(head, enders)) {
        if (ender) *ender = head.text;
        return out;
      }
      out.push_back(statement(p));
    }
    return out;
  }

  NodePtr make(Node::Kind k, int line) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = line;
    return n;
  }

  // Parses the body of a block opened by `open` and consumes its closing tag, which must be
  // one of `enders`; returns the closer's name.
  std::string block_body(const Piece& open, Body& into, std::initializer_list<std::string_view> enders) {
    DepthGuard g(depth_, max_depth_, open.line);
    std::string ender;
    into = body(enders, &ender);
    if (ender.empty()) {
      fail("'{% " + open.tokens[0].text + " %}' opened here is never closed (expected '{% " +
               std::string(*(enders.end() - 1)) + " %}')",
           open.line);
    }
    return ender;
  }

  NodePtr statement(const Piece& p) {
    const std::string& kw = p.tokens[0].text;
    ExprParser e(p.tokens, 1, p.line, depth_, max_depth_);
    ++i_;
    if (kw == "if") {
      auto n = make(Node::Kind::if_, p.line);
      ExprPtr cond = e.expression();
      e.expect_end();
      for (;;) {
        Body b;
        const Piece& opener = pieces_[i_ - 1];
        const std::string end = block_body(opener, b, {"elif", "else", "endif"});
        n->branches.emplace_back(std::move(cond), std::move(b));
        const Piece& closer = pieces_[i_];
        ++i_;
        ExprParser c(closer.tokens, 1, closer.line, depth_, max_depth_);
        if (end == "endif") {
          c.expect_end();
          return n;
        }
        if (end == "else") {
          c.expect_end();
          Body eb;
          block_body(closer, eb, {"endif"});
          ExprParser(pieces_[i_].tokens, 1, pieces_[i_].line, depth_, max_depth_).expect_end();
          ++i_;
          n->branches.emplace_back(nullptr, std::move(eb));
          return n;
        }
        cond = c.expression();
        c.expect_end();
      }
    }
    if (kw == "for") {
      auto n = make(Node::Kind::for_, p.line);
      n->targets = e.targets();
      e.expect_name("in");
      n->expr = e.expression(false);
      if (e.next_is_name("if")) {
        e.take();
        n->condition = e.expression(false);
      }
      if (e.next_is_name("recursive")) fail("recursive loops are not supported", p.line);
      e.expect_end();
      ++loops_;
      const std::string end = block_body(p, n->body, {"else", "endfor"});
      --loops_;
      ++i_;
      if (end == "else") {
        block_body(pieces_[i_ - 1], n->else_body, {"endfor"});
        ++i_;
      }
      return n;
    }
    if (kw == "set") {
      std::vector<std::string> names = e.targets();
      std::string attribute;
      if (names.size() == 1 && e.next_is_op(".")) {
        e.take();
        attribute = e.take_name("an attribute name after '.'");
      }
      if (e.next_is_op("=")) {
        e.take();
        auto n = make(Node::Kind::set, p.line);
        n->targets = std::move(names);
        n->attribute = std::move(attribute);
        n->expr = e.tuple_or_expression();
        e.expect_end();
        return n;
      }
      if (names.size() != 1 || !attribute.empty()) fail("a block '{% set %}' assigns one name", p.line);
      auto n = make(Node::Kind::set_block, p.line);
      n->targets = std::move(names);
      if (!e.at_end()) n->expr = e.filter_chain(true);
      block_body(p, n->body, {"endset"});
      ++i_;
      return n;
    }
    if (kw == "macro") {
      auto n = make(Node::Kind::macro, p.line);
      n->name = e.take_name("the macro's name");
      e.expect_op("(");
      while (!e.next_is_op(")")) {
        std::string param = e.take_name("a parameter name");
        ExprPtr def;
        if (e.next_is_op("=")) {
          e.take();
          def = e.expression();
        }
        n->params.emplace_back(std::move(param), std::move(def));
        if (!e.next_is_op(",")) break;
        e.take();
      }
      e.expect_op(")");
      e.expect_end();
      const int loops = loops_;
      loops_ = 0;  // a macro's body is not inside the loop it is defined in
      block_body(p, n->body, {"endmacro"});
      loops_ = loops;
      ++i_;
      return n;
    }
    if (kw == "filter") {
      auto n = make(Node::Kind::filter_block, p.line);
      n->expr = e.filter_chain(false);
      block_body(p, n->body, {"endfilter"});
      ++i_;
      return n;
    }
    if (kw == "generation") {
      auto n = make(Node::Kind::generation, p.line);
      e.expect_end();
      block_body(p, n->body, {"endgeneration"});
      ++i_;
      return n;
    }
    if (kw == "do") {
      auto n = make(Node::Kind::do_, p.line);
      n->expr = e.tuple_or_expression();
      e.expect_end();
      return n;
    }
    if (kw == "break" || kw == "continue") {
      e.expect_end();
      if (loops_ == 0) fail("'{% " + kw + " %}' outside a loop", p.line);
      return make(kw == "break" ? Node::Kind::break_ : Node::Kind::continue_, p.line);
    }
    static constexpr std::string_view enders[] = {"endif", "endfor", "endset",        "endmacro", "endfilter",
                                                  "elif",  "else",   "endgeneration", "endraw"};
    for (const auto end : enders) {
      if (kw == end) fail("'{% " + kw + " %}' has no open block to close here", p.line);
    }
    fail("the tag '{% " + kw + " %}' is not supported (kvchat runs if, for, set, macro, filter, break, continue)",
         p.line);
  }

  const std::vector<Piece>& pieces_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;  // for loops open around the statement being parsed
  int max_depth_;
};

}  // namespace

Body parse(const std::vector<Piece>& pieces, int max_depth) { return Parser(pieces, max_depth).run(); }

}  // namespace kvc::chat::jinja
