// GenerateOptions: the one type for what to generate and how to sample it, with every default.
//
// A chat turn's settings go from the Chat settings panel (ui::ChatState), the conversation's
// stored row (storage::ConversationSettings), kvchat-cli's flags (add_generate_options) or an API
// request's fields (server::GenerationParams) to the engine (engine::RequestOptions is this
// type) without being copied into another struct. The defaults below and SamplingParams' are the
// only ones; README.md "Generation settings" lists them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/sampling/sampler.h"

namespace kvc::sampling {

class Grammar;  // core/sampling/grammar.h

// A reply of a readable length: the CLI's -n, a new conversation's max tokens, the app's.
constexpr int64_t k_default_max_tokens = 256;

struct GenerateOptions {
  int64_t max_tokens = k_default_max_tokens;  // < 0: until the end of generation or the context is full
  SamplingParams sampling;
  std::vector<std::string> stop_strings;  // generation ends before any of these (the template's; not stored)
  bool stop_at_eog = true;                // end at EOS / end-of-turn tokens
  // Constrained output (response_format json_schema, --json-schema): only text the grammar
  // matches, ending when it is complete. Null: free text. Not stored with a conversation.
  std::shared_ptr<const Grammar> grammar;
  friend bool operator==(const GenerateOptions&, const GenerateOptions&) = default;
};

}  // namespace kvc::sampling
