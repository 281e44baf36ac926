// The real app under Xvfb on a history of very long messages (kvchat issue 43): 17,000 'a's,
// 20,000 Chinese, Arabic and combining characters, in the user's messages, a Markdown answer's
// paragraph and code block, and a reply's reasoning; a conversation title of 3,000 characters.
// One text item of more than ~16K glyphs used to abort the app (Dear ImGui's 16-bit indices) on
// every launch on that data directory. The app draws them at the top, the middle and the end of
// the history, with a frame's vertices bounded by the screen, then again after a relaunch.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "storage/conversation_store.h"
#include "support/gui_support.h"
#include "support/test_support.h"

namespace {

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// 20,000 code points: CJK ideographs, Arabic letters (no spaces: one word), combining marks.
std::string chinese() { return repeat("漢字文本測試長消息中國語言", 20000 / 12); }
std::string arabic() { return repeat("مرحبابالعالم", 20000 / 12); }
std::string combining() {
  std::string out = "x";
  for (int i = 0; i < 20000; ++i) {
    const uint32_t cp = 0x300 + static_cast<uint32_t>(i % 0x70);
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

void add_answer(kvc::storage::ConversationStore& store, int64_t conv, int64_t& parent, const std::string& text) {
  auto id = store.begin_assistant_message(conv, parent);
  REQUIRE(id.ok());
  REQUIRE(store.append_streamed(*id, text, {}).ok());
  REQUIRE(store.finish_message(*id).ok());
  parent = *id;
}

void add_user(kvc::storage::ConversationStore& store, int64_t conv, int64_t& parent, const std::string& text) {
  auto id = store.append_message(conv, parent, kvc::storage::Role::user, text, {});
  REQUIRE(id.ok());
  parent = *id;
}

// Steps that page the history up `n` times, a frame after each.
std::string page(const char* key, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += std::string(R"({"do": "key", "key": ")") + key + R"("}, {"do": "frames", "n": 1},)";
  return s;
}

// The checks after each scroll: the frame drew, and its vertices stay a screenful (the long
// texts alone are 68,000 to 80,000 glyph vertices each).
constexpr const char* k_drawn = R"({"do": "frames", "n": 2},
  {"do": "assert", "state": "frame_vertices", "op": ">", "value": 1000},
  {"do": "assert", "state": "frame_vertices", "op": "<", "value": 60000},
  {"do": "print", "state": "frame_vertices"},)";

}  // namespace

TEST_CASE("kvchat GUI: messages of 17,000 to 20,000 characters are drawn, scrolled anywhere, and after a relaunch",
          "[ui][e2e]") {
  if (auto why = kvc::test::gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  const std::string data = tmp.file("data");
  {
    auto store = kvc::storage::ConversationStore::open_in(data);
    REQUIRE(store.ok());
    auto conv = (*store)->create_conversation(repeat("長い題名", 750), {});
    REQUIRE(conv.ok());
    int64_t parent = 0;
    add_user(**store, *conv, parent, std::string(17000, 'a'));
    add_answer(**store, *conv, parent, chinese());
    add_user(**store, *conv, parent, arabic());
    add_answer(**store, *conv, parent,
               "A code block:\n\n```\n" + combining() + "\n" + std::string(17000, 'a') + "\n```\n\n" + arabic() +
                   "\n\n" + std::string(17000, 'a'));
    add_user(**store, *conv, parent, combining());
    add_answer(**store, *conv, parent, "<think>" + chinese() + "</think>\n\n" + std::string(17000, 'a'));
  }
  const std::string model = kvc::test::model_path("stories260K.gguf");
  // With Debian's Noto fonts the Chinese, Arabic and combining characters get glyphs of their own.
  const bool noto = std::filesystem::exists("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc") &&
                    std::filesystem::exists("/usr/share/fonts/truetype/noto/NotoSansArabic-Regular.ttf");
  if (!noto) WARN("fonts-noto-core or fonts-noto-cjk is not installed: the glyph count is not checked");
  {
    std::ofstream f(tmp.file("first.json"));
    f << R"({"steps": [
      {"do": "wait_model", "timeout_s": 120}, {"do": "wait_idle", "timeout_s": 60},
      {"do": "assert", "state": "n_messages", "op": "==", "value": 6},)"
      << k_drawn << R"(
      {"do": "click", "widget": "chat.reasoning"}, {"do": "frames", "n": 2},
      {"do": "assert", "state": "reasoning_state", "op": "==", "value": "expanded"},)"
      << k_drawn << page("page_up", 60) << R"(
      {"do": "assert", "state": "chat_scroll_gap", "op": ">", "value": 20000},)"
      << k_drawn << R"({"do": "assert", "state": "chat_lines_drawn", "op": ">", "value": 20},)"
      << R"({"do": "screenshot", "name": "top", "window": "Chat"},)" << page("page_down", 20) << k_drawn
      << R"({"do": "screenshot", "name": "middle", "window": "Chat"},)" << page("page_down", 20) << k_drawn
      << R"({"do": "key", "key": "ctrl+end"}, {"do": "frames", "n": 3},
      {"do": "assert", "state": "chat_scroll_gap", "op": "<=", "value": 1},)"
      << k_drawn << R"({"do": "screenshot", "name": "end", "window": "Chat"},
      {"do": "click", "widget": "chat.select"}, {"do": "frames", "n": 3},
      {"do": "assert", "state": "md_select_mode", "op": "==", "value": 1},)"
      << k_drawn << R"({"do": "click", "widget": "chat.edit_user.3"}, {"do": "frames", "n": 3},)" << k_drawn
      << R"({"do": "assert", "state": "error", "op": "==", "value": ""},
      {"do": "assert", "state": "font_glyphs_missing", "op": "==", "value": 0},)"
      << (noto ? R"({"do": "assert", "state": "font_extra_glyphs", "op": ">=", "value": 100},)" : "")
      << R"({"do": "print", "state": "font_extra_glyphs"}, {"do": "print", "state": "font_atlas_builds"},
      {"do": "print", "state": "font_atlas_width"}, {"do": "print", "state": "font_atlas_height"},
      {"do": "print", "state": "font_atlas_build_ms"}, {"do": "print", "state": "frame_ms_p50"},
      {"do": "quit"}]})";
  }
  {
    std::ofstream f(tmp.file("again.json"));
    f << R"({"steps": [
      {"do": "wait_model", "timeout_s": 120}, {"do": "wait_idle", "timeout_s": 60},
      {"do": "assert", "state": "n_messages", "op": "==", "value": 6},)"
      << k_drawn << page("page_up", 30) << k_drawn << R"(
      {"do": "quit"}]})";
  }
  const std::string args =
      " -m '" + model + "' -t 2 --data-dir '" + data + "' --screenshot-dir '" + tmp.file("shots") + "' --script ";
  std::string out;
  int rc = kvc::test::run_command(kvc::test::gui_command(300) + args + "'" + tmp.file("first.json") + "'", out);
  INFO(out);
  CHECK(out.find("Too many vertices") == std::string::npos);
  REQUIRE(rc == 0);
  // The relaunch on the same data directory draws the history again.
  rc = kvc::test::run_command(kvc::test::gui_command(300) + args + "'" + tmp.file("again.json") + "'", out);
  INFO(out);
  CHECK(out.find("Too many vertices") == std::string::npos);
  REQUIRE(rc == 0);
}
