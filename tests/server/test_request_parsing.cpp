// Request bodies of the server's generating routes: what is accepted, and the 400 for the rest.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <limits>

#include "app/server/request_parsing.h"

using namespace kvc::server;
using nlohmann::json;

namespace {

json chat(json extra = json::object()) {
  json j{{"model", "m"}, {"messages", json::array({json{{"role", "user"}, {"content", "Hi"}}})}};
  j.merge_patch(extra);
  return j;
}

ApiError chat_error(const json& body, const RequestLimits& limits = {}) {
  auto p = parse_chat_request(body.dump(), limits);
  INFO(body.dump());
  REQUIRE_FALSE(p.ok);
  CHECK(p.error.status == 400);
  return p.error;
}

}  // namespace

TEST_CASE("request parsing: a chat request's fields and defaults", "[server]") {
  auto p = parse_chat_request(chat().dump(), {});
  REQUIRE(p.ok);
  CHECK(p.value.model == "m");
  REQUIRE(p.value.messages.size() == 1);
  CHECK(p.value.params.max_tokens == -1);
  CHECK(p.value.params.sampling == kvc::sampling::SamplingParams{});  // the CLI's and the app's defaults
  CHECK_FALSE(p.value.params.stream);
  CHECK_FALSE(p.value.params.seeded);

  p = parse_chat_request(
      chat(json{{"messages", json::array({json{{"role", "developer"}, {"content", "Be brief."}},
                                          json{{"role", "user"},
                                               {"content", json::array({json{{"type", "text"}, {"text", "a"}},
                                                                        json{{"type", "text"}, {"text", "b"}}})}},
                                          json{{"role", "assistant"}, {"content", nullptr}},
                                          json{{"role", "user"}, {"content", "c"}}})},
                {"max_tokens", 7},
                {"max_completion_tokens", 9},
                {"temperature", 0},
                {"top_p", 0.5},
                {"top_k", 3},
                {"min_p", 0.1},
                {"seed", -5},
                {"stop", json::array({"END", ""})},
                {"stream", true},
                {"stream_options", {{"include_usage", true}}},
                {"presence_penalty", 1.5},
                {"frequency_penalty", -1},
                {"user", "ignored"},
                {"response_format", {{"type", "text"}}},
                {"logprobs", false},
                {"tools", json::array()}})
          .dump(),
      {});
  REQUIRE(p.ok);
  const ChatRequest& r = p.value;
  REQUIRE(r.messages.size() == 4);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[1].content == "a\nb");
  CHECK(r.messages[2].role == "assistant");
  CHECK(r.messages[2].content.empty());
  CHECK(r.params.max_tokens == 9);  // max_completion_tokens wins
  CHECK(r.params.sampling.temperature == 0.0f);
  CHECK(r.params.sampling.top_p == 0.5f);
  CHECK(r.params.sampling.top_k == 3);
  CHECK(r.params.sampling.min_p == Approx(0.1f));
  CHECK(r.params.seeded);
  CHECK(r.params.sampling.seed ==
        (int64_t{-5} & std::numeric_limits<int64_t>::max()));  // a given negative seed is still a fixed seed
  CHECK(r.params.stop == std::vector<std::string>{"END"});
  CHECK(r.params.stream);
  CHECK(r.params.include_usage);
  CHECK(r.params.presence_penalty == 1.5);
  CHECK(r.params.sampling.validate().ok());
}

TEST_CASE("request parsing: bad chat requests name the field at fault", "[server]") {
  CHECK(chat_error(json{{"messages", json::array()}}).param == "model");  // model is read first
  CHECK(chat_error(chat(json{{"model", nullptr}})).param == "model");
  CHECK(chat_error(chat(json{{"messages", json::array()}})).param == "messages");
  CHECK(chat_error(chat(json{{"messages", json::array({"hi"})}})).param == "messages[0]");
  CHECK(chat_error(chat(json{{"messages", json::array({json{{"role", "tool"}, {"content", "x"}}})}})).param ==
        "messages[0].tool_call_id");
  CHECK(chat_error(chat(json{{"messages", json::array({json{{"role", "function"}, {"content", "x"}}})}})).param ==
        "messages[0].role");
  CHECK(chat_error(chat(json{{"messages", json::array({json{{"role", "user"}}})}})).param == "messages[0].content");
  CHECK(chat_error(chat(json{{"temperature", 2.5}})).param == "temperature");
  CHECK(chat_error(chat(json{{"temperature", true}})).param == "temperature");
  CHECK(chat_error(chat(json{{"top_k", 1.5}})).param == "top_k");
  CHECK(chat_error(chat(json{{"seed", "7"}})).param == "seed");
  CHECK(chat_error(chat(json{{"presence_penalty", 3}})).param == "presence_penalty");
  CHECK(chat_error(chat(json{{"stop", json::array({"a", "b", "c", "d", "e"})}})).param == "stop");
  CHECK(chat_error(chat(json{{"stop", std::string(300, 's')}})).param == "stop");
  CHECK(chat_error(chat(json{{"stream_options", {{"include_usage", 1}}}})).param == "stream_options.include_usage");
  CHECK(chat_error(chat(json{{"logprobs", true}})).param == "logprobs");
  CHECK(chat_error(chat(json{{"response_format", {{"type", "xml"}}}})).param == "response_format");
  RequestLimits limits;
  limits.max_messages = 2;
  limits.max_tokens = 100;
  const json three =
      json::array({json{{"role", "user"}, {"content", "a"}}, json{{"role", "assistant"}, {"content", "b"}},
                   json{{"role", "user"}, {"content", "c"}}});
  CHECK(chat_error(chat(json{{"messages", three}}), limits).param == "messages");
  const ApiError e = chat_error(chat(json{{"max_tokens", 101}}), limits);
  CHECK(e.param == "max_tokens");
  CHECK_THAT(e.message, Catch::Contains("--max-tokens"));
}

