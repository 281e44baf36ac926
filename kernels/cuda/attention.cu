// KV cache writes and paged attention on the GPU, reading F16 / INT8 / INT4 rows in place.
//
// Attention: one thread block per (batch row, query head), its warps each taking a range of
// the attended positions. Lane l holds head elements l, l+32, ...; a warp walks its positions
// in order with an online softmax (running max m, running sum l, accumulator rescaled when m
// grows), so no score buffer is needed:
//   s_t = scale * q.k_t;  m' = max(m, s_t);  acc = acc e^(m-m') + e^(s_t-m') v_t;  out = acc / l
// and the block merges its warps' results. Decode and prefill rows are the same work item;
// rows are independent.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/kv_hd.h"

namespace kvc::kernels::cuda {

namespace {

constexpr int k_per_lane = k_max_attention_head_dim / 32;
constexpr int k_max_warps_per_item = 16;  // a thread block's warps, all on one (row, head)
constexpr int k_min_warps_per_item = 4;

cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

__device__ float warp_sum(float v) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// grid: (n_rows, 2): y = 0 stores K, y = 1 stores V. Threads take elements (F16) or groups.
__global__ void kv_store_kernel(KvGeometry g, const KvStoreTarget* targets, const float* k, const float* v) {
  const int64_t r = blockIdx.x;
  const bool is_v = blockIdx.y == 1;
  const KvStoreTarget tg = targets[r];
  if (tg.block == nullptr || tg.row < 0 || tg.row >= g.block_tokens) return;
  const int64_t width = static_cast<int64_t>(g.n_kv_head) * g.head_dim;
  const KvType type = is_v ? g.v_type : g.k_type;
  const float* src = (is_v ? v : k) + r * width;
  uint8_t* dst = tg.block + (is_v ? g.v_offset + tg.row * g.v_row_bytes : g.k_offset + tg.row * g.k_row_bytes);
  if (type == KvType::f16) {
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
      const uint16_t h = hd_f32_to_fp16(src[i]);
      dst[2 * i] = static_cast<uint8_t>(h & 0xff);
      dst[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
    return;
  }
  const int64_t gb = kv_group_bytes_hd(type, g.group);
  for (int64_t gi = threadIdx.x; gi < width / g.group; gi += blockDim.x) {
    kv_encode_group(type, g.group, src + gi * g.group, dst + gi * gb);
  }
}

// One thread block per (batch row, query head); its warps split the attended positions into
// consecutive ranges, each warp runs the online softmax over its own range, and the block
// merges the warps' (m, l, acc) in shared memory:
//   M = max_w m_w;  L = sum_w l_w e^(m_w - M);  out = sum_w acc_w e^(m_w - M) / L
// (a warp with no positions has m_w = -inf and weighs nothing).
// Shared memory: n_warps * (head_dim + 2) floats.
__global__ void attention_kernel(KvGeometry g, const uint8_t* const* tables, const AttentionRow* rows, int64_t n_rows,
                                 const float* q, int n_head, float scale, int64_t window, float* out) {
  extern __shared__ float merge[];  // [n_warps][head_dim] accumulators, then n_warps m, n_warps l
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int n_warps = static_cast<int>(blockDim.x / 32);
  const int64_t r = blockIdx.x / n_head;
  const int h = static_cast<int>(blockIdx.x % n_head);
  const int kvh = h / (n_head / g.n_kv_head);
  const int hd = g.head_dim;
  const AttentionRow row = rows[r];
  const float* qh = q + (r * n_head + h) * hd;
  float* oh = out + (r * n_head + h) * hd;

  float qv[k_per_lane], acc[k_per_lane];
  for (int j = 0; j < k_per_lane; ++j) {
    const int i = lane + 32 * j;
    qv[j] = i < hd ? qh[i] : 0.0f;
    acc[j] = 0.0f;
  }
  const int64_t begin = window > 0 && row.n_kv > window ? row.n_kv - window : 0;
  const int64_t span = row.n_kv - begin;
  const int64_t w_begin = begin + span * warp / n_warps, w_end = begin + span * (warp + 1) / n_warps;
  const int64_t k_head = kv_row_bytes(g.k_type, g.group, static_cast<int64_t>(kvh) * hd);
  const int64_t v_head = kv_row_bytes(g.v_type, g.group, static_cast<int64_t>(kvh) * hd);
  const uint8_t* const* table = tables + row.table_begin;
  float m = -INFINITY, l = 0.0f;
  for (int64_t t = w_begin; t < w_end; ++t) {
    const uint8_t* blk = table[t / g.block_tokens];
    const int64_t in_blk = t % g.block_tokens;
    const uint8_t* kr = blk + g.k_offset + in_blk * g.k_row_bytes + k_head;
    const uint8_t* vr = blk + g.v_offset + in_blk * g.v_row_bytes + v_head;
    float partial = 0.0f;
    for (int j = 0; j < k_per_lane; ++j) {
      const int i = lane + 32 * j;
      if (i < hd) partial += qv[j] * kv_value(g.k_type, g.group, kr, i);
    }
    const float s = scale * warp_sum(partial);
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new);  // 0 on the first position (m = -inf)
    const float p = expf(s - m_new);
    l = l * corr + p;
    for (int j = 0; j < k_per_lane; ++j) {
      const int i = lane + 32 * j;
      if (i < hd) acc[j] = acc[j] * corr + p * kv_value(g.v_type, g.group, vr, i);
    }
    m = m_new;
  }
  float* w_acc = merge + warp * hd;
  float* ms = merge + n_warps * hd;
  float* ls = ms + n_warps;
  for (int j = 0; j < k_per_lane; ++j) {
    const int i = lane + 32 * j;
    if (i < hd) w_acc[i] = acc[j];
  }
  if (lane == 0) {
    ms[warp] = m;
    ls[warp] = l;
  }
  __syncthreads();
  float m_all = -INFINITY;
  for (int w = 0; w < n_warps; ++w) m_all = fmaxf(m_all, ms[w]);
  float l_all = 0.0f;
  for (int w = 0; w < n_warps; ++w) l_all += ms[w] == -INFINITY ? 0.0f : ls[w] * expf(ms[w] - m_all);
  const float inv_l = l_all > 0.0f ? 1.0f / l_all : 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < hd; i += static_cast<int>(blockDim.x)) {
    float o = 0.0f;
    for (int w = 0; w < n_warps; ++w) {
      if (ms[w] != -INFINITY) o += merge[w * hd + i] * expf(ms[w] - m_all);
    }
    oh[i] = o * inv_l;
  }
}

}  // namespace

