// The app's DeepSeek-R1 path (ChatController on the real store, a model carrying the R1 template):
// a reply's stored tokens start with the generation prompt's "<think>\n", a regenerate appends it
// again after the unchanged user message, and the next turn shows the reply as the template does.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "app/common/chat_turn.h"
#include "app/gui/chat_controller.h"
#include "core/backend/backend.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "core/model/model_builder.h"
#include "storage/conversation_store.h"
#include "support/controller_support.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("app R1: replies carry the reasoning opening, a regenerate reuses it, the next turn shows the answer",
          "[app][e2e]") {
  test::TempDir tmp;
  const std::filesystem::path r1_model =
      test::model_with_template(tmp, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja");

  // The reply as an R1 distill writes it after its prompt: no opening tag.
  const std::string reply = "Two and two.\n</think>\n\n4.";
  app::ChatController::Options opt;
  opt.data_dir = tmp.file("data");
  opt.model_path = r1_model;
  opt.n_threads = 1;
  opt.n_ctx = 512;
  opt.replay_answer = reply;
  {
    app::ChatController c(opt);
    test::settle(c);
    c.send("What is 2 + 2?");
    test::settle(c);
    c.regenerate();
    test::settle(c);
    c.send("And 3 + 3?");
    test::settle(c);
  }

  auto be = backend::make_cpu_backend(1);
  auto m = model::Model::load(r1_model, *be);
  REQUIRE(m.ok());
  const tokenizer::Tokenizer& tok = (*m)->tokenizer();
  const chat::ChatTemplate& tmpl = (*m)->chat_template();
  REQUIRE(tmpl.runs_template());
  auto s0 = app::build_user_turn(tok, tmpl, "", {}, "What is 2 + 2?");
  REQUIRE(s0.ok());
  REQUIRE(s0->opening_text == "<think>\n");
  const std::vector<chat::ChatMessage> first = {{"user", "What is 2 + 2?"}, {"assistant", reply}};
  auto s1 = app::build_user_turn(tok, tmpl, "", first, "And 3 + 3?");
  REQUIRE(s1.ok());
  REQUIRE(s1->reply_tokens.has_value());

  auto store = storage::ConversationStore::open_in(tmp.path() / "data");
  REQUIRE(store.ok());
  auto list = (*store)->list_conversations(0, 10);
  REQUIRE(list.ok());
  REQUIRE(list->size() == 1);
  auto streams = (*store)->token_streams(list->front().id);
  REQUIRE(streams.ok());
  REQUIRE(streams->size() == 2);  // the first reply and its regenerated sibling
  const std::vector<int32_t> generated = tok.encode_continuation(reply, false);
  // The first reply's branch: user message (ending at "<｜Assistant｜>"), opening + reply.
  // The regenerated branch: the same user message, the reply shown as the template shows it,
  // the next turn, then its reply with the opening again.
  const std::vector<int32_t> kept = cat(cat(s0->tokens, s0->opening_tokens), generated);
  const std::vector<int32_t> visible =
      cat(cat(cat(cat(s0->tokens, *s1->reply_tokens), s1->tokens), s1->opening_tokens), generated);
  CHECK(((*streams)[0] == kept || (*streams)[1] == kept));
  CHECK(((*streams)[0] == visible || (*streams)[1] == visible));
  // What that stream is as text: the template's render of the visible history, then the reply.
  auto rendered = tmpl.render_prompt(std::vector<chat::ChatMessage>{first[0], first[1], {"user", "And 3 + 3?"}}, {});
  REQUIRE(rendered.ok());
  CHECK(s0->text + s1->reply_text + s1->text + s1->opening_text == *rendered);
}
