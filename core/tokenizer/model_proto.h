// Builds a SentencePiece ModelProto in protobuf wire format from a Vocabulary, for LoadFromSerializedProto.
#pragma once

#include <string>

#include "core/tokenizer/tokenizer.h"

namespace kvc::tokenizer {

// The model is BPE with byte fallback (when the vocabulary has byte pieces) and an "identity"
// normalizer with add_dummy_prefix, remove_extra_whitespaces and escape_whitespaces set to
// `add_dummy_prefix`, false and true. Expects a vocabulary that Tokenizer::create validated.
std::string serialize_model_proto(const Vocabulary& vocab, bool add_dummy_prefix);

}  // namespace kvc::tokenizer
