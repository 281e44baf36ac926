// Model discovery in the folders of kvchat, Ollama, LM Studio and Hugging Face; GGUF summaries.
#include "ui/model_discovery.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "core/gguf/gguf_file.h"
#include "core/model/model_check.h"

namespace kvc::ui {

namespace fs = std::filesystem;

std::vector<ModelSource> default_model_sources(const fs::path& home, const fs::path& data_dir) {
  return {
      {"kvchat", data_dir / "models"},
      {"Ollama", home / ".ollama/models"},
      {"LM Studio", home / ".lmstudio/models"},
      {"LM Studio", home / ".cache/lm-studio/models"},
      {"Hugging Face", home / ".cache/huggingface/hub"},
  };
}

bool has_gguf_magic(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

namespace {

bool has_gguf_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".gguf";
}

constexpr int k_max_depth = 8;

}  // namespace

std::vector<FoundModel> discover_models(const std::vector<ModelSource>& sources, size_t max_models) {
  std::vector<FoundModel> out;
  std::set<fs::path> seen;  // canonical paths
  for (size_t si = 0; si < sources.size(); ++si) {
    const ModelSource& src = sources[si];
    std::error_code ec;
    if (!fs::is_directory(src.root, ec)) continue;
    std::vector<FoundModel> named, blobs;
    auto it = fs::recursive_directory_iterator(src.root, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it.depth() > k_max_depth) {
        it.disable_recursion_pending();
        continue;
      }
      std::error_code fec;
      if (!it->is_regular_file(fec)) continue;  // follows links: HF snapshots link to blobs
      const fs::path& p = it->path();
      FoundModel m;
      m.path = p;
      m.source = src.label;
      m.file_bytes = it->file_size(fec);
      if (has_gguf_extension(p)) {
        m.display_name = p.filename().string();
        named.push_back(std::move(m));
      } else if (!p.has_extension() && has_gguf_magic(p)) {
        std::string n = p.filename().string();
        m.display_name = "blob " + (n.size() > 15 ? n.substr(0, 15) + "..." : n);
        blobs.push_back(std::move(m));
      }
    }
    auto by_name = [](const FoundModel& a, const FoundModel& b) { return a.display_name < b.display_name; };
    std::sort(named.begin(), named.end(), by_name);
    std::sort(blobs.begin(), blobs.end(), by_name);
    for (auto* group : {&named, &blobs}) {
      for (auto& m : *group) {
        std::error_code cec;
        const fs::path canon = fs::weakly_canonical(m.path, cec);
        if (!seen.insert(cec ? m.path : canon).second) continue;
        if (out.size() >= max_models) return out;
        out.push_back(std::move(m));
      }
    }
  }
  return out;
}

Result<ModelInfo> read_model_info(const fs::path& path) {
  auto file = gguf::GgufFile::open(path.string());
  if (!file.ok()) return file.error();
  // The checks loading makes, so the Model window shows why a file cannot load before Load.
  auto checked = model::check_model_file(*file);
  if (!checked.ok()) return make_error(checked.error().code, path.string() + ": " + checked.error().message);
  const model::ModelConfig* cfg = &checked->config;
  ModelInfo info;
  info.path = path.string();
  info.name = cfg->name.empty() ? path.filename().string() : cfg->name;
  info.arch = cfg->arch;
  info.n_ctx_train = cfg->n_ctx_train;
  info.n_layer = cfg->n_layer;
  info.n_embd = cfg->n_embd;
  info.n_head = cfg->n_head;
  info.n_head_kv = cfg->n_head_kv;
  info.n_vocab = cfg->n_vocab;
  info.kv_bytes_per_token_f16 = cfg->kv_bytes_per_token(2.0);
  info.kv_group = kv::kv_group_for_head_dim(cfg->head_dim);
  info.n_local_layers = cfg->n_local_layers();
  if (info.n_local_layers > 0) {
    info.local_window = cfg->local_window;
    info.kv_bytes_per_token_local_f16 = cfg->kv_bytes_per_token_local(2.0);
  }
  if (cfg->is_moe()) {
    info.n_expert = cfg->n_expert;
    info.n_expert_used = cfg->n_expert_used;
    info.expert_bytes = model::expert_bytes(*file, *cfg);
    info.active_expert_bytes = model::active_expert_bytes(info.expert_bytes, *cfg);
    info.moe_act_floats_per_token = cfg->n_expert_used * (2 * cfg->n_embd + 3 * cfg->n_ff_exp) + cfg->n_expert;
  }
  std::error_code ec;
  info.file_bytes = fs::file_size(path, ec);
  std::map<std::string, size_t> by_type;  // matrices only: norms are F32 in every file
  for (const auto& t : file->tensors()) {
    info.n_params += t.n_elements();
    info.weight_bytes += t.n_bytes;
    if (t.shape.size() >= 2) by_type[kernels::dtype_name(t.type)] += t.n_bytes;
  }
  size_t total = 0;
  for (const auto& [name, b] : by_type) total += b;
  std::string best, all;
  size_t best_bytes = 0;
  for (const auto& [name, b] : by_type) {
    all += (all.empty() ? "" : ", ") + name;
    if (b > best_bytes) {
      best = name;
      best_bytes = b;
    }
  }
  info.weight_type = (best_bytes * 4 >= total * 3) ? best : "mixed: " + all;
  return info;
}

double kv_estimate_bytes(const ModelInfo& info, int64_t n_ctx, double kv_element_bytes, bool full) {
  const double local = info.kv_bytes_per_token_local_f16 / 2.0 * kv_element_bytes;
  const double global = info.kv_bytes_per_token_f16 / 2.0 * kv_element_bytes - local;
  const int64_t local_ctx = !full && info.local_window > 0 ? std::min(n_ctx, info.local_window) : n_ctx;
  return global * static_cast<double>(n_ctx) + local * static_cast<double>(local_ctx);
}

double memory_estimate_bytes(const ModelInfo& info, int64_t n_ctx, double kv_element_bytes) {
  const double kv = kv_estimate_bytes(info, n_ctx, kv_element_bytes);
  // Activations: a few vectors of width n_embd per token of the batch, and the logits.
  const double act = 256.0 * 4.0 * static_cast<double>(8 * info.n_embd + info.n_vocab + info.moe_act_floats_per_token);
  return static_cast<double>(info.weight_bytes) + kv + act;
}

}  // namespace kvc::ui
