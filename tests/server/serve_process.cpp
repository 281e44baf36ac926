// ServeProcess: posix_spawn of kvchat-cli serve, its port read from its first line of stdout.
#include "server/serve_process.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

extern char** environ;

namespace kvc::test {

namespace {

// Waits up to `ms` for the child to exit; its status, or -2 if it is still running.
int wait_exit(pid_t pid, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() >= deadline) return -2;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

ServeProcess::ServeProcess(const std::string& model, const std::string& data_dir, const std::string& extra_args,
                           const TempDir& tmp)
    : err_file_(
          tmp.file("serve-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ".err")) {
  int out[2];
  REQUIRE(::pipe(out) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addclose(&fa, out[1]);
  const std::string cmd = "exec " + quoted(KVC_CLI_PATH) + " serve -m " + quoted(model) + " --port 0 --data-dir " +
                          quoted(data_dir) + " -t 2 " + extra_args;
  std::vector<std::string> argv_s = {"/bin/sh", "-c", cmd};
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = ::posix_spawn(&pid_, "/bin/sh", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  REQUIRE(rc == 0);
  // "kvchat-cli serve: listening on http://127.0.0.1:PORT/v1 (...)"
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);  // later output goes nowhere: the server does not print to stdout again
  const size_t at = line.find("127.0.0.1:");
  INFO("serve printed: " << line << "\nstderr: " << log());
  REQUIRE(at != std::string::npos);
  port_ = std::stoi(line.substr(at + 10));
  REQUIRE(port_ > 0);
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    wait_exit(pid_, 5000);
  }
}

int ServeProcess::stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  const int code = wait_exit(pid_, 20000);
  if (code == -2) {
    ::kill(pid_, SIGKILL);
    wait_exit(pid_, 5000);
  }
  pid_ = -1;
  return code == -2 ? -1 : code;
}

bool ServeProcess::kill_now() {
  if (pid_ <= 0) return false;
  ::kill(pid_, SIGKILL);
  const int code = wait_exit(pid_, 5000);
  pid_ = -1;
  return code == -1;  // killed by the signal
}

std::string ServeProcess::log() const {
  std::error_code ec;
  return std::filesystem::exists(err_file_, ec) ? read_file(err_file_) : "";
}

std::string qwen_vocab_missing() {
  const auto why = models_dir() / "hf-vocab-missing.txt";
  if (std::filesystem::exists(why)) return "the Qwen vocabulary was not fetched: " + read_file(why);
  return "";
}

std::string make_chat_model(const TempDir& tmp) {
  const std::string path = tmp.file("chat-qwen.gguf");
  const auto r = cli("mkmodel -q --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --type q8_0 --vocab-from " +
                         quoted(model_path("ggml-vocab-qwen2.gguf")) + " -o " + quoted(path),
                     tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return path;
}

}  // namespace kvc::test
