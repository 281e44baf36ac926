// GPT-2's byte-level alphabet: every byte as one printable code point, as byte-level BPE
// vocabularies spell their tokens (a space is "Ġ" U+0120, a newline "Ċ" U+010A).
#pragma once

#include <string>
#include <string_view>

namespace kvc::tokenizer {

// Appends `raw` to `out` with each byte replaced by its code point's UTF-8. Printable bytes
// ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves; the other 68 bytes take
// U+0100 onwards in byte order.
void append_byte_level(std::string_view raw, std::string& out);

// The bytes a byte-level spelling stands for. A code point outside the alphabet (tokens that
// were never byte-encoded) is kept as its own UTF-8.
std::string decode_byte_level(std::string_view spelled);

}  // namespace kvc::tokenizer
