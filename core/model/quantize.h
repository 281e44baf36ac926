// Converting a GGUF model's weights to another type (kvchat-cli quantize).
#pragma once

#include <functional>
#include <string>

#include "core/model/quant_policy.h"
#include "core/util/result.h"

namespace kvc::model {

// Reads `in_path`, converts every weight matrix to the type quant_policy chooses for
// `target` (re-quantizing through F32 where the source is quantized), copies all metadata
// and 1-D tensors, and writes `out_path` atomically. progress(done, total) counts output bytes.
// A file that is not a usable model (check_model_file) is refused before anything is written.
Status quantize_model(const std::string& in_path, const std::string& out_path, FileType target, int n_threads,
                      const std::function<void(size_t done, size_t total)>& progress = {});

}  // namespace kvc::model
