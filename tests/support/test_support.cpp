// Helpers shared by tests.
#include "support/test_support.h"

#include <catch2/catch.hpp>

#include "kernels/cpu/quant.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace kvc::test {

std::filesystem::path data_dir() { return KVC_TEST_DATA_DIR; }

std::filesystem::path models_dir() { return KVC_TEST_MODELS_DIR; }

std::string model_path(const std::string& file) {
  for (const auto& dir : {models_dir(), data_dir() / "models", data_dir() / "vocab"}) {
    if (std::filesystem::exists(dir / file)) return (dir / file).string();
  }
  INFO("test model " << file << " is neither in " << models_dir()
                     << " (run the whole suite, whose test_models fixture makes it: ctest --preset release) nor in "
                     << data_dir());
  FAIL("missing test model");
  return {};
}

std::filesystem::path reference_path(const std::string& file) {
  const auto p = data_dir() / "references" / file;
  INFO("reference " << p << " is missing (tests/data/make-references.sh writes it)");
  REQUIRE(std::filesystem::exists(p));
  return p;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  INFO("cannot read " << path);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<float> read_f32_file(const std::filesystem::path& path) {
  const std::string bytes = read_file(path);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

std::vector<float> read_f16_file(const std::filesystem::path& path) {
  const std::string bytes = read_file(path);
  std::vector<float> v(bytes.size() / sizeof(uint16_t));
  kernels::dequantize_row(kernels::DType::f16, bytes.data(), v.data(), static_cast<int64_t>(v.size()));
  return v;
}

model::GenerateOptions greedy_options(int max_tokens) {
  model::GenerateOptions opt;
  opt.max_tokens = max_tokens;
  opt.sampling.temperature = 0;
  opt.sampling.repeat_penalty = 1.0f;
  opt.stop_at_eog = false;
  return opt;
}

std::vector<float> ReferenceLogits::same_rows(std::span<const float> all, int64_t n_vocab) const {
  std::vector<float> out;
  out.reserve(rows.size() * static_cast<size_t>(n_vocab));
  for (const int64_t r : rows) {
    INFO("reference row " << r << " of logits at " << all.size() / static_cast<size_t>(n_vocab) << " positions");
    REQUIRE(static_cast<size_t>((r + 1) * n_vocab) <= all.size());
    out.insert(out.end(), all.begin() + r * n_vocab, all.begin() + (r + 1) * n_vocab);
  }
  return out;
}

ReferenceLogits reference_logits(const std::string& model) {
  ReferenceLogits ref;
  const auto f32 = data_dir() / "references" / (model + ".reference.logits.f32");
  ref.values = std::filesystem::exists(f32) ? read_f32_file(f32) : read_f16_file(reference_path(model + ".logits.f16"));
  const auto txt = reference_path(model + ".reference.txt");
  const bool listed = read_file(txt).find("\nlogit_rows:") != std::string::npos;
  const std::vector<int> rows = read_reference_ids(txt, listed ? "logit_rows" : "prompt");
  for (size_t i = 0; i < rows.size(); ++i) ref.rows.push_back(listed ? rows[i] : static_cast<int64_t>(i));
  INFO(model << ": " << ref.values.size() << " reference logits for " << ref.rows.size() << " rows");
  REQUIRE(!ref.rows.empty());
  REQUIRE(ref.values.size() % ref.rows.size() == 0);
  return ref;
}

std::vector<int> read_reference_ids(const std::filesystem::path& path, const std::string& key) {
  std::ifstream in(path);
  INFO("cannot read " << path);
  REQUIRE(in.good());
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream ss(line.substr(key.size() + 1));
    std::vector<int> ids;
    for (int id; ss >> id;) ids.push_back(id);
    return ids;
  }
  FAIL("no line '" << key << ":' in " << path);
  return {};
}

CliRun cli(const std::string& args, const TempDir& tmp, const std::string& stdin_text) {
  const std::string err_file = tmp.file("stderr.txt"), in_file = tmp.file("stdin.txt");
  { std::ofstream(in_file, std::ios::binary) << stdin_text; }
  const std::string cmd = "KVCHAT_DATA_DIR=" + quoted(tmp.file("data")) + " " + quoted(KVC_CLI_PATH) + " " + args +
                          " <" + quoted(in_file) + " 2>" + quoted(err_file);
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::array<char, 4096> buf{};
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(err_file);
  return r;
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

TempDir::TempDir() {
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() / ("kvchat-test-" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace kvc::test