TEST_CASE("request parsing: bodies that are not JSON objects, or nest too deep", "[server]") {
  for (const std::string body : {"", "{", "nul", "{\"a\":1,}", "[1]", "\"text\"", "{\"model\":\"m\"}garbage"}) {
    INFO(body);
    auto p = parse_chat_request(body, {});
    REQUIRE_FALSE(p.ok);
    CHECK(p.error.status == 400);
    CHECK(p.error.param.empty());
  }
  RequestLimits limits;
  limits.max_json_depth = 8;
  const std::string deep = std::string(9, '[') + std::string(9, ']');
  auto p = parse_chat_request("{\"model\": \"m\", \"x\": " + deep + "}", limits);
  REQUIRE_FALSE(p.ok);
  CHECK_THAT(p.error.message, Catch::Contains("deeper than 8"));
  CHECK(json_depth("{\"a\": \"[[[[\", \"b\": [{}]}", 100) == 3);  // brackets in strings do not count
  CHECK(json_depth("\"\\\"[\"", 100) == 0);
}

TEST_CASE("request parsing: completion prompts as text or token ids", "[server]") {
  auto p = parse_completion_request(R"({"model": "m", "prompt": "Once", "max_tokens": 5})", {});
  REQUIRE(p.ok);
  CHECK(p.value.prompt == "Once");
  CHECK_FALSE(p.value.prompt_is_ids);
  p = parse_completion_request(R"({"model": "m", "prompt": ["Once"]})", {});
  REQUIRE(p.ok);
  CHECK(p.value.prompt == "Once");
  p = parse_completion_request(R"({"model": "m", "prompt": [1, 2, 3]})", {});
  REQUIRE(p.ok);
  CHECK(p.value.prompt_is_ids);
  CHECK(p.value.prompt_ids == std::vector<int32_t>{1, 2, 3});
  p = parse_completion_request(R"({"model": "m", "prompt": [[4, 5]]})", {});
  REQUIRE(p.ok);
  CHECK(p.value.prompt_ids == std::vector<int32_t>{4, 5});
  for (const char* body :
       {R"({"model": "m"})", R"({"model": "m", "prompt": ["a", "b"]})", R"({"model": "m", "prompt": [-1]})",
        R"({"model": "m", "prompt": []})", R"({"model": "m", "prompt": 5})",
        R"({"model": "m", "prompt": "x", "echo": true})", R"({"model": "m", "prompt": "x", "best_of": 2})",
        R"({"model": "m", "prompt": "x", "suffix": "y"})"}) {
    INFO(body);
    auto bad = parse_completion_request(body, {});
    REQUIRE_FALSE(bad.ok);
    CHECK(bad.error.status == 400);
    CHECK_FALSE(bad.error.param.empty());
  }
}

TEST_CASE("request parsing: reasoning_effort is low, medium or high, at the top or in chat_template_kwargs",
          "[server]") {
  CHECK_FALSE(parse_chat_request(chat().dump(), {}).value.reasoning_effort.has_value());
  for (const char* e : {"low", "medium", "high"}) {
    auto p = parse_chat_request(chat({{"reasoning_effort", e}}).dump(), {});
    REQUIRE(p.ok);
    CHECK(p.value.reasoning_effort == std::optional<std::string>(e));
  }
  auto kw = parse_chat_request(chat({{"chat_template_kwargs", {{"reasoning_effort", "low"}}}}).dump(), {});
  REQUIRE(kw.ok);
  CHECK(kw.value.reasoning_effort == std::optional<std::string>("low"));
  // Other template variables are not ours to refuse; the top level wins over the kwargs.
  auto both = parse_chat_request(
      chat({{"reasoning_effort", "high"}, {"chat_template_kwargs", {{"reasoning_effort", "low"}, {"x", 1}}}}).dump(),
      {});
  REQUIRE(both.ok);
  CHECK(both.value.reasoning_effort == std::optional<std::string>("high"));

  auto bad = chat_error(chat({{"reasoning_effort", "extreme"}}));
  CHECK(bad.param == "reasoning_effort");
  CHECK(bad.message == "reasoning_effort must be one of low, medium, high, not \"extreme\"");
  auto number = chat_error(chat({{"reasoning_effort", 2}}));
  CHECK(number.message == "reasoning_effort must be one of low, medium, high, not number");
  auto in_kwargs = chat_error(chat({{"chat_template_kwargs", {{"reasoning_effort", "max"}}}}));
  CHECK(in_kwargs.param == "chat_template_kwargs.reasoning_effort");
  CHECK_THAT(in_kwargs.message, Catch::Contains("one of low, medium, high"));
  CHECK(chat_error(chat({{"chat_template_kwargs", "high"}})).param == "chat_template_kwargs");
}

