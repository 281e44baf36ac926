// OutputText: sampled token ids -> the text a user sees, with stop strings and end-of-turn tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace kvc::model {

enum class StopReason { max_tokens, end_of_generation, stop_string, context_full, cancelled };
const char* to_string(StopReason r);

// Text is released as soon as it is final: held back while it is an incomplete UTF-8
// sequence or could still grow into one of the stop strings, and cut before a stop string.
class OutputText {
 public:
  OutputText(const tokenizer::Tokenizer& tok, std::vector<std::string> stop_strings, bool stop_at_eog);

  struct Step {
    bool consumed = true;  // false: an end-of-generation token, not part of the output
    bool stop = false;     // generation ends here
    StopReason reason = StopReason::max_tokens;
    std::string ready;  // text that became final with this token
  };
  Step push(int32_t id);
  // Text still held back, when generation ends for another reason (max tokens, context).
  std::string finish();

 private:
  size_t held_back() const;

  const tokenizer::Tokenizer* tok_;
  std::vector<std::string> stops_;
  bool stop_at_eog_;
  tokenizer::StreamDecoder decoder_;
  std::string pending_;
};

}  // namespace kvc::model
