// Downloading a model file over HTTP(S) into DATA_DIR/models: redirects, resume of a partial
// file by range request, the published sha256 checked, a free-disk check first, cancel.
//
//   models/NAME.part        bytes so far (resumed by "Range: bytes=SIZE-")
//   models/NAME.part.json   where they came from (url, published sha256, total size)
//   models/NAME             renamed from .part once complete, hashed and a valid GGUF
//   models/NAME.sha256      "HEX  NAME", the sha256 of every finished download (sha256sum -c)
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "app/fetch/source.h"
#include "core/util/result.h"

namespace kvc::fetch {

struct DownloadProgress {
  uint64_t done_bytes = 0;   // of the whole file, resumed bytes included
  uint64_t total_bytes = 0;  // 0 while unknown
  double bytes_per_s = 0;    // over the last few seconds
  double eta_s = -1;         // < 0: unknown
  std::string phase;         // "connecting", "downloading", "verifying", "retrying in 2 s: ..."
};

struct DownloadRequest {
  std::string url;  // resolved (resolve_source)
  std::filesystem::path models_dir;
  std::string file_name;        // empty: file_name_from_url
  std::string expected_sha256;  // empty: whatever the server publishes, if anything
  int max_attempts = 5;         // a dropped connection is retried from where it stopped
  double retry_delay_s = 1.0;   // doubled after each failed attempt
  long connect_timeout_s = 30;
  long stall_timeout_s = 60;  // abort an attempt that receives nothing for this long
  // Free bytes of models_dir, for tests; empty: statvfs.
  std::function<uint64_t(const std::filesystem::path&)> free_bytes;
};

struct Downloaded {
  std::filesystem::path path;
  std::string sha256;
  std::string sha256_source;  // "the server (X-Linked-Etag)", "--sha256", or empty: nothing to check against
  uint64_t n_bytes = 0;
  uint64_t n_resumed_bytes = 0;  // bytes that were already in the .part file
  int n_attempts = 0;
  bool already_present = false;  // the file existed: nothing was downloaded
  std::string model_warning;     // a valid GGUF that kvchat cannot run: why
};

// Downloads synchronously; `progress` is called on the calling thread about 10 times a second.
// Setting `*cancel` (any thread) stops within ~100 ms with an error; the .part file stays for
// a later resume. A wrong hash or a file that is not GGUF deletes the .part file.
Result<Downloaded> download_model(const DownloadRequest& request,
                                  const std::function<void(const DownloadProgress&)>& progress = {},
                                  const std::atomic<bool>* cancel = nullptr);

// statvfs(dir): bytes available to an unprivileged user; 0 when it cannot be read.
uint64_t free_disk_bytes(const std::filesystem::path& dir);

// "1.2 GiB", "340 MiB/s", "2 min 5 s": what progress lines show.
std::string format_size(double bytes);
std::string format_duration(double seconds);
// "  41% 1.1 GiB / 2.6 GiB  12.3 MiB/s  2 min 5 s left"
std::string format_progress(const DownloadProgress& p);

}  // namespace kvc::fetch