namespace {

json weather_tool(const std::string& name = "get_weather") {
  return json{{"type", "function"},
              {"function",
               {{"name", name},
                {"description", "The weather now"},
                {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};
}

}  // namespace

TEST_CASE("request parsing: tools, tool_choice, assistant tool_calls and tool messages", "[server]") {
  const json messages = json::array(
      {json{{"role", "user"}, {"content", "Weather in Paris?"}},
       json{{"role", "assistant"},
            {"content", nullptr},
            {"tool_calls",
             json::array({json{{"id", "call_1"},
                               {"type", "function"},
                               {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}})}},
       json{{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "21 C"}}});
  auto p = parse_chat_request(chat(json{{"messages", messages},
                                        {"tools", json::array({weather_tool(), weather_tool("get_time")})},
                                        {"tool_choice", "auto"},
                                        {"parallel_tool_calls", false}})
                                  .dump(),
                              {});
  REQUIRE(p.ok);
  const ChatRequest& r = p.value;
  REQUIRE(r.messages.size() == 3);
  CHECK(r.messages[1].content.empty());
  REQUIRE(r.messages[1].tool_calls.size() == 1);
  CHECK(r.messages[1].tool_calls[0].id == "call_1");
  CHECK(r.messages[1].tool_calls[0].name == "get_weather");
  CHECK(r.messages[1].tool_calls[0].arguments == "{\"city\":\"Paris\"}");
  CHECK(r.messages[2].role == "tool");
  CHECK(r.messages[2].tool_call_id == "call_1");
  CHECK(r.messages[2].content == "21 C");
  CHECK(r.tool_names == std::vector<std::string>{"get_weather", "get_time"});
  CHECK(json::parse(r.tools_json)[0]["function"]["parameters"]["properties"].contains("city"));
  CHECK(r.tool_choice == ToolChoice::automatic);
  CHECK_FALSE(r.parallel_tool_calls);

  for (const auto& [choice, expected] :
       {std::pair{json("none"), ToolChoice::none}, std::pair{json("required"), ToolChoice::required},
        std::pair{json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}, ToolChoice::named}}) {
    auto q =
        parse_chat_request(chat(json{{"tools", json::array({weather_tool()})}, {"tool_choice", choice}}).dump(), {});
    REQUIRE(q.ok);
    CHECK(q.value.tool_choice == expected);
  }
  CHECK(parse_chat_request(chat(json{{"tools", json::array()}}).dump(), {}).value.tools_json.empty());
}

TEST_CASE("request parsing: bad tools and tool messages name the field at fault", "[server]") {
  const json tool = weather_tool();
  const std::vector<std::pair<json, std::string>> cases = {
      {json{{"tools", "get_weather"}}, "tools"},
      {json{{"tools", json::array({1})}}, "tools[0]"},
      {json{{"tools", json::array({json{{"type", "retrieval"}}})}}, "tools[0].type"},
      {json{{"tools", json::array({json{{"type", "function"}}})}}, "tools[0].function"},
      {json{{"tools", json::array({json{{"type", "function"}, {"function", {{"name", "get weather"}}}}})}},
       "tools[0].function.name"},
      {json{{"tools", json::array({tool, tool})}}, "tools[1].function.name"},
      {json{{"tools", json::array({json{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}})}},
       "tools[0].function.parameters"},
      {json{{"tools", json::array({tool})}, {"tool_choice", "sometimes"}}, "tool_choice"},
      {json{{"tools", json::array({tool})},
            {"tool_choice", json{{"type", "function"}, {"function", {{"name", "nope"}}}}}},
       "tool_choice.function.name"},
      {json{{"tool_choice", "required"}}, "tool_choice"},
      {json{{"tools", json::array({tool})}, {"parallel_tool_calls", "yes"}}, "parallel_tool_calls"},
      {json{{"functions", json::array({json::object()})}}, "functions"},
      {json{{"messages", json::array({json{{"role", "assistant"}, {"tool_calls", json::object()}},
                                      json{{"role", "user"}, {"content", "x"}}})}},
       "messages[0].tool_calls"},
      {json{{"messages",
             json::array({json{{"role", "assistant"},
                               {"tool_calls",
                                json::array({json{{"function", {{"name", "f"}, {"arguments", json::object()}}}}})}},
                          json{{"role", "user"}, {"content", "x"}}})}},
       "messages[0].tool_calls[0].function.arguments"},
      {json{{"messages", json::array({json{{"role", "tool"}, {"tool_call_id", 7}, {"content", "x"}}})}},
       "messages[0].tool_call_id"},
  };
  for (const auto& [patch, param] : cases) CHECK(chat_error(chat(patch)).param == param);
}
