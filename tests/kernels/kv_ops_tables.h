// The KV-op tables this CPU can run, scalar reference first: the KV kernel tests compare each
// SIMD table against the first.
#pragma once

#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kv_ops.h"

namespace kvc::kernels::test {

inline std::vector<const KvOpsTable*> all_kv_tables() {
  std::vector<const KvOpsTable*> r{&kv_ops_scalar()};
  if (cpu_features().avx2) r.push_back(&kv_ops_avx2());
  if (cpu_features().avx512) r.push_back(&kv_ops_avx512());
  if (cpu_features().avx512_vnni) r.push_back(&kv_ops_avx512_vnni());
  return r;
}

}  // namespace kvc::kernels::test
