// Tests of chat template detection, per-family renders written by hand, and the append-only property.
#include <catch2/catch.hpp>

#include "core/chat/chat_template.h"

using kvc::chat::ChatMessage;
using kvc::chat::ChatTemplate;
using Family = ChatTemplate::Family;

namespace {

// Short snippets in the style of each family's tokenizer.chat_template (Jinja), written for
// these tests from the families' published formats.
struct Snippet {
  const char* text;
  Family family;
};
const Snippet k_snippets[] = {
    {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
     "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
     Family::chatml},
    {"{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + messages[0]['content'] + "
     "'\\n<</SYS>>\\n\\n' %}{% endif %}{% for message in messages %}{% if message['role'] == 'user' %}"
     "{{ bos_token + '[INST] ' + content + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
     "{{ ' ' + content + ' ' + eos_token }}{% endif %}{% endfor %}",
     Family::llama2},
    {"{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
     "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
     Family::llama3},
    {"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
     "message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + "
     "eos_token }}{% endif %}{% endfor %}",
     Family::mistral},
    {"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + "
     "eos_token }}{% elif message['role'] == 'system' %}{{ '<|system|>\\n' + message['content'] + eos_token }}"
     "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n' + message['content'] + eos_token }}"
     "{% endif %}{% if loop.last and add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}{% endfor %}",
     Family::zephyr},
    {"{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'assistant') %}"
     "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
     "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
     "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
     Family::gemma},
    {"{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + "
     "'<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"
     "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}"
     "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}",
     Family::phi3},
    // The template of the shared tiny-gqa models (TinyLlama's), which builds "<|user|>" from parts.
    {"{% for message in messages %}{{'<|' + message['role'] + '|>\\n' + message['content'] + '</s>\\n'}}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}",
     Family::zephyr},
};

const Family k_families[] = {Family::chatml, Family::llama2, Family::llama3,   Family::mistral, Family::zephyr,
                             Family::gemma,  Family::phi3,   Family::deepseek, Family::fallback};

// A 2-turn conversation with a system prompt. The replies are as the model's tokens spell
// them: SentencePiece models (llama-2, mistral, fallback) start a reply with a space.
std::vector<ChatMessage> conversation(Family f) {
  const bool spaced = f == Family::llama2 || f == Family::mistral || f == Family::fallback;
  return {{"system", "Be brief."},
          {"user", "Hi!"},
          {"assistant", spaced ? " Hello." : "Hello."},
          {"user", "What is a cache?"},
          {"assistant", spaced ? " A fast copy." : "A fast copy."}};
}

}  // namespace

TEST_CASE("chat template: detection from realistic template texts", "[core]") {
  for (const auto& s : k_snippets) {
    INFO(s.text);
    CHECK(ChatTemplate::detect(s.text).family() == s.family);
  }
  CHECK(ChatTemplate::detect("").family() == Family::fallback);
  CHECK(ChatTemplate::detect("{{ messages | tojson }}").family() == Family::fallback);
}

TEST_CASE("chat template: the fallback is labelled as such", "[core]") {
  const auto fb = ChatTemplate::detect("");
  CHECK(fb.is_fallback());
  CHECK(fb.name().find("fallback") != std::string_view::npos);
  for (const Family f : k_families) {
    if (f == Family::fallback) continue;
    CHECK_FALSE(ChatTemplate::from_family(f).is_fallback());
    CHECK(ChatTemplate::from_family(f).name().find("fallback") == std::string_view::npos);
  }
  CHECK(ChatTemplate::from_family(Family::llama2).name() == "llama-2");
  CHECK(ChatTemplate::from_family(Family::phi3).name() == "phi-3");
  CHECK(ChatTemplate::from_family(Family::deepseek).name() == "deepseek");
}

