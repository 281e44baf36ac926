// The real kvchat app under Xvfb: the smoke script (two turns with stories260K), then a
// restart on the same data directory that resumes the conversation, and the restart demo
// (an in-process restart). Asserts are the scripts' and demos' own (state reached), plus the
// screenshots being real PNGs.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <vector>

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <unistd.h>

#include "core/chat/reasoning.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "core/model/model_builder.h"
#include "core/tokenizer/tokenizer.h"
#include "storage/conversation_store.h"
#include "storage/data_dir_lock.h"
#include "support/gui_support.h"
#include "support/test_support.h"

namespace {

using kvc::test::gui_command;
using kvc::test::gui_unavailable;
using kvc::test::run_command;

// model: empty for the built-in demo model. extra: more options for kvchat.
int run_script(const std::string& model, const std::string& data_dir, const std::string& script,
               const std::string& shots, std::string& output, const std::string& env = "",
               const std::string& extra = "") {
  std::string cmd = env + gui_command(120);
  if (!model.empty()) cmd += " -m '" + model + "'";
  cmd += " -t 2 --data-dir '" + data_dir + "' --script '" + std::string(KVC_ASSET_DIR) + "/scripts/" + script +
         "' --screenshot-dir '" + shots + "'" + extra;
  return run_command(cmd, output);
}

// A real screenshot: a PNG that decodes, with at least 16 distinct colours (a blank or
// single-colour frame, which a broken render loop or a missed swap gives, has a handful).
bool is_png(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  char sig[8] = {};
  if (!f.read(sig, 8) || std::string(sig, 8) != "\x89PNG\r\n\x1a\n") return false;
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load(p.c_str(), &w, &h, &n, 3);
  if (px == nullptr) return false;
  std::set<uint32_t> colours;
  for (int64_t i = 0; i < int64_t{w} * h && colours.size() < 16; ++i) {
    colours.insert(uint32_t{px[3 * i]} << 16 | uint32_t{px[3 * i + 1]} << 8 | px[3 * i + 2]);
  }
  stbi_image_free(px);
  INFO(p << ": " << w << "x" << h << ", " << colours.size() << (colours.size() < 16 ? "" : "+") << " colours");
  return colours.size() >= 16;
}

}  // namespace

TEST_CASE("screenshot check: a blank frame is refused, a drawn one passes", "[ui]") {
  kvc::test::TempDir tmp;
  std::vector<unsigned char> px(64 * 64 * 3, 30);  // the window's background colour, nothing drawn
  REQUIRE(stbi_write_png(tmp.file("blank.png").c_str(), 64, 64, 3, px.data(), 64 * 3));
  CHECK_FALSE(is_png(tmp.path() / "blank.png"));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<unsigned char>((i * 37) % 251);
  REQUIRE(stbi_write_png(tmp.file("drawn.png").c_str(), 64, 64, 3, px.data(), 64 * 3));
  CHECK(is_png(tmp.path() / "drawn.png"));
}

TEST_CASE("kvchat GUI: smoke script, then a restart resumes the conversation", "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  const std::string model = kvc::test::model_path("stories260K.gguf");
  kvc::test::TempDir tmp;
  const std::string shots = tmp.file("shots");
  std::string out;
  int rc = run_script(model, tmp.file("data"), "smoke.json", shots, out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
  CHECK(out.find("kvchat: state last_tokens_per_s = ") != std::string::npos);  // the print step
  for (const char* name : {"app", "chat", "memory", "model", "model-download"}) {
    CAPTURE(name);
    CHECK(is_png(std::filesystem::path(shots) / (std::string(name) + ".png")));
  }

  rc = run_script(model, tmp.file("data"), "resume.json", shots, out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(is_png(std::filesystem::path(shots) / "resumed.png"));
  // The script asserted the block map's T2 cells and a shared prefix; these are its Memory tabs.
  for (const char* name : {"memory-blocks", "memory-tree", "memory-timelines", "memory-export"}) {
    CAPTURE(name);
    CHECK(is_png(std::filesystem::path(shots) / (std::string(name) + ".png")));
  }
  // Both exports landed in DATA_DIR/exports/, non-empty.
  REQUIRE(std::filesystem::is_directory(tmp.path() / "data/exports"));
  int n_json = 0, n_csv = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path() / "data/exports")) {
    CHECK(std::filesystem::file_size(e.path()) > 0);
    n_json += e.path().extension() == ".json";
    n_csv += e.path().extension() == ".csv";
  }
  CHECK(n_json == 1);
  CHECK(n_csv == 1);
}

