// Loader: hands out a GGUF file's tensors as backend weights, checking each one's shape and counting bytes.
#pragma once

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model_check.h"
#include "core/util/result.h"
#include "kernels/cpu/quant.h"

namespace kvc::model {

class Loader {
 public:
  Loader(const gguf::GgufFile& f, backend::Backend& be, std::vector<void*>& owned) : f_(f), be_(be), owned_(owned) {}

  // A 2-D weight with exactly (n_rows, n_cols).
  Result<backend::Weight> matrix(const std::string& name, int64_t n_rows, int64_t n_cols) {
    auto info = matrix_info(name, n_rows, n_cols);
    if (!info.ok()) return info.error();
    const gguf::TensorInfo* t = *info;
    kernels::MatrixView v{t->type, f_.tensor_data(*t), n_rows, n_cols};
    bytes_ += t->n_bytes;
    types_.insert(kernels::dtype_name(t->type));
    return be_.upload_weight(v);
  }

  // Rows [row_begin, row_begin + n_rows) of a 2-D weight of exactly (total_rows, n_cols): one
  // part of a fused tensor (Phi-3's attn_qkv, its gate-and-up ffn_up). Rows are contiguous in
  // every GGUF type, so the part is a view, not a copy.
  Result<backend::Weight> matrix_part(const std::string& name, int64_t total_rows, int64_t n_cols, int64_t row_begin,
                                      int64_t n_rows) {
    auto whole = matrix_info(name, total_rows, n_cols);
    if (!whole.ok()) return whole.error();
    const gguf::TensorInfo& t = **whole;
    if (row_begin == 0) {  // count the tensor's bytes once, with its first part
      bytes_ += t.n_bytes;
      types_.insert(kernels::dtype_name(t.type));
    }
    const uint8_t* data = f_.tensor_data(t) + kernels::row_bytes(t.type, n_cols) * static_cast<size_t>(row_begin);
    return be_.upload_weight(kernels::MatrixView{t.type, data, n_rows, n_cols});
  }

  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

  // A 1-D float vector of n elements (any float or quantized type, dequantized); with n_mats > 0
  // one per expert, [n, n_mats], n * n_mats floats.
  Result<const float*> vector(const std::string& name, int64_t n, bool optional = false, int64_t n_mats = 0) {
    std::vector<float> host;
    auto found = host_vector(name, n, optional, host, n_mats);
    if (!found.ok()) return found.error();
    if (!*found) return static_cast<const float*>(nullptr);
    auto dev = be_.upload_floats(host.data(), static_cast<int64_t>(host.size()));
    if (!dev.ok()) return dev.error();
    owned_.push_back(*dev);
    return static_cast<const float*>(*dev);
  }

  // A 2-D tensor of exactly (n_rows, n_cols) as n_rows * n_cols floats (dequantized), row by
  // row: small tables the kernels read as floats (lfm2's conv taps).
  Result<const float*> matrix_floats(const std::string& name, int64_t n_rows, int64_t n_cols) {
    auto info = matrix_info(name, n_rows, n_cols);
    if (!info.ok()) return info.error();
    const gguf::TensorInfo* t = *info;
    std::vector<float> host(static_cast<size_t>(n_rows * n_cols));
    for (int64_t r = 0; r < n_rows; ++r) {
      kernels::dequantize_row(t->type,
                              f_.tensor_data(*t) + kernels::row_bytes(t->type, n_cols) * static_cast<size_t>(r),
                              host.data() + r * n_cols, n_cols);
    }
    bytes_ += t->n_bytes;
    types_.insert(kernels::dtype_name(t->type));
    auto dev = be_.upload_floats(host.data(), static_cast<int64_t>(host.size()));
    if (!dev.ok()) return dev.error();
    owned_.push_back(*dev);
    return static_cast<const float*>(*dev);
  }

  // n_mats matrices of (n_rows, n_cols) stacked in one 3-D tensor [n_cols, n_rows, n_mats] (a
  // mixture of experts' ffn_*_exps), as one weight of n_mats * n_rows rows: expert e's matrix is
  // its rows [e n_rows, (e + 1) n_rows).
  Result<backend::Weight> experts(const std::string& name, int64_t n_rows, int64_t n_cols, int64_t n_mats) {
    auto info = matrix_info(name, n_rows, n_cols, n_mats);
    if (!info.ok()) return info.error();
    const gguf::TensorInfo* t = *info;
    bytes_ += t->n_bytes;
    expert_bytes_ += t->n_bytes;
    types_.insert(kernels::dtype_name(t->type));
    return be_.upload_weight(kernels::MatrixView{t->type, f_.tensor_data(*t), n_rows * n_mats, n_cols});
  }

