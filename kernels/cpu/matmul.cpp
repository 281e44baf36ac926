// matmul(): quantizes activations once per call, then splits weight rows across the pool.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <span>
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
    case DType::mxfp4:
      check(w.n_cols % dtype_info(w.type).block_elems == 0, "n_cols is not a multiple of the block size");
      quantized_matmul(ks, w, x, n_tokens, y, pool);
      return;
    case DType::q8_k: break;
  }
  check(false, "unsupported weight type");
}

// Whether a weight type is read by the integer kernels (activations quantized), and in which form.
bool quantized_type(DType t) { return t != DType::f32 && t != DType::f16 && t != DType::bf16; }

void check_job(const MatmulJob& j) {
  const MatrixView& w = j.w;
  check(w.n_rows >= 0 && w.n_cols >= 0 && j.n_tokens >= 0, "negative shape");
  check(j.y_stride == 0 || j.y_stride >= w.n_rows, "y_stride below n_rows");
  if (w.n_rows == 0 || j.n_tokens == 0) return;
  check(w.data != nullptr && j.x != nullptr && j.y != nullptr, "null buffer");
  check(w.type != DType::q8_k, "unsupported weight type");
  check(w.n_cols % dtype_info(w.type).block_elems == 0, "n_cols is not a multiple of the block size");
}

// matmul_many's plan: the distinct activations to quantize, and the row ranges to compute.
struct ManyScratch {
  struct Acts {  // one (x, n_tokens, n_cols, form) quantized into the buffers below
    const float* x;
    int64_t n_tokens, n_cols;
    bool k_form;
    size_t qs_at, d_at, bsums_at;  // offsets of its token 0
    int64_t first_row;             // its first token among all Acts' tokens (the quantize pass)
    uint64_t serial;               // of its first chunk; chunk c has serial + c
  };
  struct Segment {  // rows of one job for one chunk of its tokens, in units of k_row_grain rows
    size_t job;
    int64_t acts;  // index into acts, -1: a float job
    int64_t t_begin, n_tok;
    uint64_t serial;
    int64_t unit_end;  // exclusive prefix sum of units over segments
  };
  std::vector<Acts> acts;
  std::vector<Segment> segments;
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int16_t> bsums;
};