TEST_CASE("kvchat GUI: the KV format set in the Engine window applies at once and is remembered across a restart",
          "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  const std::string model = kvc::test::model_path("stories260K.gguf");
  kvc::test::TempDir tmp;
  const std::string shots = tmp.file("shots");
  std::string out;
  // F16 (640 bytes per token for stories260K), a turn, then INT4 (240) and a turn on it.
  int rc = run_script(model, tmp.file("data"), "kv-format.json", shots, out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(is_png(std::filesystem::path(shots) / "engine-kv-format.png"));
  CHECK_THAT(kvc::test::read_file(tmp.path() / "data" / "settings.json"), Catch::Contains("\"kv_format\": \"int4\""));
  // The next launch runs INT4 from the start and reopens the conversation.
  rc = run_script(model, tmp.file("data"), "kv-format-kept.json", shots, out);
  INFO(out);
  CHECK(rc == 0);
}

TEST_CASE("kvchat GUI: chat with a Qwen-vocabulary model keeps UTF-8 whole in the stored answers", "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  const auto missing = kvc::test::models_dir() / "hf-vocab-missing.txt";
  if (std::filesystem::exists(missing)) KVC_SKIP("Qwen vocabulary not fetched: " << kvc::test::read_file(missing));
  kvc::test::TempDir tmp;
  const auto made =
      kvc::test::cli("mkmodel --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --type q8_0 -q --vocab-from " +
                         kvc::test::quoted(kvc::test::model_path("ggml-vocab-qwen2.gguf")) + " -o " +
                         kvc::test::quoted(tmp.file("qwen.gguf")),
                     tmp);
  REQUIRE(made.exit_code == 0);
  std::string out;
  const int rc = run_script(tmp.file("qwen.gguf"), tmp.file("data"), "bpe-chat.json", tmp.file("shots"), out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
  // What the app stored is what it showed: the messages typed, and answers of whole UTF-8
  // characters (a byte-level token may hold part of one; the stream holds it back).
  auto store = kvc::storage::ConversationStore::open_in(tmp.path() / "data");
  REQUIRE(store.ok());
  auto convs = (*store)->list_conversations(0, 10);
  REQUIRE(convs.ok());
  std::vector<kvc::storage::Message> chat;  // the new conversation (the other is the welcome one)
  for (const auto& c : *convs) {
    auto p = (*store)->path_to(c.active_leaf);
    if (p.ok() && p->size() == 4) chat = std::move(*p);
  }
  REQUIRE(chat.size() == 4);
  const auto* path = &chat;
  CHECK((*path)[0].text == "你好，世界 🦙 naïve café");
  for (const auto& m : *path) {
    std::string rest = m.text, whole;
    kvc::tokenizer::drain_utf8(rest, whole, true);
    CHECK(whole == m.text);
    CHECK(!m.tokens.empty());
  }
}

TEST_CASE("kvchat GUI: first launch builds the demo model and answers in the welcome conversation", "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  std::string out;
  const int rc = run_script("", tmp.file("data"), "demo-first-launch.json", tmp.file("shots"), out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(std::filesystem::exists(tmp.path() / "data/models/kvchat-demo.gguf"));
  CHECK(is_png(tmp.path() / "shots/first-launch.png"));
  CHECK(is_png(tmp.path() / "shots/demo.png"));
}

TEST_CASE("kvchat GUI: a disk tier that cannot be opened leaves chat working from RAM, with a warning", "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  std::filesystem::create_directories(tmp.path() / "data");
  { std::ofstream blocker(tmp.path() / "data/kv-cache"); }  // a file where the tier's folder goes
  std::string out;
  const int rc = run_script(kvc::test::model_path("stories260K.gguf"), tmp.file("data"), "disk-tier-off.json",
                            tmp.file("shots"), out);
  INFO(out);
  REQUIRE(rc == 0);  // the script asserts a reply and a non-empty tier warning
  CHECK(is_png(tmp.path() / "shots/disk-tier-off.png"));
}

TEST_CASE("kvchat GUI: a data directory another kvchat holds is refused with who holds it, and left untouched",
          "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  std::filesystem::create_directories(tmp.path() / "data");
  // The same flock a running app or server takes (storage/data_dir_lock.h), held by this test.
  auto held = kvc::storage::DataDirLock::acquire(tmp.path() / "data", "the test");
  REQUIRE(held.ok());
  std::string out;
  const int rc = run_script(kvc::test::model_path("stories260K.gguf"), tmp.file("data"), "data-dir-busy.json",
                            tmp.file("shots"), out);
  INFO(out);
  REQUIRE(rc == 0);  // the script asserts the error (with "is using the data directory") and no conversation
  CHECK(is_png(tmp.path() / "shots/data-dir-busy.png"));
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "data/kvchat.db"));
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "data/kv-cache"));
}

