// create_backend: a backend chosen by name ("cpu", "cuda", "auto").
#include <string>

#include "core/backend/backend.h"
#include "core/backend/cuda_backend.h"

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

std::vector<std::string> available_backends() {
  std::vector<std::string> out{"cpu"};
  if (make_cuda_backend(0).ok()) out.emplace_back("cuda");
  return out;
}

}  // namespace kvc::backend
