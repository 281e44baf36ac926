// Block map layout, owner colours, tier share segments and turn buckets for the Memory window.
#include "ui/memory_layout.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "ui/format.h"

namespace kvc::ui {

namespace {

constexpr uint32_t rgba(uint32_t r, uint32_t g, uint32_t b) { return r | g << 8 | b << 16 | 0xFFu << 24; }

// Ten hues far apart on the colour wheel, legible on the dark theme.
constexpr std::array<uint32_t, k_owner_palette_size> k_palette = {
    rgba(92, 158, 250), rgba(240, 150, 60), rgba(96, 200, 120),  rgba(225, 95, 110), rgba(170, 130, 235),
    rgba(70, 200, 200), rgba(235, 205, 80), rgba(230, 120, 200), rgba(150, 190, 70), rgba(200, 160, 120),
};
constexpr uint32_t k_no_owner = rgba(120, 124, 134);

}  // namespace

std::string kv_group_label(const KvPicture& g, bool only_group) {
  const std::string n = " (" + std::to_string(g.n_layers) + ")";
  if (only_group) return "all layers" + n;
  if (g.window <= 0) return "global layers" + n;
  return "local layers" + n + ", window " + std::to_string(g.window);
}

std::string kv_group_line(size_t g, const KvGroupLine& line) {
  std::string out = "group ";
  out += std::to_string(g);
  out += "  ·  ";
  out += line.kind;
  if (line.window > 0) {
    out += ' ';
    out += std::to_string(line.window);
  }
  if (line.source >= 0) {
    out += ", reads group ";
    out += std::to_string(line.source);
  }
  out += "  ·  ";
  out += std::to_string(line.n_layers);
  out += line.n_layers == 1 ? " layer  ·  " : " layers  ·  ";
  if (line.state_bytes > 0) {  // recurrent: a state a sequence, a snapshot of it at every block's end
    out += "state ";
    out += format_bytes(line.state_bytes);
    out += " a sequence, a snapshot a block (";
    out += format_bytes(line.bytes_per_token);
    out += " per token)";
    return out;
  }
  out += format_bytes(line.bytes_per_token);
  out += " per token";
  return out;
}

std::vector<const KvPicture*> kv_groups(const KvPicture& kv) {
  std::vector<const KvPicture*> all{&kv};
  for (const KvPicture& g : kv.more_groups) all.push_back(&g);
  return all;
}

std::vector<NodeTiers> node_tiers(const KvPicture& kv) {
  std::vector<NodeTiers> out(kv.nodes.size());
  for (const kv::KvBlockView& b : kv.blocks) {
    if (b.node < 0 || static_cast<size_t>(b.node) >= out.size()) continue;
    NodeTiers& n = out[static_cast<size_t>(b.node)];
    if (kv::is_data_tier(b.tier)) {
      ++n.n_on[static_cast<size_t>(kv::tier_index(b.tier))];
    } else {
      ++n.n_keys_only;
    }
  }
  for (NodeTiers& n : out) {
    for (int t = 0; t < k_n_kv_tiers; ++t) {
      if (n.n_on[static_cast<size_t>(t)] > 0 &&
          (n.tier < 0 || n.n_on[static_cast<size_t>(t)] > n.n_on[static_cast<size_t>(n.tier)]))
        n.tier = t;
    }
  }
  return out;
}

WindowCounts window_counts(std::span<const kv::KvBlockView> blocks, int64_t window, std::vector<uint8_t>* behind) {
  WindowCounts c;
  std::unordered_map<int64_t, int64_t> end_of;  // owner -> its furthest block end
  for (const kv::KvBlockView& b : blocks) {
    const int64_t end = b.position + b.n_tokens;
    c.max_end = std::max(c.max_end, end);
    int64_t& e = end_of[b.owner_id];
    e = std::max(e, end);
    if (b.tier == kv::Tier::t0) c.n_t0_tokens += b.n_tokens;
  }
  if (behind) behind->assign(blocks.size(), 0);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const kv::KvBlockView& b = blocks[i];
    if (!kv::is_data_tier(b.tier)) continue;  // a key without data: no block to count
    const int64_t end = b.owner_id < 0 ? c.max_end : end_of[b.owner_id];
    const bool out = window > 0 && b.position + b.n_tokens <= end - window;
    if (!out) {
      ++c.n_in_window;
      continue;
    }
    ++c.n_behind;
    c.n_behind_on_t0 += b.tier == kv::Tier::t0;
    if (behind) (*behind)[i] = 1;
  }
  return c;
}

