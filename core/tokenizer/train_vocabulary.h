// Trains a small SentencePiece BPE vocabulary (for the demo model) with sentencepiece's trainer.
#pragma once

#include <string>

#include "core/tokenizer/tokenizer.h"

namespace kvc::tokenizer {

// Trains on the text file at corpus_path (one sentence per line): BPE, byte fallback, no
// normalization, whitespace kept, digits split, ids <unk>=0 <s>=1 </s>=2, no padding. The
// result tokenizes like the trained .model through Tokenizer::create. Deterministic: the same
// corpus and size give the same vocabulary, within a process and across runs (one thread, no
// sampling or shuffling). If serialized_model is given, it receives the trained ModelProto
// (the bytes of a .model file). Errors: ErrorCode::io for an unreadable corpus,
// ErrorCode::invalid_argument when the size does not fit the corpus (too small for its
// characters plus 256 bytes, or larger than the corpus can fill).
Result<Vocabulary> train_vocabulary(const std::string& corpus_path, int vocab_size,
                                    std::string* serialized_model = nullptr);

}  // namespace kvc::tokenizer
