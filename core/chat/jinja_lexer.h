// Splits a Jinja template into text, {{ output }} and {% statement %} pieces, applying the whitespace control chat
// templates are written for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvc::chat::jinja {

// A failure inside the interpreter (a syntax error, a bad value, a limit). It never leaves the
// jinja code: Template::parse and Template::render turn it into a kvc::Error with its line.
struct TemplateError {
  std::string message;
  int line = 0;         // 0: the line being run when it was thrown
  bool raised = false;  // the template's raise_exception(): it rejects its input (the conversation)
};
[[noreturn]] void fail(std::string message, int line = 0);

struct Token {
  enum class Type { name, string, integer, number, op };
  Type type = Type::op;
  std::string text;  // the name, the operator, or the string literal's decoded bytes
  int64_t integer = 0;
  double number = 0;
  int line = 1;
  bool is(Type t, std::string_view s) const { return type == t && text == s; }
  bool is_name(std::string_view s) const { return is(Type::name, s); }
  bool is_op(std::string_view s) const { return is(Type::op, s); }
};

// The template as written, after whitespace control: Hugging Face and llama.cpp render chat
// templates with trim_blocks (the newline after a %} or #} is dropped) and lstrip_blocks (spaces
// and tabs before a {% or {# at the start of a line are dropped), and without the source's one
// trailing newline; {%- -%} {{- -}} {#- -#} strip all whitespace on their side, {%+ keeps it.
struct Piece {
  enum class Kind { text, output, statement };
  Kind kind = Kind::text;
  std::string text;           // text pieces
  std::vector<Token> tokens;  // the tokens between {{ }} or {% %}
  int line = 1;
};

// Throws TemplateError for an unterminated tag, comment or string, or a character that cannot
// start a token.
std::vector<Piece> lex(std::string_view source);

}  // namespace kvc::chat::jinja
