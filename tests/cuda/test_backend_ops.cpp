// Every backend op, run on every available backend (tests/cuda/each_backend.h), against a
// reference computed here in double from the dequantized weights, with a per-op bound.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "core/backend/backend.h"
#include "cuda/each_backend.h"
#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quant.h"
#include "support/test_support.h"

using namespace kvc;
using kernels::DType;
using kernels::KvType;
using test::DeviceBuffer;

namespace {

using test::random_floats;

// y = x W^T + bias for n_tokens of 1, 3 and 9 (two GPU token tiles of 8) against the double
// reference of the dequantized weights.
void check_matmul(backend::Backend& be, DType t, int64_t n_rows, int64_t n_cols) {
  const auto w = random_floats(static_cast<size_t>(n_rows * n_cols), 1, 0.05f);
  std::vector<uint8_t> bytes(kernels::row_bytes(t, n_cols) * n_rows);
  for (int64_t r = 0; r < n_rows; ++r) {
    kernels::quantize_row(t, w.data() + r * n_cols, bytes.data() + r * kernels::row_bytes(t, n_cols), n_cols);
  }
  std::vector<float> wd(w.size());
  kernels::dequantize_row(t, bytes.data(), wd.data(), n_rows * n_cols);
  auto weight = be.upload_weight(kernels::MatrixView{t, bytes.data(), n_rows, n_cols});
  REQUIRE(weight.ok());
  const auto bias = random_floats(static_cast<size_t>(n_rows), 3);
  auto dev_bias = be.upload_floats(bias.data(), n_rows);
  REQUIRE(dev_bias.ok());
  for (int64_t n_tokens : {1, 3, 9}) {  // 9: two GPU token tiles of 8
    INFO(be.name() << " " << kernels::dtype_name(t) << " n_tokens " << n_tokens);
    const auto x = random_floats(static_cast<size_t>(n_tokens * n_cols), 2);
    DeviceBuffer<float> dx(be, x), dy(be, static_cast<size_t>(n_tokens * n_rows));
    be.matmul(*weight, dx.get(), n_tokens, dy.get(), *dev_bias);
    const auto y = dy.to_host();
    REQUIRE(be.take_error().ok());
    for (int64_t tk = 0; tk < n_tokens; ++tk) {
      for (int64_t r = 0; r < n_rows; ++r) {
        double ref = static_cast<double>(bias[static_cast<size_t>(r)]), mag = 0;
        for (int64_t c = 0; c < n_cols; ++c) {
          const double p = static_cast<double>(wd[static_cast<size_t>(r * n_cols + c)]) *
                           static_cast<double>(x[static_cast<size_t>(tk * n_cols + c)]);
          ref += p;
          mag += std::abs(p);
        }
        // The CPU quantizes activations to 8 bits for quantized weights: each product moves
        // by at most 1/254 of |w| max|x| of its block; 1/100 of sum |w x| covers it with
        // room. Float weights: float sums only.
        const bool quantized = t != DType::f32 && t != DType::f16 && t != DType::bf16;
        const double bound = quantized ? 1e-2 * mag + 1e-6 : 1e-5 * mag + 1e-6;
        REQUIRE(std::abs(static_cast<double>(y[static_cast<size_t>(tk * n_rows + r)]) - ref) <= bound);
      }
    }
  }
  be.free(*dev_bias);
}

}  // namespace

KVC_BACKEND_TEST_CASE("backend ops: matmul on every weight type, decode and prefill tiles, with bias",
                      "[cuda][backend]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                  DType::iq4_nl, DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k}) {
    check_matmul(be, t, 13, 512);  // 13 rows: not a multiple of the rows per GPU block
  }
}

KVC_BACKEND_TEST_CASE("backend ops: matmul on float weights of a width that is not a multiple of 32",
                      "[cuda][backend]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    check_matmul(be, t, 5, 172);  // stories260K's FFN width: five chunks of 32 and a tail of 12
    check_matmul(be, t, 3, 20);   // a tail alone
  }
}

