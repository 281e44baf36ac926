// moe_ffn(): route, group the batch's tokens by expert, two matmul_many passes, weighted sum.
#include "kernels/cpu/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/ops.h"

namespace kvc::kernels {

namespace {

// A bug check (kernels may not include core/util/assert.h): the caller broke the contract.
void check(bool ok, const char* what) {
  if (!ok) [[unlikely]] {
    std::fprintf(stderr, "kvchat: moe_ffn: %s\n", what);
    std::abort();
  }
}

// Rows [first, first + n) of m: one expert's matrix of a 3-D tensor (rows are contiguous).
MatrixView rows_of(const MatrixView& m, int64_t first, int64_t n) {
  const size_t rb = row_bytes(m.type, m.n_cols);
  return {m.type, static_cast<const uint8_t*>(m.data) + static_cast<size_t>(first) * rb, n, m.n_cols};
}

// gpt-oss's clamped SwiGLU (fixed in llama.cpp too: the GGUF carries neither).
constexpr float k_oai_alpha = 1.702f;
constexpr float k_oai_limit = 7.0f;

// Elementwise work below this many floats runs on the calling thread.
constexpr int64_t k_serial_floats = 1 << 15;

template <typename T>
T* sized(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace

void moe_ffn(const MoeFfnWeights& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, MoeFfnScratch& s) {
  const MoeRouting& r = w.routing;
  const int64_t n_embd = w.router.n_cols, n_expert = r.n_expert, k = r.n_used, n_ff = w.n_ff;
  const int64_t gu_width = 2 * n_ff;  // a gathered row's gate (n_ff) then up (n_ff)
  check(w.router.n_rows == n_expert && n_ff > 0, "router shape");
  check(w.gate.n_rows == n_expert * (w.fused() ? 2 : 1) * n_ff && w.gate.n_cols == n_embd, "gate shape");
  check(w.fused() || (w.up.n_rows == n_expert * n_ff && w.up.n_cols == n_embd), "up shape");
  check(w.down.n_rows == n_expert * n_embd && w.down.n_cols == n_ff, "down shape");
  check(!w.fused() || w.up_bias == nullptr, "a fused gate_up has one bias");
  check(x != y, "y must not be x");
  if (n_tokens <= 0) return;

  // Routing: logits, then each token's experts (best first) and weights.
  float* logits = sized(s.logits, n_tokens * n_expert);
  matmul(w.router, x, n_tokens, logits, pool);
  if (w.router_bias) {
    for (int64_t t = 0; t < n_tokens; ++t) add_inplace(logits + t * n_expert, w.router_bias, n_expert);
  }
  const int64_t n_rows = n_tokens * k;  // (token, choice) pairs: the gathered rows
  int32_t* ids = sized(s.ids, n_rows);
  float* weights = sized(s.weights, n_rows);
  moe_route(r, logits, w.selection_bias, n_tokens, ids, weights);

  // Group the choices by expert (a counting sort; an expert's tokens stay in order):
  //   gathered rows  | expert 3: t0 t2 t5 | expert 7: t0 t1 | ...     expert_begin[e]: its first
  s.expert_begin.assign(static_cast<size_t>(n_expert + 1), 0);
  for (int64_t i = 0; i < n_rows; ++i) ++s.expert_begin[static_cast<size_t>(ids[i] + 1)];
  for (int64_t e = 0; e < n_expert; ++e)
    s.expert_begin[static_cast<size_t>(e + 1)] += s.expert_begin[static_cast<size_t>(e)];
  int64_t* row_of = sized(s.row_of, n_rows);
  int64_t* token_of = sized(s.token_of, n_rows);
  {
    std::vector<int64_t> next(s.expert_begin.begin(), s.expert_begin.end() - 1);
    for (int64_t i = 0; i < n_rows; ++i) {
      const int64_t row = next[static_cast<size_t>(ids[i])]++;
      row_of[i] = row;
      token_of[row] = i / k;
    }
  }
  const int64_t* begin = s.expert_begin.data();
  auto expert_of_row = [&](int64_t row) {
    return static_cast<int64_t>(std::upper_bound(begin, begin + n_expert + 1, row) - begin) - 1;
  };
  // An expert that every token chose reads x itself (each token's choices are distinct experts,
  // so its rows are all tokens in order): one token's decode gathers nothing and quantizes x once.
  auto gathered = [&](int64_t e) { return begin[e + 1] - begin[e] != n_tokens; };
  float* xg = sized(s.xg, n_rows * n_embd);
  pool.parallel_for(n_rows, std::max<int64_t>(16, k_serial_floats / n_embd), [&](int64_t b, int64_t e_) {
    for (int64_t row = b; row < e_; ++row) {
      if (gathered(expert_of_row(row))) {
        std::memcpy(xg + row * n_embd, x + token_of[row] * n_embd, static_cast<size_t>(n_embd) * sizeof(float));
      }
    }
  });

  // Gate and up of every chosen expert, and the shared experts', in one pass.
  float* gate_up = sized(s.gate_up, n_rows * gu_width);
  const int64_t n_ff_sh = w.has_shared() ? w.shared_gate.n_rows : 0;
  float* sh_gate_up = w.has_shared() ? sized(s.shared_gate_up, n_tokens * 2 * n_ff_sh) : nullptr;
  float* sh_scale = sized(s.shared_scale, n_tokens);
  s.jobs.clear();
  for (int64_t e = 0; e < n_expert; ++e) {
    const int64_t n_e = begin[e + 1] - begin[e];
    if (n_e == 0) continue;
    const float* xe = gathered(e) ? xg + begin[e] * n_embd : x;
    float* out = gate_up + begin[e] * gu_width;
    if (w.fused()) {
      s.jobs.push_back({rows_of(w.gate, e * gu_width, gu_width), xe, n_e, out, gu_width});
    } else {
      s.jobs.push_back({rows_of(w.gate, e * n_ff, n_ff), xe, n_e, out, gu_width});
      s.jobs.push_back({rows_of(w.up, e * n_ff, n_ff), xe, n_e, out + n_ff, gu_width});
    }
  }
  if (w.has_shared()) {
    s.jobs.push_back({w.shared_gate, x, n_tokens, sh_gate_up, 2 * n_ff_sh});
    s.jobs.push_back({w.shared_up, x, n_tokens, sh_gate_up + n_ff_sh, 2 * n_ff_sh});
    if (w.shared_gate_inp.n_rows > 0) s.jobs.push_back({w.shared_gate_inp, x, n_tokens, sh_scale, 1});
  }
  matmul_many(s.jobs, pool);

  // Biases and SwiGLU: act = silu(gate) * up (or the clamped variant), row by row.
  // (A decode step's few rows on one thread: a fork and join would cost more than they do.)
  float* act = sized(s.act, n_rows * n_ff);
  pool.parallel_for(n_rows, std::max<int64_t>(4, k_serial_floats / n_ff), [&](int64_t b, int64_t e_) {
    for (int64_t row = b; row < e_; ++row) {
      float* g = gate_up + row * gu_width;
      const int64_t e = expert_of_row(row);
      if (w.gate_bias) add_inplace(g, w.gate_bias + e * (w.fused() ? gu_width : n_ff), w.fused() ? gu_width : n_ff);
      if (w.up_bias) add_inplace(g + n_ff, w.up_bias + e * n_ff, n_ff);
      if (w.activation == MoeActivation::swiglu_oai) {
        swiglu_oai_mul(g, g + n_ff, n_ff, k_oai_alpha, k_oai_limit, act + row * n_ff);
      } else {
        silu_mul(g, g + n_ff, n_ff, act + row * n_ff);
      }
    }
  });
  float* sh_act = w.has_shared() ? sized(s.shared_act, n_tokens * n_ff_sh) : nullptr;
  if (w.has_shared()) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* g = sh_gate_up + t * 2 * n_ff_sh;
      silu_mul(g, g + n_ff_sh, n_ff_sh, sh_act + t * n_ff_sh);
    }
  }

