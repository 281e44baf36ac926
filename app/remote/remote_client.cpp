// The OpenAI-compatible client: requests over libcurl, SSE parsing, and what each failure means.
#include "app/remote/remote_client.h"

#include <curl/curl.h>

#include <chrono>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/util/clock.h"

namespace kvc::remote {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr size_t k_max_error_body = 64 * 1024;

void init_curl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

// The server's own words: an OpenAI error object's message, else the start of the body.
std::string server_message(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
    if (e.is_string()) return e.get<std::string>();
  }
  if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
  std::string text = body.substr(0, 200);
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text;
}

Error http_error(long status, const std::string& body, const std::string& retry_after, const std::string& url) {
  const std::string msg = server_message(body);
  const std::string said = msg.empty() ? std::string() : ": " + msg;
  const std::string code = "HTTP " + std::to_string(status);
  if (status == 401 || status == 403) {
    return make_error(ErrorCode::invalid_argument, "the server refused the API key (" + code + said +
                                                       "); enter the server's key in Model > Remote and connect again");
  }
  if (status == 429) {
    return make_error(ErrorCode::io,
                      "the server is busy (" + code + " Too Many Requests" + said + "); try again" +
                          (retry_after.empty() ? std::string(" in a moment") : " in " + retry_after + " s"));
  }
  if (status == 404) {
    return make_error(ErrorCode::invalid_argument, url + ": " + code + said +
                                                       "; is the base URL the server's OpenAI API (it usually "
                                                       "ends in /v1), and is the model name right?");
  }
  if (status >= 500) return make_error(ErrorCode::io, "the server failed (" + code + said + ")");
  return make_error(ErrorCode::invalid_argument, url + ": " + code + said);
}

Error transport_error(CURLcode rc, const char* curl_error, const std::string& url, double timeout_s, bool mid_answer) {
  const std::string detail = curl_error && *curl_error ? curl_error : curl_easy_strerror(rc);
  const std::string kept = mid_answer ? "; the answer so far is kept" : std::string();
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
      return make_error(ErrorCode::io, "cannot reach " + url + ": connection refused (" + detail +
                                           "); is the server running, and are the host and port right?");
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return make_error(ErrorCode::io, "cannot reach " + url + ": the host name does not resolve (" + detail + ")");
    case CURLE_OPERATION_TIMEDOUT:
      if (mid_answer) {
        return make_error(ErrorCode::io, "timeout: the server sent nothing for " + seconds_text(timeout_s) +
                                             " in the middle of the answer, which was cut off" + kept);
      }
      return make_error(ErrorCode::io, "timeout: " + url + " sent nothing for " + seconds_text(timeout_s) + " (" +
                                           detail + "); the server may be overloaded or stuck");
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
      return make_error(ErrorCode::io, std::string(mid_answer ? "the connection dropped mid-answer"
                                                              : "the connection to the server dropped") +
                                           " (" + detail + ")" + kept);
    default: return make_error(ErrorCode::io, "request to " + url + " failed: " + detail + kept);
  }
}

struct Transfer {
  CURL* curl = nullptr;
  curl_slist* headers = nullptr;
  char error[CURL_ERROR_SIZE] = {};
  std::string retry_after;
  ~Transfer() {
    curl_slist_free_all(headers);
    if (curl) curl_easy_cleanup(curl);
  }
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * n);
  constexpr std::string_view k_retry = "retry-after:";
  if (line.size() > k_retry.size()) {
    std::string head(line.substr(0, k_retry.size()));
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (head == k_retry) {
      std::string v(line.substr(k_retry.size()));
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
      while (!v.empty() && v.front() == ' ') v.erase(v.begin());
      t->retry_after = v;
    }
  }
  return size * n;
}

