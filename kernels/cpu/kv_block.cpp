// KV block geometry and the position writes of kv_block.h.
#include "kernels/cpu/kv_block.h"

#include <algorithm>
#include <cmath>
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
  const bool per_channel = kv_k_per_channel(k_type);
  const int64_t k_row = per_channel ? kv_k_per_channel_row_bytes(n_elems) : row_bytes(k_type, group, n_elems);
  const int64_t k_anchor = kv_type_anchored(k_type) ? 2 * n_elems : per_channel ? 4 * n_elems : 0;
  if (state) {  // recurrent: one F32 state a layer
    return n_kv_head == 1 && k_type == KvType::f16 && v_type == KvType::f16 && !v_in_k && k_anchor_bytes == 0 &&
           k_row_bytes == 4 * static_cast<int64_t>(head_dim) && v_row_bytes == 0 && layer_bytes == k_row_bytes &&
           block_bytes == n_layer * layer_bytes;
  }
  if (v_in_k) {  // latent: K rows only, V read from them
    return v_type == k_type && (k_type == KvType::f16 || k_type == KvType::q8) && n_kv_head == 1 &&
           k_row_bytes == k_row && v_row_bytes == k_row_bytes && k_row_bytes % 2 == 0 && k_anchor_bytes == 0 &&
           layer_bytes == block_tokens * k_row_bytes && block_bytes == n_layer * layer_bytes;
  }
  return k_row_bytes == k_row && v_row_bytes == row_bytes(v_type, group, n_elems) && k_row_bytes % 2 == 0 &&
         v_row_bytes % 2 == 0 && k_anchor_bytes == k_anchor &&
         layer_bytes == k_anchor_bytes + block_tokens * (k_row_bytes + v_row_bytes) &&
         block_bytes == n_layer * layer_bytes;
}

std::optional<KvBlockLayout> make_latent_block_layout(int n_layer, int row_elems, int block_tokens, KvType type) {
  if (type != KvType::f16 && type != KvType::q8) return std::nullopt;
  if (n_layer <= 0 || row_elems <= 0 || block_tokens <= 0) return std::nullopt;
  KvBlockLayout l;
  l.n_layer = n_layer;
  l.n_kv_head = 1;
  l.head_dim = row_elems;
  l.block_tokens = block_tokens;
  l.k_type = l.v_type = type;
  l.group = kv_group_for_head_dim(row_elems);
  if (type != KvType::f16 && l.group == 0) return std::nullopt;
  l.v_in_k = true;
  l.k_row_bytes = l.v_row_bytes = row_bytes(type, l.group, row_elems);
  l.layer_bytes = block_tokens * l.k_row_bytes;
  l.block_bytes = n_layer * l.layer_bytes;
  if (!l.check_invariants()) return std::nullopt;
  return l;
}

std::optional<KvBlockLayout> make_state_block_layout(int n_layer, int64_t state_floats, int block_tokens) {
  if (n_layer <= 0 || state_floats <= 0 || state_floats > (int64_t{1} << 28) || block_tokens <= 0) return std::nullopt;
  KvBlockLayout l;
  l.n_layer = n_layer;
  l.n_kv_head = 1;
  l.head_dim = static_cast<int>(state_floats);
  l.block_tokens = block_tokens;
  l.group = kv_group_for_head_dim(l.head_dim);
  l.state = true;
  l.k_row_bytes = 4 * state_floats;
  l.v_row_bytes = 0;
  l.layer_bytes = l.k_row_bytes;
  l.block_bytes = n_layer * l.layer_bytes;
  if (!l.check_invariants()) return std::nullopt;
  return l;
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
  const bool per_channel = kv_k_per_channel(k_type);
  l.k_row_bytes = per_channel ? kv_k_per_channel_row_bytes(n_elems) : row_bytes(k_type, l.group, n_elems);
  l.v_row_bytes = row_bytes(v_type, l.group, n_elems);
  l.k_anchor_bytes = kv_type_anchored(k_type) ? 2 * n_elems : per_channel ? 4 * n_elems : 0;
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
           bool anchor_set, uint16_t* kv_tail) {
  KVC_KERNEL_CHECK(block != nullptr && 0 <= layer && layer < layout.n_layer && 0 <= row && row < layout.block_tokens);
  const int64_t n = static_cast<int64_t>(layout.n_kv_head) * layout.head_dim;
  KVC_KERNEL_CHECK((kv_tail != nullptr) == kv_k_per_channel(layout.k_type));
  if (kv_tail != nullptr) {
    f32_to_f16_row(k, kv_tail + row * n, n);
    f32_to_f16_row(v, kv_tail + (layout.block_tokens + row) * n, n);
    store_row(layout.v_type, layout.group, v, n, false, nullptr, block + layout.v_row_offset(layer, row));
    return;
  }
  uint8_t* anchor = layout.k_anchor_bytes > 0 ? block + layout.k_anchor_offset(layer) : nullptr;
  store_row(layout.k_type, layout.group, k, n, row == 0 && !anchor_set, anchor,
            block + layout.k_row_offset(layer, row));
  if (layout.v_in_k) return;  // latent: the K row is the V row
  store_row(layout.v_type, layout.group, v, n, false, nullptr, block + layout.v_row_offset(layer, row));
}

}  // namespace

void kv_store(const KvBlockLayout& layout, uint8_t* block, int layer, int row, const float* k, const float* v,
              uint16_t* kv_tail) {
  store(layout, block, layer, row, k, v, false, kv_tail);
}

namespace {
// Range factors the per-channel grid of a sealed block tries (the first is min and max).
constexpr float k_shrink[] = {1.0f, 0.96f, 0.92f, 0.88f, 0.84f, 0.80f, 0.76f, 0.72f};
}  // namespace

