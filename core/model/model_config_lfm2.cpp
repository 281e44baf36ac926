// lfm2's layer pattern (conv and attention layers from head_count_kv) and its KV groups: attention and recurrent.
#include <string>

#include "core/gguf/gguf_file.h"
#include "core/model/model_config.h"

namespace kvc::model {

Status read_lfm2(const gguf::GgufFile& f, ModelConfig& c) {
  const std::string p = c.arch + ".";
  const std::string heads_key = p + "attention.head_count_kv";
  auto heads = f.get_i32_array(heads_key);
  if (!heads.ok()) {
    return make_error(ErrorCode::invalid_file, "metadata " + heads_key +
                                                   " must be an array of one KV head count per layer (0 for a "
                                                   "conv layer): " +
                                                   heads.error().message);
  }
  if (static_cast<int64_t>(heads->size()) != c.n_layer) {
    return make_error(ErrorCode::invalid_file, "metadata " + heads_key + " has " + std::to_string(heads->size()) +
                                                   " entries for " + std::to_string(c.n_layer) + " layers");
  }
  // llama.cpp runs LFM2's attention layers with a sliding window where the file sets one; kvchat
  // does not yet, and full attention there would answer differently past the window.
  if (const std::string swa = p + "attention.sliding_window"; f.find(swa)) {
    auto w = f.get_uint(swa);
    if (!w.ok()) return w.error();
    if (*w > 0) {
      return make_error(ErrorCode::unsupported,
                        "metadata " + swa + ": " + std::to_string(*w) +
                            ": this LFM2 runs its attention layers with a sliding window, which kvchat does not "
                            "support for lfm2 yet (LFM2 files without the key run)");
    }
  }
  c.lfm2 = true;
  c.layer_recurrent.assign(static_cast<size_t>(c.n_layer), 0);
  c.n_head_kv = 0;
  int64_t n_attention = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const int32_t h = (*heads)[static_cast<size_t>(l)];
    if (h < 0 || h > c.n_head) {
      return make_error(ErrorCode::invalid_file, "metadata " + heads_key + "[" + std::to_string(l) +
                                                     "] = " + std::to_string(h) + " must lie in [0, head_count " +
                                                     std::to_string(c.n_head) + "]");
    }
    if (h == 0) {
      c.layer_recurrent[static_cast<size_t>(l)] = 1;
      continue;
    }
    if (c.n_head_kv != 0 && h != c.n_head_kv) {
      return make_error(ErrorCode::unsupported, "metadata " + heads_key + ": attention layers with " +
                                                    std::to_string(c.n_head_kv) + " and " + std::to_string(h) +
                                                    " KV heads; kvchat needs one count for all of them");
    }
    c.n_head_kv = h;
    ++n_attention;
  }
  if (n_attention == 0) {
    return make_error(
        ErrorCode::unsupported,
        "metadata " + heads_key + ": every layer is a conv layer; kvchat needs at least one attention layer");
  }
  const std::string lkey = p + "shortconv.l_cache";
  auto l_cache = f.get_uint(lkey);
  if (!l_cache.ok()) return make_error(ErrorCode::invalid_file, "metadata " + lkey + ": " + l_cache.error().message);
  if (*l_cache < 2 || *l_cache > 64) {
    return make_error(ErrorCode::invalid_file,
                      "metadata " + lkey + ": " + std::to_string(*l_cache) + " must lie in [2, 64] (the conv's taps)");
  }
  c.shortconv_l_cache = static_cast<int64_t>(*l_cache);
  return {};
}

KvGroupMap recurrent_group_map(const ModelConfig& c) {
  KvGroupMap m;
  m.groups.push_back({kv::KvGroupKind::full, 0, 0, -1, 0, 0});
  m.groups.push_back({kv::KvGroupKind::recurrent, 0, 0, -1, 0, c.recurrent_state_bytes()});
  const auto n = static_cast<size_t>(c.n_layer);
  m.layer_group.assign(n, 0);
  m.layer_index.assign(n, 0);
  m.kv_group.assign(n, 0);
  m.kv_layer.assign(n, 0);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const auto i = static_cast<size_t>(l);
    const int g = c.layer_is_recurrent(l) ? 1 : 0;
    m.layer_group[i] = m.kv_group[i] = g;
    m.layer_index[i] = m.kv_layer[i] = m.groups[static_cast<size_t>(g)].n_layer++;
  }
  return m;
}

}  // namespace kvc::model
