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

TEST_CASE("read_model_info splits a Gemma 3 model's KV into its layer groups, the local layers keeping their window",
          "[ui]") {
  kvc::test::TempDir tmp;
  // Gemma 3 1B's 26 layers (22 local of window 512, 4 global) and single KV head, narrow.
  const auto made = kvc::test::cli(
      "mkmodel --preset gemma3-1b --dim 64 --ffn 64 --head-dim 32 --pad-vocab 0 -q "
      "--vocab-from " +
          kvc::test::quoted(kvc::test::model_path("stories260K.gguf")) + " -o " +
          kvc::test::quoted(tmp.file("g3.gguf")),
      tmp);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  auto info = read_model_info(tmp.file("g3.gguf"));
  REQUIRE(info.ok());
  CHECK(info->arch == "gemma3");
  CHECK(info->n_local_layers == 22);
  CHECK(info->local_window == 512);
  // K and V of one KV head of 32, 2 bytes each: 128 bytes per token and layer.
  CHECK(info->kv_bytes_per_token_f16 == 26 * 128);
  CHECK(info->kv_bytes_per_token_local_f16 == 22 * 128);
  // Within the window every layer keeps every position; past it only the 4 global layers grow.
  CHECK(kv_estimate_bytes(*info, 512, 2.0) == 26.0 * 128 * 512);
  CHECK(kv_estimate_bytes(*info, 4096, 2.0) == 4.0 * 128 * 4096 + 22.0 * 128 * 512);
  CHECK(kv_estimate_bytes(*info, 4096, 2.0, true) == 26.0 * 128 * 4096);
  CHECK(kv_estimate_bytes(*info, 4096, 1.0) == kv_estimate_bytes(*info, 4096, 2.0) / 2);
  const double at_1k = memory_estimate_bytes(*info, 1024, 2.0);
  const double at_2k = memory_estimate_bytes(*info, 2048, 2.0);
  CHECK(at_2k - at_1k == Approx(1024.0 * 4 * 128));

  // A model without local layers is unchanged: one group, every position.
  auto llama = read_model_info(kvc::test::model_path("stories260K.gguf"));
  REQUIRE(llama.ok());
  CHECK(llama->n_local_layers == 0);
  CHECK(kv_estimate_bytes(*llama, 4096, 2.0) == 4096 * llama->kv_bytes_per_token_f16);
}

TEST_CASE("read_model_info counts a mixture of experts' expert bytes, all of them and a token's share", "[ui]") {
  // tiny-qwen3moe-e128-q4_0: 2 layers x 3 tensors of 128 experts x 64 x 256 in Q4_0 (18 bytes a
  // block of 32), 8 experts per token.
  auto info = read_model_info(kvc::test::model_path("tiny-qwen3moe-e128-q4_0.gguf"));
  INFO((info.ok() ? std::string() : info.error().what()));
  REQUIRE(info.ok());
  CHECK(info->arch == "qwen3moe");
  CHECK(info->n_expert == 128);
  CHECK(info->n_expert_used == 8);
  const size_t experts = size_t{2} * 3 * 128 * 64 * 256 / 32 * 18;
  CHECK(info->expert_bytes == experts);
  CHECK(info->active_expert_bytes == experts / 16);
  // Every expert is in memory: the weights and the estimate count them all.
  CHECK(info->weight_bytes > experts);
  CHECK(memory_estimate_bytes(*info, 1024, 2.0) > static_cast<double>(info->weight_bytes));
  // A dense model has none.
  auto dense = read_model_info(kvc::test::model_path("stories260K.gguf"));
  REQUIRE(dense.ok());
  CHECK(dense->n_expert == 0);
  CHECK(dense->expert_bytes == 0);
}
