// The real kvchat app under Xvfb downloads a GGUF from a loopback HTTP server the test starts:
// typed into the Model window's Download tab (a 404, a cancel, then the real one), listed
// under On this machine at once, loaded;
// the tier defaults from free RAM and disk; Ctrl+Up/Down between conversations; and a window
// layout that persists across a restart (imgui.ini in the data directory).
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "support/gui_support.h"
#include "support/loopback_http.h"
#include "support/test_support.h"

namespace {

using kvc::test::gui_unavailable;

int run_gui(const std::string& args, std::string& output) {
  return kvc::test::run_command(kvc::test::gui_command(150) + " " + args, output);
}

}  // namespace

TEST_CASE("kvchat GUI: a model downloaded in the Model window is listed at once and loads", "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  const std::string model = kvc::test::model_path("stories260K.gguf");
  const std::string bytes = kvc::test::read_file(model);
  kvc::test::LoopbackHttpServer server([&](const kvc::test::HttpRequest& req) {
    if (req.path == "/files/slow.gguf") {  // about 10 s: time to press Cancel, even at 1 frame a second
      kvc::test::HttpResponse r = kvc::test::serve_file(req, bytes);
      r.chunk_bytes = 32 * 1024;
      r.chunk_delay_ms = 300;
      return r;
    }
    if (req.path != "/files/stories-dl.gguf") {
      kvc::test::HttpResponse r;
      r.status = 404;
      return r;
    }
    kvc::test::HttpResponse r = kvc::test::serve_file(req, bytes);
    r.chunk_bytes = 64 * 1024;
    r.chunk_delay_ms = 20;
    return r;
  });
  kvc::test::TempDir tmp;
  const std::string script = R"({"steps": [
    {"do": "wait_model", "timeout_s": 120},
    {"do": "assert", "state": "t1_default_bytes", "op": ">=", "value": 67108864},
    {"do": "assert", "state": "t2_default_bytes", "op": ">=", "value": 67108864},
    {"do": "assert", "state": "mem_available_bytes", "op": ">", "value": 0},
    {"do": "click", "widget": "model.tab.download"},
    {"do": "frames", "n": 3},
    {"do": "type", "widget": "model.download_url", "text": ")" +
                             server.url("/files/missing.gguf") + R"("},
    {"do": "click", "widget": "model.download"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "download_status", "value": "failed"},
    {"do": "assert", "state": "download_error", "op": "contains", "value": "HTTP 404"},
    {"do": "type", "widget": "model.download_url", "text": ")" +
                             server.url("/files/slow.gguf") + R"("},
    {"do": "click", "widget": "model.download"},
    {"do": "frames", "n": 2},
    {"do": "click", "widget": "model.download_cancel", "timeout_s": 10},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "download_status", "value": "cancelled"},
    {"do": "assert", "state": "download_error", "op": "contains", "value": "cancelled"},
    {"do": "type", "widget": "model.download_url", "text": ")" +
                             server.url("/files/stories-dl.gguf") + R"("},
    {"do": "click", "widget": "model.download"},
    {"do": "wait_idle", "timeout_s": 60},
    {"do": "assert", "state": "download_status", "value": "done"},
    {"do": "assert", "state": "n_downloads", "value": 1},
    {"do": "assert", "state": "download_path", "op": "contains", "value": "models/stories-dl.gguf"},
    {"do": "frames", "n": 10},
    {"do": "screenshot", "name": "model-download", "window": "Model"},
    {"do": "click", "widget": "model.tab.found"},
    {"do": "click", "widget": "model.found.stories-dl.gguf", "timeout_s": 20},
    {"do": "frames", "n": 10},
    {"do": "click", "widget": "model.load", "timeout_s": 20},
    {"do": "wait_idle", "timeout_s": 60},
    {"do": "wait_model", "timeout_s": 60},
    {"do": "assert", "state": "model_path", "op": "contains", "value": "models/stories-dl.gguf"},
    {"do": "key", "key": "ctrl+n"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "chat_title", "value": "New chat"},
    {"do": "key", "key": "ctrl+down"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "chat_title", "value": "Welcome to kvchat"},
    {"do": "key", "key": "ctrl+down"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "chat_title", "value": "Welcome to kvchat"},
    {"do": "key", "key": "ctrl+up"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "chat_title", "value": "New chat"},
    {"do": "command", "name": "export_conversation_md"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "conversation_export_path", "op": "contains", "value": ".md"},
    {"do": "quit"}
  ]})";
  { std::ofstream(tmp.file("download.json")) << script; }
  std::string out;
  const int rc = run_gui("-m '" + model + "' -t 2 --data-dir '" + tmp.file("data") + "' --script '" +
                             tmp.file("download.json") + "' --screenshot-dir '" + tmp.file("shots") + "'",
                         out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
  CHECK(kvc::test::read_file(tmp.path() / "data" / "models" / "stories-dl.gguf") == bytes);
  CHECK(std::filesystem::exists(tmp.path() / "data" / "models" / "stories-dl.gguf.sha256"));
  // The cancelled one left its partial file for a later resume, and no model.
  CHECK(std::filesystem::exists(tmp.path() / "data" / "models" / "slow.gguf.part"));
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "data" / "models" / "slow.gguf"));
  CHECK(std::filesystem::file_size(tmp.path() / "shots" / "model-download.png") > 1000);
  // The conversation export (its menu's Export as Markdown) landed in DATA_DIR/exports/.
  int n_md = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path() / "data" / "exports")) {
    if (e.path().extension() == ".md") {
      ++n_md;
      CHECK(kvc::test::read_file(e.path()).find("# New chat") == 0);
    }
  }
  CHECK(n_md == 1);
}

