// Hostile variants of the random model (mkmodel --break, for tests): GGUFs that parse but are not usable models.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/tensor_plan.h"
#include "core/util/result.h"

namespace kvc::gguf {
class GgufWriter;
}
namespace kvc::tokenizer {
struct Vocabulary;
}

namespace kvc::model {

struct ModelSpec;

struct BrokenVariant {
  std::string_view name;  // "no-tensors"
  std::string_view what;  // one line: what is wrong with the file
};

// Every variant, in a fixed order. All but "extra-tensor" and "quantized-norm" describe files
// kvchat must refuse; those two are odd files it accepts on purpose.
std::span<const BrokenVariant> broken_variants();

// Turns the metadata and tensor plans of a good random model into variant `name`. An unknown
// name is an invalid_argument error that lists the known ones.
Status apply_broken_variant(std::string_view name, const ModelSpec& spec, const tokenizer::Vocabulary& vocab,
                            gguf::GgufWriter& w, std::vector<TensorPlan>& plans);
// After the file is written: edits its bytes for the variants the writer refuses to write (a
// tensor type kvchat does not implement, data after the metadata of a file without tensors).
Status patch_broken_variant(std::string_view name, const std::string& path);

}  // namespace kvc::model
