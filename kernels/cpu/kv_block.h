// Geometry of one KV cache block (B positions of every layer's K and V) and the writes that
// append a position's K and V to it.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/cpu/kv_format.h"

namespace kvc::kernels {

// A block holds positions [i B, (i + 1) B) of one sequence for every layer; a row is one
// position's K (or V) of one layer, n_kv_head * head_dim elements (kv_format.h):
//
//   block = | layer 0: [K anchor] K row 0 .. K row B-1 | V row 0 .. V row B-1 | layer 1: ...
//                      <------ B * k_row_bytes ------> <---- B * v_row_bytes ->
//            <--------------------------- layer_bytes -------------------------->
//
// K in an anchored format (q4h, kv_format.h) has an anchor before its rows: one F16 row
// (n_kv_head * head_dim elements) from which every K row of the block is encoded as a
// difference: the mean of the previous block's K as stored (kv_store_at), or, in a sequence's
// first block (or after a block left out by a sliding window), the K of row 0 itself. A mean
// keeps the slowly moving channel offsets of trained models and adds little to zero-mean
// channels (1 + 1/B of their variance, where a single row's anchor adds all of it again).
// (Anchoring V too was measured worse: on stories260K, KL 0.0049 against 0.0027 without.)
// K per channel (q4c) has two F16 rows there instead, the block's per-channel minima and then
// its scales, and rows of n / 2 bytes of nibbles; they are written when the block is sealed:
//
//   q4c layer = | K minima (F16 row) | K scales (F16 row) | K rows 0..B-1 (nibbles) | V rows |
//
// Until then the block's K rows live in F16 in the sequence's holding area, kv_tail below,
// which also keeps its V rows in F16 (attention reads a query's own block from there, K and V
// at full precision; V rows are also written to the block as usual):
//
//   kv_tail, per layer = | K row 0 .. K row B-1 | V row 0 .. V row B-1 |   F16, n elements each
//                        row r = position i B + r of the tail block i

// A latent layout (MLA, make_latent_block_layout; v_in_k) has no V rows: a position's V is its
// K row itself, read at stride v_row_bytes = k_row_bytes (the model uses the part of it it needs):
//
//   latent layer = | K row 0 .. K row B-1 |        (v_offset(layer) == k_offset(layer))
//
// Other formats, and V, have no rows before their K rows (anchor bytes 0).
// Invariants (make_kv_block_layout establishes them): all counts > 0; group =
// kv_group_for_head_dim(head_dim) (kv_format.h; 0 when no group fits), and group > 0 when
// k_type or v_type is quantized, so groups never straddle heads; k_row_bytes =
// row_bytes(k_type, group, n_kv_head * head_dim), likewise v_row_bytes; k_anchor_bytes =
// 2 n_kv_head head_dim when k_type is anchored, else 0; layer_bytes = k_anchor_bytes +
// B (k_row_bytes + v_row_bytes); block_bytes = n_layer layer_bytes. Every row size is even,
// so F16 rows are 2-byte aligned when the block is (callers allocate blocks 64-byte aligned).
struct KvBlockLayout {
  int n_layer = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int block_tokens = 0;  // B
  int group = 0;         // elements per scale of quantized rows: 32, 16 or 8
  KvType k_type = KvType::f16;
  KvType v_type = KvType::f16;
  int64_t k_row_bytes = 0;
  int64_t v_row_bytes = 0;
  int64_t k_anchor_bytes = 0;  // F16 rows before the K rows: q4h's anchor, q4c's minima and scales
  int64_t layer_bytes = 0;
  int64_t block_bytes = 0;
  bool v_in_k = false;  // latent: no V rows, V is the K row (k_type == v_type, neither anchored nor per channel)
  // recurrent state (make_state_block_layout): no rows per position; each layer keeps one F32
  // state of head_dim floats (n_kv_head 1), the sequence's state after the block's last
  // position written so far (after its last position once full: the block's snapshot).
  bool state = false;

