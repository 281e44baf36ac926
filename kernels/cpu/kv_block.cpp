// KV block geometry and the position writes of kv_block.h.
#include "kernels/cpu/kv_block.h"

#include "kernels/cpu/ops_impl.h"

namespace kvc::kernels {

bool KvBlockLayout::check_invariants() const {
  if (n_layer <= 0 || n_kv_head <= 0 || head_dim <= 0 || block_tokens <= 0) return false;
  const bool quantized = k_type != KvType::f16 || v_type != KvType::f16;
  if (group != kv_group_for_head_dim(head_dim) || (quantized && group == 0)) return false;
  const int64_t n_elems = static_cast<int64_t>(n_kv_head) * head_dim;
  return k_row_bytes == row_bytes(k_type, group, n_elems) && v_row_bytes == row_bytes(v_type, group, n_elems) &&
         k_row_bytes % 2 == 0 && v_row_bytes % 2 == 0 &&
         layer_bytes == block_tokens * (k_row_bytes + v_row_bytes) &&
         block_bytes == n_layer * layer_bytes;
}

std::optional<KvBlockLayout> make_kv_block_layout(int n_layer, int n_kv_head, int head_dim,
                                                  int block_tokens, KvType k_type, KvType v_type) {
  KvBlockLayout l;
  l.n_layer = n_layer;
  l.n_kv_head = n_kv_head;
  l.head_dim = head_dim;
  l.block_tokens = block_tokens;
  l.k_type = k_type;
  l.v_type = v_type;
  l.group = kv_group_for_head_dim(head_dim);
  const bool quantized = k_type != KvType::f16 || v_type != KvType::f16;
  if (quantized && l.group == 0) return std::nullopt;
  const int64_t n_elems = static_cast<int64_t>(n_kv_head) * head_dim;
  l.k_row_bytes = row_bytes(k_type, l.group, n_elems);
  l.v_row_bytes = row_bytes(v_type, l.group, n_elems);
  l.layer_bytes = block_tokens * (l.k_row_bytes + l.v_row_bytes);
  l.block_bytes = n_layer * l.layer_bytes;
  if (!l.check_invariants()) return std::nullopt;
  return l;
}

void kv_store(const KvBlockLayout& layout, uint8_t* block, int layer, int row, const float* k,
              const float* v) {
  KVC_KERNEL_CHECK(block != nullptr && 0 <= layer && layer < layout.n_layer && 0 <= row &&
                   row < layout.block_tokens);
  const int64_t n = static_cast<int64_t>(layout.n_kv_head) * layout.head_dim;
  encode_row(layout.k_type, layout.group, k, n, block + layout.k_row_offset(layer, row));
  encode_row(layout.v_type, layout.group, v, n, block + layout.v_row_offset(layer, row));
}

void kv_store_at(const KvBlockLayout& layout, uint8_t* const* blocks, int layer, int64_t t,
                 const float* k, const float* v) {
  KVC_KERNEL_CHECK(t >= 0);
  const KvSlot s = kv_slot(layout, t);
  kv_store(layout, blocks[s.block], layer, s.row, k, v);
}

}  // namespace kvc::kernels
