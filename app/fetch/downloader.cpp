// download_model: one libcurl easy handle per attempt, the .part file appended to and hashed as
// bytes arrive, retried from where it stopped, verified and renamed at the end.
#include "app/fetch/downloader.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "app/fetch/sha256.h"
#include "app/fetch/source.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model_check.h"

namespace kvc::fetch {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

uint64_t free_disk_bytes(const fs::path& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
}

namespace {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r' || s[e - 1] == '\n')) --e;
  return s.substr(b, e - b);
}

// Where an interrupted download came from; a .part without one (or from another URL) is not resumed.
struct PartMeta {
  std::string url;
  std::string sha256;  // published or expected
  std::string etag;    // the final response's strong ETag, sent back as If-Range
  uint64_t total_bytes = 0;
};

std::optional<PartMeta> read_meta(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  PartMeta m;
  m.url = j.value("url", std::string());
  m.sha256 = j.value("sha256", std::string());
  m.etag = j.value("etag", std::string());
  m.total_bytes = j.value("total_bytes", uint64_t{0});
  return m;
}

void write_meta(const fs::path& file, const PartMeta& m) {
  const nlohmann::json j = {{"url", m.url}, {"sha256", m.sha256}, {"etag", m.etag}, {"total_bytes", m.total_bytes}};
  std::ofstream(file) << j.dump(2) << "\n";
}

// What one attempt saw and did; the callbacks run on the thread inside curl_easy_perform.
struct Attempt {
  CURL* curl = nullptr;
  FILE* file = nullptr;
  Sha256* hash = nullptr;
  const DownloadRequest* request = nullptr;
  const std::function<void(const DownloadProgress&)>* progress = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  PartMeta* meta = nullptr;
  fs::path meta_path;
  uint64_t offset = 0;       // bytes in the file when the body starts
  uint64_t n_written = 0;    // this attempt's body bytes written
  uint64_t total_bytes = 0;  // 0: unknown
  bool body_started = false;
  bool restart_from_zero = false;  // the file changed on the server: start over
  std::string error;               // why a callback stopped the transfer
  // Headers of the response being read; the published hash survives the redirect it came with.
  std::string content_range;
  std::string etag;
  bool hf_response = false;
  std::string published;
  std::string published_header;
  // Progress: (time, bytes done) over the last seconds.
  std::deque<std::pair<Clock::time_point, uint64_t>> samples;
  Clock::time_point last_report{};
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* a = static_cast<Attempt*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect, or 100 Continue)
    a->content_range.clear();
    a->etag.clear();
    a->hf_response = false;
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) {
    // The blank line ending a response's headers: an ETag of Hugging Face's own is its hash.
    if (a->published.empty() && a->hf_response) {
      const std::string h = sha256_from_etag(a->etag);
      if (!h.empty()) {
        a->published = h;
        a->published_header = "ETag";
      }
    }
    return size * n;
  }
  const std::string name = lower(trim(line.substr(0, colon)));
  const std::string value = trim(line.substr(colon + 1));
  if (name == "content-range") a->content_range = value;
  if (name == "etag") a->etag = value;
  if (name == "x-repo-commit") a->hf_response = true;
  if (name == "x-linked-etag") {
    const std::string h = sha256_from_etag(value);
    if (!h.empty()) {
      a->published = h;
      a->published_header = "X-Linked-Etag";
    }
  }
  return size * n;
}

// "bytes START-END/TOTAL": START and TOTAL (0 when '*'); false when malformed.
bool parse_content_range(const std::string& v, uint64_t& start, uint64_t& total) {
  unsigned long long s = 0, e = 0;
  char tail[32] = {};
  if (std::sscanf(v.c_str(), "bytes %llu-%llu/%31s", &s, &e, tail) != 3) return false;
  start = s;
  total = tail[0] == '*' ? 0 : std::strtoull(tail, nullptr, 10);
  return true;
}

