// The KV calculator's arithmetic: KV cache bytes per token and per conversation for a model
// shape and element format, with what-ifs (MQA/GQA, sliding-window layers, cross-layer sharing).
#pragma once

#include <cstdint>

#include "core/kv/kv_format.h"
#include "core/util/result.h"

namespace kvc::ui {

// A decoder's attention shape. Invariant (estimate_kv checks it): every count > 0 and
// n_kv_head divides n_head.
struct KvShape {
  int64_t n_layer = 0;
  int64_t n_head = 0;     // query heads
  int64_t n_kv_head = 0;  // n_head (MHA), fewer (GQA), 1 (MQA)
  int64_t head_dim = 0;
  // Recurrent layers (lfm2's conv layers, KV group kind recurrent): of n_layer, these keep no
  // K/V but one F32 state of state_floats per sequence, with a snapshot of it in every block.
  int64_t n_recurrent_layers = 0;
  int64_t state_floats = 0;
  int64_t block_tokens = 16;  // the engine's KV block (a snapshot a block)
};

// Changes to the shape, applied in this order: KV heads, then layer sharing, then local layers.
struct KvWhatIf {
  int64_t n_kv_head = 0;      // 0: the model's; 1: MQA; otherwise GQA with this many KV heads
  int64_t share_every = 1;    // k: each run of k consecutive layers stores one KV (1: no sharing)
  double local_fraction = 0;  // [0, 1] of the stored KV layers use sliding-window attention
  int64_t window_tokens = 0;  // how many recent tokens a local layer keeps
};

// A model's own local layers as the what-if (Gemma 3 1B: 22 of 26 layers, window 512), so that
// the estimate's local layers are exactly the model's. n_local_layers 0: none.
KvWhatIf model_local_layers(int64_t n_local_layers, int64_t n_layer, int64_t window);

// Bytes of one stored element: bits / 8 plus one F16 scale per `group` elements (INT8, INT4);
// F16 has no scale. group > 0.
double kv_element_bytes(kv::KvFormat format, int group);

// Invariant: n_local_layers <= n_kv_layers; bytes_per_conversation <= bytes_per_conversation_full
// == bytes_per_token * n_tokens; bytes_per_token == bytes_per_token_global + bytes_per_token_local.
// The two layer groups are kvchat's KV groups (docs/ARCHITECTURE.md §3.9): group 0 the global
// layers, group 1 the local ones, which keep only the window of each conversation.
struct KvEstimate {
  int64_t n_kv_head = 0;                   // after the what-if
  int64_t n_kv_layers = 0;                 // layers that store their own KV (ceil(n_layer / share_every))
  int64_t n_local_layers = 0;              // of them, sliding-window layers
  double bytes_per_token_layer = 0;        // K and V of one token in one layer: 2 * n_kv_head * head_dim * element
  double bytes_per_token = 0;              // a token while it is inside every window (all stored layers)
  double bytes_per_token_global = 0;       // of it, the global layers' (kept for every position)
  double bytes_per_token_local = 0;        // the local layers' (kept for the last window_tokens positions)
  double bytes_per_conversation = 0;       // n_tokens: full layers keep all, local layers at most window_tokens
  double bytes_per_conversation_full = 0;  // n_tokens with every layer keeping every position
  // Recurrent layers: the state of one sequence (all of them, F32) and the snapshots a
  // conversation's blocks keep (one state each); both are in bytes_per_conversation(_full).
  double state_bytes_per_sequence = 0;
  double state_bytes_per_conversation = 0;
  // What keeping only the local layers' window saves, in [0, 1) of the full figure.
  double saved_fraction() const {
    return bytes_per_conversation_full > 0 ? 1.0 - bytes_per_conversation / bytes_per_conversation_full : 0.0;
  }
};

// Errors name the input a user can fix ("4 KV heads do not divide 6 query heads").
Result<KvEstimate> estimate_kv(const KvShape& shape, const KvWhatIf& what_if, kv::KvFormat format, int group,
                               int64_t n_tokens);

}  // namespace kvc::ui
