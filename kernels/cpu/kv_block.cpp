// KV block geometry and the position writes of kv_block.h.
#include "kernels/cpu/kv_block.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/kv_ops.h"
#include "kernels/cpu/ops_impl.h"
#include "kernels/cpu/quant.h"

namespace kvc::kernels {

bool KvBlockLayout::check_invariants() const {
  if (n_layer <= 0 || n_kv_head <= 0 || head_dim <= 0 || block_tokens <= 0) return false;
  const bool quantized = k_type != KvType::f16 || v_type != KvType::f16;
  if (group != kv_group_for_head_dim(head_dim) || (quantized && group == 0)) return false;
  const int64_t n_elems = static_cast<int64_t>(n_kv_head) * head_dim;
  return k_row_bytes == row_bytes(k_type, group, n_elems) && v_row_bytes == row_bytes(v_type, group, n_elems) &&
         k_row_bytes % 2 == 0 && v_row_bytes % 2 == 0 &&
         k_anchor_bytes == (kv_type_anchored(k_type) ? 2 * n_elems : 0) &&
         layer_bytes == k_anchor_bytes + block_tokens * (k_row_bytes + v_row_bytes) &&
         block_bytes == n_layer * layer_bytes;
}

std::optional<KvBlockLayout> make_kv_block_layout(int n_layer, int n_kv_head, int head_dim, int block_tokens,
                                                  KvType k_type, KvType v_type) {
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
  l.k_anchor_bytes = kv_type_anchored(k_type) ? 2 * n_elems : 0;
  l.layer_bytes = l.k_anchor_bytes + block_tokens * (l.k_row_bytes + l.v_row_bytes);
  l.block_bytes = n_layer * l.layer_bytes;
  if (!l.check_invariants()) return std::nullopt;
  return l;
}

namespace {

// Rows of anchored formats go through a stack buffer this many floats at a time.
constexpr int64_t k_anchor_chunk = 256;

// One row of `type` at `out`; anchor non-null (anchored K): the row minus the anchor there
// (F16, n), which is set to the row itself first when set_anchor.
void store_row(KvType type, int group, const float* x, int64_t n, bool set_anchor, uint8_t* anchor, uint8_t* out) {
  if (anchor == nullptr) {
    encode_row(type, group, x, n, out);
    return;
  }
  uint16_t* a = reinterpret_cast<uint16_t*>(anchor);
  if (set_anchor) f32_to_f16_row(x, a, n);
  float diff[k_anchor_chunk];
  for (int64_t i = 0; i < n; i += k_anchor_chunk) {
    const int64_t m = std::min(k_anchor_chunk, n - i);  // a multiple of group: chunks are
    for (int64_t j = 0; j < m; ++j) diff[j] = x[i + j] - fp16_to_f32(a[i + j]);
    // q4h K: rotated, then each group's scale fitted (kv_format.h); the same bytes on every ISA.
    kv_rotate_groups(diff, m, group);
    detail::encode_row_q4_fitted(group, diff, m, out + row_bytes(type, group, i));
  }
}

void load_row(KvType type, int group, const uint8_t* in, int64_t n, const uint8_t* anchor, float* out) {
  decode_row(type, group, in, n, out);
  if (anchor == nullptr) return;
  const uint16_t* a = reinterpret_cast<const uint16_t*>(anchor);
  for (int64_t i = 0; i < n; ++i) out[i] += fp16_to_f32(a[i]);
}

void store(const KvBlockLayout& layout, uint8_t* block, int layer, int row, const float* k, const float* v,
           bool anchor_set) {
  KVC_KERNEL_CHECK(block != nullptr && 0 <= layer && layer < layout.n_layer && 0 <= row && row < layout.block_tokens);
  const int64_t n = static_cast<int64_t>(layout.n_kv_head) * layout.head_dim;
  uint8_t* anchor = layout.k_anchor_bytes > 0 ? block + layout.k_anchor_offset(layer) : nullptr;
  store_row(layout.k_type, layout.group, k, n, row == 0 && !anchor_set, anchor,
            block + layout.k_row_offset(layer, row));
  store_row(layout.v_type, layout.group, v, n, false, nullptr, block + layout.v_row_offset(layer, row));
}

}  // namespace

void kv_store(const KvBlockLayout& layout, uint8_t* block, int layer, int row, const float* k, const float* v) {
  store(layout, block, layer, row, k, v, false);
}

void kv_load(const KvBlockLayout& layout, const uint8_t* block, int layer, int row, float* k, float* v) {
  KVC_KERNEL_CHECK(block != nullptr && 0 <= layer && layer < layout.n_layer && 0 <= row && row < layout.block_tokens);
  const int64_t n = static_cast<int64_t>(layout.n_kv_head) * layout.head_dim;
  const uint8_t* anchor = layout.k_anchor_bytes > 0 ? block + layout.k_anchor_offset(layer) : nullptr;
  load_row(layout.k_type, layout.group, block + layout.k_row_offset(layer, row), n, anchor, k);
  load_row(layout.v_type, layout.group, block + layout.v_row_offset(layer, row), n, nullptr, v);
}

void kv_store_at(const KvBlockLayout& layout, uint8_t* const* blocks, int layer, int64_t t, const float* k,
                 const float* v) {
  KVC_KERNEL_CHECK(t >= 0);
  const KvSlot s = kv_slot(layout, t);
  const uint8_t* prev = s.block > 0 ? blocks[s.block - 1] : nullptr;
  if (layout.k_anchor_bytes == 0 || s.row != 0 || prev == nullptr) {
    kv_store(layout, blocks[s.block], layer, s.row, k, v);
    return;
  }
  // The anchor of a block after the first: the mean of the previous block's K as stored.
  const int64_t n = static_cast<int64_t>(layout.n_kv_head) * layout.head_dim;
  std::vector<float> mean(static_cast<size_t>(n), 0.0f), kr(static_cast<size_t>(n)), vr(static_cast<size_t>(n));
  for (int r = 0; r < layout.block_tokens; ++r) {
    kv_load(layout, prev, layer, r, kr.data(), vr.data());
    for (int64_t i = 0; i < n; ++i) mean[static_cast<size_t>(i)] += kr[static_cast<size_t>(i)];
  }
  const float inv = 1.0f / static_cast<float>(layout.block_tokens);
  for (float& x : mean) x *= inv;
  KVC_KERNEL_CHECK(blocks[s.block] != nullptr);
  f32_to_f16_row(mean.data(), reinterpret_cast<uint16_t*>(blocks[s.block] + layout.k_anchor_offset(layer)), n);
  store(layout, blocks[s.block], layer, 0, k, v, true);
}

}  // namespace kvc::kernels
