// The real kvchat app under Xvfb with gpt-oss's template: Chat settings show a reasoning effort for a model whose
// template reads one and not for others, and a harmony reply's analysis shows as collapsed reasoning.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/gui_support.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using nlohmann::json;

namespace {

json step_assert(const std::string& state, const std::string& op, json value) {
  return json{{"do", "assert"}, {"state", state}, {"op", op}, {"value", std::move(value)}};
}

// The app on `model` with `steps`, under Xvfb; its output.
std::string run_app(const kvc::test::TempDir& tmp, const std::string& model, const std::string& name, json steps,
                    const std::string& extra = "") {
  steps.push_back(json{{"do", "quit"}});
  const std::string script = tmp.file(name + ".json");
  std::ofstream(script) << json{{"steps", steps}}.dump(1);
  std::string cmd = kvc::test::gui_command(300);
  for (const std::string& piece :
       {std::string(" -m '"), model, std::string("' -t 2 --data-dir '"), tmp.file(name + "-data"),
        std::string("' --script '"), script, std::string("'"), extra}) {
    cmd.append(piece);
  }
  std::string out;
  const int rc = kvc::test::run_command(cmd, out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
  return out;
}

json open_settings() {
  return json::array({json{{"do", "click"}, {"widget", "chat.settings"}}, json{{"do", "frames"}, {"n", 3}}});
}

}  // namespace

TEST_CASE("kvchat GUI: Chat settings show a reasoning effort for gpt-oss's template only", "[ui][e2e]") {
  if (auto why = kvc::test::gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  const std::string gpt_oss = kvc::test::model_with_template(tmp, "openai-gpt-oss-120b.jinja").string();

  json steps = json::array(
      {json{{"do", "wait_model"}, {"timeout_s", 120}}, json{{"do", "wait_idle"}, {"timeout_s", 30}},
       step_assert("model_uses_reasoning_effort", "==", 1), step_assert("reasoning_effort", "==", "medium")});
  for (auto& s : open_settings()) steps.push_back(s);
  steps.push_back(step_assert("reasoning_effort_control", "==", "medium"));
  steps.push_back(json{{"do", "key"}, {"key", "escape"}});
  steps.push_back(
      json{{"do", "command"}, {"name", "set_chat_settings"}, {"max_tokens", 4}, {"reasoning_effort", "high"}});
  steps.push_back(json{{"do", "wait_idle"}, {"timeout_s", 30}});
  steps.push_back(step_assert("reasoning_effort", "==", "high"));
  // A new conversation keeps it, and a turn runs with it.
  steps.push_back(json{{"do", "key"}, {"key", "ctrl+n"}});
  steps.push_back(json{{"do", "wait_idle"}, {"timeout_s", 30}});
  steps.push_back(json{{"do", "type"}, {"widget", "chat.input"}, {"text", "Hi"}});
  steps.push_back(json{{"do", "click"}, {"widget", "chat.send"}});
  steps.push_back(json{{"do", "wait_idle"}, {"timeout_s", 120}});
  steps.push_back(step_assert("error", "==", ""));
  steps.push_back(step_assert("reasoning_effort", "==", "high"));
  for (auto& s : open_settings()) steps.push_back(s);
  steps.push_back(step_assert("reasoning_effort_control", "==", "high"));
  run_app(tmp, gpt_oss, "gpt-oss", steps);
  // The conversation keeps its effort: the app started again on the same data directory reopens
  // it with "high" (the app's default is "medium").
  json reopened =
      json::array({json{{"do", "wait_model"}, {"timeout_s", 120}}, json{{"do", "wait_idle"}, {"timeout_s", 30}},
                   step_assert("reasoning_effort", "==", "high")});
  for (auto& s : open_settings()) reopened.push_back(s);
  reopened.push_back(step_assert("reasoning_effort_control", "==", "high"));
  run_app(tmp, gpt_oss, "gpt-oss", reopened);

  // A model whose template has no reasoning effort: no control.
  json other =
      json::array({json{{"do", "wait_model"}, {"timeout_s", 120}}, json{{"do", "wait_idle"}, {"timeout_s", 30}},
                   step_assert("model_uses_reasoning_effort", "==", 0)});
  for (auto& s : open_settings()) other.push_back(s);
  other.push_back(step_assert("reasoning_effort_control", "==", "hidden"));
  run_app(tmp, kvc::test::model_path("stories260K.gguf"), "stories", other);
}

TEST_CASE("kvchat GUI: a gpt-oss reply's analysis channel shows as collapsed reasoning, and the next turn runs",
          "[ui][e2e]") {
  if (auto why = kvc::test::gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  const std::string gpt_oss = kvc::test::model_with_template(tmp, "openai-gpt-oss-120b.jinja").string();
  // Every turn streams this reply, as gpt-oss's tokens decode (a random model writes no channels).
  const std::string analysis = "The user greets me. Answer briefly.";
  std::ofstream(tmp.file("reply.txt")) << "<|channel|>analysis<|message|>" << analysis
                                       << "<|end|><|start|>assistant<|channel|>final<|message|>Hello, **friend**.";
  json steps = json::array(
      {json{{"do", "wait_model"}, {"timeout_s", 120}}, json{{"do", "wait_idle"}, {"timeout_s", 30}},
       json{{"do", "type"}, {"widget", "chat.input"}, {"text", "Hi"}}, json{{"do", "click"}, {"widget", "chat.send"}},
       json{{"do", "wait_idle"}, {"timeout_s", 120}}, json{{"do", "frames"}, {"n", 3}}, step_assert("error", "==", ""),
       step_assert("reasoning_state", "==", "collapsed"),
       // The answer is the final channel's: its bold, and no channel text.
       step_assert("md_bold_spans", "==", 1), json{{"do", "click"}, {"widget", "chat.reasoning"}},
       json{{"do", "frames"}, {"n", 2}}, step_assert("reasoning_state", "==", "expanded"),
       step_assert("reasoning_shown_chars", "==", static_cast<double>(analysis.size())),
       // The next turn renders the reply through the template (which refuses channels in
       // content): it goes through, the analysis dropped.
       json{{"do", "type"}, {"widget", "chat.input"}, {"text", "Again"}},
       json{{"do", "click"}, {"widget", "chat.send"}}, json{{"do", "wait_idle"}, {"timeout_s", 120}},
       step_assert("error", "==", ""), step_assert("n_assistant_messages", "==", 2)});
  run_app(tmp, gpt_oss, "replay", steps, " --replay-answer '" + tmp.file("reply.txt") + "'");
}
