// Internal to the kernels and their tests: paged attention computed with a chosen ISA's loops.
#pragma once

#include "kernels/cpu/kv_ops.h"
#include "kernels/cpu/paged_attention.h"

namespace kvc::kernels {

// attention_paged (paged_attention.h) with the loops of table `t` (F16 ones: ops_for(t.isa)).
void attention_paged_with(const KvOpsTable& t, const float* q, const PagedKvView& kv, int64_t n_kv,
                          const AttentionShape& s, int kv_head_begin, int kv_head_end, float* out, float* scratch);

}  // namespace kvc::kernels
