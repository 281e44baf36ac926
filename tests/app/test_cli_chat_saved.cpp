// kvchat-cli chat keeps its conversation in the data directory's kvchat.db as the app does: `export` finds it,
// `chat --resume ID` goes on with it as if it had never stopped, --no-save keeps a chat in memory, a data
// directory another kvchat holds is said so (the chat runs unsaved; a resume is refused), and a message too
// long for the context is refused before it is saved.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "storage/conversation_store.h"
#include "storage/data_dir_lock.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

std::string chat_cmd(const std::string& model, const std::string& extra = "") {
  return "chat -m " + test::quoted(model) + " -c 512 -t 1 -q -n 8 --temp 0 " + extra;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("cli chat: saved in the data directory, exported, and resumed exactly where it stopped", "[app][storage]") {
  test::TempDir tmp;
  const std::string model = test::model_path("stories260K.gguf");
  const auto first = test::cli(chat_cmd(model), tmp, "Once upon a time\nThe cat sat\n");
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK(first.err.find("saved in " + tmp.file("data") + "/kvchat.db") != std::string::npos);
  const auto list = test::cli("export", tmp);
  REQUIRE(list.exit_code == 0);
  REQUIRE(list.out == "1\tOnce upon a time\n");

  const auto resumed = test::cli(chat_cmd(model, "--resume 1"), tmp, "The dog ran\n");
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.err.find("conversation 1, \"Once upon a time\": 4 messages") != std::string::npos);
  // The same three turns in one run, in memory: the resumed third answer is the same answer,
  // and its prompt came from the cache-keyed stream the first run saved.
  const auto whole = test::cli(chat_cmd(model, "--no-save"), tmp, "Once upon a time\nThe cat sat\nThe dog ran\n");
  REQUIRE(whole.exit_code == 0);
  const auto whole_replies = lines_of(whole.out);
  REQUIRE(whole_replies.size() == 3);
  CHECK(lines_of(first.out) == std::vector<std::string>(whole_replies.begin(), whole_replies.begin() + 2));
  CHECK(lines_of(resumed.out) == std::vector<std::string>{whole_replies[2]});

  // One conversation of six messages, with their ids; --no-save added nothing.
  CHECK(test::cli("export", tmp).out == "1\tOnce upon a time\n");
  const auto js = test::cli("export 1 --format json", tmp);
  REQUIRE(js.exit_code == 0);
  const auto j = nlohmann::json::parse(js.out);
  INFO(js.out);
  const auto& messages = j.at("messages");
  REQUIRE(messages.size() == 6);
  const char* const user_texts[] = {"Once upon a time", "The cat sat", "The dog ran"};
  for (size_t i = 0; i < 3; ++i) {
    CHECK(messages[2 * i].at("role") == "user");
    CHECK(messages[2 * i].at("text") == user_texts[i]);
    CHECK(!messages[2 * i].at("tokens").empty());
    CHECK(messages[2 * i + 1].at("role") == "assistant");
    CHECK(messages[2 * i + 1].at("text") == whole_replies[i]);
    CHECK(!messages[2 * i + 1].at("tokens").empty());
  }
}

TEST_CASE("cli chat: a data directory another kvchat holds is said so: the chat runs unsaved, a resume is refused",
          "[app][storage]") {
  test::TempDir tmp;
  const std::string model = test::model_path("stories260K.gguf");
  std::filesystem::create_directories(tmp.path() / "data");
  auto held = storage::DataDirLock::acquire(tmp.path() / "data", "the kvchat app");
  REQUIRE(held.ok());
  const auto chat = test::cli(chat_cmd(model), tmp, "Once upon a time\n");
  INFO(chat.err);
  CHECK(chat.exit_code == 0);
  CHECK(lines_of(chat.out).size() == 1);
  CHECK_THAT(chat.err, Catch::Contains("the kvchat app") && Catch::Contains("this chat is not saved"));
  const auto resume = test::cli(chat_cmd(model, "--resume 1"), tmp, "more\n");
  CHECK(resume.exit_code == 2);
  CHECK_THAT(resume.err, Catch::Contains("another kvchat"));
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "data" / "kvchat.db"));
}

TEST_CASE("cli chat: a message too long for the context is refused before it is saved", "[app][storage]") {
  test::TempDir tmp;
  const std::string model = test::model_path("stories260K.gguf");
  std::string long_line;
  for (int i = 0; i < 60; ++i) long_line += "the cat sat on the mat ";
  const auto chat = test::cli("chat -m " + test::quoted(model) + " -c 128 -t 1 -q -n 8 --temp 0", tmp,
                              long_line + "\nOnce upon a time\n");
  INFO(chat.err);
  CHECK(chat.exit_code == 0);
  CHECK_THAT(chat.err,
             Catch::Matches("(.|\n)*this message takes (at least )?[0-9]+ tokens with the system prompt, more than the "
                            "context of 128 tokens(.|\n)*"));
  CHECK(lines_of(chat.out).size() == 1);  // one answer: to the short message
  auto store = storage::ConversationStore::open_read_only(tmp.path() / "data" / "kvchat.db");
  REQUIRE(store.ok());
  auto list = (*store)->list_conversations(0, 10);
  REQUIRE(list.ok());
  REQUIRE(list->size() == 1);
  CHECK(list->front().title == "Once upon a time");  // the long one started nothing
  auto path = (*store)->path_to(list->front().active_leaf);
  REQUIRE(path.ok());
  CHECK(path->size() == 2);
}