void launch_kv_store(const KvGeometry& g, const KvStoreTarget* targets, int64_t n_rows, const float* k, const float* v,
                     Stream s) {
  if (n_rows <= 0) return;
  kv_store_kernel<<<dim3(static_cast<unsigned>(n_rows), 2), 128, 0, as_stream(s)>>>(g, targets, k, v);
}

void launch_attention(const KvGeometry& g, const uint8_t* const* tables, const AttentionRow* rows, int64_t n_rows,
                      const float* q, int n_head, float scale, int64_t window, float* out, Stream s) {
  if (n_rows <= 0 || n_head <= 0) return;
  // Few (row, head) pairs (decode): more warps share each one's positions, so a long context
  // still spreads over the GPU; many (prefill): fewer, the blocks themselves fill it.
  const int64_t n_items = n_rows * n_head;
  const int n_warps = n_items < 512 ? k_max_warps_per_item : k_min_warps_per_item;
  const size_t shared = static_cast<size_t>(n_warps) * static_cast<size_t>(g.head_dim + 2) * sizeof(float);
  attention_kernel<<<static_cast<unsigned>(n_items), 32 * n_warps, shared, as_stream(s)>>>(g, tables, rows, n_rows, q,
                                                                                           n_head, scale, window, out);
}

}  // namespace kvc::kernels::cuda
