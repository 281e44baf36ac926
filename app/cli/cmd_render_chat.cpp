// kvchat-cli render-chat: the exact prompt text a chat template makes of an OpenAI-style messages array.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>

#include "app/cli/cli_common.h"
#include "core/chat/chat_template.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"

namespace kvc::cli {

namespace {

struct RenderChatArgs {
  std::string model;
  std::string template_file;
  std::string bos;
  std::string eos;
  bool add_bos = false;
  std::string messages_file;
  bool no_generation_prompt = false;
  bool no_thinking = false;
  std::string date;
  std::string data_dir;
};

Error bad_messages(const std::string& file, const std::string& what) {
  return make_error(ErrorCode::invalid_argument, file + ": " + what);
}

// A JSON array of {"role", "content", "reasoning_content"?}, or an object holding one as "messages"
// (an OpenAI chat request body).
Result<std::vector<chat::ChatMessage>> read_messages(const std::string& file) {
  auto text = read_text_file(file, "messages file");
  if (!text.ok()) return text.error();
  const nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
  if (doc.is_discarded()) return bad_messages(file, "not valid JSON");
  const nlohmann::json& list = doc.is_object() && doc.contains("messages") ? doc["messages"] : doc;
  if (!list.is_array()) return bad_messages(file, "expected an array of messages, or an object with \"messages\"");
  std::vector<chat::ChatMessage> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& m = list[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return bad_messages(file, at + " needs a \"role\" string (system, user or assistant)");
    }
    chat::ChatMessage c(m["role"].get<std::string>(), "");
    if (m.contains("content") && !m["content"].is_null()) {
      if (!m["content"].is_string()) return bad_messages(file, at + ".content must be a string");
      c.content = m["content"].get<std::string>();
    }
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_null()) {
      if (!m["reasoning_content"].is_string()) return bad_messages(file, at + ".reasoning_content must be a string");
      c.reasoning_content = m["reasoning_content"].get<std::string>();
    }
    out.push_back(std::move(c));
  }
  return out;
}

Result<chat::ChatTemplate> template_of(const RenderChatArgs& a) {
  if (!a.model.empty()) {
    // Only the metadata is needed: never touch the weights.
    auto file = gguf::GgufFile::open(resolve_model_path(a.model, a.data_dir));
    if (!file.ok()) return file.error();
    auto vocab = model::vocabulary_from_gguf(*file);
    if (!vocab.ok()) return vocab.error();
    auto tok = tokenizer::Tokenizer::create(*vocab);
    if (!tok.ok()) return tok.error();
    return model::chat_template_from_gguf(*file, *tok);
  }
  auto source = read_text_file(a.template_file, "template file");
  if (!source.ok()) return source.error();
  chat::ChatTemplate t = chat::ChatTemplate::load(*source, chat::TemplateTokens{a.bos, a.eos, a.add_bos});
  // The template asked for must be the one rendered: no family renderer stands in for it here.
  if (!t.runs_template()) {
    return make_error(
        ErrorCode::invalid_file,
        a.template_file + ": " + (t.load_error().empty() ? std::string("the template is empty") : t.load_error()));
  }
  return t;
}

int run_render_chat(const RenderChatArgs& a) {
  auto messages = read_messages(a.messages_file);
  if (!messages.ok()) return report(messages.error());
  auto tmpl = template_of(a);
  if (!tmpl.ok()) return report(tmpl.error());
  std::fprintf(stderr, "chat template: %s\n", tmpl->describe().c_str());
  chat::RenderOptions opt;
  opt.add_generation_prompt = !a.no_generation_prompt;
  opt.enable_thinking = !a.no_thinking;
  if (!a.date.empty()) {
    std::tm tm{};
    const char* end = strptime(a.date.c_str(), "%Y-%m-%d", &tm);
    if (!end || *end != '\0') {
      return report(make_error(ErrorCode::invalid_argument, "--date " + a.date + ": expected YYYY-MM-DD"));
    }
    tm.tm_hour = 12;
    opt.now = tm;
  }
  auto prompt = tmpl->render_prompt(*messages, opt);
  if (!prompt.ok()) return report(prompt.error());
  std::fwrite(prompt->data(), 1, prompt->size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

void register_render_chat(CLI::App& app) {
  auto a = std::make_shared<RenderChatArgs>();
  auto* cmd = app.add_subcommand(
      "render-chat", "print the exact prompt text a chat template makes of a messages array (no newline added)");
  auto* model =
      cmd->add_option("-m,--model", a->model, "GGUF model (or vocabulary-only GGUF) whose template and BOS/EOS to use");
  auto* tmpl = cmd->add_option("--template", a->template_file, "a Jinja chat template file instead of a model's")
                   ->excludes(model);
  cmd->add_option("--bos", a->bos, "with --template: the text of the BOS token (bos_token)")->needs(tmpl);
  cmd->add_option("--eos", a->eos, "with --template: the text of the EOS token (eos_token)")->needs(tmpl);
  cmd->add_flag(
         "--add-bos", a->add_bos,
         "with --template: the tokenizer adds BOS itself, so a BOS text at the start is dropped (as llama.cpp does)")
      ->needs(tmpl);
  cmd->add_option(
         "--messages", a->messages_file,
         "JSON file: [{\"role\": \"system\"|\"user\"|\"assistant\", \"content\": \"...\", \"reasoning_content\"?}]")
      ->required();
  cmd->add_flag("--no-generation-prompt", a->no_generation_prompt,
                "do not end with the header of the assistant's reply");
  cmd->add_flag("--no-thinking", a->no_thinking, "render with enable_thinking false (Qwen 3, SmolLM3, DeepSeek-R1)");
  cmd->add_option("--date", a->date, "the date strftime_now and date_string show, YYYY-MM-DD (default: today)");
  add_data_dir_option(*cmd, a->data_dir);
  cmd->callback([a, cmd] {
    if (cmd->count("--model") + cmd->count("--template") == 0) {
      throw CLI::RequiredError("render-chat needs a template: -m MODEL or --template FILE.jinja");
    }
    if (int rc = run_render_chat(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli
