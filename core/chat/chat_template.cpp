// ChatTemplate with the model's own template: loading it into the Jinja interpreter, the variables llama.cpp gives it,
// and the render.
#include "core/chat/chat_template.h"

#include "core/chat/jinja_template.h"

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

jinja::Value message_value(const ChatMessage& m) {
  jinja::Object o;
  o.set("role", m.role);
  o.set("content", m.content);
  if (m.reasoning_content) o.set("reasoning_content", *m.reasoning_content);
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
  jinja::Array list;
  if (system_role_) {
    for (const ChatMessage& m : messages) list.push_back(message_value(m));
  } else {
    for (const ChatMessage& m : fold_system(messages)) list.push_back(message_value(m));
  }
  jinja::Object vars;
  vars.set("messages", std::move(list));
  vars.set("add_generation_prompt", options.add_generation_prompt);
  vars.set("bos_token", tokens_.bos);
  vars.set("eos_token", tokens_.eos);
  vars.set("enable_thinking", options.enable_thinking);
  vars.set("date_string", format_date(now));
  auto out = jinja_->render(vars, now);
  if (!out.ok()) return out.error();
  std::string text = std::move(*out);
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
