// Walks a (rows x tokens) output block in register tiles and calls a micro-kernel per tile.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/vec_dot.h"

namespace kvc::kernels::tiling {

// Included by the per-ISA translation units only; the anonymous namespace gives each its own
// copy compiled for its ISA, so the linker can never hand an AVX-512 build of a helper to
// the AVX2 kernels.
namespace {

// The activations of the tokens of one micro-kernel call; token t starts at qs + t * n_cols.
struct ActTile {
  const int8_t* qs;
  const float* d;        // (n_tokens, d_stride)
  const int16_t* bsums;  // (n_tokens, n_cols / 16), Q8_K form only
  int64_t n_cols;
  int64_t d_stride;
};

// Decode streams weights from DRAM: each micro-kernel walks R rows side by side, which the
// hardware prefetcher follows poorly, so kernels prefetch the same offset k_prefetch_tiles
// tiles ahead (rows are contiguous, so that is where the walk will be then).
constexpr size_t k_prefetch_tiles = 6;
template <int k_bytes>
inline void prefetch_ahead(const void* p, size_t rb, int k_rows) {
  const char* q = static_cast<const char*>(p) + k_prefetch_tiles * static_cast<size_t>(k_rows) * rb;
  for (int i = 0; i < k_bytes; i += 64)
    __builtin_prefetch(q + i, 0, 1);  // into L2: an L1 prefetch measured ~1.7x slower
}

// Which activations a thread last arranged for a kernel. A product split into pieces calls the
// tile function once per piece with the same activations (one QuantizedActs::serial), so each
// thread arranges them on its first piece only; serials are never reused, so a kept
// arrangement is never taken for other activations. `where`: the buffer it was arranged into,
// when that can move.
struct KeptActs {
  uint64_t serial = 0;
  const void* where = nullptr;
  bool same(const QuantizedActs& a, const void* at = nullptr) const {
    return a.serial != 0 && a.serial == serial && at == where;
  }
  void keep(const QuantizedActs& a, const void* at = nullptr) {
    serial = a.serial;
    where = at;
  }
};

// Kernel: a struct with constants k_rows, k_tokens and a static template
//   template <int R, int T> void run(const uint8_t* w, size_t w_row_bytes, const ActTile& a,
//                                    float* y, int64_t y_stride);
// computing R rows x T tokens (R <= k_rows, T <= k_tokens). call_exact picks the instance
// for a tile of nr x nt and forwards its arguments.
template <typename Kernel, int R, int T, typename... Args>
void call_exact(int nr, int nt, Args&&... args) {
  if constexpr (R > 1) {
    if (nr < R) return call_exact<Kernel, R - 1, T>(nr, nt, args...);
  }
  if constexpr (T > 1) {
    if (nt < T) return call_exact<Kernel, R, T - 1>(nr, nt, args...);
  }
  Kernel::template run<R, T>(args...);
}

// Rows outer, tokens inner: a tile's weight rows stay in L1 while every token passes by.
template <typename Kernel>
void tile_quant(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens, float* y,
                int64_t ys) {
  const int64_t d_stride = acts.n_cols / Kernel::k_block;
  for (int64_t r = 0; r < n_rows; r += Kernel::k_rows) {
    const int nr = static_cast<int>(std::min<int64_t>(Kernel::k_rows, n_rows - r));
    for (int64_t t = 0; t < n_tokens; t += Kernel::k_tokens) {
      const int nt = static_cast<int>(std::min<int64_t>(Kernel::k_tokens, n_tokens - t));
      const ActTile a{acts.qs + t * acts.n_cols, acts.d + t * d_stride,
                      acts.bsums ? acts.bsums + t * (acts.n_cols / 16) : nullptr, acts.n_cols, d_stride};
      call_exact<Kernel, Kernel::k_rows, Kernel::k_tokens>(nr, nt, w + r * rb, rb, a, y + t * ys + r, ys);
    }
  }
}

// Forwards call_exact's run<R, T> to Kernel::run_prepared<R, T>.
template <typename Kernel>
struct PreparedRun {
  template <int R, int T, typename... Args>
  static void run(Args&&... args) {
    Kernel::template run_prepared<R, T>(args...);
  }
};

// Kernel's run_streamed as a tile_quant kernel.
template <typename Kernel>
struct StreamedRun {
  static constexpr int k_block = Kernel::k_block;
  static constexpr int k_rows = Kernel::k_rows;
  static constexpr int k_tokens = Kernel::k_tokens;
  template <int R, int T, typename... Args>
  static void run(Args&&... args) {
    Kernel::template run_streamed<R, T>(args...);
  }
};

template <typename Kernel>
void tile_prepared_run(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                       float* y, int64_t ys) {
  const int64_t n_units = Kernel::n_prepared(acts.n_cols);
  thread_local std::vector<typename Kernel::Prepared> prepared;  // (n_units, k_prepared_rows)
  const auto n_needed = static_cast<size_t>(n_units * Kernel::k_prepared_rows);
  if (prepared.size() < n_needed) prepared.resize(n_needed);
  const int64_t d_stride = acts.n_cols / Kernel::k_block;
  const size_t ahead = k_prefetch_tiles * static_cast<size_t>(Kernel::k_prepared_rows) * rb;
  for (int64_t r = 0; r < n_rows; r += Kernel::k_prepared_rows) {
    const int nr = static_cast<int>(std::min<int64_t>(Kernel::k_prepared_rows, n_rows - r));
    for (int64_t u = 0; u < n_units; ++u) {
      // The same part of the rows k_prefetch_tiles row tiles ahead, into L2 (as prefetch_ahead).
      const size_t part_begin = rb * static_cast<size_t>(u) / static_cast<size_t>(n_units);
      const size_t part_end = rb * static_cast<size_t>(u + 1) / static_cast<size_t>(n_units);
      for (int i = 0; i < nr; ++i) {
        const uint8_t* row = w + (r + i) * rb;
        for (size_t o = part_begin; o < part_end; o += 64) __builtin_prefetch(row + ahead + o, 0, 1);
        Kernel::prepare(row, acts.n_cols, u, &prepared[static_cast<size_t>(u * nr + i)]);
      }
    }
    for (int64_t t = 0; t < n_tokens; t += Kernel::k_prepared_tokens) {
      const int nt = static_cast<int>(std::min<int64_t>(Kernel::k_prepared_tokens, n_tokens - t));
      const ActTile a{acts.qs + t * acts.n_cols, acts.d + t * d_stride,
                      acts.bsums ? acts.bsums + t * (acts.n_cols / 16) : nullptr, acts.n_cols, d_stride};
      call_exact<PreparedRun<Kernel>, Kernel::k_prepared_rows, Kernel::k_prepared_tokens>(
          nr, nt, prepared.data(), w + r * rb, rb, a, y + t * ys + r, ys);
    }
  }
}

// Prefill: each row tile is converted once into an L1-resident buffer that every token tile
// then reads, instead of being unpacked again per token tile. Kernel additionally has
//   using Prepared = ...;  static int64_t n_prepared(int64_t n_cols);  (units per row)
//   static void prepare(const uint8_t* row, int64_t n_cols, int64_t u, Prepared* out);  (unit u
//       of a row of n_cols)
//   template <int R, int T> static void run_prepared(const Prepared* p, const uint8_t* w,
//       size_t w_row_bytes, const ActTile& a, float* y, int64_t y_stride);  p: (units, R),
//   for R <= k_prepared_rows, T <= k_prepared_tokens (its own register tile);
//   template <int R, int T> static void run_streamed(...)  (a tile_quant run), the same
//       arithmetic per row and token as run_prepared, for up to k_tokens tokens (decode):
//       rows stream through tile_quant and each unit is prepared just before use, so a
//       token's outputs do not depend on how many tokens share the call;
// and optionally static QuantizedActs prepare_acts(const QuantizedActs&, int64_t n_tokens),
// the activations rearranged for both runs, once per product on each thread (KeptActs).
template <typename Kernel>
void tile_prepared(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens, float* y,
                   int64_t ys) {
  QuantizedActs arranged = acts;
  if constexpr (requires { Kernel::prepare_acts(acts, n_tokens); }) {
    thread_local KeptActs kept_from;
    thread_local QuantizedActs kept;
    if (!kept_from.same(acts)) {
      kept = Kernel::prepare_acts(acts, n_tokens);
      kept_from.keep(acts);
    }
    arranged = kept;
  }
  if (n_tokens <= Kernel::k_tokens) return tile_quant<StreamedRun<Kernel>>(w, rb, n_rows, arranged, n_tokens, y, ys);
  tile_prepared_run<Kernel>(w, rb, n_rows, arranged, n_tokens, y, ys);
}

}  // namespace
}  // namespace kvc::kernels::tiling
