// The server tests' Node clients (the official openai and @anthropic-ai/sdk npm packages, fetched by CTest's
// test_openai_client fixture): why they cannot run here, and running one of their scripts.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "server/serve_process.h"

namespace kvc::test {

inline constexpr const char* k_chat_model_id = "chat-qwen";  // make_chat_model's file name

// Why the openai client cannot run here ("" when it can): the Qwen vocabulary or the npm package missing.
std::string openai_client_missing();
// The same for the @anthropic-ai/sdk client (fetched beside openai by the same fixture).
std::string anthropic_client_missing();

// Runs a Node script of tests/server with its client arguments (node_modules, base URL, the chat
// model's id) and then ARGS; its last output line as JSON (the test fails on none, or on a
// "failed" member). base_url: the server's, or one the script's own fetch answers (s null).
nlohmann::json run_node_at(const std::string& base_url, const std::string& script, const std::string& args,
                           int timeout_s = 120, const ServeProcess* s = nullptr);
inline nlohmann::json run_node(const ServeProcess& s, const std::string& script, const std::string& args,
                               int timeout_s = 120) {
  return run_node_at(s.base_url(), script, args, timeout_s, &s);
}

}  // namespace kvc::test