void run_many(const KernelSet& ks, std::span<const MatmulJob> jobs, ThreadPool& pool) {
  static std::atomic<uint64_t> next_serial{1};
  thread_local ManyScratch caller_scratch;  // the caller's: the pool's threads read it through `s`
  ManyScratch& s = caller_scratch;
  s.acts.clear();
  s.segments.clear();
  std::vector<int64_t> job_acts(jobs.size(), -1);
  size_t qs_total = 0, d_total = 0, bsums_total = 0;
  int64_t rows_total = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MatmulJob& j = jobs[i];
    check_job(j);
    if (j.w.n_rows == 0 || j.n_tokens == 0 || !quantized_type(j.w.type)) continue;
    const bool k_form = takes_q8_k(j.w.type);
    for (size_t a = 0; a < s.acts.size() && job_acts[i] < 0; ++a) {
      const ManyScratch::Acts& q = s.acts[a];
      if (q.x == j.x && q.n_tokens == j.n_tokens && q.n_cols == j.w.n_cols && q.k_form == k_form) {
        job_acts[i] = static_cast<int64_t>(a);
      }
    }
    if (job_acts[i] >= 0) continue;
    const int64_t n_cols = j.w.n_cols, block = k_form ? 256 : 32;
    const int64_t chunk = std::max<int64_t>(1, k_act_chunk_bytes / std::max<int64_t>(1, n_cols));
    const auto n_chunks = static_cast<uint64_t>((j.n_tokens + chunk - 1) / chunk);
    job_acts[i] = static_cast<int64_t>(s.acts.size());
    s.acts.push_back({j.x, j.n_tokens, n_cols, k_form, qs_total, d_total, bsums_total, rows_total,
                      next_serial.fetch_add(n_chunks, std::memory_order_relaxed)});
    qs_total += static_cast<size_t>(j.n_tokens * n_cols);
    d_total += static_cast<size_t>(j.n_tokens * (n_cols / block));
    if (k_form) bsums_total += static_cast<size_t>(j.n_tokens * (n_cols / 16));
    rows_total += j.n_tokens;
  }
  if (s.qs.size() < qs_total) s.qs.resize(qs_total);
  if (s.d.size() < d_total) s.d.resize(d_total);
  if (s.bsums.size() < bsums_total) s.bsums.resize(bsums_total);
  // Quantize every distinct activation row, the rows of all of them split across the pool.
  auto quantize = [&](int64_t r_begin, int64_t r_end) {
    size_t a = 0;
    for (int64_t r = r_begin; r < r_end; ++r) {
      while (r >= s.acts[a].first_row + s.acts[a].n_tokens) ++a;
      const ManyScratch::Acts& q = s.acts[a];
      const int64_t t = r - q.first_row, nb = q.n_cols / (q.k_form ? 256 : 32);
      int8_t* qs = s.qs.data() + q.qs_at + t * q.n_cols;
      float* d = s.d.data() + q.d_at + t * nb;
      if (q.k_form) {
        ks.quantize_q8_k(q.x + t * q.n_cols, q.n_cols, qs, d, s.bsums.data() + q.bsums_at + t * (q.n_cols / 16));
      } else {
        ks.quantize_q8_0(q.x + t * q.n_cols, q.n_cols, qs, d);
      }
    }
  };
  if (rows_total >= k_parallel_quantize_tokens) {
    pool.parallel_for(rows_total, 1, quantize);
  } else {
    quantize(0, rows_total);
  }
  // The pieces: each job's rows per chunk of its tokens (matmul()'s chunks, so its results).
  int64_t units = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MatmulJob& j = jobs[i];
    if (j.w.n_rows == 0 || j.n_tokens == 0) continue;
    const int64_t row_units = (j.w.n_rows + k_row_grain - 1) / k_row_grain;
    if (job_acts[i] < 0) {
      units += row_units;
      s.segments.push_back({i, -1, 0, j.n_tokens, 0, units});
      continue;
    }
    const ManyScratch::Acts& q = s.acts[static_cast<size_t>(job_acts[i])];
    const int64_t chunk = std::max<int64_t>(1, k_act_chunk_bytes / std::max<int64_t>(1, q.n_cols));
    for (int64_t t = 0, c = 0; t < j.n_tokens; t += chunk, ++c) {
      units += row_units;
      s.segments.push_back(
          {i, job_acts[i], t, std::min(chunk, j.n_tokens - t), q.serial + static_cast<uint64_t>(c), units});
    }
  }
  pool.parallel_for_balanced(units, k_row_piece, [&](int64_t u_begin, int64_t u_end) {
    auto seg = std::upper_bound(s.segments.begin(), s.segments.end(), u_begin,
                                [](int64_t u, const ManyScratch::Segment& g) { return u < g.unit_end; });
    for (int64_t u = u_begin; u < u_end; ++seg) {
      const ManyScratch::Segment& g = *seg;
      const MatmulJob& j = jobs[g.job];
      const int64_t seg_units = (j.w.n_rows + k_row_grain - 1) / k_row_grain;
      const int64_t first = g.unit_end - seg_units, last = std::min(u_end, g.unit_end);
      const int64_t r_begin = (u - first) * k_row_grain, r_end = std::min(j.w.n_rows, (last - first) * k_row_grain);
      const size_t rb = row_bytes(j.w.type, j.w.n_cols);
      const uint8_t* w = static_cast<const uint8_t*>(j.w.data) + static_cast<size_t>(r_begin) * rb;
      const int64_t ys = j.y_stride > 0 ? j.y_stride : j.w.n_rows;
      if (g.acts < 0) {
        const FloatTileFn tile = j.w.type == DType::f32 ? ks.f32 : j.w.type == DType::f16 ? ks.f16 : ks.bf16;
        tile(w, rb, r_end - r_begin, j.x, j.w.n_cols, j.n_tokens, j.y + r_begin, ys);
      } else {
        const ManyScratch::Acts& q = s.acts[static_cast<size_t>(g.acts)];
        const int64_t nb = q.n_cols / (q.k_form ? 256 : 32);
        const QuantizedActs acts{s.qs.data() + q.qs_at + g.t_begin * q.n_cols, s.d.data() + q.d_at + g.t_begin * nb,
                                 q.k_form ? s.bsums.data() + q.bsums_at + g.t_begin * (q.n_cols / 16) : nullptr,
                                 q.n_cols, g.serial};
        quant_tile(ks, j.w.type)(w, rb, r_end - r_begin, acts, g.n_tok, j.y + g.t_begin * ys + r_begin, ys);
      }
      u = last;
    }
  });
}

}  // namespace

void matmul_many(std::span<const MatmulJob> jobs, ThreadPool& pool) { run_many(kernel_set(best_isa()), jobs, pool); }

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
