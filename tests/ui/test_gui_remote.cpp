// The real kvchat app under Xvfb with a remote model source: it chats with a real `kvchat-cli
// serve` (an API key, regenerate, an edit, the Memory window from the server's /metrics and
// cached_tokens, the settings and key remembered per server), and meets a closed port, 401,
// 429, a stream that drops mid-answer, one stopped by the user and one that stalls, from a real
// loopback HTTP server.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "server/serve_process.h"
#include "storage/conversation_store.h"
#include "support/gui_support.h"
#include "support/loopback_http.h"
#include "support/test_support.h"

namespace {

using kvc::test::gui_unavailable;

int run_gui(const std::string& args, std::string& output) {
  return kvc::test::run_command(kvc::test::gui_command(240) + " " + args, output);
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// assets/scripts/remote-chat.json.in, the script bench/remote-llama-server.sh runs too.
std::string remote_script(const std::string& url, const std::string& key, const std::string& model,
                          const std::string& extra_steps) {
  std::string s = kvc::test::read_file(std::string(KVC_ASSET_DIR) + "/scripts/remote-chat.json.in");
  replace_all(s, "@URL@", url);
  replace_all(s, "@KEY@", key);
  replace_all(s, "@MODEL@", model);
  replace_all(s, "@EXTRA_STEPS@", extra_steps);
  return s;
}

unsigned mode_of(const std::filesystem::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  return st.st_mode & 0777;
}

int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 1;
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string sse_chunk(const std::string& content) {
  return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + content + "\"},\"finish_reason\":null}]}\n\n";
}

}  // namespace

TEST_CASE("kvchat GUI: chats through a real kvchat-cli serve, its cache in the Memory window", "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  const std::string key = "remote-test-key-5f3a9c17";
  kvc::test::ServeProcess srv(kvc::test::model_path("tiny-gqa-q8_0.gguf"), tmp.file("serve-data"),
                              "--alias tiny-remote --api-key " + key, tmp);
  const std::string extra = R"(
  {"do": "assert", "state": "remote_engine", "value": "kvchat"},
  {"do": "assert", "state": "remote_has_cache_data", "value": 1},
  {"do": "assert", "state": "remote_n_answers_with_cached", "value": 2},
  {"do": "assert", "state": "remote_last_cached_tokens", "op": ">", "value": 0},
  {"do": "assert", "state": "remote_t0_used_bytes", "op": ">", "value": 0},
  {"do": "assert", "state": "remote_summary", "op": "contains", "value": "kvchat: KV"},
  {"do": "assert", "state": "memory_remote_summary", "op": "contains", "value": "prompt tokens cached"},
  {"do": "assert", "state": "last_prompt_reused", "op": ">", "value": 0},
  {"do": "assert", "state": "last_ttft_ms", "op": ">", "value": 0},
  {"do": "assert", "state": "last_reply_tokens", "op": ">", "value": 1},
  {"do": "assert", "state": "last_tokens_per_s", "op": ">", "value": 0},
  {"do": "click", "widget": "chat.regenerate"},
  {"do": "wait_idle", "timeout_s": 120},
  {"do": "assert", "state": "error", "value": ""},
  {"do": "assert", "state": "n_assistant_messages", "value": 2},
  {"do": "assert", "state": "n_branch_points", "value": 1},
  {"do": "assert", "state": "remote_last_cached_tokens", "op": ">", "value": 0},
  {"do": "click", "widget": "chat.edit_user.1"},
  {"do": "frames", "n": 3},
  {"do": "type", "widget": "chat.edit_text", "text": "Once upon a time there was a dog"},
  {"do": "click", "widget": "chat.edit_send"},
  {"do": "wait_idle", "timeout_s": 120},
  {"do": "assert", "state": "error", "value": ""},
  {"do": "assert", "state": "n_messages", "value": 2},
  {"do": "assert", "state": "n_branch_points", "value": 1},
  {"do": "click", "widget": "memory.remote_refresh"},
  {"do": "wait_idle", "timeout_s": 30},
  {"do": "assert", "state": "remote_n_metrics_reads", "op": ">=", "value": 5},)";
  { std::ofstream(tmp.file("remote.json")) << remote_script(srv.base_url(), key, "tiny-remote", extra); }
  const std::string model = kvc::test::model_path("stories260K.gguf");
  std::string out;
  const int rc = run_gui("-m '" + model + "' -t 2 --data-dir '" + tmp.file("data") + "' --script '" +
                             tmp.file("remote.json") + "' --screenshot-dir '" + tmp.file("shots") + "'",
                         out);
  INFO(out);
  INFO(srv.log());
  REQUIRE(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
  CHECK(out.find(key) == std::string::npos);  // never logged
  CHECK(std::filesystem::file_size(tmp.path() / "shots" / "remote-memory.png") > 1000);

  // The key: a user-only file; the per-server settings: without it.
  const auto remote_dir = tmp.path() / "data" / "remote";
  CHECK(mode_of(remote_dir / "keys.json") == 0600);
  CHECK(kvc::test::read_file(remote_dir / "keys.json").find(key) != std::string::npos);
  const std::string servers = kvc::test::read_file(remote_dir / "servers.json");
  CHECK(servers.find(srv.base_url()) != std::string::npos);
  CHECK(servers.find("tiny-remote") != std::string::npos);
  CHECK(servers.find(key) == std::string::npos);
  CHECK(kvc::test::read_file(tmp.path() / "data" / "settings.json").find(key) == std::string::npos);

  // The conversation is stored here, with the remote model (URL + model id) recorded.
  {
    auto store = kvc::storage::ConversationStore::open_in(tmp.path() / "data");
    REQUIRE(store.ok());
    auto list = (*store)->list_conversations(0, 10);
    REQUIRE(list.ok());
    REQUIRE_FALSE(list->empty());
    const auto& c = list->front();
    CHECK(c.settings.model_path == srv.base_url());
    CHECK(c.settings.model_name == "tiny-remote");
    auto path = (*store)->path_to(c.active_leaf);
    REQUIRE(path.ok());
    REQUIRE(path->size() == 2);
    CHECK((*path)[0].text == "Once upon a time there was a dog");
    CHECK_FALSE((*path)[1].text.empty());
  }

  // A later run: the server is remembered with its key; listing needs the key (401 without).
  const std::string again = R"({"steps": [
    {"do": "wait_model", "timeout_s": 120},
    {"do": "click", "widget": "model.tab.remote"},
    {"do": "frames", "n": 3},
    {"do": "assert", "state": "remote_n_saved", "value": 1},
    {"do": "click", "widget": "model.remote_saved.0"},
    {"do": "frames", "n": 2},
    {"do": "click", "widget": "model.remote_list"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "remote_list_error", "value": ""},
    {"do": "assert", "state": "remote_models", "value": "tiny-remote"},
    {"do": "click", "widget": "model.remote_connect"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "type", "widget": "chat.input", "text": "And then?"},
    {"do": "click", "widget": "chat.send"},
    {"do": "wait_idle", "timeout_s": 120},
    {"do": "assert", "state": "error", "value": ""},
    {"do": "assert", "state": "last_reply_chars", "op": ">", "value": 0},
    {"do": "command", "name": "restart_engine"},
    {"do": "wait_idle", "timeout_s": 60},
    {"do": "wait_model", "timeout_s": 60},
    {"do": "assert", "state": "model_is_remote", "value": 0},
    {"do": "assert", "state": "remote_active", "value": 0},
    {"do": "type", "widget": "chat.input", "text": "local now"},
    {"do": "click", "widget": "chat.send"},
    {"do": "wait_idle", "timeout_s": 60},
    {"do": "assert", "state": "error", "op": "contains", "value": "answered by a remote server"},
    {"do": "quit"}]})";
  { std::ofstream(tmp.file("again.json")) << again; }
  const int rc2 = run_gui(
      "-m '" + model + "' -t 2 --data-dir '" + tmp.file("data") + "' --script '" + tmp.file("again.json") + "'", out);
  INFO(out);
  CHECK(rc2 == 0);
  CHECK(out.find(key) == std::string::npos);
}