KVC_BACKEND_TEST_CASE("backend ops: embed, rmsnorm, silu_mul, add", "[cuda][backend]") {
  const int64_t n_vocab = 40, n_embd = 256;
  for (DType t : {DType::f32, DType::f16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                  DType::iq4_nl, DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k}) {
    INFO(be.name() << " " << kernels::dtype_name(t));
    const auto table = random_floats(static_cast<size_t>(n_vocab * n_embd), 4);
    std::vector<uint8_t> bytes(kernels::row_bytes(t, n_embd) * n_vocab);
    kernels::quantize_row(t, table.data(), bytes.data(), n_vocab * n_embd);
    std::vector<float> td(table.size());
    kernels::dequantize_row(t, bytes.data(), td.data(), n_vocab * n_embd);
    auto w = be.upload_weight(kernels::MatrixView{t, bytes.data(), n_vocab, n_embd});
    REQUIRE(w.ok());
    const std::vector<int32_t> tokens{0, 39, 7, 7};
    DeviceBuffer<int32_t> dt(be, tokens);
    DeviceBuffer<float> dx(be, tokens.size() * n_embd);
    be.embed(*w, dt.get(), 4, dx.get());
    const auto x = dx.to_host();
    for (size_t i = 0; i < tokens.size(); ++i) {
      for (int64_t c = 0; c < n_embd; ++c) {
        // One dequantized value each: exact on the CPU, one fused multiply-add apart on a GPU.
        const float ref = td[static_cast<size_t>(tokens[i] * n_embd + c)];
        REQUIRE(std::abs(x[i * n_embd + c] - ref) <= 1e-6f * (1.0f + std::abs(ref)));
      }
    }
  }
  const int64_t n_tokens = 3, n = 384;
  const auto x = random_floats(static_cast<size_t>(n_tokens * n), 5, 2.0f);
  const auto wn = random_floats(static_cast<size_t>(n), 6);
  auto dw = be.upload_floats(wn.data(), n);
  REQUIRE(dw.ok());
  DeviceBuffer<float> dx(be, x), dout(be, x.size());
  be.rmsnorm(dx.get(), *dw, n_tokens, n, 1e-5f, dout.get());
  const auto out = dout.to_host();
  for (int64_t t = 0; t < n_tokens; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i)
      ss += static_cast<double>(x[static_cast<size_t>(t * n + i)]) *
            static_cast<double>(x[static_cast<size_t>(t * n + i)]);
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-5);
    for (int64_t i = 0; i < n; ++i) {
      const double ref = static_cast<double>(x[static_cast<size_t>(t * n + i)]) * inv *
                         static_cast<double>(wn[static_cast<size_t>(i)]);
      // Float sums of n/16 terms per SIMD lane on the CPU, then three roundings.
      const double bound = (static_cast<double>(n) / 16 + 4) * 6e-8 * std::abs(ref) + 1e-9;
      REQUIRE(std::abs(static_cast<double>(out[static_cast<size_t>(t * n + i)]) - ref) <= bound);
    }
  }
  be.free(*dw);
  const auto g = random_floats(1000, 7, 4.0f), u = random_floats(1000, 8);
  DeviceBuffer<float> dg(be, g), du(be, u);
  be.silu_mul(dg.get(), du.get(), 1000);
  const auto sg = dg.to_host();
  for (size_t i = 0; i < g.size(); ++i) {
    const double ref =
        static_cast<double>(g[i]) / (1.0 + std::exp(-static_cast<double>(g[i]))) * static_cast<double>(u[i]);
    REQUIRE(std::abs(static_cast<double>(sg[i]) - ref) <= 1e-5 * (1.0 + std::abs(ref)));  // float exp: a few ulp
  }
  be.add(dg.get(), du.get(), 1000);
  const auto sum = dg.to_host();
  for (size_t i = 0; i < g.size(); ++i) REQUIRE(sum[i] == sg[i] + u[i]);  // one rounding, both sides
  REQUIRE(be.take_error().ok());
}