TEST_CASE("chat template: 2-turn renders match each family's documented format", "[core]") {
  // Written by hand from each model family's published prompt format; BOS is left to the
  // tokenizer, so the first <s> / <|begin_of_text|> / <bos> is not in the text.
  const std::pair<Family, std::string> expected[] = {
      {Family::chatml,
       "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
       "Hello.<|im_end|>\n<|im_start|>user\nWhat is a cache?<|im_end|>\n<|im_start|>assistant\n"
       "A fast copy.<|im_end|>\n"},
      {Family::llama2,
       "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi! [/INST] Hello.</s><s>[INST] What is a cache? [/INST]"
       " A fast copy.</s>"},
      {Family::llama3,
       "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nWhat is a cache?<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\nA fast copy.<|eot_id|>"},
      {Family::mistral, "[INST] Be brief.\n\nHi! [/INST] Hello.</s>[INST] What is a cache? [/INST] A fast copy.</s>"},
      {Family::zephyr,
       "<|system|>\nBe brief.</s>\n<|user|>\nHi!</s>\n<|assistant|>\nHello.</s>\n"
       "<|user|>\nWhat is a cache?</s>\n<|assistant|>\nA fast copy.</s>\n"},
      {Family::gemma,
       "<start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
       "<start_of_turn>user\nWhat is a cache?<end_of_turn>\n<start_of_turn>model\nA fast copy.<end_of_turn>\n"},
      {Family::phi3,
       "<|system|>\nBe brief.<|end|>\n<|user|>\nHi!<|end|>\n<|assistant|>\nHello.<|end|>\n"
       "<|user|>\nWhat is a cache?<|end|>\n<|assistant|>\nA fast copy.<|end|>\n"},
      {Family::deepseek,
       "Be brief.<｜User｜>Hi!<｜Assistant｜>Hello.<｜end▁of▁sentence｜><｜User｜>What is a cache?<｜Assistant｜>"
       "A fast copy.<｜end▁of▁sentence｜>"},
      {Family::fallback,
       "Be brief.\n\nUser: Hi!\nAssistant: Hello.\nUser: What is a cache?\nAssistant: A fast copy.\n"},
  };
  for (const auto& [family, text] : expected) {
    const auto t = ChatTemplate::from_family(family);
    INFO(t.name());
    const auto messages = conversation(family);
    CHECK(t.render(messages, false) == text);
    CHECK(t.render(messages, true) == text);  // the last message is a reply: nothing to add
  }
}

TEST_CASE("chat template: render is the concatenation of the turn segments", "[core]") {
  for (const Family f : k_families) {
    const auto t = ChatTemplate::from_family(f);
    INFO(t.name());
    const auto m = conversation(f);
    const std::string segments = t.render_user_turn(m[0].content, m[1].content, true) + m[2].content +
                                 t.assistant_suffix() + t.render_user_turn("", m[3].content, false) + m[4].content +
                                 t.assistant_suffix();
    CHECK(t.render(m, false) == segments);

    // A conversation ending in a user message, with and without the header of the next reply.
    const std::vector<ChatMessage> open(m.begin(), m.begin() + 4);
    const std::string prefix = t.render(std::vector<ChatMessage>(m.begin(), m.begin() + 3), false);
    CHECK(t.render(open, true) == prefix + t.render_user_turn("", m[3].content, false));
    CHECK(t.render(open, true).substr(0, t.render(open, false).size()) == t.render(open, false));

    // Without a system prompt.
    const std::vector<ChatMessage> plain(m.begin() + 1, m.end());
    CHECK(t.render(plain, false) == t.render_user_turn("", m[1].content, true) + m[2].content + t.assistant_suffix() +
                                        t.render_user_turn("", m[3].content, false) + m[4].content +
                                        t.assistant_suffix());
    // The header never ends in a space (the reply's tokens carry it).
    const auto header = t.render_user_turn("", "x", true);
    CHECK(header.back() != ' ');
    CHECK_FALSE(t.stop_strings().empty());
  }
}

TEST_CASE("chat template: system prompts fold into the first user message where there is no system role", "[core]") {
  CHECK(ChatTemplate::from_family(Family::gemma).render_user_turn("S", "U", true) ==
        "<start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\n");
  CHECK(ChatTemplate::from_family(Family::mistral).render_user_turn("S", "U", true) == "[INST] S\n\nU [/INST]");
  CHECK(ChatTemplate::from_family(Family::llama2).render_user_turn("", "U", false) == "<s>[INST] U [/INST]");
  CHECK(ChatTemplate::from_family(Family::chatml).end_of_turn_tokens() == std::vector<std::string>{"<|im_end|>"});
  CHECK(ChatTemplate::from_family(Family::fallback).end_of_turn_tokens().empty());
}