  // Down of every chosen expert and of the shared experts, in one pass.
  float* down = sized(s.down, n_rows * n_embd);
  float* sh_down = w.has_shared() ? sized(s.shared_down, n_tokens * n_embd) : nullptr;
  s.jobs.clear();
  for (int64_t e = 0; e < n_expert; ++e) {
    const int64_t n_e = begin[e + 1] - begin[e];
    if (n_e == 0) continue;
    s.jobs.push_back({rows_of(w.down, e * n_embd, n_embd), act + begin[e] * n_ff, n_e, down + begin[e] * n_embd, 0});
  }
  if (w.has_shared()) s.jobs.push_back({w.shared_down, sh_act, n_tokens, sh_down, 0});
  matmul_many(s.jobs, pool);

  // y = the weighted sum of each token's experts, best first (+ the shared experts).
  pool.parallel_for(n_tokens, std::max<int64_t>(4, k_serial_floats / (k * n_embd)), [&](int64_t b, int64_t e_) {
    for (int64_t t = b; t < e_; ++t) {
      float* out = y + t * n_embd;
      for (int64_t j = 0; j < k; ++j) {
        const float wt = weights[t * k + j];
        float* d = down + row_of[t * k + j] * n_embd;
        if (w.down_bias) add_inplace(d, w.down_bias + static_cast<int64_t>(ids[t * k + j]) * n_embd, n_embd);
        if (j == 0) {
          for (int64_t i = 0; i < n_embd; ++i) out[i] = d[i] * wt;
        } else {
          for (int64_t i = 0; i < n_embd; ++i) out[i] += d[i] * wt;
        }
      }
      if (w.has_shared()) {
        const float* d = sh_down + t * n_embd;
        if (w.shared_gate_inp.n_rows > 0) {
          const float g = 1.0f / (1.0f + std::exp(-sh_scale[t]));
          for (int64_t i = 0; i < n_embd; ++i) out[i] += d[i] * g;
        } else {
          for (int64_t i = 0; i < n_embd; ++i) out[i] += d[i];
        }
      }
    }
  });
}

}  // namespace kvc::kernels