TEST_CASE("kvchat GUI: a damaged kvchat.db is moved aside, the user is told, and chat starts afresh", "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  std::filesystem::create_directories(tmp.path() / "data");
  { std::ofstream(tmp.path() / "data/kvchat.db") << std::string(8192, 'x'); }
  std::string out;
  const int rc = run_script(kvc::test::model_path("stories260K.gguf"), tmp.file("data"), "damaged-db.json",
                            tmp.file("shots"), out);
  INFO(out);
  REQUIRE(rc == 0);  // the script asserts the notice and a reply
  int n_aside = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path() / "data")) {
    if (e.path().filename().string().starts_with("kvchat.db.damaged-") && e.file_size() == 8192) ++n_aside;
  }
  CHECK(n_aside == 1);
  auto store = kvc::storage::ConversationStore::open_in(tmp.path() / "data");
  REQUIRE(store.ok());
  auto list = (*store)->list_conversations(0, 10);
  REQUIRE(list.ok());
  CHECK(list->size() == 1);
}

TEST_CASE("kvchat GUI: the restart demo plays to the end, after the restart the next turn comes from T2", "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  // The scenario's own asserts check the state reached: one restart, T1 empty after it, and
  // the next turn's prompt served from T2 (> 200 tokens); a failed assert fails the demo.
  const std::string cmd = gui_command(180) + " -m '" + kvc::test::model_path("stories260K.gguf") +
                          "' -t 2 --data-dir '" + tmp.file("data") + "' --demo '" + std::string(KVC_ASSET_DIR) +
                          "/demo/restart.json' --demo-play --demo-exit --demo-hold 0";
  std::string out;
  const int rc = run_command(cmd, out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("demo finished: 4 scenes") != std::string::npos);
}

TEST_CASE("kvchat GUI: a broken demo file is an error message and exit status 2", "[ui][e2e]") {
  kvc::test::TempDir tmp;
  { std::ofstream(tmp.path() / "bad.json") << R"({"scenes": [{"say": "x", "steps": [{"do": "click"}]}]})"; }
  std::string out;
  std::string cmd = "'";
  cmd += KVC_GUI_PATH;
  cmd += "' --demo '";
  cmd += tmp.file("bad.json");
  cmd += "'";
  const int rc = run_command(cmd, out);
  INFO(out);
  CHECK(rc == 2);
  CHECK(out.find("scene 1: step 1 (click)") != std::string::npos);
}

TEST_CASE("kvchat GUI: a streamed Markdown answer renders as headings, lists, a table and highlighted code",
          "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  // The link opener the app spawns: records its arguments, one per line (no shell between).
  const std::string opener = tmp.file("opener.sh");
  {
    std::ofstream f(opener);
    f << "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> '" << tmp.file("opened.txt") << "'; done\n";
  }
  std::filesystem::permissions(opener, std::filesystem::perms::owner_all);
  std::string out;
  // The answer is streamed by --replay-answer: a model small enough for CI cannot write Markdown.
  // The script looks at frames drawn while it streams (an open code block, a table): --stream-cpu
  // 100 lets them come as fast as they draw (up to 30 a second) instead of ~2 a second under Xvfb.
  const int rc =
      run_script(kvc::test::model_path("stories260K.gguf"), tmp.file("data"), "markdown.json", tmp.file("shots"), out,
                 "KVCHAT_URL_OPENER='" + opener + "' ",
                 " --stream-cpu 100 --replay-answer '" + std::string(KVC_ASSET_DIR) + "/scripts/markdown-answer.md'");
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
  CHECK(is_png(tmp.path() / "shots/markdown.png"));
  CHECK(is_png(tmp.path() / "shots/markdown-select.png"));
  // The link click ran the opener with the URL as its only argument.
  for (int i = 0; i < 50 && !std::filesystem::exists(tmp.path() / "opened.txt"); ++i) ::usleep(100 * 1000);
  CHECK(kvc::test::read_file(tmp.path() / "opened.txt") == "https://en.cppreference.com/w/cpp/io/basic_ifstream\n");
  // What was stored is the answer as streamed.
  auto store = kvc::storage::ConversationStore::open_in(tmp.path() / "data");
  REQUIRE(store.ok());
  auto convs = (*store)->list_conversations(0, 10);
  REQUIRE(convs.ok());
  bool found = false;
  const std::string answer = kvc::test::read_file(std::string(KVC_ASSET_DIR) + "/scripts/markdown-answer.md");
  for (const auto& c : *convs) {
    auto p = (*store)->path_to(c.active_leaf);
    if (p.ok() && p->size() == 2) found = (*p)[1].text == answer;
  }
  CHECK(found);
}

