// The real kvchat app under Xvfb with a Gemma-3-shaped model: the gemma-window demo plays to the
// end. Its own asserts check each KV group's state as the conversation grows (the local layers'
// blocks inside the window stay a handful while the global layers' grow, retired local blocks
// leave T0, T2 holds only checkpoints of them) and that the turn after a restart is a full hit.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/gui_support.h"
#include "support/test_support.h"

namespace {

// The model the demo is made for: 6 layers (5 local of window 32, 1 global), small enough to
// answer hundreds of tokens a second on two cores.
std::string make_demo_model(const kvc::test::TempDir& tmp) {
  const auto made = kvc::test::cli(
      "mkmodel --arch gemma3 --dim 64 --layers 6 --heads 4 --kv-heads 1 --head-dim 16 --ffn 128 --window 32 "
      "--ctx 4096 --rope-scale-factor 1 --type q8_0 -q --vocab-from " +
          kvc::test::quoted(kvc::test::model_path("stories260K.gguf")) + " -o " +
          kvc::test::quoted(tmp.file("gemma3.gguf")),
      tmp);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  return tmp.file("gemma3.gguf");
}

// A PNG file of some size (the screenshot mechanism's own test checks the pixels).
bool is_png_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  char sig[8] = {};
  return f.read(sig, 8) && std::string(sig, 8) == "\x89PNG\r\n\x1a\n" && std::filesystem::file_size(p) > 4096;
}

}  // namespace

TEST_CASE(
    "kvchat GUI: the Gemma window demo shows each KV group, the local one bounded by its window, and a "
    "full hit after a restart",
    "[ui][e2e]") {
  if (auto why = kvc::test::gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  const std::string model = make_demo_model(tmp);
  const std::string cmd = kvc::test::gui_command(420) + " -m '" + model + "' -t 2 -c 4096 --data-dir '" +
                          tmp.file("data") + "' --demo '" + std::string(KVC_ASSET_DIR) +
                          "/demo/gemma-window.json' --demo-play --demo-exit --demo-hold 0 --screenshot-dir '" +
                          tmp.file("shots") + "'";
  std::string out;
  const int rc = kvc::test::run_command(cmd, out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("demo finished: 6 scenes") != std::string::npos);
  CHECK(is_png_file(tmp.path() / "shots/memory-groups.png"));
  CHECK(is_png_file(tmp.path() / "shots/memory-groups-tree.png"));  // the Prefix tree tab, a tree per group
}

TEST_CASE("kvchat GUI: the Gemma window demo with a model of one KV group stops at its first assert, saying why",
          "[ui][e2e]") {
  if (auto why = kvc::test::gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  const std::string cmd = kvc::test::gui_command(120) + " -m '" + kvc::test::model_path("stories260K.gguf") +
                          "' -t 2 --data-dir '" + tmp.file("data") + "' --demo '" + std::string(KVC_ASSET_DIR) +
                          "/demo/gemma-window.json' --demo-play --demo-exit --demo-hold 0";
  std::string out;
  const int rc = kvc::test::run_command(cmd, out);
  INFO(out);
  CHECK(rc == 1);
  CHECK(out.find("kv_n_groups is 1, expected == 2") != std::string::npos);
}
