// Block geometry of each element type, as the GGUF format defines it.
#include "kernels/cpu/dtype.h"

namespace kvc::kernels {

const DTypeInfo* dtype_info(uint32_t raw) {
  static constexpr DTypeInfo f32{"F32", 1, 4};
  static constexpr DTypeInfo f16{"F16", 1, 2};
  static constexpr DTypeInfo bf16{"BF16", 1, 2};
  static constexpr DTypeInfo q4_0{"Q4_0", 32, 2 + 16};
  static constexpr DTypeInfo q8_0{"Q8_0", 32, 2 + 32};
  static constexpr DTypeInfo q4_k{"Q4_K", 256, 2 + 2 + 12 + 128};
  static constexpr DTypeInfo q6_k{"Q6_K", 256, 128 + 64 + 16 + 2};
  static constexpr DTypeInfo q8_k{"Q8_K", 256, 4 + 256 + 32};
  switch (static_cast<DType>(raw)) {
    case DType::f32: return &f32;
    case DType::f16: return &f16;
    case DType::bf16: return &bf16;
    case DType::q4_0: return &q4_0;
    case DType::q8_0: return &q8_0;
    case DType::q4_k: return &q4_k;
    case DType::q6_k: return &q6_k;
    case DType::q8_k: return &q8_k;
  }
  return nullptr;
}

}  // namespace kvc::kernels
