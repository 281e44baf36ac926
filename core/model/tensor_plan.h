// TensorPlan: one tensor the random-model writer generates (shared with the broken-model variants).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/dtype.h"

namespace kvc::model {

// Values are near-normal with mean `mean` and deviation `std` (or the given `values`),
// quantized to `type`.
struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;  // (row length, n_rows), or (n) for a vector
  kernels::DType type;
  float mean;
  float std;
  std::vector<float> values = {};  // when not empty: these values, row-major, instead of random ones
  int64_t std2_from_row = -1;      // rows from here on use std2 (the V part of a fused QKV)
  float std2 = 0.0f;
  std::vector<float> row_std_scale = {};  // when not empty: row r's deviation times row_std_scale[r]
};

}  // namespace kvc::model
