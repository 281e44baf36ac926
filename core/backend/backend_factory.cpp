// create_backend: a backend chosen by name ("cpu", "cuda", "auto"); what every backend shares.
#include <string>

#include "core/backend/backend.h"
#include "core/backend/cuda_backend.h"
#include "core/util/assert.h"

namespace kvc::backend {

Result<std::unique_ptr<Backend>> create_backend(std::string_view kind, int n_threads) {
  if (kind == "cpu") return make_cpu_backend(n_threads);
  if (kind == "cuda") return make_cuda_backend(0);
  if (kind == "auto") {
    auto cuda = make_cuda_backend(0);
    if (cuda.ok()) return std::move(cuda.value());
    return make_cpu_backend(n_threads);
  }
  return make_error(ErrorCode::invalid_argument,
                    "unknown backend \"" + std::string(kind) + "\": use cpu, cuda or auto");
}

// The defaults of the ops only the CPU backend has (Model::load refuses Gemma elsewhere).
void Backend::gelu_mul(float*, const float*, int64_t) { KVC_ASSERT(has_gemma_ops()); }
void Backend::softcap(float*, int64_t, float) { KVC_ASSERT(has_gemma_ops()); }
void Backend::scale(float*, int64_t, float) { KVC_ASSERT(has_gemma_ops()); }
void Backend::moe_ffn(const kernels::MoeFfnWeights&, const float*, int64_t, float*) { KVC_ASSERT(has_moe_ops()); }
void Backend::shortconv(const kernels::KvBlockLayout&, int, std::span<const SeqSlice>, const float*, const float*, int,
                        float*) {
  KVC_ASSERT(has_recurrent_ops());
}

MachineResources with_device_memory(MachineResources m, const Backend& b) {
  if (const auto d = b.device_memory()) {
    m.vram_total_bytes = d->total_bytes;
    m.vram_free_bytes = d->free_bytes;
  }
  return m;
}

std::vector<std::string> available_backends() {
  std::vector<std::string> out{"cpu"};
  if (make_cuda_backend(0).ok()) out.emplace_back("cuda");
  return out;
}

}  // namespace kvc::backend
