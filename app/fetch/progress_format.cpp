// How download progress reads on a terminal and in the Model window.
#include <cmath>
#include <cstdio>

#include "app/fetch/downloader.h"

namespace kvc::fetch {

std::string format_size(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  } else {
    std::snprintf(buf, sizeof buf, bytes < 10 ? "%.2f %s" : bytes < 100 ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  }
  return buf;
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[48];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%lld s", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lld min %lld s", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld h %lld min", s / 3600, (s % 3600) / 60);
  }
  return buf;
}

std::string format_progress(const DownloadProgress& p) {
  std::string out;
  char pct[16];
  if (p.total_bytes > 0) {
    std::snprintf(pct, sizeof pct, "%3.0f%% ",
                  100.0 * static_cast<double>(p.done_bytes) / static_cast<double>(p.total_bytes));
    out += pct;
    out += format_size(static_cast<double>(p.done_bytes)) + " / " + format_size(static_cast<double>(p.total_bytes));
  } else {
    out += format_size(static_cast<double>(p.done_bytes));
  }
  if (p.bytes_per_s > 0) out += "  " + format_size(p.bytes_per_s) + "/s";
  if (p.eta_s >= 0 && p.bytes_per_s > 0) out += "  " + format_duration(p.eta_s) + " left";
  if (p.phase != "downloading" && !p.phase.empty()) out += "  (" + p.phase + ")";
  return out;
}

}  // namespace kvc::fetch
