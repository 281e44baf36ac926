// gemma4's tensors: what check_model_file expects of a gemma4 file, and loading them (model_gemma4.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/model.h"
#include "core/model/model_check.h"
#include "core/model/weight_loader.h"

namespace kvc::model {

// Every tensor a gemma4 file has (the shared layers' attn_k / attn_v / attn_k_norm optional: they
// are not read), in expected_tensors' form.
void expected_gemma4_tensors(const ModelConfig& c, std::vector<ExpectedTensor>& out);

// Layer l's weights (attention with its own head size, Q/K norms, post norms, the FFN of the layer's
// width, the per-layer embedding gate, projection and norm, the output scale).
Status load_gemma4_layer(Loader& ld, const ModelConfig& c, int64_t l, LayerWeights& w);

// The per-layer embedding table (a view of the mapped file, never copied), its projection and norm.
Status load_gemma4_globals(Loader& ld, const ModelConfig& c, ModelWeights& w);

}  // namespace kvc::model
