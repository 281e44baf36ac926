// Model chat templates rendered by kvchat's Jinja interpreter, byte for byte against llama-server --jinja's renders
// (tests/data/templates).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>

#include "core/chat/chat_template.h"
#include "support/test_support.h"

using kvc::chat::ChatMessage;
using kvc::chat::ChatTemplate;
namespace test = kvc::test;

namespace {

// The templates whose renders tests/data/make-template-references.sh recorded.
const char* const k_templates[] = {
    "meta-llama-Llama-3.1-8B-Instruct",
    "meta-llama-Llama-3.2-3B-Instruct",
    "meta-llama-Llama-3.3-70B-Instruct",
    "Qwen-Qwen2.5-7B-Instruct",
    "Qwen-Qwen3-0.6B",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
    "google-gemma-2-2b-it",
    "microsoft-Phi-3.5-mini-instruct",
    "HuggingFaceTB-SmolLM3-3B",
    "openai-gpt-oss-120b",
    "LFM2.5-Instruct",
};

std::vector<ChatMessage> messages_of(const nlohmann::ordered_json& list) {
  std::vector<ChatMessage> out;
  for (const auto& m : list) {
    ChatMessage c{m.at("role").get<std::string>(), m.at("content").get<std::string>(), std::nullopt};
    if (m.contains("reasoning_content")) c.reasoning_content = m["reasoning_content"].get<std::string>();
    if (m.contains("tool_call_id")) c.tool_call_id = m["tool_call_id"].get<std::string>();
    for (const auto& call : m.value("tool_calls", nlohmann::ordered_json::array())) {
      const auto& f = call.at("function");
      c.tool_calls.push_back(
          {call.value("id", std::string()), f.at("name").get<std::string>(), f.at("arguments").get<std::string>()});
    }
    out.push_back(std::move(c));
  }
  return out;
}

// "01 Dec 2026": the day llama.cpp rendered on (its date_string and strftime_now), at noon.
std::tm day_of(const std::string& date_string) {
  std::tm tm{};
  REQUIRE(strptime(date_string.c_str(), "%d %b %Y", &tm) != nullptr);
  tm.tm_hour = 12;
  return tm;
}

}  // namespace

TEST_CASE("chat render: model templates render byte for byte as llama.cpp renders them", "[core]") {
  for (const char* name : k_templates) {
    const auto dir = test::data_dir() / "templates";
    // In the file's key order, as llama.cpp reads it (the tools' properties are listed in it).
    const auto doc = nlohmann::ordered_json::parse(test::read_file(dir / (std::string(name) + ".expected.json")));
    const std::string source = test::read_file(dir / doc.at("template").get<std::string>());
    kvc::chat::TemplateTokens tokens{doc.at("bos_token").get<std::string>(), doc.at("eos_token").get<std::string>(),
                                     doc.at("bos_stripped").get<bool>()};
    const ChatTemplate t = ChatTemplate::load(source, tokens);
    INFO(name << ": " << t.load_error());
    REQUIRE(t.runs_template());
    kvc::chat::RenderOptions opt;
    opt.now = day_of(doc.at("date_string").get<std::string>());
    for (const auto& c : doc.at("cases")) {
      INFO(c.at("name").get<std::string>());
      opt.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
      // The tool cases (conversations-tools.json): the tools' definitions and chat_template_kwargs.
      opt.tools_json = c.contains("tools") ? c["tools"].dump() : std::string();
      opt.reasoning_effort.reset();
      if (c.contains("chat_template_kwargs")) {
        opt.reasoning_effort = c["chat_template_kwargs"].at("reasoning_effort").get<std::string>();
      }
      const auto messages = messages_of(c.at("messages"));
      const auto r = t.render_prompt(messages, opt);
      REQUIRE(r.ok());
      CHECK(*r == c.at("prompt").get<std::string>());
    }
  }
}

namespace {

std::string template_text(const char* name) {
  return test::read_file(test::data_dir() / "templates" / (std::string(name) + ".jinja"));
}

}  // namespace