// The first body bytes of an attempt: is this the range asked for, the whole file, or neither?
bool begin_body(Attempt& a) {
  long status = 0;
  curl_easy_getinfo(a.curl, CURLINFO_RESPONSE_CODE, &status);
  curl_off_t length = -1;
  curl_easy_getinfo(a.curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
  if (status == 206) {
    uint64_t start = 0, total = 0;
    if (!parse_content_range(a.content_range, start, total)) {
      a.error = "the server answered a range request with a malformed Content-Range \"" + a.content_range + "\"";
      return false;
    }
    if (start != a.offset) {
      a.error = "the server sent bytes from " + std::to_string(start) + " when asked for " + std::to_string(a.offset);
      return false;
    }
    a.total_bytes = total ? total : (length >= 0 ? a.offset + static_cast<uint64_t>(length) : 0);
    const bool changed = (!a.meta->sha256.empty() && !a.published.empty() && a.meta->sha256 != a.published) ||
                         (a.meta->total_bytes && a.total_bytes && a.meta->total_bytes != a.total_bytes);
    if (changed) {
      a.restart_from_zero = true;
      a.error = "the file changed on the server since the partial download";
      return false;
    }
  } else if (status == 200) {
    if (a.offset > 0) {  // the server ignores ranges (or If-Range said the file changed): start over
      if (std::fflush(a.file) != 0 || ::ftruncate(::fileno(a.file), 0) != 0 || std::fseek(a.file, 0, SEEK_SET) != 0) {
        a.error = std::string("cannot truncate the partial file: ") + std::strerror(errno);
        return false;
      }
      a.hash->reset();
      a.offset = 0;
    }
    a.total_bytes = length >= 0 ? static_cast<uint64_t>(length) : 0;
  } else {
    a.error = "the server answered HTTP " + std::to_string(status) + " with a body, not the file";
    return false;
  }
  if (a.total_bytes > a.offset) {
    const uint64_t needed = a.total_bytes - a.offset;
    const uint64_t free =
        a.request->free_bytes ? a.request->free_bytes(a.request->models_dir) : free_disk_bytes(a.request->models_dir);
    if (needed > free) {
      a.error = "not enough disk space: " + format_size(static_cast<double>(needed)) + " to download, " +
                format_size(static_cast<double>(free)) + " free in " + a.request->models_dir.string();
      return false;
    }
  }
  if (a.offset == 0) a.meta->sha256.clear();
  if (!a.published.empty()) a.meta->sha256 = a.published;
  const bool strong = !a.etag.empty() && a.etag.rfind("W/", 0) != 0;
  a.meta->etag = strong ? a.etag : std::string();
  a.meta->total_bytes = a.total_bytes;
  write_meta(a.meta_path, *a.meta);
  a.body_started = true;
  return true;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* a = static_cast<Attempt*>(user);
  const size_t bytes = size * n;
  if (!a->body_started && !begin_body(*a)) return 0;
  if (std::fwrite(data, 1, bytes, a->file) != bytes) {
    a->error = std::string("cannot write the partial file: ") + std::strerror(errno) +
               " (what was downloaded is kept: free some space and pull again to resume)";
    return 0;
  }
  a->hash->update(data, bytes);
  a->n_written += bytes;
  return bytes;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* a = static_cast<Attempt*>(user);
  if (a->cancel && a->cancel->load()) return 1;
  const auto now = Clock::now();
  if (now - a->last_report < std::chrono::milliseconds(100)) return 0;
  a->last_report = now;
  DownloadProgress p;
  p.done_bytes = a->offset + a->n_written;
  p.total_bytes = a->total_bytes;
  p.phase = a->body_started ? "downloading" : "connecting";
  a->samples.emplace_back(now, p.done_bytes);
  while (a->samples.size() > 2 && now - a->samples.front().first > std::chrono::seconds(5)) a->samples.pop_front();
  const double dt = std::chrono::duration<double>(now - a->samples.front().first).count();
  if (dt > 0.2) p.bytes_per_s = static_cast<double>(p.done_bytes - a->samples.front().second) / dt;
  if (p.bytes_per_s > 0 && p.total_bytes >= p.done_bytes) {
    p.eta_s = static_cast<double>(p.total_bytes - p.done_bytes) / p.bytes_per_s;
  }
  if (a->progress && *a->progress) (*a->progress)(p);
  return 0;
}

bool retryable(CURLcode c) {
  switch (c) {
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_COULDNT_CONNECT:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return true;
    default: return false;
  }
}

std::string http_error_message(long status, const std::string& url) {
  std::string m = "HTTP " + std::to_string(status) + " from " + url;
  if (status == 404) m += ": no such file (check the owner, repository and file name)";
  if (status == 401 || status == 403) {
    m += ": access denied (a gated or private Hugging Face model needs its licence accepted on the website and "
         "a token in $HF_TOKEN)";
  }
  return m;
}

// Hashes the first `n_bytes` of the file into `hash`.
Status hash_prefix(const fs::path& file, uint64_t n_bytes, Sha256& hash) {
  std::ifstream in(file, std::ios::binary);
  std::vector<char> buf(1 << 20);
  uint64_t left = n_bytes;
  while (left > 0 && in) {
    in.read(buf.data(), static_cast<std::streamsize>(std::min<uint64_t>(left, buf.size())));
    const auto got = static_cast<uint64_t>(in.gcount());
    if (got == 0) break;
    hash.update(buf.data(), got);
    left -= got;
  }
  if (left != 0) return make_error(ErrorCode::io, "cannot read " + file.string() + " to resume it");
  return {};
}

bool sleep_unless_cancelled(double seconds, const std::atomic<bool>* cancel) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    if (cancel && cancel->load()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !(cancel && cancel->load());
}

// An open .part file, locked so that a second pull of the same file (the app and the CLI) waits its turn.
struct PartFile {
  FILE* f = nullptr;
  ~PartFile() {
    if (f) std::fclose(f);
  }
};

// A .part that holds no byte when the pull ends (a 404, a redirect loop, too little disk, a
// cancel before the first byte) is removed with its metadata: there is nothing to resume.
struct RemoveIfEmpty {
  fs::path part;
  fs::path meta;
  ~RemoveIfEmpty() {
    std::error_code ec;
    if (fs::file_size(part, ec) != 0 || ec) return;
    fs::remove(part, ec);
    fs::remove(meta, ec);
  }
};

// What a failed pull says of its .part: where its bytes wait for the next pull, if it has any.
std::string kept_note(uint64_t n_bytes, const fs::path& part_path, const char* then) {
  if (n_bytes == 0) return "";
  return "; " + std::to_string(n_bytes) + " bytes are kept in " + part_path.string() + then;
}

std::string read_recorded_sha(const fs::path& sha_file) {
  std::ifstream in(sha_file);
  std::string hex;
  in >> hex;
  return is_sha256_hex(hex) ? lower(hex) : std::string();
}

}  // namespace

