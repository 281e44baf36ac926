// The CLI and the app answer the same conversation with the same greedy replies: kvchat-cli chat
// (the real binary) against ChatController (its engine turn runner and its store), three turns,
// each side set up where a user sets it up (flags; the Chat settings).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "app/gui/chat_controller.h"
#include "core/sampling/generate_options.h"
#include "support/controller_support.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;

TEST_CASE("cli and app: the same conversation gets the same greedy replies, turn after turn", "[app][e2e]") {
  test::TempDir tmp;
  const std::filesystem::path model = test::model_with_template(tmp, "Qwen-Qwen2.5-7B-Instruct.jinja");
  const std::vector<std::string> turns = {"Hello there.", "Tell me a story about a cat.", "And one about a dog?"};
  constexpr int64_t k_reply_tokens = 24;

  std::vector<std::string> app_replies;
  {
    app::ChatController::Options opt;
    opt.data_dir = tmp.file("app-data");
    opt.model_path = model.string();
    opt.n_threads = 1;
    opt.n_ctx = 512;
    app::ChatController c(opt);
    test::settle(c);
    // The Chat settings of the conversation the app opens at start (its welcome conversation).
    sampling::GenerateOptions settings;
    settings.max_tokens = k_reply_tokens;
    settings.sampling.temperature = 0;
    c.update_settings("", settings);
    test::settle(c);
    REQUIRE(c.snapshot()->chat.generation.max_tokens == k_reply_tokens);
    for (const std::string& t : turns) {
      c.send(t);
      test::settle(c);
    }
    auto s = c.snapshot();
    INFO(s->error);
    REQUIRE(s->error.empty());
    for (const ui::MessageView& m : s->chat.messages) {
      if (m.role == ui::Role::assistant) app_replies.push_back(m.text);
    }
  }
  REQUIRE(app_replies.size() == turns.size());

  std::string input;
  for (const std::string& t : turns) input += t + "\n";
  const auto cli =
      test::cli("chat -m " + test::quoted(model.string()) + " -c 512 -t 1 -q -n " + std::to_string(k_reply_tokens) +
                    " --temp 0 --data-dir " + test::quoted(tmp.file("cli-data")),
                tmp, input);
  INFO(cli.err);
  REQUIRE(cli.exit_code == 0);
  std::string expected;  // kvchat-cli chat prints each reply and a newline
  size_t n_text = 0;
  for (const std::string& r : app_replies) {
    expected += r + "\n";
    n_text += r.size();
  }
  CHECK(n_text > 0);  // the model said something: the comparison is not of empty replies
  CHECK(cli.out == expected);
}
