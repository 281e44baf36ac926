// Helpers shared by tests: where the test models and references live, skips, temporary directories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/model/session.h"

namespace kvc::test {

// tests/data in the source tree: committed fixtures (see its README.md).
std::filesystem::path data_dir();
// The synthetic models that the test_models CTest fixture writes with kvchat-cli mkmodel
// (tests/data/synthetic-models.sh), in the build tree.
std::filesystem::path models_dir();
// Full path of a test model: a synthetic one, or one in tests/data/models or tests/data/vocab.
// The test fails with a message saying how to make it if it is missing.
std::string model_path(const std::string& file);
// Full path of a file in tests/data/references; the test fails if it is missing.
std::filesystem::path reference_path(const std::string& file);
// Reads a whole binary file of float32 / float16 values (reference logits); fails if unreadable.
std::vector<float> read_f32_file(const std::filesystem::path& path);
std::vector<float> read_f16_file(const std::filesystem::path& path);
// llama.cpp's logits at prompt positions of a model's reference prompt: <model>.logits.f16 holds
// the rows its reference.txt's "logit_rows:" line lists (every prompt position when there is
// none), <model>.reference.logits.f32 every position where float32 is small enough.
struct ReferenceLogits {
  std::vector<int64_t> rows;  // prompt positions, ascending
  std::vector<float> values;  // (rows.size(), n_vocab), row-major
  // The same rows of logits computed at every prompt position: (n_positions, n_vocab) ->
  // (rows.size(), n_vocab). Fails the test if `all` has too few positions.
  std::vector<float> same_rows(std::span<const float> all, int64_t n_vocab) const;
};
ReferenceLogits reference_logits(const std::string& model);
// Reads a whole file as bytes; fails the test if unreadable.
std::string read_file(const std::filesystem::path& path);
// Reads "key: v v v" lines of a <model>.reference.txt into ids.
std::vector<int> read_reference_ids(const std::filesystem::path& path, const std::string& key);

// Ends the running test case as skipped: prints the marker that CTest's SKIP_REGULAR_EXPRESSION
// (tests/CMakeLists.txt) turns into "Skipped", with the reason. Use only where nothing of the
// test has run or will run: a skip hides the whole case.
#define KVC_SKIP(reason)                  \
  do {                                    \
    WARN("kvc-test-skipped: " << reason); \
    return;                               \
  } while (false)

// Greedy decoding of exactly max_tokens tokens (no repeat penalty, end-of-generation tokens do
// not stop it): how the reference continuations were made.
model::GenerateOptions greedy_options(int max_tokens);

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

// One run of kvchat-cli: its exit status and what it wrote to stdout and stderr.
struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};
class TempDir;
// Runs kvchat-cli with `args` (shell-quoted by the caller) and `stdin_text` on its standard
// input, with its data directory inside `tmp`.
CliRun cli(const std::string& args, const TempDir& tmp, const std::string& stdin_text = "");
// `s` in single quotes for a shell command line (embedded quotes escaped).
std::string quoted(const std::string& s);

}  // namespace kvc::test
