// Loopback names: 127.0.0.0/8 and ::1 as text, and localhost with its subdomains (RFC 6761).
#include "app/server/loopback.h"

#include <arpa/inet.h>

#include <cctype>
#include <string>

namespace kvc::server {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool is_loopback_address(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string h = lower(host);
  if (h == "localhost" || h.ends_with(".localhost")) return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    // ::ffff:127.x.x.x
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

bool is_loopback_host_header(std::string_view host) {
  if (host.empty()) return false;
  if (host.front() == '[') {  // "[::1]" or "[::1]:8080"
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return false;
    return is_loopback_address(host.substr(0, close + 1));
  }
  const size_t colon = host.rfind(':');
  if (colon != std::string_view::npos && host.find(':') == colon) host = host.substr(0, colon);  // "name:port"
  return is_loopback_address(host);
}

}  // namespace kvc::server
