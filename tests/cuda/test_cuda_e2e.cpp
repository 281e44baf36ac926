// Backend selection, and end to end on a GPU: the CUDA backend's logits on the test models
// against llama.cpp's references and the CPU backend's, and the stories260K greedy reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/backend/backend.h"
#include "core/backend/cuda_backend.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "cuda/each_backend.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

struct Loaded {
  std::unique_ptr<backend::Backend> be;
  std::unique_ptr<model::Model> m;
};

Loaded load(const std::string& file, const char* kind) {
  Loaded l;
  auto be = backend::create_backend(kind, 2);
  REQUIRE(be.ok());
  l.be = std::move(*be);
  auto m = model::Model::load(test::model_path(file), *l.be);
  INFO((m.ok() ? std::string() : m.error().what()));
  REQUIRE(m.ok());
  l.m = std::move(*m);
  return l;
}

std::vector<int32_t> to_i32(const std::vector<int>& v) { return {v.begin(), v.end()}; }

// Worst row's RMS of (a - b) relative to the standard deviation of b.
double worst_rel_rms(std::span<const float> a, std::span<const float> b, int64_t n_vocab) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t r = 0; r < a.size() / static_cast<size_t>(n_vocab); ++r) {
    double mean = 0, var = 0, d2 = 0;
    const size_t o = r * static_cast<size_t>(n_vocab);
    for (int64_t i = 0; i < n_vocab; ++i) mean += static_cast<double>(b[o + static_cast<size_t>(i)]);
    mean /= static_cast<double>(n_vocab);
    for (int64_t i = 0; i < n_vocab; ++i) {
      const double e = b[o + static_cast<size_t>(i)], d = static_cast<double>(a[o + static_cast<size_t>(i)]) - e;
      var += (e - mean) * (e - mean);
      d2 += d * d;
    }
    worst = std::max(worst, std::sqrt(d2 / var));
  }
  return worst;
}

}  // namespace

TEST_CASE("create_backend: cpu always, cuda or a clear reason, auto falls back, typos are errors", "[cuda][backend]") {
  auto cpu = backend::create_backend("cpu", 1);
  REQUIRE(cpu.ok());
  CHECK((*cpu)->name().substr(0, 3) == "cpu");
  auto cuda = backend::create_backend("cuda", 1);
  auto autob = backend::create_backend("auto", 1);
  REQUIRE(autob.ok());
  const auto kinds = backend::available_backends();
  REQUIRE(kinds.front() == "cpu");
  if (cuda.ok()) {
    CHECK((*cuda)->name().substr(0, 4) == "cuda");
    CHECK((*autob)->name().substr(0, 4) == "cuda");
    CHECK(kinds.size() == 2);
  } else {
    const std::string msg = cuda.error().message;
    INFO(msg);
    CHECK((msg.find("no CUDA device found") != std::string::npos ||
           msg.find("has no CUDA backend") != std::string::npos));
    CHECK(msg.find("--backend cpu") != std::string::npos);
    CHECK(backend::cuda_built() == (msg.find("has no CUDA backend") == std::string::npos));
    CHECK((*autob)->name().substr(0, 3) == "cpu");
    CHECK(kinds.size() == 1);
  }
  auto bad = backend::create_backend("gpu", 1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::invalid_argument);
}

TEST_CASE("cuda e2e: stories260K greedy continuation reproduces the 100 reference tokens", "[cuda][e2e]") {
  if (const std::string why = test::cuda_unavailable(); !why.empty()) KVC_SKIP(why);
  auto l = load("stories260K.gguf", "cuda");
  const auto prompt = to_i32(test::read_reference_ids(test::reference_path("stories260K.reference.txt"), "prompt"));
  const auto greedy = to_i32(test::read_reference_ids(test::reference_path("stories260K.reference.txt"), "greedy"));
  auto s = model::Session::create(*l.m, 256);
  REQUIRE(s.ok());
  const model::GenerateOptions opt = test::greedy_options(100);
  auto r = model::generate(*s, prompt, opt);
  REQUIRE(r.ok());
  CHECK(r->tokens == greedy);
}

TEST_CASE("cuda e2e: prompt logits on every test model match llama.cpp's and the CPU backend's", "[cuda][e2e]") {
  if (const std::string why = test::cuda_unavailable(); !why.empty()) KVC_SKIP(why);
  // Bounds vs llama.cpp: those the CPU backend meets (tests/core/test_model.cpp); the GPU keeps
  // activations in float, which is closer to exact, not farther. CPU vs GPU: the CPU's 8-bit
  // activations against float ones, at most the sum of both distances to the reference.
  struct Case {
    const char* file;
    double max_rel_rms;
  };
  const Case cases[] = {{"stories260K", 2e-3},   {"tiny-gqa-f16", 0.02},    {"tiny-gqa-q8_0", 0.05},
                        {"tiny-gqa-q4_0", 0.05}, {"tiny-gqa-q4_k_m", 0.05}, {"tiny-mqa-q8_0", 0.05},
                        {"tiny-q-q4_1", 0.05},   {"tiny-q-q5_0", 0.05},     {"tiny-q-q5_1", 0.05},
                        {"tiny-q-iq4_nl", 0.05}, {"tiny-q-q2_k", 0.05},     {"tiny-q-q3_k_m", 0.05},
                        {"tiny-q-q5_k_m", 0.05}, {"tiny-w320-q2_k", 0.05},  {"tiny-w320-q4_k_m", 0.05}};
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.file) {
      const auto prompt =
          to_i32(test::read_reference_ids(test::reference_path(std::string(c.file) + ".reference.txt"), "prompt"));
      const auto ref = test::reference_logits(c.file);
      std::vector<float> per_backend[2];
      int64_t n_vocab = 0;
      for (int i = 0; i < 2; ++i) {
        auto l = load(std::string(c.file) + ".gguf", i == 0 ? "cpu" : "cuda");
        n_vocab = l.m->config().n_vocab;
        auto s = model::Session::create(*l.m, 64);
        REQUIRE(s.ok());
        auto logits = s->evaluate_all(prompt);
        REQUIRE(logits.ok());
        per_backend[i] = ref.same_rows(*logits, l.m->config().n_vocab);
      }
      const double gpu_ref = worst_rel_rms(per_backend[1], ref.values, n_vocab);
      const double gpu_cpu = worst_rel_rms(per_backend[1], per_backend[0], n_vocab);
      INFO(c.file << ": cuda vs llama.cpp " << gpu_ref << ", cuda vs cpu " << gpu_cpu);
      CHECK(gpu_ref < c.max_rel_rms);
      CHECK(gpu_cpu < 2 * c.max_rel_rms);
    }
  }
}