// A transfer with the options every request shares; the key only in its header.
Result<std::unique_ptr<Transfer>> start(const Endpoint& e, const std::string& url) {
  init_curl();
  auto t = std::make_unique<Transfer>();
  t->curl = curl_easy_init();
  if (!t->curl) return make_error(ErrorCode::internal, "libcurl could not start a transfer");
  CURL* c = t->curl;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
  curl_easy_setopt(c, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  curl_easy_setopt(c, CURLOPT_USERAGENT, "kvchat");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, t->error);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::max(0.1, e.connect_timeout_s) * 1000));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(std::max(1.0, std::ceil(e.timeout_s))));
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, t.get());
  if (!e.api_key.empty()) {
    const std::string auth = "Authorization: Bearer " + e.api_key;
    t->headers = curl_slist_append(t->headers, auth.c_str());
  }
  return t;
}

size_t collect(char* data, size_t size, size_t n, void* user) {
  auto* body = static_cast<std::string*>(user);
  body->append(data, size * n);
  return body->size() > (size_t{32} << 20) ? 0 : size * n;  // a page over 32 MiB is not an answer
}

Result<std::string> get(const Endpoint& e, const std::string& url) {
  auto t = start(e, url);
  if (!t.ok()) return t.error();
  CURL* c = (*t)->curl;
  std::string body;
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max(1.0, e.timeout_s) * 1000));
  if ((*t)->headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, (*t)->headers);
  const CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (rc != CURLE_OK) return transport_error(rc, (*t)->error, url, e.timeout_s, false);
  if (status >= 400) return http_error(status, body, (*t)->retry_after, url);
  return body;
}

// "\"URL\"" (built by appends: GCC 12 misreads `"literal" + std::string` at -O3 as overlapping).
std::string quoted(std::string_view url) {
  std::string q(1, '"');
  q.append(url);
  q.push_back('"');
  return q;
}

}  // namespace

Result<std::string> normalize_base_url(std::string_view url) {
  std::string u(url);
  while (!u.empty() && std::isspace(static_cast<unsigned char>(u.front()))) u.erase(u.begin());
  while (!u.empty() && std::isspace(static_cast<unsigned char>(u.back()))) u.pop_back();
  if (u.empty()) return make_error(ErrorCode::invalid_argument, "enter the server's URL, e.g. http://gpu-box:8000/v1");
  const size_t scheme = u.find("://");
  if (scheme == std::string::npos) {
    u.insert(0, "http://");
  } else if (u.compare(0, scheme, "http") != 0 && u.compare(0, scheme, "https") != 0) {
    return make_error(ErrorCode::invalid_argument,
                      quoted(url) + " is not an http:// or https:// URL of an OpenAI-compatible server");
  }
  const size_t host_at = u.find("://") + 3;
  if (host_at >= u.size() || u[host_at] == '/' || u[host_at] == ':') {
    return make_error(ErrorCode::invalid_argument, quoted(url) + " has no host name");
  }
  while (u.size() > host_at && u.back() == '/') u.pop_back();
  if (u.find('/', host_at) == std::string::npos) u += "/v1";
  return u;
}

std::string metrics_url(std::string_view base_url) {
  std::string u(base_url);
  if (u.size() >= 3 && u.compare(u.size() - 3, 3, "/v1") == 0) u.resize(u.size() - 3);
  return u + "/metrics";
}

Result<std::vector<std::string>> list_models(const Endpoint& e) {
  const std::string url = e.base_url + "/models";
  auto body = get(e, url);
  if (!body.ok()) return body.error();
  const json j = json::parse(*body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) {
    return make_error(
        ErrorCode::invalid_file,
        url + " did not answer with a model list; is this an OpenAI-compatible API base (ending in /v1)?");
  }
  std::vector<std::string> ids;
  for (const json& m : j["data"]) {
    if (m.is_object() && m.contains("id") && m["id"].is_string()) ids.push_back(m["id"].get<std::string>());
  }
  if (ids.empty()) return make_error(ErrorCode::invalid_file, url + " lists no models");
  return ids;
}

