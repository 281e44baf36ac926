// libFuzzer target for what the server reads from a client before any model runs: any bytes as a
// connection's first bytes (the connection pool's head scan) and as a request body (the chat and
// completion parsers and Anthropic's messages parser, with the server's limits).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "app/server/anthropic_request.h"
#include "app/server/request_head.h"
#include "app/server/request_parsing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  using kvc::server::RequestHead;
  const size_t skip = kvc::server::leading_empty_lines(bytes);
  const RequestHead h = kvc::server::scan_request_head(bytes.substr(skip), 4096);
  if (h.state == RequestHead::State::complete) {
    // The head's end is inside what was scanned, and a known length is what the head says.
    if (h.head_bytes > bytes.size() - skip || h.head_bytes > 4096) __builtin_trap();
    if (h.length_known() && h.request_bytes() < h.head_bytes) __builtin_trap();
  }
  const kvc::server::RequestLimits limits;
  (void)kvc::server::parse_chat_request(bytes, limits);
  (void)kvc::server::parse_completion_request(bytes, limits);
  (void)kvc::server::parse_messages_request(bytes, limits, kvc::server::MessagesBody::create, true);
  (void)kvc::server::parse_messages_request(bytes, limits, kvc::server::MessagesBody::count_tokens, false);
  return 0;
}
