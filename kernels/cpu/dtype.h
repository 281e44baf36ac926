// Weight and activation element types, numbered as GGUF numbers them (ggml_type).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvc::kernels {

enum class DType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,  // activation-side type of the k-quants; never stored in model files we write
  iq4_nl = 20,
  bf16 = 30,
  mxfp4 = 39,  // OCP microscaling FP4: an E8M0 scale per 32 e2m1 values (gpt-oss's experts)
};

struct DTypeInfo {
  const char* name;     // "Q4_K"
  int64_t block_elems;  // elements per block (1 for plain floats)
  size_t block_bytes;   // bytes per block
};

// Null when `raw` names a type kvchat does not implement.
const DTypeInfo* dtype_info(uint32_t raw);
inline const DTypeInfo& dtype_info(DType t) { return *dtype_info(static_cast<uint32_t>(t)); }
inline const char* dtype_name(DType t) { return dtype_info(t).name; }

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = dtype_info(t);
  return static_cast<size_t>(n / i.block_elems) * i.block_bytes;
}

}  // namespace kvc::kernels