Result<Downloaded> download_model(const DownloadRequest& request,
                                  const std::function<void(const DownloadProgress&)>& progress,
                                  const std::atomic<bool>* cancel) {
  init_curl_once();
  std::string name = request.file_name;
  if (name.empty()) {
    auto n = file_name_from_url(request.url);
    if (!n.ok()) return n.error();
    name = *n;
  }
  KVC_TRY(check_file_name(name));
  if (!request.expected_sha256.empty() && !is_sha256_hex(request.expected_sha256)) {
    return make_error(ErrorCode::invalid_argument,
                      "--sha256 wants 64 hex digits, got \"" + request.expected_sha256 + "\"");
  }
  const std::string expected = lower(request.expected_sha256);
  std::error_code ec;
  fs::create_directories(request.models_dir, ec);
  if (ec) return make_error(ErrorCode::io, "cannot create " + request.models_dir.string() + ": " + ec.message());
  const fs::path final_path = request.models_dir / name;
  const fs::path part_path = request.models_dir / (name + ".part");
  const fs::path meta_path = request.models_dir / (name + ".part.json");
  const fs::path sha_path = request.models_dir / (name + ".sha256");

  Downloaded out;
  out.path = final_path;
  if (fs::exists(final_path, ec)) {
    out.already_present = true;
    out.n_bytes = fs::file_size(final_path, ec);
    out.sha256 = read_recorded_sha(sha_path);
    if (!expected.empty() && !out.sha256.empty() && out.sha256 != expected) {
      return make_error(ErrorCode::invalid_file, final_path.string() + " exists with sha256 " + out.sha256 +
                                                     ", not the " + expected +
                                                     " asked for; delete it to download again");
    }
    return out;
  }

  // Resume only what came from this URL (and, when a hash was asked for, for the same hash).
  PartMeta meta;
  uint64_t offset = 0;
  if (auto old = read_meta(meta_path); old && old->url == request.url && fs::exists(part_path, ec) &&
                                       (expected.empty() || old->sha256.empty() || old->sha256 == expected)) {
    meta = *old;
    offset = fs::file_size(part_path, ec);
    if (ec || (meta.total_bytes && offset > meta.total_bytes)) offset = 0;
  }
  meta.url = request.url;
  PartFile part;
  const int fd = ::open(part_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return make_error(ErrorCode::io, "cannot write " + part_path.string() + ": " + std::strerror(errno));
  part.f = ::fdopen(fd, "r+b");
  if (!part.f) {
    ::close(fd);
    return make_error(ErrorCode::io, "cannot write " + part_path.string() + ": " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    return make_error(ErrorCode::io,
                      "another download of " + name + " into " + request.models_dir.string() + " is running");
  }
  const RemoveIfEmpty remove_if_empty{part_path, meta_path};  // before the lock is let go
  if (offset == 0 && ::ftruncate(::fileno(part.f), 0) != 0) {
    return make_error(ErrorCode::io, "cannot truncate " + part_path.string() + ": " + std::strerror(errno));
  }
  Sha256 hash;
  if (offset > 0) {
    if (progress) progress(DownloadProgress{offset, meta.total_bytes, 0, -1, "hashing the partial download"});
    if (auto st = hash_prefix(part_path, offset, hash); !st.ok()) return st.error();
    ::fseeko(part.f, static_cast<off_t>(offset), SEEK_SET);
  }
  out.n_resumed_bytes = offset;

  const char* token = std::getenv("HF_TOKEN");
  double delay = request.retry_delay_s;
  uint64_t total = meta.total_bytes;
  std::string published = meta.sha256;
  std::string published_header = meta.sha256.empty() ? "" : "X-Linked-Etag";
  bool restarted = false;
  // A .part already as long as the file: only the checks are left.
  const bool complete = offset > 0 && offset == meta.total_bytes;
  for (int attempt = 1; !complete; ++attempt) {
    out.n_attempts = attempt;
    CURL* curl = curl_easy_init();
    if (!curl) return make_error(ErrorCode::internal, "libcurl could not start a transfer");
    Attempt a;
    a.curl = curl;
    a.file = part.f;
    a.hash = &hash;
    a.request = &request;
    a.progress = &progress;
    a.cancel = cancel;
    a.meta = &meta;
    a.meta_path = meta_path;
    a.offset = offset;
    a.total_bytes = total;
    char curl_error[CURL_ERROR_SIZE] = {};
    curl_slist* headers = nullptr;
    std::string auth;
    if (token && *token && request.url.rfind("https://huggingface.co/", 0) == 0) {
      auth = std::string("Authorization: Bearer ") + token;  // curl drops it on a redirect to another host
      headers = curl_slist_append(headers, auth.c_str());
    }
    std::string if_range;
    if (offset > 0 && !meta.etag.empty()) {
      if_range = "If-Range: " + meta.etag;
      headers = curl_slist_append(headers, if_range.c_str());
    }
    curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85 deprecates the bitmask options
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "kvchat");
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, request.connect_timeout_s);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, request.stall_timeout_s);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_error);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &a);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    if (headers) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    // "Range: bytes=N-" by hand: with CURLOPT_RESUME_FROM curl itself fails a 200 answer, and
    // a server that ignores ranges should just send the whole file again.
    const std::string range = std::to_string(offset) + "-";
    if (offset > 0) curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
    if (progress) progress(DownloadProgress{offset, total, 0, -1, attempt == 1 ? "connecting" : "reconnecting"});
    const CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    std::fflush(part.f);
    offset = a.offset + a.n_written;
    if (a.total_bytes) total = a.total_bytes;
    if (!a.published.empty()) {
      published = a.published;
      published_header = a.published_header;
    }
    if (rc == CURLE_OK) break;

    std::string why;
    bool retry = false;
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
      return make_error(ErrorCode::io,
                        "download cancelled" + kept_note(offset, part_path, " for a later pull to resume"));
    } else if (rc == CURLE_WRITE_ERROR && a.restart_from_zero && !restarted) {
      restarted = true;
      retry = true;
      why = a.error;
    } else if (rc == CURLE_WRITE_ERROR) {
      return make_error(ErrorCode::io, a.error.empty() ? std::string("cannot write ") + part_path.string() : a.error);
    } else if (rc == CURLE_HTTP_RETURNED_ERROR && status == 416 && offset > 0 && !restarted) {
      restarted = true;  // the range lies past the file's end: the file changed; start over
      retry = true;
      why = "HTTP 416 for the partial download's range";
    } else if (rc == CURLE_HTTP_RETURNED_ERROR) {
      why = http_error_message(status, request.url);
      retry = status >= 500 || status == 429;
      if (!retry) return make_error(ErrorCode::io, why);
    } else {
      why = std::string(curl_error[0] ? curl_error : curl_easy_strerror(rc));
      retry = retryable(rc);
      if (!retry) return make_error(ErrorCode::io, "cannot download " + request.url + ": " + why);
    }
    if (restarted && (a.restart_from_zero || status == 416)) {
      if (std::fflush(part.f) != 0 || ::ftruncate(::fileno(part.f), 0) != 0 || std::fseek(part.f, 0, SEEK_SET) != 0) {
        return make_error(ErrorCode::io, "cannot truncate " + part_path.string() + ": " + std::strerror(errno));
      }
      hash.reset();
      offset = 0;
      total = 0;
      meta = PartMeta{request.url, "", "", 0};
      published.clear();
      continue;
    }
    if (attempt >= request.max_attempts) {
      return make_error(ErrorCode::io, "cannot download " + request.url + " after " + std::to_string(attempt) +
                                           " attempts: " + why +
                                           kept_note(offset, part_path, ", pull again to resume"));
    }
    if (progress) {
      char phase[96];
      std::snprintf(phase, sizeof phase, "retrying in %.0f s", delay);
      progress(DownloadProgress{offset, total, 0, -1, std::string(phase) + ": " + why});
    }
    if (!sleep_unless_cancelled(delay, cancel)) {
      return make_error(ErrorCode::io,
                        "download cancelled" + kept_note(offset, part_path, " for a later pull to resume"));
    }
    delay *= 2;
  }

  if (std::fflush(part.f) != 0 || ::fsync(::fileno(part.f)) != 0) {
    return make_error(ErrorCode::io, std::string("cannot write ") + part_path.string() + ": " + std::strerror(errno));
  }
  if (total && offset != total) {
    return make_error(ErrorCode::io, "the server ended the transfer after " + std::to_string(offset) + " of " +
                                         std::to_string(total) + " bytes; pull again to resume");
  }
  if (progress) progress(DownloadProgress{offset, total, 0, 0, "verifying"});
  out.n_bytes = offset;
  out.sha256 = hash.hex_digest();
  const std::string want = !expected.empty() ? expected : published;
  if (!want.empty()) out.sha256_source = !expected.empty() ? "--sha256" : "the server (" + published_header + ")";
  auto discard = [&] {
    std::fclose(part.f);
    part.f = nullptr;
    fs::remove(part_path, ec);
    fs::remove(meta_path, ec);
  };
  if (!want.empty() && want != out.sha256) {
    discard();
    return make_error(ErrorCode::invalid_file, "sha256 mismatch for " + name + ": " + out.sha256_source + " says " +
                                                   want + ", the download hashes to " + out.sha256 +
                                                   "; the download was deleted, pull again");
  }
  {
    auto gguf = gguf::GgufFile::open(part_path.string());
    if (!gguf.ok()) {
      discard();
      return make_error(ErrorCode::invalid_file, request.url + " is not a GGUF model file (" + gguf.error().message +
                                                     "); the download was deleted");
    }
    if (auto checked = model::check_model_file(*gguf); !checked.ok()) out.model_warning = checked.error().message;
  }
  std::fclose(part.f);
  part.f = nullptr;
  fs::rename(part_path, final_path, ec);
  if (ec)
    return make_error(ErrorCode::io,
                      "cannot rename " + part_path.string() + " to " + final_path.string() + ": " + ec.message());
  std::ofstream(sha_path) << out.sha256 << "  " << name << "\n";
  fs::remove(meta_path, ec);
  return out;
}

}  // namespace kvc::fetch
