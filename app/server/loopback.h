// Loopback names: whether the address a server listens on, or the Host a request is addressed
// to, is this machine's loopback (127.0.0.0/8, ::1, localhost and its subdomains).
#pragma once

#include <string_view>

namespace kvc::server {

// A listen address ("127.0.0.1", "::1", "localhost", "[::1]"): true when only this machine can connect.
bool is_loopback_address(std::string_view host);
// A Host header's value, with or without a port ("localhost:8080", "[::1]:8080", "127.0.0.1").
bool is_loopback_host_header(std::string_view host);

}  // namespace kvc::server
