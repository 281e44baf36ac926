// Helpers shared by tests: where the shared models live, temporary directories.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kvc::test {

// The folder of shared test models: $KVCHAT_TEST_MODELS, else ../shared/models.
std::filesystem::path models_dir();
// Full path of a shared model file; the test fails with a clear message if it is missing.
std::string model_path(const std::string& file);
// Reads a whole binary file (reference logits); fails the test if unreadable.
std::vector<float> read_f32_file(const std::filesystem::path& path);
// Reads "key: v v v" lines of a <model>.reference.txt into ids.
std::vector<int> read_reference_ids(const std::filesystem::path& path, const std::string& key);

// n samples of N(0, scale^2) from a fixed seed.
std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f);

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace kvc::test