Result<std::string> fetch_metrics(const Endpoint& e) {
  Endpoint m = e;
  m.timeout_s = std::min(e.timeout_s, 5.0);
  return get(m, metrics_url(e.base_url));
}

void SseParser::feed(std::string_view bytes, const std::function<void(std::string_view)>& on_event) {
  for (char c : bytes) {
    if (c != '\n') {
      line_ += c;
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {  // the blank line that ends an event
      if (has_data_) on_event(data_);
      data_.clear();
      has_data_ = false;
    } else if (line_.compare(0, 5, "data:") == 0) {
      std::string_view v = std::string_view(line_).substr(5);
      if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      if (has_data_) data_ += '\n';
      data_ += v;
      has_data_ = true;
    }  // comments (":"), event:, id: and retry: lines carry nothing a chat completion needs
    line_.clear();
  }
}

namespace {

struct Stream {
  const std::function<bool(std::string_view)>* on_delta = nullptr;
  StreamedAnswer* out = nullptr;
  CURL* curl = nullptr;
  SseParser sse;
  Clock::time_point t0;
  std::string error_body;  // an HTTP error's body
  std::string raw;         // the first bytes, for an answer that is not a stream
  std::string server_error;
  bool in_reasoning = false;
  int64_t n_events = 0;
  // The stall watchdog: curl's low-speed check averages over seconds, so a burst then silence
  // would pass it; the progress callback compares the time since the last byte instead.
  Clock::time_point last_byte;
  double timeout_ms = 0;
  bool stalled = false;

  bool emit(const std::string& text) {
    if (text.empty()) return true;
    const double t = ms_since(t0);
    if (out->n_deltas == 0) out->ttft_ms = t;
    out->decode_ms = t - out->ttft_ms;
    ++out->n_deltas;
    out->text += text;
    if (!(*on_delta)(text)) {
      out->stopped = true;
      return false;
    }
    return true;
  }

  // One data payload; false stops the transfer.
  bool event(std::string_view data) {
    ++n_events;
    if (data == "[DONE]") {
      out->done = true;
      return true;
    }
    const json j = json::parse(data, nullptr, false);
    if (!j.is_object()) return true;
    if (j.contains("error") && !j["error"].is_null()) {
      server_error = server_message(std::string(data));
      return false;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      const json& u = j["usage"];
      if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number()) out->prompt_tokens = u["prompt_tokens"];
      if (u.contains("completion_tokens") && u["completion_tokens"].is_number()) {
        out->completion_tokens = u["completion_tokens"];
      }
      if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object()) {
        const json& d = u["prompt_tokens_details"];
        if (d.contains("cached_tokens") && d["cached_tokens"].is_number()) out->cached_tokens = d["cached_tokens"];
      }
    }
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return true;
    const json& ch = j["choices"][0];
    if (!ch.is_object()) return true;
    if (ch.contains("delta") && ch["delta"].is_object()) {
      const json& d = ch["delta"];
      std::string text;
      for (const char* key : {"reasoning_content", "reasoning"}) {
        if (d.contains(key) && d[key].is_string() && !d[key].get<std::string>().empty()) {
          if (!in_reasoning) text += "<think>";
          in_reasoning = true;
          text += d[key].get<std::string>();
          break;
        }
      }
      if (d.contains("content") && d["content"].is_string() && !d["content"].get<std::string>().empty()) {
        if (in_reasoning) text += "</think>";
        in_reasoning = false;
        text += d["content"].get<std::string>();
      }
      if (!emit(text)) return false;
    }
    if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) {
      out->finish_reason = ch["finish_reason"].get<std::string>();
      if (in_reasoning && !emit("</think>")) return false;
      in_reasoning = false;
    }
    return true;
  }
};