TEST_CASE("chat render: the family of each model template is recognised", "[core]") {
  using Family = ChatTemplate::Family;
  const std::pair<const char*, Family> expected[] = {
      {"meta-llama-Llama-3.1-8B-Instruct", Family::llama3},
      {"Qwen-Qwen2.5-7B-Instruct", Family::chatml},
      {"Qwen-Qwen3-0.6B", Family::chatml},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", Family::deepseek},
      {"google-gemma-2-2b-it", Family::gemma},
      {"microsoft-Phi-3.5-mini-instruct", Family::phi3},
      {"HuggingFaceTB-SmolLM3-3B", Family::chatml},
      {"openai-gpt-oss-120b", Family::harmony},
  };
  for (const auto& [name, family] : expected) {
    INFO(name);
    const ChatTemplate t = ChatTemplate::load(template_text(name), {"<s>", "</s>", true});
    CHECK(t.family() == family);
    CHECK(t.runs_template());
    CHECK(t.load_error().empty());
    CHECK(t.describe() == std::string(t.name()) + ", the model's template");
  }
}

TEST_CASE("chat render: BOS text, system folding and generation prompts follow llama.cpp", "[core]") {
  const std::vector<ChatMessage> m = {{"system", "S"}, {"user", "U"}};
  kvc::chat::RenderOptions opt;
  // A BOS text at the start is dropped only when the tokenizer adds the token itself.
  const auto with_bos = ChatTemplate::load(template_text("google-gemma-2-2b-it"), {"<bos>", "<eos>", true});
  const auto without = ChatTemplate::load(template_text("google-gemma-2-2b-it"), {"<bos>", "<eos>", false});
  // Gemma's template rejects a system message; it is folded into the first user message.
  CHECK(*with_bos.render_prompt(m, opt) == "<start_of_turn>user\nS\nU<end_of_turn>\n<start_of_turn>model\n");
  CHECK(*without.render_prompt(m, opt) == "<bos><start_of_turn>user\nS\nU<end_of_turn>\n<start_of_turn>model\n");
  opt.add_generation_prompt = false;
  CHECK(*with_bos.render_prompt(m, opt) == "<start_of_turn>user\nS\nU<end_of_turn>\n");
  // The template's own checks are errors the caller can show.
  const std::vector<ChatMessage> assistant_first = {{"assistant", "A"}, {"user", "U"}};
  const auto r = with_bos.render_prompt(assistant_first, opt);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == kvc::ErrorCode::invalid_argument);
  CHECK_THAT(r.error().message, Catch::Contains("Conversation roles must alternate user/assistant"));
  // enable_thinking reaches the template.
  const auto qwen3 = ChatTemplate::load(template_text("Qwen-Qwen3-0.6B"), {"<|endoftext|>", "<|im_end|>", false});
  kvc::chat::RenderOptions no_think;
  no_think.enable_thinking = false;
  CHECK_THAT(*qwen3.render_prompt(m, no_think), Catch::EndsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  CHECK_THAT(*qwen3.render_prompt(m, {}), Catch::EndsWith("<|im_start|>assistant\n"));
}

