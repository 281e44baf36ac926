// Anthropic's Messages API mapped onto kvchat's chat requests and replies: a request's system, content blocks,
// tools, tool_choice and thinking to the ChatRequest /v1/chat/completions runs; a reply's text to thinking, text
// and tool_use blocks with their stop reason and usage; the streamed events in Anthropic's order; errors.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "app/server/anthropic_json.h"
#include "app/server/anthropic_request.h"

using namespace kvc;
using namespace kvc::server;
using nlohmann::json;

namespace {

const RequestLimits k_limits;

Parsed<MessagesRequest> parse(const json& body, MessagesBody kind = MessagesBody::create, bool effort = false) {
  return parse_messages_request(body.dump(), k_limits, kind, effort);
}

json base() {
  return json{{"model", "m"}, {"max_tokens", 64}, {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}};
}

// The error of a body that must be refused, checked to name `param`.
ApiError refused(const json& body, const std::string& param) {
  auto p = parse(body);
  INFO(body.dump() << " -> " << p.error.message);
  REQUIRE(!p.ok);
  CHECK(p.error.status == 400);
  CHECK(p.error.param == param);
  CHECK(p.error.message.find(param) != std::string::npos);
  return p.error;
}

engine::RequestResult result(std::string text, model::StopReason reason, int64_t n_out = 5, int64_t n_cached = 0) {
  engine::RequestResult r;
  r.state = engine::RequestState::finished;
  r.text = std::move(text);
  r.reason = reason;
  r.tokens.assign(static_cast<size_t>(n_out), 1);
  r.prefix.n_cached = n_cached;
  return r;
}

AnthropicReply reply(bool tools) {
  AnthropicReply a;
  a.ids = ResponseIds{"msg_0123", 0, "m"};
  a.n_prompt = 40;
  a.tools = tools;
  a.tool_format = tools ? chat::ToolFormat::hermes : chat::ToolFormat::none;
  a.stop_sequences = {"END"};
  return a;
}

// Server-sent events "event: T\ndata: J\n\n" as JSON objects, each checked to carry its own type.
std::vector<json> events(const std::string& sse) {
  std::vector<json> out;
  size_t at = 0;
  while (at < sse.size()) {
    const size_t end = sse.find("\n\n", at);
    REQUIRE(end != std::string::npos);
    const std::string e = sse.substr(at, end - at);
    REQUIRE(e.starts_with("event: "));
    const size_t nl = e.find('\n');
    REQUIRE(e.substr(nl + 1, 6) == "data: ");
    json j = json::parse(e.substr(nl + 7));
    CHECK(j["type"] == e.substr(7, nl - 7));
    out.push_back(std::move(j));
    at = end + 2;
  }
  return out;
}

}  // namespace

TEST_CASE("anthropic: a request's system, content blocks, tool use and results map to chat messages", "[server]") {
  json body = base();
  body["system"] = json::array({{{"type", "text"}, {"text", "Be brief."}}, {{"type", "text"}, {"text", "Be kind."}}});
  body["messages"] = json::array(
      {{{"role", "user"},
        {"content", json::array({{{"type", "text"}, {"text", "Weather"}}, {{"type", "text"}, {"text", "in Paris?"}}})}},
       {{"role", "assistant"},
        {"content",
         json::array(
             {{{"type", "thinking"}, {"thinking", "look it up"}, {"signature", "x"}},
              {{"type", "text"}, {"text", "Let me look."}},
              {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}}})}},
       {{"role", "user"},
        {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "18 C"}},
                                 {{"type", "text"}, {"text", "And tomorrow?"}}})}}});
  body["tools"] =
      json::array({{{"name", "get_weather"},
                    {"description", "Weather of a city"},
                    {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}});
  body["stop_sequences"] = json::array({"END", ""});
  body["temperature"] = 0.5;
  body["top_k"] = 7;
  body["metadata"] = {{"user_id", "u"}};
  auto p = parse(body);
  REQUIRE(p.ok);
  const ChatRequest& cr = p.value.chat;
  REQUIRE(cr.messages.size() == 5);
  CHECK(cr.messages[0].role == "system");
  CHECK(cr.messages[0].content == "Be brief.\nBe kind.");
  CHECK(cr.messages[1].role == "user");
  CHECK(cr.messages[1].content == "Weather\nin Paris?");
  CHECK(cr.messages[2].role == "assistant");
  CHECK(cr.messages[2].content == "Let me look.");
  CHECK(cr.messages[2].reasoning_content == "look it up");
  REQUIRE(cr.messages[2].tool_calls.size() == 1);
  CHECK(cr.messages[2].tool_calls[0].id == "toolu_1");
  CHECK(cr.messages[2].tool_calls[0].name == "get_weather");
  CHECK(json::parse(cr.messages[2].tool_calls[0].arguments) == json{{"city", "Paris"}});
  CHECK(cr.messages[3].role == "tool");  // results first, then the user's text: one turn
  CHECK(cr.messages[3].tool_call_id == "toolu_1");
  CHECK(cr.messages[3].content == "18 C");
  CHECK(cr.messages[4].role == "user");
  CHECK(cr.messages[4].content == "And tomorrow?");
  const json tools = json::parse(cr.tools_json);
  CHECK(tools[0]["type"] == "function");
  CHECK(tools[0]["function"]["name"] == "get_weather");
  CHECK(tools[0]["function"]["parameters"]["properties"]["city"]["type"] == "string");
  CHECK(cr.tool_choice == ToolChoice::automatic);
  CHECK(cr.params.max_tokens == 64);
  CHECK(cr.params.stop == std::vector<std::string>{"END"});
  CHECK(cr.params.sampling.temperature == 0.5F);
  CHECK(cr.params.sampling.top_k == 7);
  CHECK(!cr.params.stream);
  CHECK(!p.value.thinking);
}

