// Tests of model discovery on a temporary folder tree, and of model summaries before loading.
#include <catch2/catch.hpp>

#include <fstream>

#include "support/test_support.h"
#include "ui/model_discovery.h"

using namespace kvc::ui;
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

// The magic and version 3, then zeros: enough for discovery, which reads only the magic.
std::string gguf_bytes() {
  std::string s(72, '\0');
  s.replace(0, 5, "GGUF\x03");
  return s;
}
const std::string k_gguf = gguf_bytes();

}  // namespace

TEST_CASE("discover_models finds .gguf files and GGUF blobs, once each", "[ui]") {
  kvc::test::TempDir tmp;
  const fs::path home = tmp.path() / "home";
  const fs::path data = tmp.path() / "data";
  write_file(data / "models/kvchat-demo.gguf", k_gguf);
  write_file(home / ".lmstudio/models/org/repo/Model-Q4_K_M.GGUF", k_gguf);
  write_file(home / ".cache/lm-studio/models/readme.txt", "not a model");
  // Ollama: blobs named by digest, no extension; only those with the magic are models.
  write_file(home / ".ollama/models/blobs/sha256-aaaaaaaaaaaaaaaaaaaaaaaaaaaa", k_gguf);
  write_file(home / ".ollama/models/blobs/sha256-bbbbbbbbbbbbbbbbbbbbbbbbbbbb", "{\"license\": \"MIT\"}");
  // Hugging Face: a snapshot link named *.gguf pointing at its blob.
  const fs::path hf = home / ".cache/huggingface/hub/models--org--repo";
  write_file(hf / "blobs/0123456789abcdef", k_gguf);
  fs::create_directories(hf / "snapshots/rev");
  fs::create_symlink(hf / "blobs/0123456789abcdef", hf / "snapshots/rev/tiny.Q8_0.gguf");
  // A file named .gguf without the magic is still listed (loading it will say what is wrong).
  write_file(data / "models/broken.gguf", "nope");

  const auto found = discover_models(default_model_sources(home, data));
  std::vector<std::string> names;
  for (const auto& f : found) {
    std::string n = f.source;
    n.append(": ").append(f.display_name);
    names.push_back(std::move(n));
  }
  CAPTURE(names);
  REQUIRE(found.size() == 5);
  CHECK(names[0] == "kvchat: broken.gguf");
  CHECK(names[1] == "kvchat: kvchat-demo.gguf");
  CHECK(names[2] == "Ollama: blob sha256-aaaaaaaa...");
  CHECK(names[3] == "LM Studio: Model-Q4_K_M.GGUF");
  CHECK(names[4] == "Hugging Face: tiny.Q8_0.gguf");  // the blob it links to is not listed again
  CHECK(found[1].file_bytes == k_gguf.size());
}

TEST_CASE("discover_models skips missing folders and respects the limit", "[ui]") {
  kvc::test::TempDir tmp;
  CHECK(discover_models({{"none", tmp.path() / "missing"}}).empty());
  for (const char* name : {"m0.gguf", "m1.gguf", "m2.gguf", "m3.gguf", "m4.gguf"})
    write_file(tmp.path() / name, k_gguf);
  CHECK(discover_models({{"t", tmp.path()}}, 3).size() == 3);
}

TEST_CASE("read_model_info summarises stories260K before loading", "[ui]") {
  const auto path = kvc::test::model_path("stories260K.gguf");
  auto info = read_model_info(path);
  REQUIRE(info.ok());
  // The shape the models README gives: dim 64, 5 layers, 8 heads, 4 KV heads, vocab 512, F32.
  CHECK(info->arch == "llama");
  CHECK(info->n_embd == 64);
  CHECK(info->n_layer == 5);
  CHECK(info->n_head == 8);
  CHECK(info->n_head_kv == 4);
  CHECK(info->n_vocab == 512);
  CHECK(info->weight_type == "F32");
  // K and V, 5 layers, 4 heads x 8 dims, 2 bytes each.
  CHECK(info->kv_bytes_per_token_f16 == 2.0 * 5 * 32 * 2);
  // "260K" parameters: all F32, so the weight bytes are 4 per parameter.
  CHECK(info->weight_bytes == static_cast<size_t>(info->n_params) * 4);
  CHECK(info->n_params > 200'000);
  CHECK(info->n_params < 320'000);
  const double at_1k = memory_estimate_bytes(*info, 1024, 2.0);
  const double at_2k = memory_estimate_bytes(*info, 2048, 2.0);
  CHECK(at_2k - at_1k == Approx(1024 * info->kv_bytes_per_token_f16));
  CHECK(at_1k > static_cast<double>(info->weight_bytes));
}

TEST_CASE("read_model_info reports a broken file instead of failing", "[ui]") {
  kvc::test::TempDir tmp;
  write_file(tmp.path() / "bad.gguf", "GGUF but truncated");
  auto info = read_model_info(tmp.path() / "bad.gguf");
  REQUIRE_FALSE(info.ok());
  CHECK_FALSE(info.error().message.empty());
}
