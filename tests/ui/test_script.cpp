// Tests of script-mode parsing: valid scripts, and errors that name the step at fault.
#include <catch2/catch.hpp>

#include "ui/app_state.h"
#include "ui/script.h"
#include "ui/script_runner.h"

using namespace kvc::ui;

namespace {

std::string error_of(const std::string& json) {
  auto s = parse_script(json);
  REQUIRE_FALSE(s.ok());
  return s.error().message;
}

}  // namespace

TEST_CASE("parse_script reads every kind of step", "[ui]") {
  auto s = parse_script(R"({"steps": [
    {"do": "wait_model", "timeout_s": 5},
    {"do": "type", "widget": "chat.input", "text": "hi"},
    {"do": "click", "widget": "chat.send"},
    {"do": "key", "key": "ctrl+n"},
    {"do": "wait_idle"},
    {"do": "frames", "n": 3},
    {"do": "screenshot", "name": "chat", "window": "Chat"},
    {"do": "assert", "state": "n_messages", "op": ">=", "value": 2},
    {"do": "assert", "state": "chat_title", "op": "contains", "value": "cat"},
    {"do": "quit"},
    {"do": "wait_state", "state": "md_tables", "op": ">=", "value": 1, "timeout_s": 7},
    {"do": "print", "state": "last_tokens_per_s"},
    {"do": "sleep", "seconds": 1.5}]})");
  REQUIRE(s.ok());
  REQUIRE(s->steps.size() == 13);
  CHECK(s->steps[12].kind == StepKind::sleep);
  CHECK(s->steps[12].timeout_s == 1.5);
  CHECK(s->steps[11].kind == StepKind::print);
  CHECK(s->steps[11].state == "last_tokens_per_s");
  CHECK(s->steps[10].kind == StepKind::wait_state);
  CHECK(s->steps[10].state == "md_tables");
  CHECK(s->steps[10].timeout_s == 7);
  CHECK(s->steps[0].kind == StepKind::wait_model);
  CHECK(s->steps[0].timeout_s == 5);
  CHECK(s->steps[1].widget == "chat.input");
  CHECK(s->steps[1].text == "hi");
  CHECK(s->steps[3].text == "ctrl+n");
  CHECK(s->steps[5].n_frames == 3);
  CHECK(s->steps[6].window == "Chat");
  CHECK(s->steps[7].op == CompareOp::ge);
  CHECK(s->steps[7].value == 2);
  CHECK(s->steps[8].value_is_string);
  CHECK(s->steps[9].kind == StepKind::quit);
  CHECK(s->steps[9].index == 10);
}

TEST_CASE("script errors name the step", "[ui]") {
  CHECK(error_of("{") == "the script is not valid JSON");
  CHECK(error_of(R"({"stepz": []})").find("\"steps\" array") != std::string::npos);
  CHECK(error_of(R"({"steps": []})") == "the script has no steps");
  CHECK(error_of(R"({"steps": [{"do": "quit"}, {"do": "click"}]})") ==
        "step 2 (click): \"widget\" must be a non-empty string");
  CHECK(error_of(R"({"steps": [{"do": "dance"}]})").rfind("step 1 (dance): unknown step", 0) == 0);
  CHECK(error_of(R"({"steps": [{"widget": "x"}]})") == "step 1: missing \"do\" (what the step does)");
  CHECK(error_of(R"({"steps": [{"do": "frames", "n": 0}]})") ==
        "step 1 (frames): \"n\" must be an integer in [1, 100000]");
  CHECK(error_of(R"({"steps": [{"do": "wait_idle", "timeout_s": -1}]})") ==
        "step 1 (wait_idle): \"timeout_s\" must be a positive number");
  CHECK(error_of(R"({"steps": [{"do": "screenshot", "name": "../x"}]})").rfind("step 1 (screenshot)", 0) == 0);
  CHECK(error_of(R"({"steps": [{"do": "assert", "state": "n_messages", "op": "~", "value": 1}]})")
            .rfind("step 1 (assert): \"op\"", 0) == 0);
  CHECK(error_of(R"({"steps": [{"do": "assert", "state": "n_messages"}]})") == "step 1 (assert): missing \"value\"");
  CHECK(error_of(R"({"steps": [{"do": "wait_state", "state": "md_tables"}]})") ==
        "step 1 (wait_state): missing \"value\"");
  CHECK(error_of(R"({"steps": [{"do": "print"}]})") == "step 1 (print): \"state\" must be a non-empty string");
  CHECK(error_of(R"({"steps": [{"do": "key", "key": "f13"}]})").rfind("step 1 (key): unknown key", 0) == 0);
  CHECK(error_of(R"({"steps": [{"do": "command", "name": "set_kv_format", "format": "int5"}]})")
            .rfind("step 1 (command): \"format\" must be f16, int8, int4, int8h, int4h or int4c, got \"int5\"", 0) ==
        0);
  CHECK(error_of(R"({"steps": [{"do": "command", "name": "set_kv_format"}]})").find("format") != std::string::npos);
  CHECK(error_of(R"({"steps": [{"do": "sleep"}]})") == "step 1 (sleep): \"seconds\" must be a number in (0, 600]");
  CHECK(error_of(R"({"steps": [{"do": "sleep", "seconds": 0}]})") ==
        "step 1 (sleep): \"seconds\" must be a number in (0, 600]");
}

TEST_CASE("compare and script_state", "[ui]") {
  CHECK(compare(3.0, CompareOp::ge, 3.0));
  CHECK_FALSE(compare(2.0, CompareOp::gt, 3.0));
  CHECK(compare(std::string("a cat"), CompareOp::contains, std::string("cat")));
  CHECK_FALSE(compare(std::string("a"), CompareOp::ge, std::string("a")));

  AppSnapshot s;
  s.conversations.resize(2);
  MessageView u;
  u.role = Role::user;
  u.text = "hi";
  MessageView a;
  a.role = Role::assistant;
  a.text = "hello there";
  a.stats.valid = true;
  a.stats.n_tokens = 3;
  a.stats.n_prompt_reused = 7;
  a.stats.ttft_ms = 40;
  a.stats.decode_ms = 500;  // 2 tokens after the first in half a second
  s.chat.messages = {u, a};
  s.model.status = ModelStatus::ready;
  const auto st = script_state(s);
  CHECK(std::get<double>(st.at("n_conversations")) == 2);
  CHECK(std::get<double>(st.at("n_messages")) == 2);
  CHECK(std::get<double>(st.at("n_user_messages")) == 1);
  CHECK(std::get<double>(st.at("last_reply_chars")) == 11);
  CHECK(std::get<double>(st.at("last_reply_tokens")) == 3);
  CHECK(std::get<double>(st.at("last_prompt_reused")) == 7);
  CHECK(std::get<double>(st.at("last_tokens_per_s")) == Approx(4.0));
  CHECK(std::get<double>(st.at("last_ttft_ms")) == 40);
  CHECK(std::get<double>(st.at("model_ready")) == 1);
  CHECK(std::get<std::string>(st.at("model_status")) == "ready");
}
