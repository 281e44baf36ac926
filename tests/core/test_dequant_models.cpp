// Dequantizing the shared quantized models gives back their F16 twin's weights.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "kernels/cpu/quant.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// RMS(quantized - f16) / RMS(f16) over a tensor: a wrong bit layout decorrelates the values
// and gives ~1.4; correct dequantization gives the format's quantization noise.
double relative_rms_error(const gguf::GgufFile& q, const gguf::TensorInfo& tq, const gguf::GgufFile& f,
                          const gguf::TensorInfo& tf) {
  const int64_t n = tq.n_elements();
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  kernels::dequantize_row(tq.type, q.tensor_data(tq), a.data(), n);
  kernels::dequantize_row(tf.type, f.tensor_data(tf), b.data(), n);
  double e = 0, s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[static_cast<size_t>(i)]) - static_cast<double>(b[static_cast<size_t>(i)]);
    const double w = b[static_cast<size_t>(i)];
    e += d * d;
    s += w * w;
  }
  return std::sqrt(e / s);
}

}  // namespace

TEST_CASE("dequantized shared models agree with the F16 model", "[core][e2e]") {
  // Quantization noise of each format on normally distributed weights: Q8_0 ~0.5%, Q6_K ~2%,
  // Q5_K, Q5_0 and Q5_1 ~4%, Q4_K, Q4_0, Q4_1 and IQ4_NL ~7-10%, Q3_K ~14%, Q2_K ~26%. The
  // bounds leave room above those and stay far below the ~1.4 of a wrong layout.
  using kernels::DType;
  const std::map<DType, double> bound = {
      {DType::q8_0, 0.01}, {DType::q6_k, 0.04}, {DType::q5_k, 0.06}, {DType::q5_0, 0.07},   {DType::q5_1, 0.07},
      {DType::q4_k, 0.13}, {DType::q4_0, 0.13}, {DType::q4_1, 0.13}, {DType::iq4_nl, 0.13}, {DType::q3_k, 0.2},
      {DType::q2_k, 0.35}, {DType::f16, 1e-6},  {DType::f32, 1e-3}};
  // Each F16 model and the models made from the same seed and shape in other types.
  const std::pair<const char*, std::vector<const char*>> groups[] = {
      {"tiny-gqa-f16", {"tiny-gqa-q8_0", "tiny-gqa-q4_0", "tiny-gqa-q4_k_m"}},
      {"tiny-q-f16",
       {"tiny-q-q4_1", "tiny-q-q5_0", "tiny-q-q5_1", "tiny-q-iq4_nl", "tiny-q-q2_k", "tiny-q-q3_k_m", "tiny-q-q5_k_m",
        "tiny-q-q6_k"}},
      {"tiny-w320-f16", {"tiny-w320-q2_k", "tiny-w320-q3_k_m", "tiny-w320-q4_k_m", "tiny-w320-q5_k_m"}},
  };
  std::map<DType, int> seen;
  for (const auto& [f16_name, files] : groups) {
    auto f16 = gguf::GgufFile::open(test::model_path(std::string(f16_name) + ".gguf"));
    REQUIRE(f16.ok());
    for (const char* file : files) {
      auto q = gguf::GgufFile::open(test::model_path(std::string(file) + ".gguf"));
      REQUIRE(q.ok());
      for (const auto& tq : q->tensors()) {
        if (tq.shape.size() != 2) continue;
        const gguf::TensorInfo* tf = f16->find_tensor(tq.name);
        REQUIRE(tf);
        const double err = relative_rms_error(*q, tq, *f16, *tf);
        INFO(file << " " << tq.name << " " << kernels::dtype_name(tq.type) << ": relative RMS error " << err);
        REQUIRE(bound.count(tq.type));
        CHECK(err < bound.at(tq.type));
        ++seen[tq.type];
      }
    }
  }
  // The files exercise every quantized format.
  for (auto t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl, DType::q2_k,
                 DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k}) {
    INFO(kernels::dtype_name(t));
    CHECK(seen[t] > 0);
  }
}
