// ChatTemplate with the model's own template: loading it into the Jinja interpreter, the variables llama.cpp gives it,
// and the render.
#include "core/chat/chat_template.h"

#include "core/chat/jinja_template.h"
#include "core/chat/reasoning.h"

namespace kvc::chat {
namespace {

std::tm local_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

std::string format_date(const std::tm& tm) {
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
  return std::string(buf, n);
}

jinja::Value tool_calls_value(const std::vector<ToolCall>& calls) {
  jinja::Array list;
  for (const ToolCall& c : calls) {
    // The arguments as a JSON value where they parse (llama.cpp passes them so to templates
    // that print them with tojson), else as the text.
    jinja::Value args;
    std::string error;
    if (!jinja::from_json(c.arguments, args, error)) args = c.arguments;
    jinja::Object function;
    function.set("name", c.name);
    function.set("arguments", std::move(args));
    jinja::Object call;
    call.set("type", "function");
    call.set("function", std::move(function));
    if (!c.id.empty()) call.set("id", c.id);
    list.push_back(std::move(call));
  }
  return list;
}

// A message as the template sees it, with llama.cpp's fields. For harmony (gpt-oss) templates,
// as llama.cpp passes them: the reasoning is also `thinking` (the field the template reads), an
// assistant's content is dropped when it carries both reasoning and tool calls, and a reply kept
// as generated (<|channel|>analysis<|message|>...) is given as its answer and its reasoning.
jinja::Value message_value(const ChatMessage& m, bool harmony) {
  std::string content = m.content;
  std::optional<std::string> reasoning = m.reasoning_content;
  if (harmony && m.role == "assistant" && is_harmony_reply(content)) {
    ReasoningSplit split = split_reasoning(content, /*finished=*/true);
    content = std::move(split.answer);
    if (split.has_reasoning && !reasoning) reasoning = std::move(split.reasoning);
  }
  if (harmony && reasoning && reasoning->empty()) reasoning.reset();  // llama.cpp passes no empty reasoning
  jinja::Object o;
  o.set("role", m.role);
  if (!(harmony && reasoning && !m.tool_calls.empty())) o.set("content", std::move(content));
  if (reasoning) o.set("reasoning_content", *reasoning);
  if (!m.tool_call_id.empty()) o.set("tool_call_id", m.tool_call_id);
  if (!m.tool_calls.empty()) o.set("tool_calls", tool_calls_value(m.tool_calls));
  if (harmony && reasoning) o.set("thinking", *reasoning);
  return o;
}

// llama.cpp's fold of a system message for templates without a system role: its text, a newline,
// then the first user message's.
std::vector<ChatMessage> fold_system(std::span<const ChatMessage> messages) {
  std::vector<ChatMessage> out;
  std::string pending;
  bool have_pending = false;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      if (have_pending) {
        pending += '\n';
        pending += m.content;
      } else {
        pending = m.content;
      }
      have_pending = true;
      continue;
    }
    ChatMessage c = m;
    if (have_pending && m.role == "user") {
      c.content = pending + "\n" + m.content;
      have_pending = false;
    }
    out.push_back(std::move(c));
  }
  if (have_pending) out.push_back({"user", pending, std::nullopt});
  return out;
}

}  // namespace

bool is_reasoning_effort(std::string_view s) {
  for (const std::string_view e : k_reasoning_efforts) {
    if (s == e) return true;
  }
  return false;
}

