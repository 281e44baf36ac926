// Formatting of numbers for the views.
#include "ui/format.h"

#include <cmath>
#include <cstdio>

namespace kvc::ui {

std::string format_bytes(double n) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(n) >= 1024.0 && u < 4) {
    n /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", n, units[u]);
  return buf;
}

std::string format_prefill(int64_t n_tokens, double elapsed_ms) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "prefilling %lld new token%s...", static_cast<long long>(n_tokens),
                n_tokens == 1 ? "" : "s");
  std::string s = buf;
  if (elapsed_ms >= 500) {
    s += ' ';
    s += format_duration_ms(elapsed_ms);
  }
  return s;
}

std::string format_duration_ms(double ms) {
  char buf[32];
  if (ms < 10.0) {
    std::snprintf(buf, sizeof buf, "%.2f ms", ms);
  } else if (ms < 1000.0) {
    std::snprintf(buf, sizeof buf, "%.0f ms", ms);
  } else if (ms < 60'000.0) {
    std::snprintf(buf, sizeof buf, "%.2f s", ms / 1000.0);
  } else {
    const auto s = static_cast<int64_t>(ms / 1000.0);
    std::snprintf(buf, sizeof buf, "%lld min %02lld s", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  }
  return buf;
}

std::string format_tok_per_s(int64_t n_tokens, double ms) {
  if (ms <= 0 || n_tokens <= 0) return "-";
  char buf[32];
  const double r = 1000.0 * static_cast<double>(n_tokens) / ms;
  std::snprintf(buf, sizeof buf, r < 10.0 ? "%.2f tok/s" : "%.1f tok/s", r);
  return buf;
}

std::string format_params(int64_t n) {
  char buf[32];
  const auto x = static_cast<double>(n);
  if (n < 1000) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  } else if (n < 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.0fK", x / 1e3);
  } else if (n < 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "%.1fM", x / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1fB", x / 1e9);
  }
  return buf;
}

std::string format_age(int64_t then_ms, int64_t now_ms) {
  const int64_t s = (now_ms - then_ms) / 1000;
  if (s < 60) return "just now";
  if (s < 3600) return std::to_string(s / 60) + " min ago";
  if (s < 86400) return std::to_string(s / 3600) + " h ago";
  const int64_t d = s / 86400;
  return d == 1 ? "yesterday" : std::to_string(d) + " days ago";
}

void utf8_pop_back(std::string& s) {
  while (!s.empty()) {
    const auto c = static_cast<unsigned char>(s.back());
    s.pop_back();
    if ((c & 0xC0u) != 0x80u) return;  // not a continuation byte: the code point's first byte
  }
}

}  // namespace kvc::ui