int block_map_cells_per_row(float width, float cell, float gap) {
  const float pitch = cell + gap;
  if (pitch <= 0 || width <= cell) return 1;
  return std::max(1, static_cast<int>(std::floor((width + gap) / pitch)));
}

BlockMapLayout layout_block_map(std::span<const kv::KvBlockView> blocks, float width, float cell, float gap) {
  BlockMapLayout l;
  l.cells_per_row = block_map_cells_per_row(width, cell, gap);
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (!kv::is_data_tier(blocks[i].tier)) continue;  // a key in the chain without data (a local group's)
    const int t = tier_of(blocks[i].tier);
    l.groups[static_cast<size_t>(t)].cells.push_back(i);
    if (t != 2 && blocks[i].on_cold) l.groups[2].cells.push_back(i);
  }
  for (BlockMapGroup& g : l.groups) {
    std::stable_sort(g.cells.begin(), g.cells.end(), [&](size_t a, size_t b) {
      const kv::KvBlockView& x = blocks[a];
      const kv::KvBlockView& y = blocks[b];
      if (x.owner_id != y.owner_id) return x.owner_id < y.owner_id;
      return x.position < y.position;
    });
    const auto n = static_cast<int>(g.cells.size());
    g.n_rows = (n + l.cells_per_row - 1) / l.cells_per_row;
  }
  return l;
}

BlockMapCell fit_block_map_cell(std::span<const size_t> group_sizes, float width, float height, float min_cell,
                                float max_cell, float gap_ratio, float group_pad, float group_min_h) {
  auto with_gap = [&](float cell) { return BlockMapCell{cell, std::max(1.0f, std::round(cell * gap_ratio))}; };
  const float lo = std::max(1.0f, std::round(min_cell));
  for (float cell = std::max(lo, std::round(max_cell)); cell > lo; cell -= 1.0f) {
    const BlockMapCell c = with_gap(cell);
    const int per_row = block_map_cells_per_row(width, c.cell, c.gap);
    float need = 0;
    for (size_t n : group_sizes) {
      if (n == 0) continue;
      const auto rows = static_cast<float>((n + static_cast<size_t>(per_row) - 1) / static_cast<size_t>(per_row));
      need += block_map_group_height(static_cast<int>(rows), c.cell + c.gap, group_pad, group_min_h);
    }
    if (need <= height) return c;
  }
  return with_gap(lo);
}

float block_map_group_height(int n_rows, float pitch, float group_pad, float group_min_h) {
  return group_pad + std::max(static_cast<float>(std::max(n_rows, 1)) * pitch, group_min_h);
}

std::vector<int> flow_lines(std::span<const float> widths, float spacing, float width) {
  std::vector<int> lines;
  int line = 0;
  float x = 0;
  for (size_t i = 0; i < widths.size(); ++i) {
    if (i > 0 && x + spacing + widths[i] > width) {
      ++line;
      x = 0;
    } else if (i > 0) {
      x += spacing;
    }
    x += widths[i];
    lines.push_back(line);
  }
  return lines;
}

size_t first_fitting(std::span<const float> widths, float avail) {
  for (size_t i = 0; i < widths.size(); ++i) {
    if (widths[i] <= avail) return i;
  }
  return widths.empty() ? 0 : widths.size() - 1;
}

TimelineGrid timeline_grid(int n_charts, float width, float height, std::array<float, 2> header_h, float pad,
                           float min_chart_h, float max_chart_h, float min_col_w) {
  TimelineGrid g;
  if (n_charts <= 0) return g;
  auto chart_h = [&](int n_cols) {
    const int n_rows = (n_charts + n_cols - 1) / n_cols;
    return height / static_cast<float>(n_rows) - header_h[static_cast<size_t>(n_cols - 1)] - pad;
  };
  g.chart_h = chart_h(1);
  if (g.chart_h < min_chart_h && n_charts > 1 && width / 2.0f >= min_col_w) {
    g.n_cols = 2;
    g.chart_h = chart_h(2);
  }
  g.chart_h = std::clamp(g.chart_h, min_chart_h, std::max(min_chart_h, max_chart_h));
  return g;
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
