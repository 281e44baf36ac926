// Running the server tests' Node clients (npm_client.h).
#include "server/npm_client.h"

#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <filesystem>

#include "support/test_support.h"

namespace kvc::test {

namespace {
const std::filesystem::path k_npm_dir = KVC_TEST_NPM_DIR;
}  // namespace

std::string openai_client_missing() {
  if (const std::string v = qwen_vocab_missing(); !v.empty()) return v;
  const auto why = k_npm_dir / "openai-missing.txt";
  if (std::filesystem::exists(why)) return "the openai npm client was not fetched: " + read_file(why);
  if (!std::filesystem::exists(k_npm_dir / "node_modules" / "openai")) {
    return "the openai npm client is not installed in " + k_npm_dir.string() +
           " (CTest's test_openai_client fixture runs tests/server/fetch-openai-client.sh)";
  }
  return "";
}

std::string anthropic_client_missing() {
  if (const std::string v = qwen_vocab_missing(); !v.empty()) return v;
  const auto why = k_npm_dir / "openai-missing.txt";
  if (std::filesystem::exists(why)) return "the npm clients were not fetched: " + read_file(why);
  if (!std::filesystem::exists(k_npm_dir / "node_modules" / "@anthropic-ai" / "sdk")) {
    return "the @anthropic-ai/sdk npm client is not installed in " + k_npm_dir.string() +
           " (CTest's test_openai_client fixture runs tests/server/fetch-openai-client.sh)";
  }
  return "";
}

nlohmann::json run_node_at(const std::string& base_url, const std::string& script, const std::string& args,
                           int timeout_s, const ServeProcess* s) {
  std::string cmd = "timeout ";
  cmd += std::to_string(timeout_s);
  cmd += " node ";
  cmd += quoted(std::string(KVC_TEST_SERVER_DIR) + "/" + script);
  for (const std::string& arg : {(k_npm_dir / "node_modules").string(), base_url, std::string(k_chat_model_id)}) {
    cmd += ' ';
    cmd += quoted(arg);
  }
  cmd += ' ';
  cmd += args;
  cmd += " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  std::array<char, 4096> buf{};
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
  ::pclose(p);
  INFO("node printed: " << out << "\nserver log: " << (s ? s->log() : std::string("(no server)")));
  // The last line is the result (anything before it: Node's warnings).
  const size_t end = out.find_last_not_of('\n');
  REQUIRE(end != std::string::npos);
  const size_t begin = out.rfind('\n', end);
  nlohmann::json j =
      nlohmann::json::parse(out.substr(begin == std::string::npos ? 0 : begin + 1, end + 1), nullptr, false);
  REQUIRE(!j.is_discarded());
  REQUIRE(!j.contains("failed"));
  return j;
}

}  // namespace kvc::test
