// RequestHead: the end of a request's head and its body's framing, found without parsing the rest.
#include "app/server/request_head.h"

#include <algorithm>
#include <limits>

namespace kvc::server {

namespace {

bool equals_lower(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A decimal number of at most 19 digits (no sign, no spaces inside); false for anything else.
bool parse_length(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  out = v;
  return true;
}

// One header line (without its line end) applied to the framing fields.
void read_header(std::string_view line, RequestHead& h) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;  // httplib refuses the head; nothing to frame
  const std::string_view name = line.substr(0, colon);
  const std::string_view value = trim(line.substr(colon + 1));
  if (equals_lower(name, "content-length")) {
    uint64_t n = 0;
    if (!parse_length(value, n) || (h.has_length && n != h.content_length)) h.ambiguous = true;
    h.has_length = true;
    h.content_length = n;
  } else if (equals_lower(name, "transfer-encoding")) {
    h.has_transfer_coding = true;
  } else if (equals_lower(name, "expect")) {
    h.expect_continue = h.expect_continue || equals_lower(value, "100-continue");
  }
}

}  // namespace

uint64_t RequestHead::request_bytes() const {
  if (!length_known()) return 0;
  const uint64_t body = has_length ? content_length : 0;
  return body > std::numeric_limits<uint64_t>::max() - head_bytes ? std::numeric_limits<uint64_t>::max()
                                                                  : head_bytes + body;
}

RequestHead scan_request_head(std::string_view bytes, size_t max_head_bytes) {
  RequestHead h;
  const std::string_view window = bytes.substr(0, std::min(bytes.size(), max_head_bytes));
  size_t line_begin = 0;
  bool first = true;  // the request line
  while (true) {
    const size_t nl = window.find('\n', line_begin);
    if (nl == std::string_view::npos) break;
    std::string_view line = window.substr(line_begin, nl - line_begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    line_begin = nl + 1;
    if (line.empty() && !first) {
      h.state = RequestHead::State::complete;
      h.head_bytes = line_begin;
      if (h.has_length && h.has_transfer_coding) h.ambiguous = true;
      if (h.ambiguous) h.content_length = 0;
      return h;
    }
    if (!first) read_header(line, h);
    first = false;
  }
  h = RequestHead{};
  if (bytes.size() >= max_head_bytes) h.state = RequestHead::State::too_large;
  return h;
}

size_t leading_empty_lines(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (bytes[i] == '\n') {
      ++i;
    } else if (bytes[i] == '\r' && i + 1 < bytes.size() && bytes[i + 1] == '\n') {
      i += 2;
    } else {
      break;
    }
  }
  return i;
}

}  // namespace kvc::server
