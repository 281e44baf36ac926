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
  std::vector<int64_t> shape;  // (row length, n_rows), (row length, n_rows, n_expert), or (n) for a vector
  kernels::DType type;
  float mean;
  float std;
  std::vector<float> values = {};  // when not empty: these values, row-major, instead of random ones
  int64_t std2_from_row = -1;      // rows from here on use std2 (the V part of a fused QKV)
  float std2 = 0.0f;
  std::vector<float> row_std_scale = {};  // when not empty: row r's deviation times row_std_scale[r]

  // Rows of shape[0] elements: every dimension past the first multiplied.
  int64_t n_rows() const {
    int64_t n = 1;
    for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
    return n;
  }
};

}  // namespace kvc::model