size_t on_stream(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Stream*>(user);
  const size_t len = size * n;
  s->last_byte = Clock::now();
  long status = 0;
  curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 400) {
    if (s->error_body.size() < k_max_error_body) s->error_body.append(data, len);
    return len;
  }
  if (s->raw.size() < k_max_error_body) s->raw.append(data, std::min(len, k_max_error_body - s->raw.size()));
  bool go = true;
  s->sse.feed(std::string_view(data, len), [&](std::string_view ev) {
    if (go) go = s->event(ev);
  });
  return go ? len : 0;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* s = static_cast<Stream*>(user);
  if (ms_since(s->last_byte) > s->timeout_ms) {
    s->stalled = true;
    return 1;
  }
  if (!(*s->on_delta)(std::string_view())) {
    s->out->stopped = true;
    return 1;
  }
  return 0;
}

}  // namespace

Status stream_chat(const Endpoint& e, const ChatOptions& o, const std::vector<chat::ChatMessage>& messages,
                   const std::function<bool(std::string_view)>& on_delta, StreamedAnswer& out) {
  out = StreamedAnswer{};
  const std::string url = e.base_url + "/chat/completions";
  json body = {{"model", o.model}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  body["messages"] = json::array();
  for (const chat::ChatMessage& m : messages) body["messages"].push_back({{"role", m.role}, {"content", m.content}});
  const sampling::GenerateOptions& g = o.generation;
  if (g.max_tokens > 0) body["max_tokens"] = g.max_tokens;
  body["temperature"] = g.sampling.temperature;
  body["top_p"] = g.sampling.top_p;
  if (g.sampling.seed >= 0) body["seed"] = g.sampling.seed;
  const std::string payload = body.dump(-1, ' ', false, json::error_handler_t::replace);

  auto t = start(e, url);
  if (!t.ok()) return t.error();
  CURL* c = (*t)->curl;
  (*t)->headers = curl_slist_append((*t)->headers, "Content-Type: application/json");
  (*t)->headers = curl_slist_append((*t)->headers, "Accept: text/event-stream");
  (*t)->headers = curl_slist_append((*t)->headers, "Expect:");  // no 100-continue round trip
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, (*t)->headers);
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
  Stream s;
  s.on_delta = &on_delta;
  s.out = &out;
  s.curl = c;
  s.t0 = s.last_byte = Clock::now();
  s.timeout_ms = std::max(0.1, e.timeout_s) * 1000;
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  const CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (out.stopped) return {};
  if (!s.server_error.empty()) {
    return make_error(ErrorCode::io, "the server ended the answer with an error: " + s.server_error +
                                         (out.text.empty() ? std::string() : "; the answer so far is kept"));
  }
  if (status >= 400) return http_error(status, s.error_body, (*t)->retry_after, url);
  const bool mid_answer = out.n_deltas > 0;
  if (s.stalled) return transport_error(CURLE_OPERATION_TIMEDOUT, "", url, e.timeout_s, mid_answer);
  if (rc != CURLE_OK) return transport_error(rc, (*t)->error, url, e.timeout_s, mid_answer);
  if (s.n_events == 0) {
    // A server that answered without streaming: one chat.completion object.
    const json j = json::parse(s.raw, nullptr, false);
    if (j.is_object() && j.contains("choices") && j["choices"].is_array() && !j["choices"].empty() &&
        j["choices"][0].contains("message") && j["choices"][0]["message"].is_object()) {
      const json& m = j["choices"][0]["message"];
      if (m.contains("content") && m["content"].is_string()) s.emit(m["content"].get<std::string>());
      out.done = true;
      return {};
    }
    return make_error(ErrorCode::invalid_file, url + " did not answer with a chat completion stream");
  }
  if (!out.done && out.finish_reason.empty()) {
    return make_error(
        ErrorCode::io,
        std::string(mid_answer ? "the connection dropped mid-answer" : "the connection to the server dropped") +
            " (the stream ended without [DONE])" + (mid_answer ? "; the answer so far is kept" : ""));
  }
  out.done = true;
  return {};
}

}  // namespace kvc::remote
