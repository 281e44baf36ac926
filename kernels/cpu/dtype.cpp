// Block geometry of each element type, as the GGUF format defines it.
#include "kernels/cpu/dtype.h"

namespace kvc::kernels {

const DTypeInfo* dtype_info(uint32_t raw) {
  static constexpr DTypeInfo f32{"F32", 1, 4};
  static constexpr DTypeInfo f16{"F16", 1, 2};
  static constexpr DTypeInfo bf16{"BF16", 1, 2};
  static constexpr DTypeInfo q4_0{"Q4_0", 32, 2 + 16};
  static constexpr DTypeInfo q4_1{"Q4_1", 32, 2 + 2 + 16};
  static constexpr DTypeInfo q5_0{"Q5_0", 32, 2 + 4 + 16};
  static constexpr DTypeInfo q5_1{"Q5_1", 32, 2 + 2 + 4 + 16};
  static constexpr DTypeInfo iq4_nl{"IQ4_NL", 32, 2 + 16};
  static constexpr DTypeInfo q8_0{"Q8_0", 32, 2 + 32};
  static constexpr DTypeInfo q2_k{"Q2_K", 256, 16 + 64 + 2 + 2};
  static constexpr DTypeInfo q3_k{"Q3_K", 256, 32 + 64 + 12 + 2};
  static constexpr DTypeInfo q5_k{"Q5_K", 256, 2 + 2 + 12 + 32 + 128};
  static constexpr DTypeInfo q4_k{"Q4_K", 256, 2 + 2 + 12 + 128};
  static constexpr DTypeInfo q6_k{"Q6_K", 256, 128 + 64 + 16 + 2};
  static constexpr DTypeInfo q8_k{"Q8_K", 256, 4 + 256 + 32};
  static constexpr DTypeInfo mxfp4{"MXFP4", 32, 1 + 16};
  switch (static_cast<DType>(raw)) {
    case DType::f32: return &f32;
    case DType::f16: return &f16;
    case DType::bf16: return &bf16;
    case DType::q4_0: return &q4_0;
    case DType::q4_1: return &q4_1;
    case DType::q5_0: return &q5_0;
    case DType::q5_1: return &q5_1;
    case DType::iq4_nl: return &iq4_nl;
    case DType::q8_0: return &q8_0;
    case DType::q2_k: return &q2_k;
    case DType::q3_k: return &q3_k;
    case DType::q5_k: return &q5_k;
    case DType::q4_k: return &q4_k;
    case DType::q6_k: return &q6_k;
    case DType::q8_k: return &q8_k;
    case DType::mxfp4: return &mxfp4;
  }
  return nullptr;
}

}  // namespace kvc::kernels