KVC_BACKEND_TEST_CASE("backend: host memory that held one weight and then another uploads as the second",
                      "[cuda][backend]") {
  // Q4_0 and IQ4_NL rows are the same size, so one host buffer holds either: a backend that
  // keeps a device copy per host tensor must not hand back the first for the second.
  const int64_t n_vocab = 8, n_embd = 64;
  std::vector<uint8_t> host(kernels::row_bytes(DType::q4_0, n_embd) * n_vocab);
  REQUIRE(host.size() == kernels::row_bytes(DType::iq4_nl, n_embd) * n_vocab);
  const std::vector<int32_t> tokens{0, 5};
  DeviceBuffer<int32_t> dt(be, tokens);
  for (DType t : {DType::q4_0, DType::iq4_nl}) {
    INFO(be.name() << " " << kernels::dtype_name(t));
    const auto table = random_floats(static_cast<size_t>(n_vocab * n_embd), t == DType::q4_0 ? 7 : 8);
    kernels::quantize_row(t, table.data(), host.data(), n_vocab * n_embd);
    std::vector<float> td(table.size());
    kernels::dequantize_row(t, host.data(), td.data(), n_vocab * n_embd);
    auto w = be.upload_weight(kernels::MatrixView{t, host.data(), n_vocab, n_embd});
    REQUIRE(w.ok());
    DeviceBuffer<float> dx(be, tokens.size() * n_embd);
    be.embed(*w, dt.get(), static_cast<int64_t>(tokens.size()), dx.get());
    const auto x = dx.to_host();
    for (size_t i = 0; i < tokens.size(); ++i) {
      for (int64_t c = 0; c < n_embd; ++c) {
        const float ref = td[static_cast<size_t>(tokens[i] * n_embd + c)];
        REQUIRE(std::abs(x[i * n_embd + c] - ref) <= 1e-6f * (1.0f + std::abs(ref)));
      }
    }
  }
}

KVC_BACKEND_TEST_CASE("backend ops: rope with both pairings at small and large positions", "[cuda][backend]") {
  const int n_heads = 3, head_dim = 64;
  const std::vector<int64_t> positions{0, 1, 17, 70000};
  const auto n_tokens = static_cast<int64_t>(positions.size());
  for (bool interleaved : {true, false}) {
    for (int n_rot : {64, 32}) {
      INFO(be.name() << " interleaved " << interleaved << " n_rot " << n_rot);
      const kernels::RopeParams p{n_rot, 10000.0f, 0.5f, interleaved};
      const auto x = random_floats(static_cast<size_t>(n_tokens * n_heads * head_dim), 9);
      DeviceBuffer<float> dx(be, x);
      be.rope(dx.get(), n_tokens, positions.data(), n_heads, head_dim, p);
      const auto y = dx.to_host();
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int h = 0; h < n_heads; ++h) {
          const size_t base = static_cast<size_t>((t * n_heads + h) * head_dim);
          for (int i = n_rot; i < head_dim; ++i)
            REQUIRE(y[base + static_cast<size_t>(i)] == x[base + static_cast<size_t>(i)]);
          for (int k = 0; k < n_rot / 2; ++k) {
            const size_t ia = base + static_cast<size_t>(interleaved ? 2 * k : k);
            const size_t ib = base + static_cast<size_t>(interleaved ? 2 * k + 1 : k + n_rot / 2);
            const double th =
                static_cast<double>(positions[static_cast<size_t>(t)]) * 0.5 * std::pow(10000.0, -2.0 * k / n_rot);
            const double xa = static_cast<double>(x[ia]), xb = static_cast<double>(x[ib]);
            const double ra = xa * std::cos(th) - xb * std::sin(th);
            const double rb = xa * std::sin(th) + xb * std::cos(th);
            // cos/sin rounded to float, then two products and a sum in float.
            REQUIRE(std::abs(static_cast<double>(y[ia]) - ra) <= 1e-6 * (std::abs(xa) + std::abs(xb) + 1e-3));
            REQUIRE(std::abs(static_cast<double>(y[ib]) - rb) <= 1e-6 * (std::abs(xa) + std::abs(xb) + 1e-3));
          }
        }
      }
    }
  }
  REQUIRE(be.take_error().ok());
}

KVC_BACKEND_TEST_CASE("backend: device memory is reported by a GPU backend and falls as it allocates",
                      "[cuda][backend]") {
  const auto before = be.device_memory();
  if (be.name().substr(0, 3) == "cpu") {
    CHECK_FALSE(before.has_value());  // computes in host RAM: the budgets use /proc/meminfo
    return;
  }
  REQUIRE(before.has_value());
  CHECK(before->total_bytes > 0);
  CHECK(before->free_bytes <= before->total_bytes);
  constexpr size_t n = size_t{256} << 20;
  void* p = be.alloc(n);
  REQUIRE(p != nullptr);
  const auto after = be.device_memory();
  REQUIRE(after.has_value());
  CHECK(after->free_bytes + (n / 2) <= before->free_bytes);
  be.free(p);
  const MachineResources m = backend::with_device_memory(MachineResources{}, be);
  CHECK(m.vram_total_bytes == before->total_bytes);
}
