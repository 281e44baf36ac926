// A model's KV groups from its config: the layer -> group map, each group's kind, and the shared-KV key.
#include "core/model/model_config.h"

#include <string>

#include "core/gguf/gguf_file.h"

namespace kvc::model {

namespace {

// The last storing layer before n_layer_kv of the same kind (local or global) as layer l; -1: none.
int64_t shared_source_layer(const ModelConfig& c, int64_t l) {
  for (int64_t k = c.n_layer_kv() - 1; k >= 0; --k) {
    if (c.layer_is_local(k) == c.layer_is_local(l)) return k;
  }
  return -1;
}

}  // namespace

KvGroupMap ModelConfig::kv_group_map() const {
  if (!layer_recurrent.empty()) return recurrent_group_map(*this);  // lfm2 (model_config_lfm2.cpp)
  KvGroupMap m;
  const int64_t n_kv = n_layer_kv();
  int64_t n_local = 0;
  for (int64_t l = 0; l < n_kv; ++l) n_local += layer_is_local(l) ? 1 : 0;
  // Local and global layers each in a group of their own (group 0 the global ones); a model whose
  // storing layers attend alike has one group, windowed when every layer has the same window.
  const bool split = n_local > 0 && n_local < n_kv;
  if (split) {
    m.groups.push_back({kv::KvGroupKind::full, 0, 0, -1, 0, 0});
    m.groups.push_back({kv::KvGroupKind::window, 0, local_window, -1, 0, 0});
  } else if (mla) {  // deepseek2: every layer keeps one latent row a token
    m.groups.push_back({kv::KvGroupKind::latent, 0, 0, -1, 0, 0});
  } else {
    m.groups.push_back(
        {sliding_window > 0 ? kv::KvGroupKind::window : kv::KvGroupKind::full, 0, sliding_window, -1, 0, 0});
  }
  const auto n = static_cast<size_t>(n_layer);
  m.layer_group.assign(n, 0);
  m.layer_index.assign(n, 0);
  m.kv_group.assign(n, 0);
  m.kv_layer.assign(n, 0);
  for (int64_t l = 0; l < n_kv; ++l) {
    const auto i = static_cast<size_t>(l);
    const int g = split && layer_is_local(l) ? 1 : 0;
    m.layer_group[i] = m.kv_group[i] = g;
    m.layer_index[i] = m.kv_layer[i] = m.groups[static_cast<size_t>(g)].n_layer++;
  }
  // Shared layers: one group of kind shared per storing group they read.
  for (int64_t l = n_kv; l < n_layer; ++l) {
    const auto i = static_cast<size_t>(l);
    int64_t src = shared_source_layer(*this, l);
    if (src < 0) src = n_kv - 1;  // from_gguf refuses such a file; the map stays total
    const int source_group = m.layer_group[static_cast<size_t>(src)];
    int g = -1;
    for (size_t k = 0; k < m.groups.size(); ++k) {
      if (m.groups[k].kind == kv::KvGroupKind::shared && m.groups[k].source == source_group) g = static_cast<int>(k);
    }
    if (g < 0) {
      g = static_cast<int>(m.groups.size());
      m.groups.push_back({kv::KvGroupKind::shared, 0, 0, source_group, 0, 0});
    }
    m.layer_group[i] = g;
    m.layer_index[i] = m.groups[static_cast<size_t>(g)].n_layer++;
    m.kv_group[i] = source_group;
    m.kv_layer[i] = m.layer_index[static_cast<size_t>(src)];
  }
  return m;
}

Status read_kv_sharing(const gguf::GgufFile& f, ModelConfig& c) {
  const std::string key = "kvchat.shared_kv_from_layer";
  if (!f.find(key)) return {};
  auto v = f.get_uint(key);
  if (!v.ok()) return v.error();
  if (*v == 0 || *v >= static_cast<uint64_t>(c.n_layer)) {
    return make_error(ErrorCode::invalid_file, "metadata " + key + ": " + std::to_string(*v) + " must lie in [1, " +
                                                   std::to_string(c.n_layer) +
                                                   ") (the first layer that reads an earlier layer's K/V)");
  }
  c.shared_kv_from_layer = static_cast<int64_t>(*v);
  for (int64_t l = c.shared_kv_from_layer; l < c.n_layer; ++l) {
    if (shared_source_layer(c, l) < 0) {
      return make_error(ErrorCode::invalid_file, "metadata " + key + ": layer " + std::to_string(l) + " is " +
                                                     (c.layer_is_local(l) ? "local" : "global") +
                                                     " but no layer before " + std::to_string(*v) +
                                                     " is, so it has no K/V of its kind to read");
    }
  }
  return {};
}

}  // namespace kvc::model
