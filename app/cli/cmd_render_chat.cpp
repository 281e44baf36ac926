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
  std::string reasoning_effort;
  std::string data_dir;
};

Error bad_messages(const std::string& file, const std::string& what) {
  return make_error(ErrorCode::invalid_argument, file + ": " + what);
}

// An assistant's tool_calls: [{"id"?, "type": "function", "function": {"name", "arguments"}}], the
// arguments a JSON text (OpenAI's) or a JSON value.
Result<std::vector<chat::ToolCall>> read_tool_calls(const std::string& file, const std::string& at,
                                                    const nlohmann::ordered_json& list) {
  if (!list.is_array()) return bad_messages(file, at + " must be an array");
  std::vector<chat::ToolCall> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::ordered_json& c = list[i];
    const std::string where = at + "[" + std::to_string(i) + "]";
    const nlohmann::ordered_json* f = c.is_object() && c.contains("function") ? &c["function"] : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
      return bad_messages(file, where + " needs a \"function\" with a \"name\" string");
    }
    chat::ToolCall call;
    call.name = (*f)["name"].get<std::string>();
    if (f->contains("arguments")) {
      const nlohmann::ordered_json& args = (*f)["arguments"];
      call.arguments = args.is_string() ? args.get<std::string>() : args.dump();
    }
    if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
    out.push_back(std::move(call));
  }
  return out;
}

struct MessagesFile {
  std::vector<chat::ChatMessage> messages;
  std::string tools_json;        // the body's "tools", if any
  std::string reasoning_effort;  // the body's reasoning_effort or chat_template_kwargs.reasoning_effort
};

// A JSON array of {"role", "content", "reasoning_content"?, "tool_calls"?, "tool_call_id"?}, or an
// object holding one as "messages" (an OpenAI chat request body, with "tools" and the reasoning
// effort if it has them).
Result<MessagesFile> read_messages(const std::string& file) {
  auto text = read_text_file(file, "messages file");
  if (!text.ok()) return text.error();
  // In the file's key order (a tool's parameters are listed in it).
  const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(*text, nullptr, false);
  if (doc.is_discarded()) return bad_messages(file, "not valid JSON");
  const nlohmann::ordered_json& list = doc.is_object() && doc.contains("messages") ? doc["messages"] : doc;
  if (!list.is_array()) return bad_messages(file, "expected an array of messages, or an object with \"messages\"");
  MessagesFile out;
  if (doc.is_object()) {
    if (doc.contains("tools") && !doc["tools"].is_null()) out.tools_json = doc["tools"].dump();
    const nlohmann::ordered_json kwargs = doc.value("chat_template_kwargs", nlohmann::ordered_json::object());
    for (const nlohmann::ordered_json* e : {&doc, &kwargs}) {
      if (e->is_object() && e->contains("reasoning_effort") && (*e)["reasoning_effort"].is_string()) {
        out.reasoning_effort = (*e)["reasoning_effort"].get<std::string>();
      }
    }
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::ordered_json& m = list[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return bad_messages(file, at + " needs a \"role\" string (system, user, assistant or tool)");
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
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      auto calls = read_tool_calls(file, at + ".tool_calls", m["tool_calls"]);
      if (!calls.ok()) return calls.error();
      c.tool_calls = std::move(*calls);
    }
    if (m.contains("tool_call_id") && m["tool_call_id"].is_string()) {
      c.tool_call_id = m["tool_call_id"].get<std::string>();
    }
    out.messages.push_back(std::move(c));
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
  const std::string effort = a.reasoning_effort.empty() ? messages->reasoning_effort : a.reasoning_effort;
  if (!effort.empty() && !chat::is_reasoning_effort(effort)) {
    return report(
        make_error(ErrorCode::invalid_argument, "reasoning effort \"" + effort + "\": expected low, medium or high"));
  }
  auto tmpl = template_of(a);
  if (!tmpl.ok()) return report(tmpl.error());
  std::fprintf(stderr, "chat template: %s\n", tmpl->describe().c_str());
  chat::RenderOptions opt;
  opt.add_generation_prompt = !a.no_generation_prompt;
  opt.enable_thinking = !a.no_thinking;
  opt.tools_json = messages->tools_json;
  if (!effort.empty()) opt.reasoning_effort = effort;
  if (!a.date.empty()) {
    std::tm tm{};
    const char* end = strptime(a.date.c_str(), "%Y-%m-%d", &tm);
    if (!end || *end != '\0') {
      return report(make_error(ErrorCode::invalid_argument, "--date " + a.date + ": expected YYYY-MM-DD"));
    }
    tm.tm_hour = 12;
    opt.now = tm;
  }
  auto prompt = tmpl->render_prompt(messages->messages, opt);
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
         "JSON file: [{\"role\": \"system\"|\"user\"|\"assistant\"|\"tool\", \"content\": \"...\", "
         "\"reasoning_content\"?, \"tool_calls\"?, \"tool_call_id\"?}], or a chat request body with \"messages\" "
         "(and \"tools\", \"reasoning_effort\" or \"chat_template_kwargs\")")
      ->required();
  cmd->add_flag("--no-generation-prompt", a->no_generation_prompt,
                "do not end with the header of the assistant's reply");
  cmd->add_flag("--no-thinking", a->no_thinking, "render with enable_thinking false (Qwen 3, SmolLM3, DeepSeek-R1)");
  cmd->add_option("--reasoning-effort", a->reasoning_effort,
                  "low, medium or high: the template's reasoning_effort (gpt-oss); default: the body's, else the "
                  "template's own");
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
