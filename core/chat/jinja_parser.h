// The Jinja parser: lexed pieces to a syntax tree, with a bound on nesting depth.
#pragma once

#include <vector>

#include "core/chat/jinja_ast.h"
#include "core/chat/jinja_lexer.h"

namespace kvc::chat::jinja {

// Throws TemplateError for a syntax error, a tag kvchat does not run ({% include %}, {% extends %},
// {% call %}, ...), a block left open, or nesting of blocks and expressions deeper than max_depth.
Body parse(const std::vector<Piece>& pieces, int max_depth);

}  // namespace kvc::chat::jinja
