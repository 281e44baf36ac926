// kvchat-cli render-chat: the exact prompt text of a messages file, from a template file or a model's own template.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "support/test_support.h"

using kvc::test::cli;
using kvc::test::quoted;
namespace test = kvc::test;

namespace {

nlohmann::ordered_json expected(const std::string& name) {
  return nlohmann::ordered_json::parse(test::read_file(test::data_dir() / "templates" / (name + ".expected.json")));
}

std::string write(const test::TempDir& tmp, const std::string& file, const std::string& text) {
  std::ofstream(tmp.file(file), std::ios::binary) << text;
  return tmp.file(file);
}

// "01 Dec 2026" -> "2026-12-01", for --date.
std::string iso_date(const std::string& date_string) {
  std::tm tm{};
  REQUIRE(strptime(date_string.c_str(), "%d %b %Y", &tm) != nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

}  // namespace

TEST_CASE("cli: render-chat prints llama.cpp's prompt for a template file, byte for byte", "[app][e2e]") {
  test::TempDir tmp;
  for (const std::string name : {"meta-llama-Llama-3.2-3B-Instruct", "microsoft-Phi-3.5-mini-instruct",
                                 "Qwen-Qwen3-0.6B", "openai-gpt-oss-120b"}) {
    const auto doc = expected(name);
    std::string common =
        "render-chat --template " + quoted((test::data_dir() / "templates" / (name + ".jinja")).string()) + " --bos " +
        quoted(doc["bos_token"].get<std::string>()) + " --eos " + quoted(doc["eos_token"].get<std::string>()) +
        " --date " + iso_date(doc["date_string"].get<std::string>());
    if (doc["bos_stripped"].get<bool>()) common += " --add-bos";
    for (const auto& c : doc["cases"]) {
      INFO(name << ": " << c["name"].get<std::string>());
      // gpt-oss's tool cases as a request body: its tools and chat_template_kwargs (reasoning_effort).
      nlohmann::ordered_json body = c["messages"];
      if (c.contains("tools") || c.contains("chat_template_kwargs")) {
        body = nlohmann::ordered_json{{"messages", c["messages"]}};
        for (const char* key : {"tools", "chat_template_kwargs"}) {
          if (c.contains(key)) body[key] = c[key];
        }
      }
      const std::string messages = write(tmp, "m.json", body.dump());
      std::string args = common + " --messages " + quoted(messages);
      if (!c["add_generation_prompt"].get<bool>()) args += " --no-generation-prompt";
      const auto r = cli(args, tmp);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      CHECK(r.out == c["prompt"].get<std::string>());
      CHECK_THAT(r.err, Catch::Contains("the model's template"));
    }
  }
}

TEST_CASE("cli: render-chat uses a model's own template and BOS, and an OpenAI request body", "[app][e2e]") {
  test::TempDir tmp;
  // Phi-3's vocabulary carries its chat template; its tokenizer adds BOS, so "<s>" is not in the text.
  // That template drops system messages, so the system prompt is folded into the user's (as llama.cpp does).
  const std::string messages = write(tmp, "req.json", R"({"model": "x", "messages": [
      {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})");
  const auto r = cli(
      "render-chat -m " + quoted(test::model_path("ggml-vocab-phi-3.gguf")) + " --messages " + quoted(messages), tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("chat template: phi-3, the model's template"));
  CHECK(r.out == "<|user|>\nBe brief.\nHi<|end|>\n<|assistant|>\n");
  // inspect says which renderer a model gets.
  const auto info = cli("inspect " + quoted(test::model_path("ggml-vocab-phi-3.gguf")), tmp);
  CHECK_THAT(info.out, Catch::Contains("chat template: phi-3, the model's template"));
}

TEST_CASE("cli: render-chat reports bad messages and templates clearly", "[app][e2e]") {
  test::TempDir tmp;
  const std::string tmpl = (test::data_dir() / "templates" / "google-gemma-2-2b-it.jinja").string();
  const auto run = [&](const std::string& messages_json, const std::string& template_file) {
    return cli("render-chat --template " + quoted(template_file) + " --messages " +
                   quoted(write(tmp, "m.json", messages_json)),
               tmp);
  };
  auto bad_json = run("[{\"role\": ", tmpl);
  CHECK(bad_json.exit_code == 2);
  CHECK_THAT(bad_json.err, Catch::Contains("not valid JSON"));
  auto no_role = run("[{\"content\": \"x\"}]", tmpl);
  CHECK(no_role.exit_code == 2);
  CHECK_THAT(no_role.err, Catch::Contains("messages[0] needs a \"role\""));
  auto parts = run("[{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]", tmpl);
  CHECK(parts.exit_code == 2);
  CHECK_THAT(parts.err, Catch::Contains("messages[0].content must be a string"));
  auto calls = run("[{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"1\"}]}]", tmpl);
  CHECK(calls.exit_code == 2);
  CHECK_THAT(calls.err, Catch::Contains("messages[0].tool_calls[0] needs a \"function\" with a \"name\" string"));
  auto effort = run("{\"messages\": [{\"role\": \"user\", \"content\": \"U\"}], \"reasoning_effort\": \"max\"}", tmpl);
  CHECK(effort.exit_code == 2);
  CHECK_THAT(effort.err, Catch::Contains("reasoning effort \"max\": expected low, medium or high"));
  // The template's own check: Gemma's roles must alternate.
  auto rejected = run("[{\"role\": \"assistant\", \"content\": \"A\"}]", tmpl);
  CHECK(rejected.exit_code == 2);
  CHECK_THAT(rejected.err, Catch::Contains("Conversation roles must alternate"));
  // A template that cannot run is an error naming its line, not a silent stand-in.
  auto broken =
      run("[{\"role\": \"user\", \"content\": \"U\"}]", write(tmp, "bad.jinja", "x\n{% for m in messages %}"));
  CHECK(broken.exit_code == 3);
  CHECK_THAT(broken.err, Catch::Contains("line 2: '{% for %}' opened here is never closed"));
  auto missing = cli("render-chat --template " + quoted(tmpl) + " --messages /nonexistent.json", tmp);
  CHECK(missing.exit_code == 3);
  CHECK_THAT(missing.err, Catch::Contains("/nonexistent.json"));
  auto neither = cli("render-chat --messages " + quoted(write(tmp, "m.json", "[]")), tmp);
  CHECK(neither.exit_code != 0);
  CHECK_THAT(neither.err + neither.out, Catch::Contains("-m MODEL or --template FILE.jinja"));
}
