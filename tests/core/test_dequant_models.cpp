// Dequantizing the shared Q8_0 / Q4_0 / Q4_K_M models gives back their F16 twin's weights.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

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
  auto f16 = gguf::GgufFile::open(test::model_path("tiny-gqa-f16.gguf"));
  REQUIRE(f16.ok());
  // Quantization noise of each format on normally distributed weights: Q8_0 ~0.5%,
  // Q6_K ~2%, Q4_K and Q4_0 ~8-10%. The bounds leave room above those and stay far below
  // the ~1.4 of a wrong layout.
  const std::map<kernels::DType, double> bound = {{kernels::DType::q8_0, 0.01}, {kernels::DType::q6_k, 0.04},
                                                  {kernels::DType::q4_k, 0.13}, {kernels::DType::q4_0, 0.13},
                                                  {kernels::DType::f16, 1e-6}, {kernels::DType::f32, 1e-3}};
  std::map<kernels::DType, int> seen;
  for (const char* file : {"tiny-gqa-q8_0.gguf", "tiny-gqa-q4_0.gguf", "tiny-gqa-q4_k_m.gguf"}) {
    auto q = gguf::GgufFile::open(test::model_path(file));
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
  // The files exercise every quantized format.
  for (auto t : {kernels::DType::q8_0, kernels::DType::q4_0, kernels::DType::q4_k, kernels::DType::q6_k}) {
    INFO(kernels::dtype_name(t));
    CHECK(seen[t] > 0);
  }
}
