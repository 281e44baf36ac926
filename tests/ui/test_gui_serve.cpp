// The real app under Xvfb with its "Serve on localhost" switch: the official openai npm client
// streams from the app's engine (the same greedy answer kvchat-cli serve gives), its second turn
// hits the app's cache as the app's state shows, turning the switch off ends a stream in flight
// with an error event and closes the port; a port in use is a clear message, and the switch is
// remembered across a restart of the app.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "server/serve_process.h"
#include "support/gui_support.h"
#include "support/test_support.h"

using nlohmann::json;

namespace {

const std::filesystem::path k_npm_dir = KVC_TEST_NPM_DIR;
const std::string k_model_id = "serve-qwen";  // the model file's name, as /v1/models lists it

// Why the openai client cannot run here ("" when it can).
std::string client_missing() {
  if (auto gui = kvc::test::gui_unavailable()) return *gui;
  if (const std::string v = kvc::test::qwen_vocab_missing(); !v.empty()) return v;
  const auto why = k_npm_dir / "openai-missing.txt";
  if (std::filesystem::exists(why)) return "the openai npm client was not fetched: " + kvc::test::read_file(why);
  if (!std::filesystem::exists(k_npm_dir / "node_modules" / "openai")) {
    return "the openai npm client is not installed in " + k_npm_dir.string() +
           " (CTest's test_openai_client fixture runs tests/server/fetch-openai-client.sh)";
  }
  return "";
}

// A chatml model whose answers take a while (the Qwen vocabulary's 151k logits per token): a
// 3,000-token stream is still running when the switch goes off.
std::string make_model(const kvc::test::TempDir& tmp) {
  const std::string path = tmp.file(k_model_id + ".gguf");
  const auto r = kvc::test::cli(
      "mkmodel -q --ctx 4096 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --type q8_0 "
      "--vocab-from " +
          kvc::test::quoted(kvc::test::model_path("ggml-vocab-qwen2.gguf")) + " -o " + kvc::test::quoted(path),
      tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return path;
}

// A loopback port nobody listens on now.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t n = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A listening socket on a free loopback port, held by the test (the port in use).
struct Squatter {
  int fd = -1;
  int port = 0;
  Squatter() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 4) == 0);
    socklen_t n = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0);
    port = ntohs(a.sin_port);
  }
  ~Squatter() { ::close(fd); }
};

