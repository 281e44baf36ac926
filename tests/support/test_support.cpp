// Helpers shared by tests.
#include "support/test_support.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace kvc::test {

std::filesystem::path models_dir() {
  if (const char* env = std::getenv("KVCHAT_TEST_MODELS"); env && *env) return env;
  return KVC_DEFAULT_TEST_MODELS;
}

std::string model_path(const std::string& file) {
  const auto p = models_dir() / file;
  INFO("shared test model " << p << " is missing; set KVCHAT_TEST_MODELS to the models folder");
  REQUIRE(std::filesystem::exists(p));
  return p.string();
}

std::vector<float> read_f32_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  INFO("cannot read " << path);
  REQUIRE(in.good());
  in.seekg(0, std::ios::end);
  const auto n = static_cast<size_t>(in.tellg());
  std::vector<float> v(n / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
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
