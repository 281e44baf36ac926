// KvGroupSpec: what one KV group of a model stores per position or per sequence, and its rules.
//
// A model's layers fall into KV groups (docs/ARCHITECTURE.md §3.9): the layers of one group keep
// their state the same way, in one block chain of their own. A group's *kind* says how:
//
//   kind        per token, per layer             a prefix hit at P needs     T2 keeps
//   ---------   ------------------------------   -------------------------   ---------------------------
//   full        K and V per KV head              positions [0, P)            every block
//   window W    K and V, only the last W live    positions [P - W, P)        checkpoints at turn ends
//   latent      one compressed vector (MLA)      positions [0, P)            every block
//   shared j    nothing: reads group j's K/V     nothing of its own          nothing
//   recurrent   nothing; a state per sequence    the state at exactly P      state snapshots
//
// Every kind runs end to end (recurrent since lfm2: its blocks hold state snapshots, below). A latent
// group's blocks hold one row a position per layer and no V rows (kernels::KvBlockLayout::v_in_k).
// A shared group holds no blocks: its layers read the blocks of the group `source` names, so the
// KV cache makes a group (a block chain, tiers, an index) only for the groups that store.
#pragma once

#include <cstdint>
#include <string_view>

namespace kvc::kv {

enum class KvGroupKind : uint8_t { full, window, latent, shared, recurrent };

constexpr std::string_view kv_group_kind_name(KvGroupKind k) {
  switch (k) {
    case KvGroupKind::full: return "full";
    case KvGroupKind::window: return "window";
    case KvGroupKind::latent: return "latent";
    case KvGroupKind::shared: return "shared";
    case KvGroupKind::recurrent: return "recurrent";
  }
  return "?";
}

// Whether kvchat can run a group of this kind today (the others are refused by name).
constexpr bool kv_group_kind_supported(KvGroupKind k) {
  return k == KvGroupKind::full || k == KvGroupKind::window || k == KvGroupKind::latent || k == KvGroupKind::shared ||
         k == KvGroupKind::recurrent;
}

// Whether a group of this kind keeps blocks of its own (a shared group reads another's).
constexpr bool kv_group_kind_stores(KvGroupKind k) { return k != KvGroupKind::shared; }

// What the cold tier (T2) keeps of a group's blocks.
enum class T2Keeps : uint8_t {
  every_block,     // full, latent: each block written behind when it is published
  checkpoints,     // window: the blocks a resume at a turn boundary needs (the window before it)
  nothing,         // shared: the source group's blocks are the data
  state_snapshots  // recurrent: the state at turn boundaries and every Nth block boundary
};

// Positions [begin, end) whose K/V a prefix hit needs from a group; with state_at_end, the
// range is empty and the group needs its recurrent state taken at exactly position `end`.
struct HitNeed {
  int64_t begin = 0;
  int64_t end = 0;
  bool state_at_end = false;  // recurrent: the snapshot at position `end`, not per-position data
};

// Invariants: n_layer > 0; window > 0 exactly for kind window; source >= 0 exactly for kind
// shared (and names a storing group); block_bytes > 0 for the storing per-position kinds once
// the layout is known (0 before, and always for shared and recurrent); state_bytes only for
// recurrent.
struct KvGroupSpec {
  KvGroupKind kind = KvGroupKind::full;
  int32_t n_layer = 0;      // the model's layers in the group
  int64_t window = 0;       // window: positions each layer attends to, its own included
  int32_t source = -1;      // shared: the group whose blocks its layers read
  int64_t block_bytes = 0;  // bytes of one block of B positions, every layer of the group
  int64_t state_bytes = 0;  // recurrent: bytes of one sequence's state (conv window + SSM matrix)
  // recurrent: a block of B positions stores the state after its last position (a snapshot),
  // and every snapshot_every-th block is kept as a checkpoint. 1 (lfm2, states of KiBs a layer):
  // every block, so a hit at any block boundary is whole and only a partial last block is
  // recomputed. A larger N (Qwen 3.5 / Mamba2, MiBs a layer) would keep every Nth block only; the
  // hit rule then takes the largest multiple of N B <= P that the other groups also cover
  // (hit_boundary), recomputing at most N B - 1 positions.
  int64_t snapshot_every = 1;

  // recurrent: the longest prefix <= p this group can resume from (a checkpoint boundary);
  // p itself for the other kinds.
  int64_t hit_boundary(int64_t p, int64_t block_tokens) const {
    if (kind != KvGroupKind::recurrent) return p;
    const int64_t step = block_tokens * (snapshot_every > 0 ? snapshot_every : 1);
    return p / step * step;
  }

  bool stores() const { return kv_group_kind_stores(kind); }

  // Which positions a prefix hit at P (the first P positions reused) needs from this group.
  HitNeed hit_needs(int64_t p) const {
    switch (kind) {
      case KvGroupKind::full:
      case KvGroupKind::latent: return {0, p, false};
      case KvGroupKind::window: return {p > window ? p - window : 0, p, false};
      case KvGroupKind::shared: return {p, p, false};
      case KvGroupKind::recurrent: return {p, p, true};
    }
    return {0, p, false};
  }

  T2Keeps t2_keeps() const {
    switch (kind) {
      case KvGroupKind::full:
      case KvGroupKind::latent: return T2Keeps::every_block;
      case KvGroupKind::window: return T2Keeps::checkpoints;
      case KvGroupKind::shared: return T2Keeps::nothing;
      case KvGroupKind::recurrent: return T2Keeps::state_snapshots;
    }
    return T2Keeps::every_block;
  }

  // Bytes per position over the group's layers (block_bytes / B); 0 for shared and recurrent.
  double bytes_per_token(int64_t block_tokens) const {
    return block_tokens > 0 ? static_cast<double>(block_bytes) / static_cast<double>(block_tokens) : 0.0;
  }
};

}  // namespace kvc::kv