// Whether something accepts connections on 127.0.0.1:port.
bool listening(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// Runs the openai_client.mjs scenario against the app; its last output line as JSON.
json run_client(int port, const std::string& scenario) {
  std::string cmd = "timeout 300 node ";
  cmd += kvc::test::quoted(std::string(KVC_TEST_SERVER_DIR) + "/openai_client.mjs");
  for (const std::string& arg : {(k_npm_dir / "node_modules").string(),
                                 "http://127.0.0.1:" + std::to_string(port) + "/v1", k_model_id, scenario}) {
    cmd += ' ';
    cmd += kvc::test::quoted(arg);
  }
  std::string out;
  kvc::test::run_command(cmd, out);
  const size_t end = out.find_last_not_of('\n');
  if (end == std::string::npos) return json{{"failed", "no output"}};
  const size_t begin = out.rfind('\n', end);
  json j = json::parse(out.substr(begin == std::string::npos ? 0 : begin + 1, end + 1), nullptr, false);
  if (j.is_discarded()) return json{{"failed", out}};
  return j;
}

json step(const char* kind) { return json{{"do", kind}}; }
json wait_state(const std::string& state, const std::string& op, json value, double timeout_s = 60) {
  return json{
      {"do", "wait_state"}, {"state", state}, {"op", op}, {"value", std::move(value)}, {"timeout_s", timeout_s}};
}
json assert_state(const std::string& state, const std::string& op, json value) {
  return json{{"do", "assert"}, {"state", state}, {"op", op}, {"value", std::move(value)}};
}
json print(const std::string& state) { return json{{"do", "print"}, {"state", state}}; }

// Opens the Engine window and sets the switch (after typing `port`, when given).
json switch_steps(bool type_port, int port) {
  json s = json::array({json{{"do", "click"}, {"widget", "menu.engine"}}, json{{"do", "frames"}, {"n", 2}}});
  if (type_port) s.push_back(json{{"do", "type"}, {"widget", "engine.serve_port"}, {"text", std::to_string(port)}});
  s.push_back(json{{"do", "click"}, {"widget", "engine.serve"}});
  return s;
}

json start_steps() {
  return json::array({json{{"do", "wait_model"}, {"timeout_s", 120}}, json{{"do", "wait_idle"}, {"timeout_s", 60}}});
}

void append(json& to, const json& steps) {
  for (const auto& s : steps) to.push_back(s);
}

std::string app_command(const std::string& model, const std::string& data, const std::string& script) {
  std::string cmd = kvc::test::gui_command(400);
  for (const std::string& piece :
       {std::string(" -m '"), model, std::string("' -t 2 --data-dir '"), data, std::string("' --script '"), script,
        std::string("' --screenshot-dir '"), data, std::string("/shots'")}) {
    cmd.append(piece);
  }
  return cmd;
}

struct AppRun {
  int exit_code = -1;
  std::string output;
  std::map<std::string, std::string> printed;  // "kvchat: state NAME = VALUE" lines
};

// Runs the app with `steps`; on_line sees each output line as it comes (the app runs meanwhile).
template <typename F>
AppRun run_app(const std::string& model, const std::string& data, const json& steps, F on_line) {
  const std::string script = data + "-script.json";
  std::ofstream(script) << json{{"steps", steps}}.dump(1);
  const std::string cmd = app_command(model, data, script) + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  AppRun run;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p)) {
    std::string line = buf.data();
    run.output += line;
    while (!line.empty() && line.back() == '\n') line.pop_back();
    const std::string prefix = "kvchat: state ";
    if (line.starts_with(prefix)) {
      const size_t eq = line.find(" = ", prefix.size());
      if (eq != std::string::npos) run.printed[line.substr(prefix.size(), eq - prefix.size())] = line.substr(eq + 3);
    }
    on_line(line);
  }
  const int status = ::pclose(p);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

double number(const AppRun& r, const std::string& key) {
  const auto it = r.printed.find(key);
  return it == r.printed.end() ? -1 : std::stod(it->second);
}

json read_settings(const std::string& data) {
  return json::parse(kvc::test::read_file(std::filesystem::path(data) / "settings.json"), nullptr, false);
}

}  // namespace

