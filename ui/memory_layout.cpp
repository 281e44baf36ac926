// Block map layout, owner colours, tier share segments and turn buckets for the Memory window.
#include "ui/memory_layout.h"

#include <algorithm>
#include <cmath>

namespace kvc::ui {

namespace {

constexpr uint32_t rgba(uint32_t r, uint32_t g, uint32_t b) { return r | g << 8 | b << 16 | 0xFFu << 24; }

// Ten hues far apart on the colour wheel, legible on the dark theme.
constexpr std::array<uint32_t, k_owner_palette_size> k_palette = {
    rgba(92, 158, 250), rgba(240, 150, 60),  rgba(96, 200, 120), rgba(225, 95, 110), rgba(170, 130, 235),
    rgba(70, 200, 200), rgba(235, 205, 80),  rgba(230, 120, 200), rgba(150, 190, 70), rgba(200, 160, 120),
};
constexpr uint32_t k_no_owner = rgba(120, 124, 134);

}  // namespace

int block_map_cells_per_row(float width, float cell, float gap) {
  const float pitch = cell + gap;
  if (pitch <= 0 || width <= cell) return 1;
  return std::max(1, static_cast<int>(std::floor((width + gap) / pitch)));
}

BlockMapLayout layout_block_map(std::span<const BlockCell> blocks, float width, float cell, float gap) {
  BlockMapLayout l;
  l.cells_per_row = block_map_cells_per_row(width, cell, gap);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int t = std::clamp(blocks[i].tier, 0, k_n_kv_tiers - 1);
    l.groups[static_cast<size_t>(t)].cells.push_back(i);
    if (t != 2 && blocks[i].on_disk) l.groups[2].cells.push_back(i);
  }
  for (BlockMapGroup& g : l.groups) {
    std::stable_sort(g.cells.begin(), g.cells.end(), [&](size_t a, size_t b) {
      const BlockCell& x = blocks[a];
      const BlockCell& y = blocks[b];
      if (x.owner != y.owner) return x.owner < y.owner;
      return x.position < y.position;
    });
    const auto n = static_cast<int>(g.cells.size());
    g.n_rows = (n + l.cells_per_row - 1) / l.cells_per_row;
  }
  return l;
}

uint32_t owner_color(int64_t owner) {
  if (owner < 0) return k_no_owner;
  return k_palette[static_cast<size_t>(owner % k_owner_palette_size)];
}

uint32_t shade_color(uint32_t c, float shade) {
  const float s = std::clamp(shade, 0.0f, 1.0f);
  auto ch = [&](int shift) {
    return static_cast<uint32_t>(std::lround(static_cast<float>((c >> shift) & 0xFFu) * s)) << shift;
  };
  return ch(0) | ch(8) | ch(16) | (c & 0xFF000000u);
}

float recency_shade(uint64_t age, uint64_t max_age) {
  if (max_age == 0 || age == 0) return 1.0f;
  const float f = static_cast<float>(std::min(age, max_age)) / static_cast<float>(max_age);
  return 1.0f - f * (1.0f - k_min_recency_shade);
}

std::vector<ShareSegment> share_segments(std::span<const OwnerShare> shares, int tier, size_t used_bytes,
                                         size_t capacity_bytes) {
  std::vector<ShareSegment> out;
  if (tier < 0 || tier >= k_n_kv_tiers) return out;
  const double cap = capacity_bytes > 0 ? static_cast<double>(capacity_bytes) : 1.0;
  size_t at = 0;
  auto push = [&](int64_t owner, size_t bytes) {
    bytes = std::min(bytes, used_bytes - at);
    if (bytes == 0) return;
    out.push_back(ShareSegment{owner, bytes, static_cast<double>(at) / cap, static_cast<double>(at + bytes) / cap});
    at += bytes;
  };
  for (const OwnerShare& s : shares) push(s.owner, s.bytes[static_cast<size_t>(tier)]);
  push(-1, used_bytes - at);
  return out;
}

std::vector<TurnBar> bucket_turns(std::span<const TurnPhases> turns, size_t max_bars) {
  std::vector<TurnBar> bars;
  if (turns.empty() || max_bars == 0) return bars;
  const size_t per_bar = (turns.size() + max_bars - 1) / max_bars;
  const size_t n_bars = (turns.size() + per_bar - 1) / per_bar;
  // The oldest bar takes the remainder so every later bar holds exactly per_bar turns.
  const size_t first_len = turns.size() - (n_bars - 1) * per_bar;
  size_t begin = 0;
  for (size_t b = 0; b < n_bars; ++b) {
    const size_t len = b == 0 ? first_len : per_bar;
    TurnBar bar;
    bar.first_turn = begin;
    bar.n_turns = len;
    bar.sum.request_id = turns[begin + len - 1].request_id;
    for (size_t i = begin; i < begin + len; ++i) {
      const TurnPhases& t = turns[i];
      for (size_t k = 0; k < k_n_kv_tiers; ++k) bar.sum.n_cached[k] += t.n_cached[k];
      bar.sum.n_computed += t.n_computed;
      bar.sum.lookup_ms += t.lookup_ms;
      bar.sum.promote_ms += t.promote_ms;
      bar.sum.prefill_ms += t.prefill_ms;
      bar.sum.first_decode_ms += t.first_decode_ms;
    }
    const auto n = static_cast<double>(len);
    bar.sum.lookup_ms /= n;
    bar.sum.promote_ms /= n;
    bar.sum.prefill_ms /= n;
    bar.sum.first_decode_ms /= n;
    bars.push_back(bar);
    begin += len;
  }
  return bars;
}

}  // namespace kvc::ui
