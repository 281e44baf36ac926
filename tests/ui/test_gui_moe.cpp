// The real kvchat app under Xvfb with a mixture-of-experts model (qwen3moe): the smoke script's
// two turns (the second reusing the first's KV) and the Model window with the experts' memory.
#include <catch2/catch.hpp>

#include <string>

#include "support/gui_support.h"
#include "support/test_support.h"

TEST_CASE("kvchat GUI: a qwen3moe model chats two turns, the second reusing the first's KV", "[ui][e2e]") {
  if (auto why = kvc::test::gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  const std::string cmd = kvc::test::gui_command(120) + " -m '" + kvc::test::model_path("tiny-qwen3moe-q4_0.gguf") +
                          "' -t 2 --data-dir '" + tmp.file("data") + "' --script '" + std::string(KVC_ASSET_DIR) +
                          "/scripts/smoke.json' --screenshot-dir '" + tmp.file("shots") + "'";
  std::string out;
  const int rc = kvc::test::run_command(cmd, out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
}