TEST_CASE("kvchat GUI: --replay-answer with a missing file is a clear error", "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  std::string out;
  const int rc = run_script(kvc::test::model_path("stories260K.gguf"), tmp.file("data"), "markdown.json",
                            tmp.file("shots"), out, "", " --replay-answer '" + tmp.file("missing.md") + "'");
  CHECK(rc == 2);
  CHECK(out.find("--replay-answer") != std::string::npos);
  CHECK(out.find("cannot read it") != std::string::npos);
}

TEST_CASE("kvchat GUI: a reasoning answer shows 'thinking...' while it streams, then a collapsed, expandable header",
          "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  // A Qwen 3 architecture model with the Qwen 3 chat template (stories260K's vocabulary).
  auto f = kvc::gguf::GgufFile::open(kvc::test::model_path("stories260K.gguf"));
  REQUIRE(f.ok());
  auto vocab = kvc::model::vocabulary_from_gguf(*f);
  REQUIRE(vocab.ok());
  const std::string qwen3 = kvc::test::read_file(kvc::test::data_dir() / "templates" / "Qwen-Qwen3-0.6B.jinja");
  REQUIRE(kvc::model::write_vocabulary_file(*vocab, qwen3, tmp.file("vocab.gguf")).ok());
  const auto made = kvc::test::cli(
      "mkmodel --arch qwen3 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --type q8_0 -q "
      "--vocab-from " +
          kvc::test::quoted(tmp.file("vocab.gguf")) + " -o " + kvc::test::quoted(tmp.file("qwen3.gguf")),
      tmp);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  std::string out;
  // --replay-answer streams a <think>...</think> answer: a model small enough for CI cannot reason.
  const std::string answer_file = std::string(KVC_ASSET_DIR) + "/scripts/reasoning-answer.md";
  // It looks at frames drawn while the answer streams ("thinking..."): as above, --stream-cpu 100.
  const int rc = run_script(tmp.file("qwen3.gguf"), tmp.file("data"), "reasoning.json", tmp.file("shots"), out, "",
                            " --stream-cpu 100 --replay-answer '" + answer_file + "'");
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
  CHECK(is_png(tmp.path() / "shots/reasoning-collapsed.png"));
  CHECK(is_png(tmp.path() / "shots/reasoning-expanded.png"));
  // The stored answers keep their reasoning whole; the first one, followed by a question, is in
  // the stream as Qwen 3's template shows it: its answer only.
  auto tok = kvc::tokenizer::Tokenizer::create(*vocab);
  REQUIRE(tok.ok());
  auto store = kvc::storage::ConversationStore::open_in(tmp.path() / "data");
  REQUIRE(store.ok());
  auto convs = (*store)->list_conversations(0, 10);
  REQUIRE(convs.ok());
  const std::string answer = kvc::test::read_file(answer_file);
  std::vector<kvc::storage::Message> chat;
  for (const auto& c : *convs) {
    auto p = (*store)->path_to(c.active_leaf);
    if (p.ok() && p->size() == 4) chat = std::move(*p);
  }
  REQUIRE(chat.size() == 4);
  CHECK(chat[1].text == answer);
  CHECK(chat[3].text == answer);
  const std::string visible = kvc::chat::split_reasoning(answer).answer;
  CHECK(chat[1].tokens == tok->encode_continuation(visible, true));
  CHECK(chat[3].tokens == tok->encode_continuation(answer, false));
}
