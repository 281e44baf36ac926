// Incremental detokenization with stop strings.
#include "core/model/output_text.h"

#include <algorithm>

namespace kvc::model {

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::max_tokens: return "max tokens";
    case StopReason::end_of_generation: return "end of generation";
    case StopReason::stop_string: return "stop string";
    case StopReason::context_full: return "context full";
    case StopReason::cancelled: return "cancelled";
  }
  return "?";
}

OutputText::OutputText(const tokenizer::Tokenizer& tok, std::vector<std::string> stop_strings, bool stop_at_eog)
    : tok_(&tok),
      stops_(std::move(stop_strings)),
      stop_at_eog_(stop_at_eog),
      decoder_(tok, /*strip_leading_space=*/false) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

// Length of the longest suffix of the pending text that is a proper prefix of a stop string.
size_t OutputText::held_back() const {
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n) {
      if (std::string_view(pending_).substr(pending_.size() - n) == std::string_view(s).substr(0, n)) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}

OutputText::Step OutputText::push(int32_t id) {
  Step st;
  if (stop_at_eog_ && tok_->is_end_of_generation(id)) {
    st.consumed = false;
    st.stop = true;
    st.reason = StopReason::end_of_generation;
    st.ready = finish();
    return st;
  }
  pending_ += decoder_.push(id);
  size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    pending_.resize(cut);
    st.stop = true;
    st.reason = StopReason::stop_string;
    st.ready = std::move(pending_);
    pending_.clear();
    return st;
  }
  const size_t hold = held_back();
  st.ready = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, st.ready.size());
  return st;
}

std::string OutputText::finish() {
  pending_ += decoder_.finish();
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace kvc::model
