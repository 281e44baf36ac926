// libFuzzer target for the Jinja interpreter: any bytes as a chat template, parsed and rendered within small limits.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string_view>

#include "core/chat/jinja_template.h"

namespace {

using kvc::chat::jinja::Array;
using kvc::chat::jinja::Limits;
using kvc::chat::jinja::Object;
using kvc::chat::jinja::Template;
using kvc::chat::jinja::Value;

// What ChatTemplate passes a template: a short conversation and the special tokens.
Object variables() {
  Array messages;
  const char* const turns[][2] = {{"system", "Be brief."},
                                  {"user", " Hi! "},
                                  {"assistant", "<think>\nx\n</think>\n\nHello."},
                                  {"user", "And now?"}};
  for (const auto& t : turns) {
    Object m;
    m.set("role", t[0]);
    m.set("content", t[1]);
    messages.emplace_back(std::move(m));
  }
  Object v;
  v.set("messages", std::move(messages));
  v.set("add_generation_prompt", true);
  v.set("bos_token", "<s>");
  v.set("eos_token", "</s>");
  v.set("enable_thinking", true);
  v.set("date_string", "26 Jul 2024");
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Small limits keep each input fast; the limits' own checks are what is exercised.
  Limits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_steps = 200'000;
  limits.max_items = 10'000;
  auto t = Template::parse(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (!t.ok()) return 0;
  static const Object vars = variables();
  std::tm now{};
  now.tm_year = 124;
  now.tm_mday = 1;
  (void)t->render(vars, now);
  return 0;
}