TEST_CASE("chat render: unknown and malformed templates get a labelled fallback", "[core]") {
  const std::vector<ChatMessage> m = {{"system", "S"}, {"user", "U"}};
  // No template: the plain fallback, labelled.
  const auto none = ChatTemplate::load("", {"<s>", "</s>", true});
  CHECK(none.is_fallback());
  CHECK_FALSE(none.runs_template());
  CHECK(none.describe() == "fallback (plain 'User:/Assistant:')");
  CHECK(*none.render_prompt(m, {}) == "S\n\nUser: U\nAssistant:");
  // An unknown template that runs renders exactly; its family is unknown, it is no fallback.
  const auto odd = ChatTemplate::load("{% for m in messages %}<<{{ m.role }}>>{{ m.content }}{% endfor %}", {});
  CHECK(odd.runs_template());
  CHECK_FALSE(odd.is_fallback());
  CHECK(odd.describe() == "the model's template");
  CHECK(*odd.render_prompt(m, {}) == "<<system>>S<<user>>U");
  CHECK(odd.stop_strings().empty());  // no "User:" stop for a format that has none
  // Malformed templates: never a crash or a hang; the family renderer (or the fallback) with the reason.
  const std::pair<std::string, std::string> bad[] = {
      {"{% for m in messages %}<|im_start|>{{ m.role }}",
       "chatml (built-in renderer); the model's template cannot run here: "
       "chat template, line 1: '{% for %}' opened here is never closed"},
      {"<|im_start|>{{ messages[0].content ", "'{{' opened here is never closed"},
      {"{{ raise_exception('no') }}",
       "fallback (plain 'User:/Assistant:'); the model's template cannot run here: "
       "chat template, line 1: the template rejects this conversation: no"},
      {"<start_of_turn>{% for i in range(100000) %}" + std::string(1000, 'x') + "{% endfor %}",
       "gemma (built-in renderer); the model's template cannot run here: chat template, line 1: the template's output "
       "passed the limit of 32 MiB"},
  };
  for (const auto& [text, description] : bad) {
    INFO(text.substr(0, 80));
    const auto t = ChatTemplate::load(text, {"<s>", "</s>", true});
    CHECK_FALSE(t.runs_template());
    CHECK_FALSE(t.load_error().empty());
    CHECK_THAT(t.describe(), Catch::Contains(description));
    CHECK(t.render_prompt(m, {}).ok());
  }
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += "{% if true %}";
  const auto t = ChatTemplate::load("<|im_start|>" + deep, {});
  CHECK(t.family() == ChatTemplate::Family::chatml);
  CHECK_THAT(t.describe(), Catch::Contains("deeper than 128 levels"));
}

TEST_CASE("chat render: gpt-oss's template gets replies as generated split, and its last reply ends at <|end|>",
          "[core]") {
  const auto t = ChatTemplate::load(template_text("openai-gpt-oss-120b"), {"<|startoftext|>", "<|return|>", false});
  REQUIRE(t.runs_template());
  CHECK(t.uses_reasoning_effort());
  CHECK_FALSE(ChatTemplate::load(template_text("Qwen-Qwen3-0.6B"), {"", "<|im_end|>", false}).uses_reasoning_effort());
  kvc::chat::RenderOptions opt;
  opt.add_generation_prompt = false;
  // A reply kept as the model wrote it (its channels in the text; the template refuses those in
  // content): its analysis goes to `thinking`, its final answer to `content`.
  const std::vector<ChatMessage> m = {
      {"user", "2 + 2?"},
      {"assistant", "<|channel|>analysis<|message|>Add.<|end|><|start|>assistant<|channel|>final<|message|>4."}};
  const auto r = t.render_prompt(m, opt);
  REQUIRE(r.ok());
  // Shown with its analysis (the last reply, no generation prompt), and ended with <|end|> as
  // llama.cpp ends it at inference, not with the template's <|return|>.
  CHECK_THAT(*r, Catch::EndsWith("<|start|>user<|message|>2 + 2?<|end|><|start|>assistant<|channel|>analysis"
                                 "<|message|>Add.<|end|><|start|>assistant<|channel|>final<|message|>4.<|end|>"));
  // An earlier reply loses its analysis.
  std::vector<ChatMessage> more = m;
  more.emplace_back("user", "3 + 3?");
  opt.add_generation_prompt = true;
  const auto r2 = t.render_prompt(more, opt);
  REQUIRE(r2.ok());
  CHECK(r2->find("Add.") == std::string::npos);
  CHECK_THAT(*r2, Catch::EndsWith("<|start|>assistant<|channel|>final<|message|>4.<|end|><|start|>user<|message|>"
                                  "3 + 3?<|end|><|start|>assistant"));
  // A bad tools JSON is an error, not a crash.
  opt.tools_json = "[{";
  const auto bad = t.render_prompt(more, opt);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::StartsWith("tools: not valid JSON"));
}
