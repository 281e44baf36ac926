// RequestHead: what the bytes of a connection received so far say about the HTTP/1.1 request at
// their start — whether its head has arrived whole, and how its body is framed.
//
//   "POST /v1/chat/completions HTTP/1.1\r\nHost: …\r\nContent-Length: 42\r\n\r\n{…42 bytes…}POST …"
//    |<------------------------- head_bytes ------------------------------>|<- body ->|<- next …
//
// The server's connection pool reads requests without a thread of its own per connection and
// hands one to a worker only once this says it is there; the framing it finds must agree with
// httplib's, so anything ambiguous (two lengths, a length with a transfer coding, a length that
// is not a number) is marked and the request answered with a 400 on a connection then closed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvc::server {

struct RequestHead {
  enum class State {
    incomplete,  // the blank line that ends the head has not arrived
    complete,    // head_bytes is the head's length, the framing fields are set
    too_large,   // no end of head within the limit
  };
  State state = State::incomplete;
  size_t head_bytes = 0;        // through the blank line
  bool has_length = false;      // a Content-Length header
  uint64_t content_length = 0;  // its value when has_length and not ambiguous
  bool has_transfer_coding = false;
  bool expect_continue = false;  // "Expect: 100-continue": the client waits for a go-ahead before its body
  // Two Content-Length values that differ, one that is not a decimal number, or a Content-Length
  // beside a Transfer-Encoding: the body's end is not known for sure (RFC 9112 §6.3).
  bool ambiguous = false;

  // The bytes of head and body when the body's length is known from the head; 0 otherwise.
  uint64_t request_bytes() const;
  // Whether the body's length is known without reading it (no transfer coding, no ambiguity).
  bool length_known() const { return state == State::complete && !has_transfer_coding && !ambiguous; }
};

// Scans `bytes` (a connection's buffer, starting at a request) for its head: at most
// `max_head_bytes` are looked at.
RequestHead scan_request_head(std::string_view bytes, size_t max_head_bytes);

// The number of empty lines ("\r\n" or "\n") at the start of `bytes`, in bytes: RFC 9112 §2.2
// lets a server skip them before a request line (some clients send one after a body).
size_t leading_empty_lines(std::string_view bytes);

}  // namespace kvc::server