TEST_CASE("kvchat GUI: remote errors are shown plainly and lose nothing typed", "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  const std::string stream = sse_chunk("Hel") + sse_chunk("lo") + sse_chunk(" world") +
                             "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                             "data: [DONE]\n\n";
  kvc::test::LoopbackHttpServer server([&](const kvc::test::HttpRequest& req) {
    kvc::test::HttpResponse r;
    const std::string& p = req.path;
    if (p.rfind("/denied/", 0) == 0) {
      r.status = 401;
      r.body = R"({"error":{"message":"invalid api key","code":"invalid_api_key"}})";
    } else if (p.size() > 10 && p.compare(p.size() - 10, 10, "/v1/models") == 0) {
      r.body = R"({"object":"list","data":[{"id":"m","object":"model"}]})";
    } else if (p == "/busy/v1/chat/completions") {
      r.status = 429;
      r.headers = {{"Retry-After", "2"}};
      r.body = R"({"error":{"message":"too many requests"}})";
    } else if (p == "/drop/v1/chat/completions") {
      r.body = stream;
      r.headers = {{"Content-Type", "text/event-stream"}};
      r.drop_after = sse_chunk("Hel").size() + sse_chunk("lo").size();
    } else if (p == "/slow/v1/chat/completions") {  // 40 pieces, 0.25 s apart: time to press Stop
      for (int i = 0; i < 40; ++i) {
        std::string piece(1, 'w');  // appends: GCC 12 misreads "w" + std::string at -O3 (-Wrestrict)
        piece += std::to_string(i);
        piece += ' ';
        r.body += sse_chunk(piece);
      }
      r.body += "data: [DONE]\n\n";
      r.headers = {{"Content-Type", "text/event-stream"}};
      r.chunk_bytes = sse_chunk("w10 ").size();
      r.chunk_delay_ms = 250;
    } else if (p == "/stall/v1/chat/completions") {
      r.body = stream;
      r.headers = {{"Content-Type", "text/event-stream"}};
      r.chunk_bytes = sse_chunk("Hel").size();
      r.chunk_delay_ms = 4000;
    } else {
      r.status = 404;
      r.body = "not here";
    }
    return r;
  });
  const std::string closed = "http://127.0.0.1:" + std::to_string(closed_port()) + "/v1";
  auto connect = [&](const std::string& prefix, const std::string& timeout) {
    return R"(
    {"do": "type", "widget": "model.remote_url", "text": ")" +
           server.url(prefix + "/v1") + R"("},
    {"do": "type", "widget": "model.remote_timeout", "text": ")" +
           timeout + R"("},
    {"do": "click", "widget": "model.remote_list"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "click", "widget": "model.remote_model.m", "timeout_s": 10},
    {"do": "frames", "n": 2},
    {"do": "click", "widget": "model.remote_connect"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "model_is_remote", "value": 1},)";
  };
  const std::string script = R"({"steps": [
    {"do": "wait_model", "timeout_s": 120},
    {"do": "click", "widget": "model.tab.remote"},
    {"do": "frames", "n": 3},
    {"do": "type", "widget": "model.remote_url", "text": ")" +
                             closed + R"("},
    {"do": "click", "widget": "model.remote_list"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "remote_list_error", "op": "contains", "value": "connection refused"},
    {"do": "type", "widget": "model.remote_url", "text": ")" +
                             server.url("/denied/v1") + R"("},
    {"do": "click", "widget": "model.remote_list"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "remote_list_error", "op": "contains", "value": "refused the API key (HTTP 401"},
    {"do": "assert", "state": "remote_n_models", "value": 0},)" +
                             connect("/drop", "30") + R"(
    {"do": "assert", "state": "remote_summary", "value": "this server reports no cache data"},
    {"do": "assert", "state": "remote_metrics_error", "op": "contains", "value": "HTTP 404"},
    {"do": "key", "key": "ctrl+n"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "type", "widget": "chat.input", "text": "please answer"},
    {"do": "click", "widget": "chat.send"},
    {"do": "wait_idle", "timeout_s": 60},
    {"do": "assert", "state": "error", "op": "contains", "value": "dropped mid-answer"},
    {"do": "assert", "state": "last_reply", "value": "Hello"},
    {"do": "assert", "state": "last_interrupted", "op": "contains", "value": "dropped mid-answer"},
    {"do": "assert", "state": "n_user_messages", "value": 1},
    {"do": "assert", "state": "md_last_user_text", "value": "please answer"},
    {"do": "frames", "n": 3},
    {"do": "screenshot", "name": "remote-dropped", "window": "Chat"},)" +
                             connect("/busy", "30") + R"(
    {"do": "type", "widget": "chat.input", "text": "second try"},
    {"do": "click", "widget": "chat.send"},
    {"do": "wait_idle", "timeout_s": 60},
    {"do": "assert", "state": "error", "op": "contains", "value": "HTTP 429"},
    {"do": "assert", "state": "error", "op": "contains", "value": "try again in 2 s"},
    {"do": "assert", "state": "n_user_messages", "value": 2},)" +
                             connect("/slow", "30") + R"(
    {"do": "type", "widget": "chat.input", "text": "a long answer please"},
    {"do": "click", "widget": "chat.send"},
    {"do": "wait_state", "state": "last_reply_chars", "op": ">=", "value": 8, "timeout_s": 30},
    {"do": "click", "widget": "chat.stop"},
    {"do": "wait_idle", "timeout_s": 30},
    {"do": "assert", "state": "last_stop_reason", "value": "stopped"},
    {"do": "assert", "state": "last_interrupted", "value": ""},
    {"do": "assert", "state": "last_reply_chars", "op": "<", "value": 100},
    {"do": "assert", "state": "n_user_messages", "value": 3},)" +
                             connect("/stall", "1") + R"(
    {"do": "type", "widget": "chat.input", "text": "third try"},
    {"do": "click", "widget": "chat.send"},
    {"do": "wait_idle", "timeout_s": 60},
    {"do": "assert", "state": "error", "op": "contains", "value": "timeout"},
    {"do": "assert", "state": "last_reply", "value": "Hel"},
    {"do": "assert", "state": "last_interrupted", "op": "contains", "value": "middle of the answer"},
    {"do": "assert", "state": "n_user_messages", "value": 4},
    {"do": "quit"}
  ]})";
  kvc::test::TempDir tmp;
  { std::ofstream(tmp.file("errors.json")) << script; }
  std::string out;
  const int rc =
      run_gui("-m '" + kvc::test::model_path("stories260K.gguf") + "' -t 2 --data-dir '" + tmp.file("data") +
                  "' --script '" + tmp.file("errors.json") + "' --screenshot-dir '" + tmp.file("shots") + "'",
              out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
  // On disk: every question, and each answer as far as it came.
  auto store = kvc::storage::ConversationStore::open_in(tmp.path() / "data");
  REQUIRE(store.ok());
  auto list = (*store)->list_conversations(0, 10);
  REQUIRE(list.ok());
  REQUIRE_FALSE(list->empty());
  auto path = (*store)->path_to(list->front().active_leaf);
  REQUIRE(path.ok());
  std::vector<std::string> texts;
  for (const auto& m : *path) texts.push_back(m.text);
  REQUIRE(texts.size() == 8);
  CHECK(std::vector<std::string>(texts.begin(), texts.begin() + 5) ==
        std::vector<std::string>{"please answer", "Hello", "second try", "", "a long answer please"});
  CHECK(texts[5].rfind("w0 w1 ", 0) == 0);  // stopped: what came before Stop, kept
  CHECK(texts[5].size() < 100);
  CHECK(texts[6] == "third try");
  CHECK(texts[7] == "Hel");
}
