// Quant formats against llama.cpp's own bytes: llama-quantize's Q8_0/Q4_0/Q4_K_M of the synthetic
// F16 model (the first rows of each tensor, tests/data/references/llama-quantize-*.slice.gguf)
// versus that F16 model, made at test time.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/quant.h"
#include "support/test_support.h"

using namespace kvc::kernels;

namespace {

// Just enough of GGUF (v2/v3) to find tensors: a test-only reader, independent of core/gguf,
// that trusts the test files.
struct TensorInfo {
  uint32_t type = 0;
  std::vector<uint64_t> dims;  // dims[0] = elements per row
  uint64_t offset = 0;         // from the start of the data section
};

struct GgufFile {
  std::vector<uint8_t> bytes;
  std::map<std::string, TensorInfo> tensors;
  size_t data_begin = 0;

  const uint8_t* data(const TensorInfo& t) const { return bytes.data() + data_begin + t.offset; }
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& b) : b_(b) {}
  template <typename T>
  T get() {
    if (pos_ + sizeof(T) > b_.size()) FAIL("truncated GGUF file");
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = get<uint64_t>();
    if (pos_ + n > b_.size()) FAIL("truncated GGUF file");
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  // Skips one metadata value of GGUF type `type`, returning it when it is an integer.
  uint64_t skip_value(uint32_t type) {
    static constexpr size_t k_sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    REQUIRE(type < 13);
    if (type == 8) {
      str();
      return 0;
    }
    if (type == 9) {
      const auto elem = get<uint32_t>();
      const auto n = get<uint64_t>();
      for (uint64_t i = 0; i < n; ++i) skip_value(elem);
      return 0;
    }
    uint64_t v = 0;
    std::memcpy(&v, b_.data() + pos_, k_sizes[type]);
    pos_ += k_sizes[type];
    return v;
  }
  size_t pos() const { return pos_; }

 private:
  const std::vector<uint8_t>& b_;
  size_t pos_ = 0;
};

GgufFile load(const std::string& path) {
  GgufFile g;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  REQUIRE(in);
  g.bytes.resize(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(g.bytes.data()), static_cast<std::streamsize>(g.bytes.size()));
  REQUIRE(in);
  Reader r(g.bytes);
  REQUIRE(r.get<uint32_t>() == 0x46554747u);  // "GGUF"
  REQUIRE(r.get<uint32_t>() >= 2);
  const auto n_tensors = r.get<uint64_t>();
  const auto n_kv = r.get<uint64_t>();
  uint64_t alignment = 32;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = r.str();
    const uint64_t v = r.skip_value(r.get<uint32_t>());
    if (key == "general.alignment") alignment = v;
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string name = r.str();
    TensorInfo t;
    t.dims.resize(r.get<uint32_t>());
    for (auto& d : t.dims) d = r.get<uint64_t>();
    t.type = r.get<uint32_t>();
    t.offset = r.get<uint64_t>();
    g.tensors[name] = t;
  }
  g.data_begin = (r.pos() + alignment - 1) / alignment * alignment;
  return g;
}

// The F16 model, loaded once for all the tests here.
const GgufFile& f16_model() {
  static const GgufFile f16 = load(kvc::test::model_path("tiny-gqa-f16.gguf"));
  return f16;
}

// The F16 model's row `row` of tensor `name`, as floats.
std::vector<float> f16_row(const GgufFile& f16, const std::string& name, int64_t row) {
  const TensorInfo& t = f16.tensors.at(name);
  if (t.type != static_cast<uint32_t>(DType::f16)) FAIL(name << " is not F16 in the F16 model");
  const auto n_cols = static_cast<int64_t>(t.dims[0]);
  std::vector<float> y(static_cast<size_t>(n_cols));
  dequantize_row(DType::f16, f16.data(t) + row_bytes(DType::f16, n_cols) * static_cast<size_t>(row), y.data(),
                 n_cols);
  return y;
}

// llama-quantize's output for tiny-gqa-f16 at `type` (q8_0, q4_0, q4_k_m): 16 rows per tensor.
GgufFile llama_quantized(const std::string& type) {
  return load(kvc::test::reference_path("llama-quantize-" + type + ".slice.gguf").string());
}

constexpr int64_t k_rows_per_tensor = 16;  // the slices' rows: every block pattern, fast

}  // namespace

TEST_CASE("Q8_0 and Q4_0 quantizers reproduce llama-quantize's bytes", "[kernels]") {
  const GgufFile& f16 = f16_model();
  for (const auto& [file, type] : {std::pair{"q8_0", DType::q8_0}, {"q4_0", DType::q4_0}}) {
    const GgufFile q = llama_quantized(file);
    int64_t n_blocks = 0, n_differ = 0;
    for (const auto& [name, t] : q.tensors) {
      if (t.type != static_cast<uint32_t>(type)) continue;
      const auto n_cols = static_cast<int64_t>(t.dims[0]);
      const size_t rb = row_bytes(type, n_cols);
      std::vector<uint8_t> mine(rb);
      for (int64_t row = 0; row < k_rows_per_tensor; ++row) {
        const auto x = f16_row(f16, name, row);
        quantize_row(type, x.data(), mine.data(), n_cols);
        const uint8_t* theirs = q.data(t) + rb * static_cast<size_t>(row);
        const size_t bb = dtype_info(type).block_bytes;
        for (size_t b = 0; b < rb; b += bb) {
          ++n_blocks;
          n_differ += std::memcmp(mine.data() + b, theirs + b, bb) != 0;
        }
      }
    }
    INFO(file << ": " << n_differ << " of " << n_blocks << " blocks differ");
    REQUIRE(n_blocks > 1000);
    REQUIRE(n_differ == 0);
  }
}

TEST_CASE("Q4_K and Q6_K tensors of the Q4_K_M model dequantize close to the F16 weights", "[kernels]") {
  const GgufFile& f16 = f16_model();
  const GgufFile q = llama_quantized("q4_k_m");
  for (const DType type : {DType::q4_k, DType::q6_k}) {
    INFO(dtype_name(type));
    double err2 = 0, ref2 = 0;
    int n_tensors = 0;
    for (const auto& [name, t] : q.tensors) {
      if (t.type != static_cast<uint32_t>(type)) continue;
      ++n_tensors;
      const auto n_cols = static_cast<int64_t>(t.dims[0]);
      std::vector<float> y(static_cast<size_t>(n_cols));
      for (int64_t row = 0; row < k_rows_per_tensor; ++row) {
        const auto x = f16_row(f16, name, row);
        dequantize_row(type, q.data(t) + row_bytes(type, n_cols) * static_cast<size_t>(row), y.data(),
                       n_cols);
        for (int64_t i = 0; i < n_cols; ++i) {
          const double d = static_cast<double>(y[i]) - static_cast<double>(x[i]);
          err2 += d * d;
          ref2 += static_cast<double>(x[i]) * static_cast<double>(x[i]);
        }
      }
    }
    REQUIRE(n_tensors > 0);
    // Normal weights: a 4-bit grid over a 32-value sub-block's range (about 4 sigma, a step
    // near 0.27 sigma) leaves step / sqrt(12) ~ 0.077 sigma of RMS error (measured: 0.071);
    // 6 bits over 16 values ~ 0.017 (measured: 0.018). A misplaced nibble, high-bit pair or
    // scale makes errors the size of the weights themselves (relative RMS near 1).
    const double rel = std::sqrt(err2 / ref2);
    INFO("relative RMS error " << rel);
    REQUIRE(rel < (type == DType::q4_k ? 0.10 : 0.03));
  }
}
