// ConversationMapper over an agent loop: tools rendered by the model's own template, assistant tool calls and tool
// results mapped to a stream that is the template's render and that each next request extends (the cache hits).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "app/server/conversation_mapper.h"
#include "core/backend/backend.h"
#include "core/model/model.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;
using chat::ChatMessage;
using chat::ToolCall;
using server::ConversationMapper;

namespace {

std::string tools_json() {
  return nlohmann::json::parse(test::read_file(test::data_dir() / "templates" / "conversations-tools.json"))["tools"]
      .dump();
}

ChatMessage calls(std::vector<ToolCall> c, std::string content = "") {
  ChatMessage m("assistant", std::move(content));
  m.tool_calls = std::move(c);
  return m;
}

ChatMessage result(std::string id, std::string text) {
  ChatMessage m("tool", std::move(text));
  m.tool_call_id = std::move(id);
  return m;
}

bool is_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// parallel: the template takes two calls in one message (Llama 3.1's raises on more than one);
// preamble: it shows an assistant's content beside its calls (Llama 3.1's drops it).
void check_agent_loop(const std::string& template_name, bool parallel, bool preamble) {
  test::TempDir tmp;
  const auto path = test::model_with_template(tmp, template_name);
  auto be = backend::make_cpu_backend(1);
  auto m = model::Model::load(path, *be);
  REQUIRE(m.ok());
  const tokenizer::Tokenizer& tok = (*m)->tokenizer();
  const chat::ChatTemplate& tmpl = (*m)->chat_template();
  REQUIRE(tmpl.runs_template());
  auto store = storage::AnswerStore::open("");
  REQUIRE(store.ok());
  const ConversationMapper mapper(**m, **store);
  const std::string tools = tools_json();

  // Three requests of one agent loop: a question; the call and its result; two parallel calls,
  // their two results, then the user's next question in the same turn.
  std::vector<ChatMessage> conv = {{"system", "You are a weather bot."}, {"user", "Weather in Paris?"}};
  std::vector<std::vector<ChatMessage>> turns;
  turns.push_back(conv);
  conv.push_back(calls({{"call_a", "get_weather", R"({"city":"Paris"})"}}));
  conv.push_back(result("call_a", "21 C, sunny"));
  turns.push_back(conv);
  conv.push_back({"assistant", "It is 21 C and sunny in Paris."});
  conv.push_back({"user", "And Lyon and Nice?"});
  if (parallel) {
    conv.push_back(
        calls({{"call_b", "get_weather", R"({"city":"Lyon"})"}, {"call_c", "get_weather", R"({"city":"Nice"})"}},
              preamble ? "Looking both up." : ""));
    conv.push_back(result("call_b", "18 C"));
    conv.push_back(result("call_c", "24 C"));
  } else {
    conv.push_back(calls({{"call_b", "get_weather", R"({"city":"Lyon"})"}}, preamble ? "Looking it up." : ""));
    conv.push_back(result("call_b", "18 C"));
  }
  turns.push_back(conv);

  chat::RenderOptions opt;
  opt.tools_json = tools;
  std::vector<int32_t> previous;
  for (const auto& t : turns) {
    INFO(template_name << ", turn of " << t.size() << " messages");
    auto p = mapper.map(t, std::nullopt, tools);
    REQUIRE(p.ok());
    // The prompt is the template's render of the whole conversation, tools included.
    auto rendered = tmpl.render_prompt(t, opt);
    REQUIRE(rendered.ok());
    CHECK_THAT(*rendered, Catch::Contains("The weather in a city now"));
    CHECK(tok.decode(p->tokens) == tok.decode(tok.encode(*rendered, tok.wants_bos(), true)));
    // Each request extends the one before: the engine's cache serves it up to the new reply.
    CHECK(is_prefix(previous, p->tokens));
    previous = p->tokens;
  }
}

}  // namespace

TEST_CASE("tool mapping: Qwen 2.5's agent loop renders byte-exact and each request extends the last", "[server]") {
  check_agent_loop("Qwen-Qwen2.5-7B-Instruct.jinja", true, true);
}

TEST_CASE("tool mapping: Llama 3.1's agent loop renders byte-exact and each request extends the last", "[server]") {
  check_agent_loop("meta-llama-Llama-3.1-8B-Instruct.jinja", false, false);
}

TEST_CASE("tool mapping: gpt-oss's agent loop renders byte-exact and each request extends the last", "[server]") {
  check_agent_loop("openai-gpt-oss-120b.jinja", true, false);
}

TEST_CASE("tool mapping: Qwen 3's and Llama 3.2's agent loops render byte-exact too", "[server]") {
  check_agent_loop("Qwen-Qwen3-0.6B.jinja", true, true);
  check_agent_loop("meta-llama-Llama-3.2-3B-Instruct.jinja", false, false);
}
