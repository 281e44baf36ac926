// matmul(): quantizes activations once per call, then splits weight rows across the pool.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/vec_dot.h"

namespace kvc::kernels {

namespace {

// A bug check (kernels may not include core/util/assert.h): the caller broke the contract.
void check(bool ok, const char* what) {
  if (!ok) [[unlikely]] {
    std::fprintf(stderr, "kvchat: matmul: %s\n", what);
    std::abort();
  }
}

const KernelSet& kernel_set(Isa isa) {
  const CpuFeatures& f = cpu_features();
  if (isa == Isa::avx512_amx && f.amx_int8) return kernels_avx512_amx();
  if (isa >= Isa::avx512_vnni && f.avx512_vnni) return kernels_avx512_vnni();
  // The 512-bit kernels need VNNI; plain AVX-512 gets the AVX2 kernels.
  if (isa >= Isa::avx2 && f.avx2) return kernels_avx2();
  return kernels_scalar();
}

// Quantized activations of one call, reused across calls on the same thread (no per-call
// allocation once the largest shape has been seen).
struct ActScratch {
  std::vector<int8_t> qs;      // (n_tokens, n_cols)
  std::vector<float> d;        // (n_tokens, n_cols / block)
  std::vector<int16_t> bsums;  // (n_tokens, n_cols / 16), Q8_K form
};

constexpr int64_t k_row_grain = 16;                // rows per unit of work split across threads
constexpr int64_t k_row_piece = 4;                 // units a thread takes at a time (parallel_for_balanced)
constexpr int64_t k_act_chunk_bytes = 1 << 20;     // activations kept in L2 per pass over rows
constexpr int64_t k_parallel_quantize_tokens = 8;  // below this, one thread quantizes

// Splits rows (in units of k_row_grain) across the pool and calls fn(row_begin, row_end) for each
// piece of k_row_piece units, balanced: a thread done early takes half of what another has left.
template <typename F>
void for_rows(ThreadPool* pool, int64_t n_rows, F&& fn) {
  const int64_t n_units = (n_rows + k_row_grain - 1) / k_row_grain;
  auto body = [&](int64_t u_begin, int64_t u_end) { fn(u_begin * k_row_grain, std::min(n_rows, u_end * k_row_grain)); };
  if (pool == nullptr) {
    body(0, n_units);
  } else {
    pool->parallel_for_balanced(n_units, k_row_piece, body);
  }
}

void quantized_matmul(const KernelSet& ks, const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                      ThreadPool* pool) {
  const bool k_form = takes_q8_k(w.type);
  const int64_t block = k_form ? 256 : 32;
  const int64_t n_cols = w.n_cols;
  const size_t n_blocks = static_cast<size_t>(n_cols / block);

  thread_local ActScratch scratch;
  const size_t n_tok = static_cast<size_t>(n_tokens);
  if (scratch.qs.size() < n_tok * static_cast<size_t>(n_cols)) scratch.qs.resize(n_tok * static_cast<size_t>(n_cols));
  if (scratch.d.size() < n_tok * n_blocks) scratch.d.resize(n_tok * n_blocks);
  if (k_form && scratch.bsums.size() < n_tok * static_cast<size_t>(n_cols / 16))
    scratch.bsums.resize(n_tok * static_cast<size_t>(n_cols / 16));
  int8_t* qs = scratch.qs.data();
  float* d = scratch.d.data();
  int16_t* bsums = k_form ? scratch.bsums.data() : nullptr;

  auto quantize = [&](int64_t t_begin, int64_t t_end) {
    for (int64_t t = t_begin; t < t_end; ++t) {
      if (k_form) {
        ks.quantize_q8_k(x + t * n_cols, n_cols, qs + t * n_cols, d + t * static_cast<int64_t>(n_blocks),
                         bsums + t * (n_cols / 16));
      } else {
        ks.quantize_q8_0(x + t * n_cols, n_cols, qs + t * n_cols, d + t * static_cast<int64_t>(n_blocks));
      }
    }
  };
  if (pool != nullptr && n_tokens >= k_parallel_quantize_tokens) {
    pool->parallel_for(n_tokens, 1, quantize);
  } else {
    quantize(0, n_tokens);
  }

  const QuantTileFn tile = quant_tile(ks, w.type);
  const size_t rb = row_bytes(w.type, n_cols);
  const int64_t chunk = std::max<int64_t>(1, k_act_chunk_bytes / std::max<int64_t>(1, n_cols));
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  // One parallel pass over the rows per chunk of tokens: its pieces share one serial, so each
  // thread arranges the chunk's activations once (tile_prepared), however many pieces it takes.
  static std::atomic<uint64_t> next_serial{1};
  for (int64_t t = 0; t < n_tokens; t += chunk) {
    const QuantizedActs acts{qs + t * n_cols, d + t * static_cast<int64_t>(n_blocks),
                             k_form ? bsums + t * (n_cols / 16) : nullptr, n_cols,
                             next_serial.fetch_add(1, std::memory_order_relaxed)};
    const int64_t nt = std::min(chunk, n_tokens - t);
    for_rows(pool, w.n_rows, [&](int64_t r_begin, int64_t r_end) {
      tile(wbytes + r_begin * rb, rb, r_end - r_begin, acts, nt, y + t * w.n_rows + r_begin, w.n_rows);
    });
  }
}

void float_matmul(const KernelSet& ks, const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                  ThreadPool* pool) {
  FloatTileFn tile = w.type == DType::f32 ? ks.f32 : w.type == DType::f16 ? ks.f16 : ks.bf16;
  const size_t rb = row_bytes(w.type, w.n_cols);
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  for_rows(pool, w.n_rows, [&](int64_t r_begin, int64_t r_end) {
    tile(wbytes + r_begin * rb, rb, r_end - r_begin, x, w.n_cols, n_tokens, y + r_begin, w.n_rows);
  });
}

void run_matmul(const KernelSet& ks, const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                ThreadPool* pool) {
  check(w.n_rows >= 0 && w.n_cols >= 0 && n_tokens >= 0, "negative shape");
  if (w.n_rows == 0 || n_tokens == 0) return;
  check(w.data != nullptr && x != nullptr && y != nullptr, "null buffer");
  switch (w.type) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: float_matmul(ks, w, x, n_tokens, y, pool); return;
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::iq4_nl:
    case DType::q8_0:
    case DType::q2_k:
    case DType::q3_k:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
      check(w.n_cols % dtype_info(w.type).block_elems == 0, "n_cols is not a multiple of the block size");
      quantized_matmul(ks, w, x, n_tokens, y, pool);
      return;
    case DType::q8_k: break;
  }
  check(false, "unsupported weight type");
}

}  // namespace

void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  run_matmul(kernel_set(best_isa()), w, x, n_tokens, y, &pool);
}

void matmul_reference(const MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  run_matmul(kernels_scalar(), w, x, n_tokens, y, nullptr);
}

void matmul_isa(Isa isa, const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  run_matmul(kernel_set(isa), w, x, n_tokens, y, &pool);
}

}  // namespace kvc::kernels