TEST_CASE("kvchat GUI: Serve on localhost answers the openai client from the app's engine and cache, then stops",
          "[ui][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  kvc::test::TempDir tmp;
  const std::string model = make_model(tmp);
  const std::string data = tmp.file("data");
  const int port = free_port();
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/v1";

  json steps = start_steps();
  append(steps, switch_steps(true, port));
  append(steps, json::array({
                    wait_state("serve_on", "==", 1, 30),
                    assert_state("serve_url", "==", url),
                    assert_state("serve_error", "==", ""),
                    print("serve_on"),  // the client starts on this line
                    // greedy, turn 1, turn 2: then the app shows turn 2's request and its cache hit
                    wait_state("serve_requests", ">=", 3, 240),
                    print("serve_last_cached_tokens"),
                    print("serve_last_prompt_tokens"),
                    print("serve_requests"),
                    // the Memory window's timeline shows the API's requests, the cached ones too
                    wait_state("kv_timeline_turns", ">=", 3, 30),
                    wait_state("kv_timeline_last_cached", ">", 0, 30),
                    // the long stream is running: the switch goes off under it
                    wait_state("serve_in_flight", ">=", 1, 120),
                }));
  append(steps, switch_steps(false, port));
  append(steps, json::array({wait_state("serve_on", "==", 0, 30), assert_state("serve_wanted", "==", 0),
                             assert_state("serve_url", "==", ""), print("serve_on"),  // the test looks at the port
                             json{{"do", "sleep"}, {"seconds", 3}}, step("quit")}));

  std::future<json> client;
  bool closed_while_running = false;
  int n_on = 0;
  const AppRun run = run_app(model, data, steps, [&](const std::string& line) {
    if (line != "kvchat: state serve_on = 1" && line != "kvchat: state serve_on = 0") return;
    if (++n_on == 1) {
      client = std::async(std::launch::async, [port] { return run_client(port, "app"); });
    } else {
      closed_while_running = !listening(port);  // the app still runs (its script sleeps)
    }
  });
  INFO(run.output);
  REQUIRE(client.valid());
  const json c = client.get();
  INFO(c.dump());
  REQUIRE(run.exit_code == 0);
  REQUIRE_FALSE(c.contains("failed"));

  // The answer: the app's engine answers as kvchat-cli serve does (greedy, the same model).
  const json& greedy = c["greedy"];
  CHECK(greedy["role"] == "assistant");
  CHECK(!greedy["content"].get<std::string>().empty());
  CHECK(greedy["usage"]["completion_tokens"].get<int>() > 0);
  // Turn 2 resends turn 1's answer as text: it maps back to the app's cached ids.
  const json& t1 = c["turns"][0];
  const json& t2 = c["turns"][1];
  CHECK(!t1["content"].get<std::string>().empty());
  const int64_t cached = t2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  CHECK(cached >= t1["usage"]["prompt_tokens"].get<int64_t>() + t1["usage"]["completion_tokens"].get<int64_t>() - 16);
  // ... and the app's state showed that very request.
  CHECK(number(run, "serve_requests") == 3);
  CHECK(number(run, "serve_last_cached_tokens") == static_cast<double>(cached));
  CHECK(number(run, "serve_last_prompt_tokens") == static_cast<double>(t2["usage"]["prompt_tokens"].get<int64_t>()));
  // Off: the stream in flight ended with the server's error event, the port closed.
  const json& long_stream = c["long"];
  CHECK(!long_stream["content"].get<std::string>().empty());
  CHECK(long_stream["finish_reason"].is_null());
  REQUIRE(long_stream["error"].is_object());
  CHECK(long_stream["error"]["code"] == "server_shutting_down");
  CHECK(n_on == 2);
  CHECK(closed_while_running);
  // Off is remembered.
  const json settings = read_settings(data);
  CHECK(settings["serve"] == false);
  CHECK(settings["serve_port"] == port);

  // kvchat-cli serve gives the same greedy answer on the same model.
  kvc::test::ServeProcess s(model, tmp.file("serve-data"), "", tmp);  // -t 2, as the app
  const json g = run_client(s.port(), "greedy");
  INFO(g.dump());
  CHECK(g["content"] == greedy["content"]);
  CHECK(s.stop() == 0);
}

TEST_CASE("kvchat GUI: Serve on localhost on a port in use says so, and the switch is remembered across a restart",
          "[ui][e2e][server]") {
  if (auto why = kvc::test::gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  const std::string model = kvc::test::model_path("stories260K.gguf");
  const std::string data = tmp.file("data");
  int port = 0;
  {
    Squatter busy;
    port = busy.port;
    json steps = start_steps();
    append(steps, switch_steps(true, port));
    append(steps,
           json::array(
               {wait_state("serve_error", "contains", "the port is in use", 30), assert_state("serve_on", "==", 0),
                assert_state("serve_wanted", "==", 1), assert_state("serve_error", "contains", std::to_string(port)),
                json{{"do", "screenshot"}, {"name", "serve-port-in-use"}, {"window", "Engine"}}, step("quit")}));
    const AppRun run = run_app(model, data, steps, [](const std::string&) {});
    INFO(run.output);
    CHECK(run.exit_code == 0);
  }
  // Wanted, on that port: the next start tries again, and now the port is free.
  json settings = read_settings(data);
  CHECK(settings["serve"] == true);
  CHECK(settings["serve_port"] == port);
  json steps = start_steps();
  append(steps, json::array({wait_state("serve_on", "==", 1, 30), assert_state("serve_port", "==", port),
                             assert_state("serve_error", "==", ""), print("serve_on"),  // the test looks
                             json{{"do", "sleep"}, {"seconds", 2}}}));
  append(steps, switch_steps(false, port));
  append(steps, json::array({wait_state("serve_on", "==", 0, 30), step("quit")}));
  bool was_listening = false;
  const AppRun run = run_app(model, data, steps, [&](const std::string& line) {
    if (line == "kvchat: state serve_on = 1") was_listening = listening(port);
  });
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(was_listening);
  CHECK_FALSE(listening(port));
  settings = read_settings(data);
  CHECK(settings["serve"] == false);
}