ChatTemplate ChatTemplate::load(std::string_view template_text, const TemplateTokens& tokens) {
  ChatTemplate t = detect(template_text);
  if (template_text.empty()) return t;
  const auto fallback_note = [&](const std::string& why) { t.load_error_ = why; };
  auto parsed = jinja::Template::parse(template_text);
  if (!parsed.ok()) {
    fallback_note(parsed.error().message);
    return t;
  }
  t.jinja_ = std::make_shared<const jinja::Template>(std::move(*parsed));
  t.tokens_ = tokens;
  t.uses_reasoning_effort_ = template_text.find("reasoning_effort") != std::string_view::npos;

  // Whether the template takes a system message: it renders one and shows its text (Gemma's
  // raises instead), as llama.cpp decides it.
  RenderOptions opt;
  opt.now = local_now();
  const std::string probe = "kvchat-system-probe";
  const ChatMessage with_system[] = {{"system", probe, std::nullopt}, {"user", "Hello", std::nullopt}};
  auto sys = t.render_jinja(with_system, opt);
  t.system_role_ = sys.ok() && sys->find(probe) != std::string::npos;

  // A conversation like the ones the app renders must go through.
  const ChatMessage conversation[] = {{"system", "You are helpful.", std::nullopt},
                                      {"user", "Hi!", std::nullopt},
                                      {"assistant", "Hello.", std::nullopt},
                                      {"user", "What is a cache?", std::nullopt}};
  for (const bool gen : {true, false}) {
    opt.add_generation_prompt = gen;
    auto r = t.render_prompt(conversation, opt);
    if (!r.ok()) {
      t.jinja_.reset();
      t.uses_reasoning_effort_ = false;
      fallback_note(r.error().message);
      return t;
    }
  }
  return t;
}

std::string ChatTemplate::describe() const {
  if (jinja_) {
    return family_ == Family::fallback ? std::string("the model's template")
                                       : std::string(name()) + ", the model's template";
  }
  std::string s(name());
  if (!is_fallback()) s += " (built-in renderer)";
  if (!load_error_.empty()) s += "; the model's template cannot run here: " + load_error_;
  return s;
}

Result<std::string> ChatTemplate::render_jinja(std::span<const ChatMessage> messages,
                                               const RenderOptions& options) const {
  const std::tm now = options.now ? *options.now : local_now();
  const bool harmony = family_ == Family::harmony;
  jinja::Array list;
  if (system_role_) {
    for (const ChatMessage& m : messages) list.push_back(message_value(m, harmony));
  } else {
    for (const ChatMessage& m : fold_system(messages)) list.push_back(message_value(m, harmony));
  }
  jinja::Object vars;
  vars.set("messages", std::move(list));
  vars.set("add_generation_prompt", options.add_generation_prompt);
  vars.set("bos_token", tokens_.bos);
  vars.set("eos_token", tokens_.eos);
  vars.set("enable_thinking", options.enable_thinking);
  vars.set("date_string", format_date(now));
  if (!options.tools_json.empty()) {
    jinja::Value tools;
    std::string error;
    if (!jinja::from_json(options.tools_json, tools, error)) {
      return make_error(ErrorCode::invalid_argument, "tools: not valid JSON: " + error);
    }
    vars.set("tools", std::move(tools));
  }
  if (options.reasoning_effort) vars.set("reasoning_effort", *options.reasoning_effort);
  auto out = jinja_->render(vars, now);
  if (!out.ok()) return out.error();
  std::string text = std::move(*out);
  // A harmony render that ends a reply with <|return|> (a conversation's last reply, no
  // generation prompt) ends it with <|end|> instead, as llama.cpp does at inference: <|return|>
  // ends a generation, <|end|> a message in a conversation that goes on.
  if (harmony && !options.add_generation_prompt) {
    static constexpr std::string_view k_return = "<|return|>";
    if (const size_t at = text.rfind(k_return); at != std::string::npos) text.replace(at, k_return.size(), "<|end|>");
  }
  if (tokens_.add_bos && !tokens_.bos.empty() && text.compare(0, tokens_.bos.size(), tokens_.bos) == 0) {
    text.erase(0, tokens_.bos.size());
  }
  return text;
}

Result<std::string> ChatTemplate::render_prompt(std::span<const ChatMessage> messages,
                                                const RenderOptions& options) const {
  if (jinja_) return render_jinja(messages, options);
  return render(messages, options.add_generation_prompt);
}

}  // namespace kvc::chat
