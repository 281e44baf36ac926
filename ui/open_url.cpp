// Spawning the URL opener without a shell.
#include "ui/open_url.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace kvc::ui {

bool is_openable_url(std::string_view url) {
  auto starts_with_nocase = [&](std::string_view prefix) {
    if (url.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i) {
      char c = url[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != prefix[i]) return false;
    }
    return true;
  };
  const size_t scheme = starts_with_nocase("https://")  ? 8
                        : starts_with_nocase("http://") ? 7
                        : starts_with_nocase("mailto:") ? 7
                                                        : 0;
  if (scheme == 0 || url.size() == scheme) return false;
  for (const char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7F) return false;
  }
  return true;
}

Status open_url(const std::string& url) {
  if (!is_openable_url(url)) {
    return make_error(ErrorCode::invalid_argument,
                      "not opened: \"" + url.substr(0, 200) + "\" is not an http(s) or mailto link");
  }
  const char* env = std::getenv("KVCHAT_URL_OPENER");
  const std::string opener = env && *env ? env : "xdg-open";
  char* const argv[] = {const_cast<char*>(opener.c_str()), const_cast<char*>(url.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, opener.c_str(), nullptr, nullptr, argv, environ);
  if (rc != 0) {
    return make_error(ErrorCode::io, "could not start " + opener + " to open " + url.substr(0, 200) + ": " +
                                         std::strerror(rc) + " (install xdg-utils, or set KVCHAT_URL_OPENER)");
  }
  std::thread([pid] {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  }).detach();
  return {};
}

}  // namespace kvc::ui
