// Building the token segment of a user turn.
#include "app/common/chat_turn.h"

namespace kvc::app {

TurnSegment build_user_turn(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl, std::string_view system,
                            std::string_view user, bool first_turn) {
  TurnSegment s;
  if (!first_turn) s.text = tmpl.assistant_suffix();
  s.text += tmpl.render_user_turn(first_turn ? system : "", user, first_turn);
  s.tokens = first_turn ? tok.encode(s.text, tok.wants_bos(), true) : tok.encode_continuation(s.text, true);
  return s;
}

}  // namespace kvc::app
