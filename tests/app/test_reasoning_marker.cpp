// ReasoningMarker: kvchat-cli chat's marks on streamed reasoning, whatever the pieces' boundaries.
#include <catch2/catch.hpp>

#include "app/common/reasoning_marker.h"

using kvc::app::ReasoningMarker;

namespace {

// The reply streamed `n` bytes a piece.
std::string stream(const std::string& reply, size_t n, bool terminal, bool starts_open = false) {
  ReasoningMarker m(terminal, starts_open);
  std::string out;
  for (size_t i = 0; i < reply.size(); i += n) out += m.feed(reply.substr(i, n));
  return out + m.finish();
}

const std::string k_reply = "<think>\nadd them\nthen check\n</think>\n\n4.";

}  // namespace

TEST_CASE("reasoning marker: a pipe gets '[reasoning] ' lines, a terminal dimmed text", "[app]") {
  for (size_t n : {1, 2, 3, 5, 64}) {
    INFO("pieces of " << n);
    CHECK(stream(k_reply, n, false) ==
          "[reasoning] <think>\n[reasoning] add them\n[reasoning] then check\n[reasoning] </think>\n\n4.");
    CHECK(stream(k_reply, n, true) == "\x1b[2m<think>\nadd them\nthen check\n</think>\x1b[0m\n\n4.");
    CHECK(stream("4. No reasoning; <think> later is text.", n, false) == "4. No reasoning; <think> later is text.");
  }
}

TEST_CASE("reasoning marker: a prompt that opened the reasoning, and a reply cut off inside it", "[app]") {
  CHECK(stream("add them\n</think>\n\n4.", 3, false, true) == "[reasoning] add them\n[reasoning] </think>\n\n4.");
  CHECK(stream("add\n</think>4.", 2, true, true) == "\x1b[2madd\n</think>\x1b[0m4.");
  CHECK(stream("<think>\nstill", 4, true) == "\x1b[2m<think>\nstill\x1b[0m");
  CHECK(stream("<thin", 2, false) == "<thin");
}