void kv_seal_block(const KvBlockLayout& layout, uint8_t* block, int layer, const uint16_t* kv_tail) {
  KVC_KERNEL_CHECK(block != nullptr && kv_tail != nullptr && kv_k_per_channel(layout.k_type) && 0 <= layer &&
                   layer < layout.n_layer);
  const int64_t n = layout.row_elems();
  const int B = layout.block_tokens;
  auto* minima = reinterpret_cast<uint16_t*>(block + layout.k_anchor_offset(layer));
  uint16_t* scales = minima + n;
  uint8_t* rows = block + layout.k_offset(layer);
  const int half = layout.group / 2;
  for (int64_t c = 0; c < n; ++c) {
    float lo = fp16_to_f32(kv_tail[c]);
    float hi = lo;
    for (int r = 1; r < B; ++r) {
      const float x = fp16_to_f32(kv_tail[r * n + c]);
      lo = std::fmin(lo, x);
      hi = std::fmax(hi, x);
    }
    // The grid [m, m + 15 d] is fitted: the range [lo, hi] shrunk about its middle by the
    // factor of k_shrink that gives the least squared error over the block (1: min and max;
    // a smaller range trades the extremes' error for a finer step). m and d are rounded to
    // F16 first, and the levels chosen for the rounded grid.
    float best_err = INFINITY;
    uint16_t best_m = 0, best_d = 0;
    float id = 0.0f;
    for (float shrink : k_shrink) {
      const float mid = 0.5f * lo + 0.5f * hi;
      const uint16_t m_bits = f32_to_fp16(mid - (mid - lo) * shrink);
      const float m = fp16_to_f32(m_bits);
      uint16_t d_bits = 0;
      const float id_try = detail::kv_group_scale((mid + (hi - mid) * shrink - m) / 15.0f, &d_bits);
      const float d = fp16_to_f32(d_bits);
      float err = 0.0f;
      for (int r = 0; r < B; ++r) {
        const float x = fp16_to_f32(kv_tail[r * n + c]);
        float q = std::nearbyint((x - m) * id_try);
        q = q > 0.0f ? (q < 15.0f ? q : 15.0f) : 0.0f;  // NaN to 0
        const float e = x - (m + d * q);
        err += e * e;
      }
      if (shrink != k_shrink[0] && !(err < best_err)) continue;  // the first always counts (err may be NaN)
      best_err = err;
      best_m = std::isfinite(m) ? m_bits : 0;
      best_d = std::isfinite(m) ? d_bits : 0;
      id = std::isfinite(m) ? id_try : 0.0f;
    }
    minima[c] = best_m;
    scales[c] = best_d;
    const float m = fp16_to_f32(best_m);
    // Byte of channel c in a row: its head's chunk of `group` elements, low or high nibble.
    const int64_t chunk = c / layout.group;
    const auto j = static_cast<int>(c % layout.group);
    const int64_t byte = chunk * half + (j % half);
    const int shift = j < half ? 0 : 4;
    for (int r = 0; r < B; ++r) {
      const float x = fp16_to_f32(kv_tail[r * n + c]);
      float q = std::nearbyint((x - m) * id);
      q = q > 0.0f ? (q < 15.0f ? q : 15.0f) : 0.0f;  // NaN to 0
      uint8_t& b = rows[r * layout.k_row_bytes + byte];
      b = static_cast<uint8_t>((b & (0xf0 >> shift)) | static_cast<int>(q) << shift);
    }
  }
}

void kv_load(const KvBlockLayout& layout, const uint8_t* block, int layer, int row, float* k, float* v) {
  KVC_KERNEL_CHECK(block != nullptr && 0 <= layer && layer < layout.n_layer && 0 <= row && row < layout.block_tokens);
  const int64_t n = static_cast<int64_t>(layout.n_kv_head) * layout.head_dim;
  if (kv_k_per_channel(layout.k_type)) {
    const auto* minima = reinterpret_cast<const uint16_t*>(block + layout.k_anchor_offset(layer));
    const uint16_t* scales = minima + n;
    const uint8_t* nib = block + layout.k_row_offset(layer, row);
    const int half = layout.group / 2;
    for (int64_t c = 0; c < n; ++c) {
      const auto j = static_cast<int>(c % layout.group);
      const uint8_t b = nib[c / layout.group * half + j % half];
      const int q = j < half ? (b & 0x0f) : (b >> 4);
      k[c] = fp16_to_f32(minima[c]) + fp16_to_f32(scales[c]) * static_cast<float>(q);
    }
    load_row(layout.v_type, layout.group, block + layout.v_row_offset(layer, row), n, nullptr, v);
    return;
  }
  const uint8_t* anchor = layout.k_anchor_bytes > 0 ? block + layout.k_anchor_offset(layer) : nullptr;
  load_row(layout.k_type, layout.group, block + layout.k_row_offset(layer, row), n, anchor, k);
  load_row(layout.v_type, layout.group, block + layout.v_row_offset(layer, row), n, nullptr, v);
}

void kv_store_at(const KvBlockLayout& layout, uint8_t* const* blocks, int layer, int64_t t, const float* k,
                 const float* v, uint16_t* kv_tail) {
  KVC_KERNEL_CHECK(t >= 0);
  const KvSlot s = kv_slot(layout, t);
  const uint8_t* prev = s.block > 0 ? blocks[s.block - 1] : nullptr;
  if (!kv_type_anchored(layout.k_type) || s.row != 0 || prev == nullptr) {
    kv_store(layout, blocks[s.block], layer, s.row, k, v, kv_tail);
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
  store(layout, blocks[s.block], layer, 0, k, v, true, nullptr);
}

}  // namespace kvc::kernels