TEST_CASE("kvchat GUI: the window layout and the last model persist across a restart", "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  const std::string model = kvc::test::model_path("stories260K.gguf");
  kvc::test::TempDir tmp;
  auto run = [&](const std::string& steps, std::string& out) {
    { std::ofstream(tmp.file("layout.json")) << "{\"steps\": [" + steps + "]}"; }
    return run_gui(
        "-m '" + model + "' -t 2 --data-dir '" + tmp.file("data") + "' --script '" + tmp.file("layout.json") + "'",
        out);
  };
  std::string out;
  // The first run places the windows in the default layout and saves it on exit.
  REQUIRE(run(R"({"do": "wait_model", "timeout_s": 120}, {"do": "frames", "n": 5}, {"do": "quit"})", out) == 0);
  const auto ini = tmp.path() / "data" / "imgui.ini";
  REQUIRE(std::filesystem::exists(ini));
  std::string text = kvc::test::read_file(ini);
  const size_t model_at = text.find("[Window][Model]");
  REQUIRE(model_at != std::string::npos);
  // Move the Model window as a user dragging it would; the next run must put it there.
  const size_t pos_at = text.find("Pos=", model_at);
  REQUIRE(pos_at != std::string::npos);
  text.replace(pos_at, text.find('\n', pos_at) - pos_at, "Pos=123,456");
  { std::ofstream(ini, std::ios::binary) << text; }
  const int rc = run(R"({"do": "wait_model", "timeout_s": 120}, {"do": "frames", "n": 5},
      {"do": "assert", "state": "window.Model.x", "value": 123}, {"do": "assert", "state": "window.Model.y", "value": 456},
      {"do": "quit"})",
                     out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(kvc::test::read_file(ini).find("Pos=123,456") != std::string::npos);  // saved again on exit

  // Without -m, the next run opens the model of the last one (DATA_DIR/settings.json), not the demo.
  {
    std::ofstream(tmp.file("layout.json")) << R"({"steps": [{"do": "wait_model", "timeout_s": 120},
      {"do": "assert", "state": "model_is_demo", "value": 0},
      {"do": "assert", "state": "model_path", "op": "contains", "value": "stories260K.gguf"}, {"do": "quit"}]})";
  }
  const int rc3 = run_gui("-t 2 --data-dir '" + tmp.file("data") + "' --script '" + tmp.file("layout.json") + "'", out);
  INFO(out);
  CHECK(rc3 == 0);
}
