// How one user turn extends a conversation's append-only token stream (shared by the CLI chat and the GUI).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/tokenizer/tokenizer.h"

namespace kvc::app {

// The text and tokens a user turn appends to the stream:
//
//   turn 0:  [BOS] render_user_turn(system, user, first=true)
//   turn k:  assistant_suffix() render_user_turn("", user, first=false)
//            ^ closes the previous reply: its end-of-turn token is never in the stream
//
// Only this segment is tokenized; the history's tokens are reused as they are, so the stream
// stays identical to the model's own sampled ids (DESIGN.md section 2).
struct TurnSegment {
  std::string text;
  std::vector<int32_t> tokens;
};

TurnSegment build_user_turn(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl, std::string_view system,
                            std::string_view user, bool first_turn);

}  // namespace kvc::app
