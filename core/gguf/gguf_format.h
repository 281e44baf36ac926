// Constants of the GGUF format and message helpers shared by the reader and the writer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvc::gguf {

inline constexpr std::string_view k_alignment_key = "general.alignment";
inline constexpr uint32_t k_write_version = 3;

// "0x1f40"
std::string hex(uint64_t v);
// A key or name for a message: non-printable bytes as \xNN, at most ~96 bytes shown.
std::string printable(std::string_view s);

}  // namespace kvc::gguf
