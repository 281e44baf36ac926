// ServeProcess: a `kvchat-cli serve` started by a test on a free loopback port, stopped by SIGTERM;
// and the tiny chatml (Qwen vocabulary) model the server tests run on.
#pragma once

#include <sys/types.h>
#include <string>

#include "support/test_support.h"

namespace kvc::test {

class ServeProcess {
 public:
  // Starts `kvchat-cli serve -m MODEL --port 0 --data-dir DATA_DIR EXTRA` and waits (up to 30 s)
  // for the line naming its port; the test fails if it does not come.
  ServeProcess(const std::string& model, const std::string& data_dir, const std::string& extra_args,
               const TempDir& tmp);
  ~ServeProcess();  // SIGKILL if still running
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  // SIGTERM, then waits up to 20 s: the exit code (-1: killed by a signal or did not exit).
  int stop();
  // SIGKILL now (no shutdown of any kind): true when it died of it.
  bool kill_now();
  bool running() const { return pid_ > 0; }
  std::string log() const;  // its stderr so far

 private:
  pid_t pid_ = -1;
  int port_ = -1;
  std::string err_file_;
};

// The reason the server tests on the Qwen-vocabulary model must skip ("" when they can run):
// its vocabulary comes from npm (tests/data/test-vocabularies.sh).
std::string qwen_vocab_missing();
// mkmodel's tiny qwen2-vocabulary llama (dim 64, 2 layers, Q8_0; chatml template) in tmp.
std::string make_chat_model(const TempDir& tmp);

}  // namespace kvc::test
