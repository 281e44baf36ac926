// The llama forward pass, written once against the backend ops (core/backend/backend.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/model/model.h"
#include "core/util/result.h"
#include "kernels/cpu/kv_block.h"

namespace kvc::model {

// One sequence's tokens in a batch: evaluated at positions [pos0, pos0 + tokens.size()),
// attending over its KV blocks, which must already hold [0, pos0) and have room for the rest.
struct SeqInput {
  std::span<const int32_t> tokens;
  // One block table per storing KV group, group 0 first (KvCache::block_tables; one for most models).
  std::span<const std::span<uint8_t* const>> blocks;
  int64_t pos0 = 0;
  // K per channel (int4c, group 0): the sequence's holding area of its tail block's K and V
  // rows, (n_layer, layout.tail_layer_elems()) F16 (KvCache::kv_tail).
  std::span<uint16_t> kv_tail = {};
};

enum class Logits { last, all };

// Runs batches of tokens of one or more sequences through the model (continuous batching
// puts the decode steps of many sequences and prefill chunks into one batch: every weight
// matrix is read once for all of them). Owns activation buffers for max_batch rows; a larger
// batch is an invalid_argument error.
class Forward {
 public:
  Forward(const Model& m, const kernels::KvBlockLayout& layout, int64_t max_batch);
  // One layout per storing KV group (KvCache::layouts()): each layer keeps its K/V in its group's.
  Forward(const Model& m, std::vector<kernels::KvBlockLayout> layouts, int64_t max_batch);
  ~Forward();
  Forward(const Forward&) = delete;
  Forward& operator=(const Forward&) = delete;

  // Logits::last: one row per input (its last token's logits), (inputs.size(), n_vocab).
  // Logits::all: every token's, (total tokens, n_vocab). Host memory owned by this object,
  // valid until the next call.
  Result<std::span<const float>> eval(std::span<const SeqInput> inputs, Logits which = Logits::last);

  int64_t max_batch() const { return max_batch_; }
  const kernels::KvBlockLayout& layout() const { return layouts_[0]; }

 private:
  const Model& m_;
  backend::Backend& be_;
  std::vector<kernels::KvBlockLayout> layouts_;  // per KV group
  // Per layer: the storing group whose blocks hold its K/V, its index in that group's layout, and
  // whether it writes them (a shared layer only reads another layer's).
  std::vector<int> layer_group_, layer_index_;
  std::vector<bool> layer_stores_;
  // deepseek2's attention block (forward_mla.cpp): from h_ (the normed input) to h_ (after
  // attn_output), storing the layer's latent rows into its blocks.
  void mla_attention(int64_t l, int64_t n, const kernels::KvBlockLayout& layout, int layer,
                     const std::vector<backend::SeqSlice>& slices, const kernels::AttentionShape& shape);
  // gemma4's layer (forward_gemma4.cpp): attention with the layer's own head size and V norm,
  // GeGLU FFN of its width, the per-layer embedding gated in, the output scale; and the per-layer
  // inputs of the batch (pl_in_), computed once before the layers from the scaled embeddings in x_.
  void gemma4_layer(int64_t l, int64_t n, const kernels::KvBlockLayout& layout, int layer,
                    const std::vector<backend::SeqSlice>& slices, bool stores);
  void gemma4_per_layer_inputs(int64_t n);
  float* pl_in_ = nullptr;    // gemma4: (n_layer, max_batch, n_embd_per_layer), layer-major
  float* pl_tmp_ = nullptr;   // gemma4: (max_batch, n_layer * n_embd_per_layer) token-major scratch
  float* pl_gate_ = nullptr;  // gemma4: (max_batch, n_embd_per_layer)
  float* ones_ = nullptr;     // gemma4: (max_head_dim) ones, V's RMS norm without weight
  int64_t max_batch_;
  // Backend buffers, each sized for max_batch rows.
  float* x_ = nullptr;         // (max_batch, n_embd) residual stream
  float* h_ = nullptr;         // (max_batch, n_embd) normed input
  float* q_ = nullptr;         // (max_batch, q_width)
  float* k_ = nullptr;         // (max_batch, kv_width)
  float* v_ = nullptr;         // (max_batch, kv_width)
  float* att_ = nullptr;       // (max_batch, q_width)
  float* gate_ = nullptr;      // (max_batch, n_ff)
  float* up_ = nullptr;        // (max_batch, n_ff)
  float* out_rows_ = nullptr;  // (max_batch, n_embd) rows whose logits are wanted
  float* moe_out_ = nullptr;   // (max_batch, n_embd) a mixture-of-experts layer's FFN output, else null
  // deepseek2 only, else null: the absorbed queries (max_batch, n_head * head_dim), two scratch
  // buffers (max_batch, mla_scratch_width()) and the heads' outputs after v_b (max_batch, n_head * mla_value_head).
  float* mla_q_ = nullptr;
  float* mla_a_ = nullptr;
  float* mla_b_ = nullptr;
  float* mla_o_ = nullptr;
  float* mla_pe_ = nullptr;    // (max_batch, n_head * n_rot): the query heads' rope parts, rotated together
  float* conv_bcx_ = nullptr;  // lfm2 only, else null: (max_batch, 3 n_embd) a conv layer's in_proj rows
  float* conv_y_ = nullptr;    // lfm2 only: (max_batch, n_embd) its gated conv output
  float* logits_ = nullptr;    // (max_batch, n_vocab)
  int32_t* tokens_ = nullptr;  // (max_batch) host staging of the batch's token ids
  bool alloc_failed_ = false;  // a buffer above could not be allocated; eval() reports it
  std::vector<int32_t> batch_tokens_;
  std::vector<int64_t> positions_;
  std::vector<std::vector<backend::SeqSlice>> slices_;  // per storing KV group: the batch's sequences
  std::vector<float> host_logits_;
};

}  // namespace kvc::model