  // n_mats matrices of (n_rows, n_cols) stacked in one 3-D tensor [n_cols, n_rows, n_mats], one
  // weight each (deepseek2's per-head attn_k_b / attn_v_b). Views into the file: CPU backend only.
  Result<std::vector<backend::Weight>> stacked(const std::string& name, int64_t n_rows, int64_t n_cols,
                                               int64_t n_mats) {
    auto info = matrix_info(name, n_rows, n_cols, n_mats);
    if (!info.ok()) return info.error();
    const gguf::TensorInfo* t = *info;
    bytes_ += t->n_bytes;
    types_.insert(kernels::dtype_name(t->type));
    const size_t mat_bytes = kernels::row_bytes(t->type, n_cols) * static_cast<size_t>(n_rows);
    std::vector<backend::Weight> out;
    for (int64_t i = 0; i < n_mats; ++i) {
      auto w = be_.upload_weight(
          kernels::MatrixView{t->type, f_.tensor_data(*t) + static_cast<size_t>(i) * mat_bytes, n_rows, n_cols});
      if (!w.ok()) return w.error();
      out.push_back(*w);
    }
    return out;
  }

  // The tensor `name`, checked to be a weight matrix of exactly (n_rows, n_cols), or with
  // n_mats > 0 a stack of n_mats of them, [n_cols, n_rows, n_mats].
  Result<const gguf::TensorInfo*> matrix_info(const std::string& name, int64_t n_rows, int64_t n_cols,
                                              int64_t n_mats = 0) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t) return make_error(ErrorCode::invalid_file, "tensor " + name + " is missing");
    used_.insert(name);
    std::vector<int64_t> want{n_cols, n_rows};
    if (n_mats > 0) want.push_back(n_mats);
    if (t->shape != want) {
      return make_error(ErrorCode::invalid_file,
                        "tensor " + name + " has shape " + shape_str(*t) + ", expected " + shape_str(want));
    }
    if (!is_matrix_type(t->type)) {
      return make_error(ErrorCode::unsupported,
                        "tensor " + name + ": type " + kernels::dtype_name(t->type) + " cannot be a weight matrix");
    }
    return t;
  }

  // A 1-D vector of n elements (n_mats > 0: n_mats of them, [n, n_mats]) into host memory; false
  // when it is optional and absent.
  Result<bool> host_vector(const std::string& name, int64_t n, bool optional, std::vector<float>& host,
                           int64_t n_mats = 0) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t) {
      if (optional) return false;
      return make_error(ErrorCode::invalid_file, "tensor " + name + " is missing");
    }
    std::vector<int64_t> want{n};
    if (n_mats > 0) want.push_back(n_mats);
    if (t->shape != want) {
      return make_error(ErrorCode::invalid_file,
                        "tensor " + name + " has shape " + shape_str(*t) + ", expected " + shape_str(want));
    }
    used_.insert(name);
    const int64_t total = n * std::max<int64_t>(1, n_mats);
    host.resize(static_cast<size_t>(total));
    kernels::dequantize_row(t->type, f_.tensor_data(*t), host.data(), total);
    bytes_ += t->n_bytes;
    return true;
  }

  // The first tensor of the file that no call above asked for, or null; an MTP block's tensors
  // (of config c) are left in the file by design.
  const gguf::TensorInfo* first_unused(const ModelConfig& c) const {
    for (const gguf::TensorInfo& t : f_.tensors()) {
      if (!used_.count(t.name) && !is_mtp_tensor(t.name, c)) return &t;
    }
    return nullptr;
  }

  size_t bytes() const { return bytes_; }
  size_t expert_bytes() const { return expert_bytes_; }
  const std::set<std::string>& types() const { return types_; }

 private:
  static std::string shape_str(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }
  static std::string shape_str(const gguf::TensorInfo& t) { return shape_str(t.shape); }

  const gguf::GgufFile& f_;
  backend::Backend& be_;
  std::vector<void*>& owned_;
  size_t bytes_ = 0;
  size_t expert_bytes_ = 0;  // of the routed experts' 3-D tensors
  std::set<std::string> types_;
  std::set<std::string> used_;  // names of the tensors handed out
};

}  // namespace kvc::model
