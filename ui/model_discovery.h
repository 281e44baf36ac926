// Finding GGUF models already on the machine, and what a model file says about itself before loading.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/util/result.h"

namespace kvc::ui {

// A folder where some app keeps models.
struct ModelSource {
  std::string label;  // "kvchat", "Ollama", "LM Studio", "Hugging Face"
  std::filesystem::path root;
};

// kvchat's models folder under `data_dir`, then Ollama (~/.ollama/models), LM Studio
// (~/.lmstudio/models, ~/.cache/lm-studio/models) and Hugging Face (~/.cache/huggingface/hub).
std::vector<ModelSource> default_model_sources(const std::filesystem::path& home,
                                               const std::filesystem::path& data_dir);

struct FoundModel {
  std::filesystem::path path;
  std::string source;        // the ModelSource label
  std::string display_name;  // file name; for a blob without a name, "blob sha256-1a2b3c4d..."
  uintmax_t file_bytes = 0;
};

// True when the file starts with the GGUF magic.
bool has_gguf_magic(const std::filesystem::path& path);

// Files named *.gguf (any case), and blobs without an extension (Ollama's sha256-..., Hugging
// Face's blobs/) that start with the GGUF magic, under every source; a file reached twice
// (a Hugging Face snapshot link and its blob) is listed once, under its named path. Missing
// or unreadable folders are skipped. At most `max_models`, sorted by source order, then name.
std::vector<FoundModel> discover_models(const std::vector<ModelSource>& sources, size_t max_models = 500);

// What the Model window shows before loading.
struct ModelInfo {
  std::string path;
  std::string name;
  std::string arch;
  std::string weight_type;  // the type holding most weight bytes ("Q8_0"), "mixed: ..." if no type has 3/4
  int64_t n_params = 0;
  int64_t n_ctx_train = 0;
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_vocab = 0;
  uintmax_t file_bytes = 0;
  size_t weight_bytes = 0;
  double kv_bytes_per_token_f16 = 0;  // K and V, all layers
  int kv_group = 0;                   // INT8 / INT4 KV scale group for the head size; 0: F16 only
  // Gemma's local layers (their own KV group, keeping only the last local_window positions of
  // each conversation): how many, their window and their part of kv_bytes_per_token_f16; 0: none.
  int64_t n_local_layers = 0;
  int64_t local_window = 0;
  double kv_bytes_per_token_local_f16 = 0;
  // A mixture of experts: experts per layer and per token, and the routed experts' bytes (part of
  // weight_bytes, all in memory) and the share of them one token reads; 0: a dense model.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  size_t expert_bytes = 0;
  size_t active_expert_bytes = 0;
  int64_t moe_act_floats_per_token = 0;  // a MoE layer's activations per token (copies, gate, up, output)
};

// Reads the GGUF header (mapped, not loaded) and makes every check loading makes
// (model::check_model_file), so a file that cannot load says why before Load is pressed.
Result<ModelInfo> read_model_info(const std::filesystem::path& path);

// KV bytes of one conversation of n_ctx tokens with elements of kv_element_bytes, as kvchat's
// cache keeps them: the global layers every position, the local layers (if any) the last
// local_window. With full, every layer every position (what a cache without KV groups needs).
double kv_estimate_bytes(const ModelInfo& info, int64_t n_ctx, double kv_element_bytes, bool full = false);

// Weights (every expert of a mixture of experts) + KV at n_ctx tokens (kv_estimate_bytes) +
// activations of a 256-token prefill batch: what loading and filling the context will take.
double memory_estimate_bytes(const ModelInfo& info, int64_t n_ctx, double kv_element_bytes);

}  // namespace kvc::ui
