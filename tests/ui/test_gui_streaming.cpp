// The real app under Xvfb while an answer streams: its frames are paced by what they cost
// (ui/frame_pacer.h), so the window takes a bounded share of a core, and typing still works;
// PageUp leaves the growing answer's end and the view stays where it was put (PageDown too),
// Ctrl+End follows it again; the history, followed to its end while the answer grew, shows all
// of it once it is done.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "support/gui_support.h"
#include "support/test_support.h"

namespace {

// "kvchat: state NAME = VALUE" lines of the app's output, the last value of each.
std::map<std::string, double> printed_states(const std::string& out) {
  std::map<std::string, double> m;
  std::istringstream in(out);
  const std::string prefix = "kvchat: state ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    m[line.substr(prefix.size(), eq - prefix.size())] = std::atof(line.c_str() + eq + 3);
  }
  return m;
}

}  // namespace

TEST_CASE("kvchat GUI: while an answer streams, frames are paced by their cost and typing and paging still work",
          "[ui][e2e]") {
  if (auto why = kvc::test::gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  // A long answer, replayed 12 bytes every 8 ms (--replay-answer): about 33 s of streaming, for
  // the steps (one a frame, about a frame a second under Xvfb) that run while it streams.
  const std::string part = kvc::test::read_file(std::string(KVC_ASSET_DIR) + "/scripts/markdown-answer.md");
  {
    std::ofstream f(tmp.file("answer.md"));
    for (int i = 0; i < 36; ++i) f << part << "\n";
  }
  {
    std::ofstream f(tmp.file("stream.json"));
    f << R"({"steps": [
      {"do": "wait_model", "timeout_s": 120}, {"do": "wait_idle", "timeout_s": 30},
      {"do": "key", "key": "ctrl+n"}, {"do": "wait_idle", "timeout_s": 30},
      {"do": "type", "widget": "chat.input", "text": "Count the lines of a file"},
      {"do": "click", "widget": "chat.send"},
      {"do": "wait_state", "state": "generating", "op": "==", "value": 1, "timeout_s": 30},
      {"do": "type", "widget": "chat.input", "text": "typed while it streams"},
      {"do": "wait_state", "state": "chat_input", "op": "==", "value": "typed while it streams", "timeout_s": 10},
      {"do": "assert", "state": "generating", "op": "==", "value": 1},
      {"do": "key", "key": "page_up"}, {"do": "frames", "n": 2},
      {"do": "assert", "state": "chat_scroll_gap", "op": ">", "value": 100},
      {"do": "key", "key": "page_down"}, {"do": "frames", "n": 1},
      {"do": "assert", "state": "chat_scroll_gap", "op": ">", "value": 100},
      {"do": "key", "key": "ctrl+end"},
      {"do": "wait_state", "state": "chat_scroll_gap", "op": "<=", "value": 1, "timeout_s": 10},
      {"do": "frames", "n": 2}, {"do": "assert", "state": "chat_scroll_gap", "op": "<=", "value": 1},
      {"do": "assert", "state": "generating", "op": "==", "value": 1},
      {"do": "wait_idle", "timeout_s": 60},
      {"do": "assert", "state": "error", "op": "==", "value": ""},
      {"do": "assert", "state": "chat_input", "op": "==", "value": "typed while it streams"},
      {"do": "frames", "n": 3},
      {"do": "assert", "state": "chat_scroll_gap", "op": "<=", "value": 1},
      {"do": "print", "state": "n_frames_stream"}, {"do": "print", "state": "frame_ms_stream_p50"},
      {"do": "print", "state": "frame_interval_ms_stream"}, {"do": "print", "state": "ui_cpu_share_stream"},
      {"do": "print", "state": "frame_cpu_ms"},
      {"do": "quit"}]})";
  }
  std::string out;
  const int rc = kvc::test::run_command(
      kvc::test::gui_command(120) + " -m '" + kvc::test::model_path("stories260K.gguf") + "' -t 2 --data-dir '" +
          tmp.file("data") + "' --script '" + tmp.file("stream.json") + "' --screenshot-dir '" + tmp.file("shots") +
          "' --replay-answer '" + tmp.file("answer.md") + "'",
      out);
  INFO(out);
  REQUIRE(rc == 0);
  const auto st = printed_states(out);
  for (const char* k :
       {"n_frames_stream", "frame_ms_stream_p50", "frame_interval_ms_stream", "ui_cpu_share_stream", "frame_cpu_ms"})
    REQUIRE(st.count(k) == 1);
  // Frames went on while it streamed: at least 1 a second (the pacer's floor), at most 30.
  CHECK(st.at("n_frames_stream") >= 3);
  CHECK(st.at("frame_interval_ms_stream") >= 1000.0 / 30 - 0.1);
  CHECK(st.at("frame_interval_ms_stream") <= 1000.1);
  CHECK(st.at("frame_cpu_ms") > 0);
  // The window (its thread and the GL driver's) took about its share of a core (3 %, or a frame a
  // second where a frame costs more than 30 ms of CPU), not what unpaced frames take (30 frames/s
  // of software GL: most of a core; 10 a second: a quarter).
  const double bound = 2 * std::max(0.03, st.at("frame_cpu_ms") / 1000) + 0.02;
  CHECK(st.at("ui_cpu_share_stream") <= bound);
  CHECK(st.at("ui_cpu_share_stream") > 0);
}
