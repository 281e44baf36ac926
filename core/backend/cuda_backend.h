// The CUDA backend: the backend ops on one GPU's memory through kernels/cuda.
#pragma once

#include <memory>

#include "core/backend/backend.h"
#include "core/util/result.h"

namespace kvc::backend {

// True when this build has the CUDA backend (KVC_CUDA=ON at configure time).
bool cuda_built();

// The CUDA backend on device `device`; an error (never a crash) when the build has no CUDA,
// no driver or device is found, or the device cannot be opened. Weights are uploaded once,
// at model load, and stay on the device until the backend is destroyed (one backend per
// loaded model: the upload cache is keyed by the weight's host address, which a later model's
// mapping could reuse). Every op runs on one stream; copy_to_host synchronises. The calling
// thread's current device is set only at creation: with device != 0, use the backend from
// that thread.
Result<std::unique_ptr<Backend>> make_cuda_backend(int device);

}  // namespace kvc::backend
