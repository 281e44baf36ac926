// Running the real app under Xvfb from a test.
#include "support/gui_support.h"

#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

namespace kvc::test {

std::optional<std::string> gui_unavailable() {
  if (const char* off = std::getenv("KVCHAT_TEST_NO_GUI"); off != nullptr && *off != '\0') {
    return "KVCHAT_TEST_NO_GUI is set: the GUI tests run in the release build's suite";
  }
  if (std::system("command -v xvfb-run >/dev/null 2>&1") != 0) {
    return "xvfb-run is not installed (apt-get install xvfb xauth)";
  }
  return std::nullopt;
}

namespace {
// gui_command's wrapper prints the app's own exit status last, so that xvfb-run's own failures
// after the app ended (its temporary directory's clean-up, seen failing now and then on a busy
// machine: exit status 5) do not stand for the app's.
constexpr const char* k_exit_marker = "[kvchat exit status ";
}  // namespace

int run_command(const std::string& cmd, std::string& output) {
  std::string line = cmd;
  line += " 2>&1";
  FILE* p = ::popen(line.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  output.clear();
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  const int status = ::pclose(p);
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (rc == 124) return rc;  // timeout(1) stopped it: not the app's own end
  if (const size_t at = output.rfind(k_exit_marker); at != std::string::npos)
    return std::atoi(output.c_str() + at + std::char_traits<char>::length(k_exit_marker));
  return rc;
}

std::string gui_command(int timeout_s, const std::string& screen) {
  std::string cmd = "timeout ";
  cmd += std::to_string(timeout_s);
  cmd += " xvfb-run -a -s '-screen 0 ";
  cmd += screen;
  cmd += "' ";
#if defined(__SANITIZE_ADDRESS__)
  cmd += "env ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" ";
#endif
  cmd += "sh -c '\"$0\" \"$@\"; s=$?; echo \"";
  cmd += k_exit_marker;
  cmd += "$s]\" >&2; exit $s' '";
  cmd += KVC_GUI_PATH;
  cmd += "'";
  return cmd;
}

}  // namespace kvc::test
