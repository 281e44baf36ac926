// Row conversions of kv_format.h: run-time ISA dispatch over the KvOpsTable for groups of 32,
// the scalar any-group loops for smaller groups.
#include "kernels/cpu/kv_format.h"

#include "kernels/cpu/kv_ops.h"
#include "kernels/cpu/ops_impl.h"
#include "kernels/cpu/quant.h"

namespace kvc::kernels {

const KvOpsTable& kv_ops_for(Isa isa) {
  const CpuFeatures& f = cpu_features();
  if (isa >= Isa::avx512_vnni && f.avx512_vnni) return kv_ops_avx512_vnni();
  if (isa >= Isa::avx512 && f.avx512) return kv_ops_avx512();
  if (isa >= Isa::avx2 && f.avx2) return kv_ops_avx2();
  return kv_ops_scalar();
}

const KvOpsTable& kv_ops_active() {
  static const KvOpsTable& t = kv_ops_for(best_isa());
  return t;
}

const char* kv_type_name(KvType type) {
  switch (type) {
    case KvType::f16: return "f16";
    case KvType::q8: return "q8";
    case KvType::q4: return "q4";
    case KvType::q8h: return "q8h";
    case KvType::q4h: return "q4h";
    case KvType::q4c: return "q4c";
  }
  return "?";
}

void kv_rotate_groups(float* x, int64_t n, int group) {
  KVC_KERNEL_CHECK(kv_group_valid(group) && n >= 0 && n % group == 0);
  const float norm = group == 32 ? 0.17677669529663687f : group == 16 ? 0.25f : 0.35355339059327373f;  // 1/sqrt(g)
  for (int64_t g = 0; g < n; g += group) {
    float* v = x + g;
    for (int h = 1; h < group; h *= 2) {
      for (int i = 0; i < group; i += 2 * h) {
        for (int j = i; j < i + h; ++j) {
          const float a = v[j];
          const float b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
      }
    }
    for (int i = 0; i < group; ++i) v[i] *= norm;
  }
}

namespace {

// Rows are rotated through a stack buffer this many floats at a time (a multiple of 32).
constexpr int64_t k_rotate_chunk = 256;

}  // namespace

void encode_row_with(const KvOpsTable& t, KvType type, int group, const float* x, int64_t n, uint8_t* out) {
  KVC_KERNEL_CHECK(n >= 0);
  if (type == KvType::f16) {
    uint16_t* h = reinterpret_cast<uint16_t*>(out);
    KVC_KERNEL_CHECK(reinterpret_cast<uintptr_t>(h) % alignof(uint16_t) == 0);
    ops_for(t.isa).f32_to_f16_row(x, h, n);
    return;
  }
  KVC_KERNEL_CHECK(kv_type_valid(type) && kv_group_valid(group) && n % group == 0);
  if (kv_type_rotated(type)) {
    const KvType base = kv_storage_type(type);
    float tmp[k_rotate_chunk];
    for (int64_t i = 0; i < n; i += k_rotate_chunk) {
      const int64_t m = n - i < k_rotate_chunk ? n - i : k_rotate_chunk;  // a multiple of group
      for (int64_t j = 0; j < m; ++j) tmp[j] = x[i + j];
      kv_rotate_groups(tmp, m, group);
      encode_row_with(t, base, group, tmp, m, out + row_bytes(base, group, i));
    }
    return;
  }
  if (group != k_kv_group_max) {
    detail::encode_row_any_group(type, group, x, n, out);
  } else if (type == KvType::q8) {
    t.encode_q8(x, n, out);
  } else {
    t.encode_q4(x, n, out);
  }
}

void decode_row_with(const KvOpsTable& t, KvType type, int group, const uint8_t* in, int64_t n, float* out) {
  KVC_KERNEL_CHECK(n >= 0);
  if (type == KvType::f16) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
    KVC_KERNEL_CHECK(reinterpret_cast<uintptr_t>(h) % alignof(uint16_t) == 0);
    for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_f32(h[i]);
    return;
  }
  KVC_KERNEL_CHECK(kv_type_valid(type) && kv_group_valid(group) && n % group == 0);
  if (kv_type_rotated(type)) {
    decode_row_with(t, kv_storage_type(type), group, in, n, out);
    kv_rotate_groups(out, n, group);
    return;
  }
  if (group != k_kv_group_max) {
    detail::decode_row_any_group(type, group, in, n, out);
  } else if (type == KvType::q8) {
    t.decode_q8(in, n, out);
  } else {
    t.decode_q4(in, n, out);
  }
}

void encode_row(KvType type, int group, const float* x, int64_t n, uint8_t* out) {
  encode_row_with(kv_ops_active(), type, group, x, n, out);
}

void decode_row(KvType type, int group, const uint8_t* in, int64_t n, float* out) {
  decode_row_with(kv_ops_active(), type, group, in, n, out);
}

void encode_row_reference(KvType type, int group, const float* x, int64_t n, uint8_t* out) {
  encode_row_with(kv_ops_scalar(), type, group, x, n, out);
}

void decode_row_reference(KvType type, int group, const uint8_t* in, int64_t n, float* out) {
  decode_row_with(kv_ops_scalar(), type, group, in, n, out);
}

}  // namespace kvc::kernels
