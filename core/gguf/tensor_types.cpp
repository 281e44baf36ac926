// ggml tensor type names (ids 0..39) and the subset kvchat's kernels implement.
#include "core/gguf/tensor_types.h"

#include <array>

namespace kvc::gguf {

namespace {

using kernels::DType;

// Ids 4, 5, 31..33 and 36..38 were assigned once and later retired by ggml.
constexpr std::array<const char*, 40> k_ggml_type_names = {
    "F32",    "F16",   "Q4_0",  "Q4_1",   nullptr, nullptr, "Q5_0",    "Q5_1",   "Q8_0",    "Q8_1",
    "Q2_K",   "Q3_K",  "Q4_K",  "Q5_K",   "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
    "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",    "I16",   "I32",     "I64",    "F64",     "IQ1_M",
    "BF16",   nullptr, nullptr, nullptr,  "TQ1_0", "TQ2_0", nullptr,   nullptr,  nullptr,   "MXFP4",
};

constexpr std::array<DType, 15> k_supported = {DType::f32,  DType::f16,  DType::bf16, DType::q8_0,   DType::q4_0,
                                               DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl, DType::q2_k,
                                               DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k,   DType::mxfp4};

}  // namespace

const char* ggml_type_name(uint32_t raw) { return raw < k_ggml_type_names.size() ? k_ggml_type_names[raw] : nullptr; }

std::optional<DType> supported_tensor_type(uint32_t raw) {
  for (DType t : k_supported) {
    if (static_cast<uint32_t>(t) == raw && kernels::dtype_info(raw) != nullptr) return t;
  }
  return std::nullopt;
}

std::string supported_tensor_type_list() {
  std::string s;
  for (DType t : k_supported) {
    if (!s.empty()) s += ", ";
    s += kernels::dtype_name(t);
  }
  return s;
}

}  // namespace kvc::gguf
