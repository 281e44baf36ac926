// The KV calculator's arithmetic.
#include "ui/kv_calculator.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace kvc::ui {

double kv_element_bytes(kv::KvFormat format, int group) {
  switch (format) {
    case kv::KvFormat::f16: return 2.0;
    case kv::KvFormat::int8:
    case kv::KvFormat::int8h: return 1.0 + 2.0 / group;
    case kv::KvFormat::int4:
    case kv::KvFormat::int4h: return 0.5 + 2.0 / group;
    // K: two F16 rows per block of 16 positions (0.5 + 4 / 16), V as int4h: their mean.
    case kv::KvFormat::int4c: return 0.5 + (4.0 / 16 + 2.0 / group) / 2;
  }
  return 2.0;
}

KvWhatIf model_local_layers(int64_t n_local_layers, int64_t n_layer, int64_t window) {
  KvWhatIf w;
  if (n_local_layers > 0 && n_layer > 0 && window > 0) {
    w.local_fraction = static_cast<double>(n_local_layers) / static_cast<double>(n_layer);
    w.window_tokens = window;
  }
  return w;
}

Result<KvEstimate> estimate_kv(const KvShape& shape, const KvWhatIf& w, kv::KvFormat format, int group,
                               int64_t n_tokens) {
  if (shape.n_layer <= 0 || shape.n_head <= 0 || shape.n_kv_head <= 0 || shape.head_dim <= 0) {
    return make_error(ErrorCode::invalid_argument, "the model shape is unknown: load a model first");
  }
  if (group <= 0) return make_error(ErrorCode::invalid_argument, "the quantization group must be at least 1 element");
  if (n_tokens < 0) return make_error(ErrorCode::invalid_argument, "the context length cannot be negative");
  const int64_t n_kv_head = w.n_kv_head > 0 ? w.n_kv_head : shape.n_kv_head;
  if (n_kv_head > shape.n_head || shape.n_head % n_kv_head != 0) {
    return make_error(ErrorCode::invalid_argument, std::to_string(n_kv_head) + " KV heads do not divide " +
                                                       std::to_string(shape.n_head) +
                                                       " query heads: pick a divisor of the query heads");
  }
  if (w.share_every < 1 || w.share_every > shape.n_layer) {
    return make_error(ErrorCode::invalid_argument, "layers sharing one KV must be between 1 and " +
                                                       std::to_string(shape.n_layer) + " (the model's layers)");
  }
  if (!(w.local_fraction >= 0 && w.local_fraction <= 1)) {
    return make_error(ErrorCode::invalid_argument, "the fraction of local layers must lie in [0, 1]");
  }
  if (w.local_fraction > 0 && w.window_tokens <= 0) {
    return make_error(ErrorCode::invalid_argument, "local layers need a window of at least 1 token");
  }
  if (shape.n_recurrent_layers < 0 || shape.n_recurrent_layers >= shape.n_layer || shape.state_floats < 0 ||
      shape.block_tokens <= 0) {
    return make_error(ErrorCode::invalid_argument, "recurrent layers must be fewer than the layers, with a state");
  }
  KvEstimate e;
  e.n_kv_head = n_kv_head;
  const int64_t n_attention = shape.n_layer - shape.n_recurrent_layers;
  e.n_kv_layers = (n_attention + w.share_every - 1) / w.share_every;
  e.n_local_layers = std::min(
      e.n_kv_layers, static_cast<int64_t>(std::llround(w.local_fraction * static_cast<double>(e.n_kv_layers))));
  e.bytes_per_token_layer = 2.0 * static_cast<double>(n_kv_head * shape.head_dim) * kv_element_bytes(format, group);
  e.bytes_per_token = e.bytes_per_token_layer * static_cast<double>(e.n_kv_layers);
  const int64_t n_full = e.n_kv_layers - e.n_local_layers;
  e.bytes_per_token_global = e.bytes_per_token_layer * static_cast<double>(n_full);
  e.bytes_per_token_local = e.bytes_per_token_layer * static_cast<double>(e.n_local_layers);
  const int64_t n_local_tokens = std::min(n_tokens, w.window_tokens);
  e.bytes_per_conversation =
      e.bytes_per_token_layer * static_cast<double>(n_full * n_tokens + e.n_local_layers * n_local_tokens);
  e.bytes_per_conversation_full = e.bytes_per_token * static_cast<double>(n_tokens);
  e.state_bytes_per_sequence = 4.0 * static_cast<double>(shape.n_recurrent_layers * shape.state_floats);
  e.state_bytes_per_conversation =
      e.state_bytes_per_sequence * static_cast<double>((n_tokens + shape.block_tokens - 1) / shape.block_tokens + 1);
  e.bytes_per_conversation += e.state_bytes_per_conversation;
  e.bytes_per_conversation_full += e.state_bytes_per_conversation;
  return e;
}

}  // namespace kvc::ui