  // Byte offset of layer `layer`'s K (V) rows inside a block (after its anchor).
  int64_t k_offset(int layer) const { return layer * layer_bytes + k_anchor_bytes; }
  int64_t v_offset(int layer) const {
    return layer * layer_bytes + k_anchor_bytes + (v_in_k ? 0 : block_tokens * k_row_bytes);
  }
  // Byte offset of layer `layer`'s K anchor: F16, n_kv_head * head_dim (anchored K only); for K
  // per channel its minima, followed by its scales.
  int64_t k_anchor_offset(int layer) const { return layer * layer_bytes; }
  // Elements of one K row (n_kv_head * head_dim); the holding area of K per channel keeps B such
  // F16 rows per layer.
  int64_t row_elems() const { return static_cast<int64_t>(n_kv_head) * head_dim; }
  // F16 elements of one layer's holding area (K per channel): B K rows, then B V rows.
  int64_t tail_layer_elems() const { return 2 * block_tokens * row_elems(); }
  // Byte offset of row `row` in [0, B) of layer `layer`'s K (V) inside a block.
  int64_t k_row_offset(int layer, int row) const { return k_offset(layer) + row * k_row_bytes; }
  int64_t v_row_offset(int layer, int row) const { return v_offset(layer) + row * v_row_bytes; }
  // Byte offset of kv head h inside a K (V) row.
  int64_t k_head_offset(int h) const {
    return kv_k_per_channel(k_type) ? kv_k_per_channel_row_bytes(static_cast<int64_t>(h) * head_dim)
                                    : row_bytes(k_type, group, static_cast<int64_t>(h) * head_dim);
  }
  int64_t v_head_offset(int h) const { return row_bytes(v_type, group, static_cast<int64_t>(h) * head_dim); }

  // True when the invariants above hold.
  bool check_invariants() const;
};

// The layout for a model's shape (the group chosen from head_dim), or nullopt when the shape
// cannot be stored: a count <= 0, or a quantized type with head_dim not a multiple of 8 (the
// caller reports it; a model file can have such a head_dim, so it is not a bug here).
std::optional<KvBlockLayout> make_kv_block_layout(int n_layer, int n_kv_head, int head_dim, int block_tokens,
                                                  KvType k_type, KvType v_type);

// The layout of a latent cache (MLA): n_layer layers of one row of row_elems elements a position
// in `type` (f16 or int8), no V rows (v_in_k); nullopt for another type or a count <= 0.
std::optional<KvBlockLayout> make_latent_block_layout(int n_layer, int row_elems, int block_tokens, KvType type);

// The layout of a recurrent group's blocks: n_layer layers of one F32 state of state_floats
// floats each (layer_bytes = 4 state_floats, whatever B is), no K or V rows:
//
//   state block = | layer 0 state | layer 1 state | ...      (k_offset(layer) == layer * layer_bytes)
//
// nullopt for a count <= 0 or a state over 2^28 floats.
std::optional<KvBlockLayout> make_state_block_layout(int n_layer, int64_t state_floats, int block_tokens);

// Where position t of a sequence lives, given its block table (block i holds [i B, (i+1) B)).
struct KvSlot {
  int64_t block = 0;  // index into the block table
  int row = 0;        // in [0, B)
};
inline KvSlot kv_slot(const KvBlockLayout& layout, int64_t t) {
  return {t / layout.block_tokens, static_cast<int>(t % layout.block_tokens)};
}

// Encodes one position's K and V of one layer into row `row` of `block`. Anchored K: row 0
// also sets the anchor to itself, and a row r > 0 is stored against the anchor, so row 0 of
// a block is written before its other rows. K per channel: K and V also go to row `row` of
// kv_tail (this layer's holding area, tail_layer_elems() F16; non-null exactly then), and the
// block's K is encoded by kv_seal_block once all its rows are there.
//   k, v: (n_kv_head, head_dim) floats.
void kv_store(const KvBlockLayout& layout, uint8_t* block, int layer, int row, const float* k, const float* v,
              uint16_t* kv_tail = nullptr);

// K per channel: encodes the block's K of layer `layer` from the B F16 K rows of kv_tail (its
// minima, scales and nibbles, kv_format.h); the same bytes on every ISA. Other formats: a bug.
void kv_seal_block(const KvBlockLayout& layout, uint8_t* block, int layer, const uint16_t* kv_tail);

// Decodes row `row` of `block` back to floats (the anchor added back for anchored K).
//   k, v: (n_kv_head, head_dim) floats.  Row `row` and, when K is anchored, row 0 were stored;
//   K per channel: the block is sealed.
void kv_load(const KvBlockLayout& layout, const uint8_t* block, int layer, int row, float* k, float* v);

// kv_store at position t of a sequence through its block table (blocks[t / B] non-null).
// Anchored K at row 0 of a block after a non-null one: the anchor is the mean of that block's
// K rows, so that block is complete before this row is stored (callers store a block's row 0
// after the previous block, and before the block's other rows).
// K per channel: kv_tail as for kv_store (the caller seals a block after its last row).
void kv_store_at(const KvBlockLayout& layout, uint8_t* const* blocks, int layer, int64_t t, const float* k,
                 const float* v, uint16_t* kv_tail = nullptr);

}  // namespace kvc::kernels