TEST_CASE("anthropic: tool_choice and thinking map to the chat request's", "[server]") {
  json body = base();
  body["tools"] = json::array({{{"name", "f"}, {"input_schema", {{"type", "object"}}}},
                               {{"name", "g"}, {"input_schema", {{"type", "object"}}}}});
  body["tool_choice"] = {{"type", "any"}};
  CHECK(parse(body).value.chat.tool_choice == ToolChoice::required);
  body["tool_choice"] = {{"type", "tool"}, {"name", "g"}, {"disable_parallel_tool_use", true}};
  auto named = parse(body);
  REQUIRE(named.ok);
  CHECK(named.value.chat.tool_choice == ToolChoice::named);
  CHECK(named.value.chat.tool_choice_name == "g");
  CHECK(!named.value.chat.parallel_tool_calls);
  body["tool_choice"] = {{"type", "none"}};
  CHECK(parse(body).value.chat.tool_choice == ToolChoice::none);
  body["tool_choice"] = {{"type", "auto"}};
  CHECK(parse(body).value.chat.tool_choice == ToolChoice::automatic);

  json t = base();
  t["max_tokens"] = 3000;
  t["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2048}};
  auto plain = parse(t);
  REQUIRE(plain.ok);
  CHECK(plain.value.thinking);
  CHECK(!plain.value.chat.reasoning_effort);  // the template reads no effort
  auto effort = parse(t, MessagesBody::create, /*effort=*/true);
  REQUIRE(effort.ok);
  CHECK(effort.value.chat.reasoning_effort == "low");
  t["thinking"]["budget_tokens"] = 512;
  refused(t, "thinking.budget_tokens");
  t["thinking"]["budget_tokens"] = 3000;
  refused(t, "thinking.budget_tokens");  // not below max_tokens
}

TEST_CASE("anthropic: bad requests are refused with a 400 that names the field", "[server]") {
  json b = base();
  b.erase("max_tokens");
  refused(b, "max_tokens");
  CHECK(parse(b, MessagesBody::count_tokens).ok);  // count_tokens needs none
  b = base();
  b["messages"][0]["content"] = json::array(
      {{{"type", "text"}, {"text", "What is this?"}}, {{"type", "image"}, {"source", {{"type", "base64"}}}}});
  const ApiError image = refused(b, "messages.0.content.1.type");
  CHECK(image.message.find("image") != std::string::npos);
  b = base();
  b["temperature"] = 1.5;  // Anthropic's range is [0, 1]
  refused(b, "temperature");
  b = base();
  b["messages"][0]["role"] = "system";
  refused(b, "messages.0.role");
  b = base();
  b["messages"].push_back({{"role", "assistant"}, {"content", "Sure"}});
  refused(b, "messages.1.role");  // a prefilled answer is not continued
  b = base();
  b["tools"] = json::array({{{"name", "f"}}});
  refused(b, "tools.0.input_schema");
  b["tools"] = json::array({{{"type", "web_search_20250305"}, {"name", "web_search"}}});
  refused(b, "tools.0.type");
  b["tools"] = json::array({{{"name", "f"}, {"input_schema", {{"type", "object"}}}}});
  b["tool_choice"] = {{"type", "tool"}, {"name", "nope"}};
  refused(b, "tool_choice.name");
  b = base();
  b["stop_sequences"] = "END";
  refused(b, "stop_sequences");
  b = base();
  b.erase("model");
  refused(b, "model");

  const json e = anthropic_error(bad_request("max_tokens: Field required", "max_tokens"));
  CHECK(e == json{{"type", "error"},
                  {"error", {{"type", "invalid_request_error"}, {"message", "max_tokens: Field required"}}}});
  CHECK(anthropic_error(ApiError{401, "no key", "", "", ""})["error"]["type"] == "authentication_error");
  CHECK(anthropic_error(ApiError{404, "no model", "", "", ""})["error"]["type"] == "not_found_error");
  CHECK(anthropic_error(ApiError{429, "busy", "", "", ""})["error"]["type"] == "rate_limit_error");
  CHECK(anthropic_error(ApiError{503, "stopping", "", "", ""})["error"]["type"] == "overloaded_error");
}

TEST_CASE("anthropic: a reply becomes thinking, text and tool_use blocks with stop reason and usage", "[server]") {
  const std::string text =
      "<think>\nweather tool\n</think>\n\nLet me look.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>";
  const json m = anthropic_message(reply(true), result(text, model::StopReason::end_of_generation, 30, 12), "");
  CHECK(m["id"] == "msg_0123");
  CHECK(m["type"] == "message");
  CHECK(m["role"] == "assistant");
  CHECK(m["model"] == "m");
  REQUIRE(m["content"].size() == 3);
  CHECK(m["content"][0] == json{{"type", "thinking"}, {"thinking", "weather tool"}, {"signature", ""}});
  CHECK(m["content"][1] == json{{"type", "text"}, {"text", "Let me look."}});
  CHECK(m["content"][2]["type"] == "tool_use");
  CHECK(m["content"][2]["id"].get<std::string>().starts_with("toolu_"));
  CHECK(m["content"][2]["name"] == "get_weather");
  CHECK(m["content"][2]["input"] == json{{"city", "Paris"}});
  CHECK(m["stop_reason"] == "tool_use");
  CHECK(m["stop_sequence"].is_null());
  CHECK(m["usage"] == json{{"input_tokens", 28},
                           {"cache_creation_input_tokens", 0},
                           {"cache_read_input_tokens", 12},
                           {"output_tokens", 30}});

  const json plain = anthropic_message(reply(false), result("Hello", model::StopReason::end_of_generation), "");
  CHECK(plain["content"] == json::array({{{"type", "text"}, {"text", "Hello"}}}));
  CHECK(plain["stop_reason"] == "end_turn");
  CHECK(anthropic_message(reply(false), result("Hel", model::StopReason::max_tokens), "")["stop_reason"] ==
        "max_tokens");
  const json stopped =
      anthropic_message(reply(false), result("one two ", model::StopReason::stop_string), "one two END");
  CHECK(stopped["stop_reason"] == "stop_sequence");
  CHECK(stopped["stop_sequence"] == "END");
  CHECK(stopped["content"][0]["text"] == "one two ");
  // The template's own stop string (<|im_end|>) ends the turn.
  const json own = anthropic_message(reply(false), result("one", model::StopReason::stop_string), "one<|im_end|>");
  CHECK(own["stop_reason"] == "end_turn");
  CHECK(own["stop_sequence"].is_null());
}

TEST_CASE("anthropic: a streamed reply is Anthropic's events in order, adding up to the whole message", "[server]") {
  const std::string text =
      "<think>\nweather tool\n</think>\n\nLet me look.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>";
  const engine::RequestResult r = result(text, model::StopReason::end_of_generation, 30, 12);
  AnthropicStream s(reply(true));
  std::string sse = s.start();
  for (const char c : text) sse += s.feed(std::string(1, c));  // a byte at a time: every prefix
  sse += s.finish(r, "");
  const std::vector<json> ev = events(sse);

  std::vector<std::string> order;
  for (const json& e : ev) {
    const std::string t = e["type"];
    if (t == "content_block_delta" && !order.empty() && order.back() == "content_block_delta") continue;
    order.push_back(t);
  }
  const std::vector<std::string> expected = {"message_start",       "ping",  // the message opens
                                             "content_block_start", "content_block_delta",
                                             "content_block_stop",  // thinking
                                             "content_block_start", "content_block_delta",
                                             "content_block_stop",  // text
                                             "content_block_start", "content_block_delta",
                                             "content_block_stop",  // tool_use
                                             "message_delta",       "message_stop"};
  CHECK(order == expected);

  CHECK(ev[0]["message"]["id"] == "msg_0123");
  CHECK(ev[0]["message"]["content"] == json::array());
  // The blocks' deltas, put together as a client does, are the whole message's blocks.
  const json whole = anthropic_message(reply(true), r, "");
  json built = json::array();
  std::vector<std::string> partial_json;
  for (const json& e : ev) {
    if (e["type"] == "content_block_start") {
      CHECK(e["index"] == built.size());
      built.push_back(e["content_block"]);
      partial_json.emplace_back();
    } else if (e["type"] == "content_block_delta") {
      const json& d = e["delta"];
      json& b = built[e["index"].get<size_t>()];
      if (d["type"] == "thinking_delta")
        b["thinking"] = b["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      if (d["type"] == "text_delta") b["text"] = b["text"].get<std::string>() + d["text"].get<std::string>();
      if (d["type"] == "input_json_delta")
        partial_json[e["index"].get<size_t>()] += d["partial_json"].get<std::string>();
    } else if (e["type"] == "content_block_stop") {
      const auto i = e["index"].get<size_t>();
      if (built[i]["type"] == "tool_use") built[i]["input"] = json::parse(partial_json[i]);
    }
  }
  CHECK(built == whole["content"]);
  const json& delta = ev[ev.size() - 2];
  CHECK(delta["delta"]["stop_reason"] == "tool_use");
  CHECK(delta["usage"]["cache_read_input_tokens"] == 12);
  CHECK(delta["usage"]["output_tokens"] == 30);
}

TEST_CASE("anthropic: a reply after a prompt that opened <think> (DeepSeek-R1) streams its reasoning as thinking",
          "[server]") {
  AnthropicReply a = reply(false);
  a.opened_thinking = true;
  const std::string text = "add them\n</think>\n\n4.";
  AnthropicStream s(a);
  std::string sse = s.start();
  for (const char c : text) sse += s.feed(std::string(1, c));
  sse += s.finish(result(text, model::StopReason::end_of_generation), "");
  std::string thinking, answer;
  for (const json& e : events(sse)) {
    if (e["type"] != "content_block_delta") continue;
    if (e["delta"]["type"] == "thinking_delta") thinking += e["delta"]["thinking"].get<std::string>();
    if (e["delta"]["type"] == "text_delta") answer += e["delta"]["text"].get<std::string>();
  }
  CHECK(thinking == "add them");
  CHECK(answer == "4.");
  const json whole = anthropic_message(a, result(text, model::StopReason::end_of_generation), "");
  CHECK(whole["content"] == json::array({{{"type", "thinking"}, {"thinking", "add them"}, {"signature", ""}},
                                         {{"type", "text"}, {"text", "4."}}}));
}

TEST_CASE("anthropic: a plain streamed reply holds back a possible <think> and ends with its stop reason", "[server]") {
  AnthropicStream s(reply(false));
  (void)s.start();
  CHECK(s.feed("<th").empty());  // may still open a thinking block
  std::string sse = s.feed("e answer");
  sse += s.finish(result("<the answer", model::StopReason::max_tokens), "");
  const std::vector<json> ev = events(sse);
  INFO(json(ev).dump());
  REQUIRE(ev.size() == 5);
  CHECK(ev[0]["content_block"] == json{{"type", "text"}, {"text", ""}});
  CHECK(ev[1]["delta"] == json{{"type", "text_delta"}, {"text", "<the answer"}});
  CHECK(ev[2]["type"] == "content_block_stop");
  CHECK(ev[3]["delta"]["stop_reason"] == "max_tokens");
  CHECK(ev[4]["type"] == "message_stop");
}
