// kvchat-cli --backend: cuda runs (and agrees with cpu on greedy text) where a GPU is usable,
// and elsewhere fails with a message naming the cause and the way out; unknown names are refused.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/backend/backend.h"
#include "support/test_support.h"

namespace {

struct Run {
  int exit_code = -1;
  std::string out;
  std::string err;
};

Run cli(const std::string& args, const kvc::test::TempDir& tmp) {
  const std::string err_file = tmp.file("stderr.txt");
  const std::string cmd = std::string("KVCHAT_DATA_DIR='") + tmp.file("data") + "' '" + KVC_CLI_PATH + "' " + args +
                          " </dev/null 2>'" + err_file + "'";
  Run r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::array<char, 4096> buf{};
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::stringstream ss;
  ss << std::ifstream(err_file).rdbuf();
  r.err = ss.str();
  return r;
}

}  // namespace

TEST_CASE("cli: --backend cuda generates like cpu on a GPU, and says why not elsewhere", "[cuda][app]") {
  kvc::test::TempDir tmp;
  const std::string args = "generate -m '" + kvc::test::model_path("stories260K.gguf") +
                           "' -p 'Once upon a time' -n 12 --temp 0 -q --backend ";
  const Run cpu = cli(args + "cpu", tmp);
  REQUIRE(cpu.exit_code == 0);
  const Run cuda = cli(args + "cuda", tmp);
  if (kvc::backend::create_backend("cuda", 1).ok()) {
    INFO(cuda.err);
    CHECK(cuda.exit_code == 0);
    CHECK(cuda.out == cpu.out);
  } else {
    WARN("skipped the GPU half: no CUDA device");
    INFO(cuda.err);
    CHECK(cuda.exit_code != 0);
    CHECK((cuda.err.find("no CUDA device found") != std::string::npos ||
           cuda.err.find("has no CUDA backend") != std::string::npos));
    CHECK(cuda.err.find("--backend cpu") != std::string::npos);
  }
  const Run typo = cli(args + "gpu", tmp);
  CHECK(typo.exit_code != 0);
  CHECK(typo.err.find("--backend") != std::string::npos);
}
