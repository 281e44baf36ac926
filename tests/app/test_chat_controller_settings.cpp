// The Chat settings and DATA_DIR/settings.json through the app's controller, on the real store:
// settings set with no conversation open start the next one, settings the engine would refuse are
// refused where they are set, and a settings file value that is not used is reported, not dropped.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <thread>

#include "app/gui/chat_controller.h"
#include "core/sampling/generate_options.h"
#include "storage/conversation_store.h"
#include "support/controller_support.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

app::ChatController::Options options(const test::TempDir& tmp) {
  app::ChatController::Options opt;
  opt.data_dir = tmp.file("data");
  opt.model_path = test::model_path("stories260K.gguf");
  opt.n_threads = 1;
  opt.n_ctx = 256;
  opt.replay_answer = "Once upon a time.";
  return opt;
}

}  // namespace

TEST_CASE("chat settings: set with no conversation open they start the next one, and refused ones are reported",
          "[app]") {
  test::TempDir tmp;
  int64_t conversation = 0;
  {
    app::ChatController c(options(tmp));
    test::settle(c);
    c.delete_conversation(c.snapshot()->chat.conversation_id);  // the welcome conversation: none is open now
    test::settle(c);
    REQUIRE(c.snapshot()->chat.conversation_id == 0);

    sampling::GenerateOptions g;
    g.max_tokens = 7;
    g.sampling.temperature = 0.3f;
    g.sampling.seed = 11;
    c.update_settings("Be brief.", g);
    test::settle(c);
    c.send("hello");
    test::settle(c);
    auto s = c.snapshot();
    INFO(s->error);
    REQUIRE(s->error.empty());
    conversation = s->chat.conversation_id;
    REQUIRE(conversation != 0);
    CHECK(s->chat.generation == g);
    CHECK(s->chat.system_prompt == "Be brief.");

    sampling::GenerateOptions bad = g;
    bad.sampling.top_p = 1.5f;
    c.update_settings("Be brief.", bad);
    test::settle(c);
    CHECK_THAT(c.snapshot()->error, Catch::Contains("--top-p must be in (0, 1], got 1.5"));
    CHECK(c.snapshot()->chat.generation == g);  // unchanged
  }
  auto store = storage::ConversationStore::open_in(tmp.path() / "data");
  REQUIRE(store.ok());
  auto c = (*store)->conversation(conversation);
  REQUIRE(c.ok());
  CHECK(c->settings.system_prompt == "Be brief.");
  CHECK(c->settings.generation.max_tokens == 7);
  CHECK(c->settings.generation.sampling.temperature == 0.3f);
  CHECK(c->settings.generation.sampling.seed == 11);
  CHECK(c->settings.generation.sampling.top_p == sampling::SamplingParams{}.top_p);
}

TEST_CASE("app settings: a settings.json value the app cannot use is reported at start", "[app]") {
  test::TempDir tmp;
  std::filesystem::create_directories(tmp.path() / "data");
  {
    std::ofstream(tmp.path() / "data" / "settings.json")
        << "{\"tier_budgets\": {\"t1_bytes\": \"lots\"}, \"serve_port\": 8090}";
  }
  app::ChatController c(options(tmp));
  test::settle(c);
  auto s = c.snapshot();
  CHECK_THAT(s->error, Catch::Contains("tier_budgets.t1_bytes must be a byte count (0: the default), got \"lots\""));
  CHECK(s->engine.budgets.t1_bytes == 0);
}
