// Which ggml tensor types exist, which of them kvchat reads, and what to say about the rest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/cpu/dtype.h"

namespace kvc::gguf {

// ggml's name for a tensor type id ("Q5_K" for 13); null for ids ggml never assigned or retired.
const char* ggml_type_name(uint32_t raw);

// The DType for `raw` if kvchat can load tensors of that type from a model file.
std::optional<kernels::DType> supported_tensor_type(uint32_t raw);

// "F32, F16, BF16, Q8_0, Q4_0, Q4_1, ..."
std::string supported_tensor_type_list();

}  // namespace kvc::gguf
