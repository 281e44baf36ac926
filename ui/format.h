// Human-readable numbers for the views: bytes, durations, rates, parameter counts, ages.
#pragma once

#include <cstdint>
#include <string>

namespace kvc::ui {

// "0 B", "512 B", "1.5 KiB", "12.3 MiB", "2.0 GiB" (binary units; one decimal above bytes).
std::string format_bytes(double n_bytes);
// "0.42 ms", "85 ms", "1.25 s", "2 min 05 s".
std::string format_duration_ms(double ms);
// Decode speed: n_tokens over ms, "23.4 tok/s"; "-" when there is no time to divide by.
std::string format_tok_per_s(int64_t n_tokens, double ms);
// Parameter counts: "260K", "15.2M", "1.1B".
std::string format_params(int64_t n);
// How long ago, from two epoch-millisecond clocks: "just now", "5 min ago", "3 h ago", "2 days ago".
std::string format_age(int64_t then_ms, int64_t now_ms);

// The line shown while a long prompt is computed: "prefilling 1234 new tokens... 3.2 s" (no
// time for the first half second).
std::string format_prefill(int64_t n_tokens, double elapsed_ms);

// Removes the last UTF-8 code point of s (nothing when empty), so shortened text never ends
// inside a multi-byte character.
void utf8_pop_back(std::string& s);

}  // namespace kvc::ui
