// The tokenizer's vocabulary as the grammar matcher of constrained sampling sees it.
#pragma once

#include <memory>

#include "core/model/model.h"
#include "core/sampling/grammar_matcher.h"

namespace kvc::model {

// Each token's decoded bytes and kind (text, special, end of generation), built on first use (a
// pass over the vocabulary) and shared by every request on a model with these weights and
// tokenizer (keyed by weights_fingerprint(), which covers both). Thread-safe.
std::shared_ptr<const sampling::TokenVocabulary> grammar_vocabulary(const Model& m);

}  // namespace kvc::model
