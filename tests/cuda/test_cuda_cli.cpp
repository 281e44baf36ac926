// kvchat-cli --backend: cuda runs (and agrees with cpu on greedy text) where a GPU is usable,
// and elsewhere fails with a message naming the cause and the way out; unknown names are refused.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/backend/backend.h"
#include "cuda/each_backend.h"
#include "support/test_support.h"

namespace {

using Run = kvc::test::CliRun;
using kvc::test::cli;
using kvc::test::quoted;

std::string generate_args() {
  return "generate -m '" + kvc::test::model_path("stories260K.gguf") +
         "' -p 'Once upon a time' -n 12 --temp 0 -q --backend ";
}

}  // namespace

TEST_CASE("cli: --backend cuda generates like cpu on a GPU", "[cuda][app]") {
  if (const std::string why = kvc::test::cuda_unavailable(); !why.empty()) KVC_SKIP(why);
  kvc::test::TempDir tmp;
  const Run cpu = cli(generate_args() + "cpu", tmp);
  REQUIRE(cpu.exit_code == 0);
  const Run cuda = cli(generate_args() + "cuda", tmp);
  INFO(cuda.err);
  CHECK(cuda.exit_code == 0);
  CHECK(cuda.out == cpu.out);
}

TEST_CASE("cli: --backend cuda without a usable GPU names the cause and the way out", "[cuda][app]") {
  kvc::test::TempDir tmp;
  // Where a GPU is present the child is shown none: an empty CUDA_VISIBLE_DEVICES leaves the
  // CUDA runtime no device (the parent's own CUDA context is already made and unaffected).
  const bool hide_gpu = kvc::test::cuda_unavailable().empty();
  const char* was = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string saved = was != nullptr ? was : "";
  if (hide_gpu) ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  const Run cuda = cli(generate_args() + "cuda", tmp);
  if (hide_gpu && was != nullptr) {
    ::setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1);
  } else if (hide_gpu) {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
  }
  INFO(cuda.err);
  CHECK(cuda.exit_code != 0);
  CHECK((cuda.err.find("no CUDA device found") != std::string::npos ||
         cuda.err.find("has no CUDA backend") != std::string::npos));
  CHECK(cuda.err.find("--backend cpu") != std::string::npos);
}

TEST_CASE("cli: a --backend typo is refused", "[cuda][app]") {
  kvc::test::TempDir tmp;
  const Run typo = cli(generate_args() + "gpu", tmp);
  CHECK(typo.exit_code != 0);
  CHECK(typo.err.find("--backend") != std::string::npos);
}
