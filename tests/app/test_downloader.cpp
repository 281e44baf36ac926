// kvchat's model downloads against a real HTTP server on loopback serving a real GGUF: ranges,
// a dropped connection resumed, a server that ignores ranges, Hugging Face's redirect with the
// sha256 in X-Linked-Etag (right and wrong), a 404, a file that is not GGUF, a full disk, cancel.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "app/fetch/downloader.h"
#include "app/fetch/sha256.h"
#include "support/loopback_http.h"
#include "support/test_support.h"

namespace fs = std::filesystem;
using kvc::fetch::DownloadRequest;
using kvc::test::HttpRequest;
using kvc::test::HttpResponse;
using kvc::test::LoopbackHttpServer;

namespace {

// The real 1.1 MiB stories260K.gguf from tests/data/models.
const std::string& model_bytes() {
  static const std::string bytes = kvc::test::read_file(kvc::test::model_path("stories260K.gguf"));
  return bytes;
}

DownloadRequest request_for(const LoopbackHttpServer& server, const std::string& path, const kvc::test::TempDir& tmp) {
  DownloadRequest r;
  r.url = server.url(path);
  r.models_dir = tmp.path() / "models";
  r.retry_delay_s = 0.05;
  r.connect_timeout_s = 5;
  r.stall_timeout_s = 10;
  return r;
}

uintmax_t size_or_zero(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

// Hugging Face's shape: /resolve/main/F answers 302 to /cdn/F with X-Linked-Etag (the LFS
// file's sha256) and X-Repo-Commit; the CDN serves the bytes with ranges.
HttpResponse hf_like(const HttpRequest& req, const std::string& sha) {
  if (req.path.rfind("/org/repo/resolve/main/", 0) == 0) {
    HttpResponse r;
    r.status = 302;
    r.headers = {{"Location", "/cdn/" + req.path.substr(23)},
                 {"X-Linked-Etag", "\"" + sha + "\""},
                 {"X-Linked-Size", std::to_string(model_bytes().size())},
                 {"X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567"},
                 {"ETag", "\"a94a8fe5ccb19ba61c4c0873d391e987982fbbd3\""}};
    return r;
  }
  if (req.path.rfind("/cdn/", 0) == 0) return kvc::test::serve_file(req, model_bytes());
  HttpResponse r;
  r.status = 404;
  r.body = "Entry not found";
  return r;
}

}  // namespace

TEST_CASE("pull: a redirect to the CDN, the sha256 of X-Linked-Etag checked and recorded beside the file",
          "[app][e2e]") {
  const std::string sha = kvc::fetch::sha256_hex(model_bytes());
  LoopbackHttpServer server([&](const HttpRequest& req) { return hf_like(req, sha); });
  kvc::test::TempDir tmp;
  std::vector<kvc::fetch::DownloadProgress> seen;
  auto r = kvc::fetch::download_model(request_for(server, "/org/repo/resolve/main/stories.gguf", tmp),
                                      [&](const kvc::fetch::DownloadProgress& p) { seen.push_back(p); });
  INFO((r.ok() ? "" : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->path == tmp.path() / "models" / "stories.gguf");
  CHECK(r->sha256 == sha);
  CHECK(r->sha256_source == "the server (X-Linked-Etag)");
  CHECK(r->n_bytes == model_bytes().size());
  CHECK(r->model_warning.empty());
  CHECK(kvc::test::read_file(r->path) == model_bytes());
  CHECK(kvc::test::read_file(tmp.path() / "models" / "stories.gguf.sha256") == sha + "  stories.gguf\n");
  CHECK_FALSE(fs::exists(tmp.path() / "models" / "stories.gguf.part"));
  CHECK_FALSE(fs::exists(tmp.path() / "models" / "stories.gguf.part.json"));
  REQUIRE(server.requests().size() == 2);
  CHECK(server.requests()[1].path == "/cdn/stories.gguf");
  REQUIRE_FALSE(seen.empty());
  CHECK(seen.back().phase == "verifying");
  CHECK(seen.back().done_bytes == model_bytes().size());
  CHECK(seen.back().total_bytes == model_bytes().size());

  // Pulling it again downloads nothing.
  auto again = kvc::fetch::download_model(request_for(server, "/org/repo/resolve/main/stories.gguf", tmp));
  REQUIRE(again.ok());
  CHECK(again->already_present);
  CHECK(again->sha256 == sha);
  CHECK(server.requests().size() == 2);
}

TEST_CASE("pull: a wrong published sha256 deletes the download and says both hashes", "[app][e2e]") {
  const std::string wrong(64, 'b');
  LoopbackHttpServer server([&](const HttpRequest& req) { return hf_like(req, wrong); });
  kvc::test::TempDir tmp;
  auto r = kvc::fetch::download_model(request_for(server, "/org/repo/resolve/main/stories.gguf", tmp));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("sha256 mismatch") != std::string::npos);
  CHECK(r.error().message.find(wrong) != std::string::npos);
  CHECK(r.error().message.find(kvc::fetch::sha256_hex(model_bytes())) != std::string::npos);
  CHECK_FALSE(fs::exists(tmp.path() / "models" / "stories.gguf"));
  CHECK_FALSE(fs::exists(tmp.path() / "models" / "stories.gguf.part"));

  // A hash given by the user is checked too, against a server that publishes none.
  LoopbackHttpServer plain([&](const HttpRequest& req) { return kvc::test::serve_file(req, model_bytes()); });
  auto req = request_for(plain, "/m.gguf", tmp);
  req.expected_sha256 = wrong;
  auto given = kvc::fetch::download_model(req);
  REQUIRE_FALSE(given.ok());
  CHECK(given.error().message.find("--sha256 says " + wrong) != std::string::npos);
  req.expected_sha256 = kvc::fetch::sha256_hex(model_bytes());
  auto right = kvc::fetch::download_model(req);
  REQUIRE(right.ok());
  CHECK(right->sha256_source == "--sha256");
}

TEST_CASE("pull: a server that publishes no hash: the sha256 is still recorded", "[app][e2e]") {
  LoopbackHttpServer server([&](const HttpRequest& req) { return kvc::test::serve_file(req, model_bytes()); });
  kvc::test::TempDir tmp;
  auto r = kvc::fetch::download_model(request_for(server, "/files/stories260K.gguf", tmp));
  REQUIRE(r.ok());
  CHECK(r->sha256_source.empty());
  CHECK(kvc::test::read_file(tmp.path() / "models" / "stories260K.gguf.sha256") ==
        kvc::fetch::sha256_hex(model_bytes()) + "  stories260K.gguf\n");
}

TEST_CASE("pull: a connection dropped mid-file is resumed by a range request", "[app][e2e]") {
  const std::string sha = kvc::fetch::sha256_hex(model_bytes());
  const size_t drop_at = 300 * 1024;
  std::atomic<int> n_served{0};
  LoopbackHttpServer server([&](const HttpRequest& req) {
    HttpResponse r = kvc::test::serve_file(req, model_bytes());
    r.headers.emplace_back("ETag", "\"v1\"");
    if (n_served++ == 0) r.drop_after = drop_at;
    return r;
  });
  kvc::test::TempDir tmp;

  SECTION("within one pull: retried from where it stopped") {
    auto req = request_for(server, "/m.gguf", tmp);
    req.expected_sha256 = sha;
    auto r = kvc::fetch::download_model(req);
    INFO((r.ok() ? "" : r.error().message));
    REQUIRE(r.ok());
    CHECK(r->n_attempts == 2);
    CHECK(kvc::test::read_file(r->path) == model_bytes());
    const auto reqs = server.requests();
    REQUIRE(reqs.size() == 2);
    CHECK(reqs[0].header("range").empty());
    CHECK(reqs[1].header("range") == "bytes=" + std::to_string(drop_at) + "-");
    CHECK(reqs[1].header("if-range") == "\"v1\"");
  }
  SECTION("by a later pull: the .part file is kept and continued") {
    auto req = request_for(server, "/m.gguf", tmp);
    req.max_attempts = 1;
    auto first = kvc::fetch::download_model(req);
    REQUIRE_FALSE(first.ok());
    CHECK(first.error().message.find("pull again to resume") != std::string::npos);
    CHECK(size_or_zero(tmp.path() / "models" / "m.gguf.part") == drop_at);
    CHECK_FALSE(fs::exists(tmp.path() / "models" / "m.gguf"));
    auto second = kvc::fetch::download_model(req);
    INFO((second.ok() ? "" : second.error().message));
    REQUIRE(second.ok());
    CHECK(second->n_resumed_bytes == drop_at);
    CHECK(second->sha256 == sha);
    CHECK(kvc::test::read_file(second->path) == model_bytes());
    CHECK(server.requests().back().header("range") == "bytes=" + std::to_string(drop_at) + "-");
  }
}

TEST_CASE("pull: a server that ignores ranges sends the whole file again, which replaces the partial one",
          "[app][e2e]") {
  std::atomic<int> n_served{0};
  LoopbackHttpServer server([&](const HttpRequest& req) {
    HttpResponse r = kvc::test::serve_file(req, model_bytes(), false);
    if (n_served++ == 0) r.drop_after = 200 * 1024;
    return r;
  });
  kvc::test::TempDir tmp;
  auto req = request_for(server, "/m.gguf", tmp);
  auto r = kvc::fetch::download_model(req);
  INFO((r.ok() ? "" : r.error().message));
  REQUIRE(r.ok());
  CHECK(server.requests().back().header("range") == "bytes=204800-");  // asked for, not honoured
  CHECK(r->sha256 == kvc::fetch::sha256_hex(model_bytes()));
  CHECK(kvc::test::read_file(r->path) == model_bytes());
}

TEST_CASE("pull: a partial file as long as the file left by a crash is verified without a request", "[app][e2e]") {
  LoopbackHttpServer server([&](const HttpRequest& req) {
    HttpResponse r = kvc::test::serve_file(req, model_bytes());
    r.drop_after = model_bytes().size() - 1;  // the first pull stops one byte short
    return r;
  });
  kvc::test::TempDir tmp;
  auto req = request_for(server, "/m.gguf", tmp);
  req.max_attempts = 1;
  REQUIRE_FALSE(kvc::fetch::download_model(req).ok());
  // Complete the .part by hand, as if the process died after its last write.
  { std::ofstream(tmp.path() / "models" / "m.gguf.part", std::ios::binary | std::ios::app) << model_bytes().back(); }
  const size_t n_requests = server.requests().size();
  auto r = kvc::fetch::download_model(req);
  REQUIRE(r.ok());
  CHECK(server.requests().size() == n_requests);
  CHECK(kvc::test::read_file(r->path) == model_bytes());
}

TEST_CASE("pull: a 404, a redirect loop and a page that is not GGUF are errors that say so, and leave nothing behind",
          "[app][e2e]") {
  const std::string sha = kvc::fetch::sha256_hex(model_bytes());
  LoopbackHttpServer server([&](const HttpRequest& req) {
    if (req.path == "/page.gguf") {
      HttpResponse r;
      r.body = "<html><body>Please log in</body></html>";
      return r;
    }
    if (req.path == "/loop.gguf") {
      HttpResponse r;
      r.status = 302;
      r.headers = {{"Location", "/loop.gguf"}};
      return r;
    }
    return hf_like(req, sha);
  });
  kvc::test::TempDir tmp;
  auto missing = kvc::fetch::download_model(request_for(server, "/org/repo/nothing-here.gguf", tmp));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("HTTP 404") != std::string::npos);
  CHECK(missing.error().message.find("no such file") != std::string::npos);
  CHECK(server.requests().size() == 1);  // not retried
  CHECK_FALSE(fs::exists(tmp.path() / "models" / "nothing-here.gguf.part"));
  CHECK_FALSE(fs::exists(tmp.path() / "models" / "nothing-here.gguf.part.json"));
  auto loop = kvc::fetch::download_model(request_for(server, "/loop.gguf", tmp));
  REQUIRE_FALSE(loop.ok());
  CHECK(loop.error().message.find("redirect") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp.path() / "models" / "loop.gguf.part"));
  auto page = kvc::fetch::download_model(request_for(server, "/page.gguf", tmp));
  REQUIRE_FALSE(page.ok());
  CHECK(page.error().message.find("is not a GGUF model file") != std::string::npos);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(tmp.path() / "models")) left.push_back(e.path().filename().string());
  INFO(left.size());
  for (const auto& name : left) CHECK(name.find("page.gguf") == std::string::npos);
}

TEST_CASE("pull: too little free disk for the Content-Length stops before a byte is written", "[app][e2e]") {
  LoopbackHttpServer server([&](const HttpRequest& req) { return kvc::test::serve_file(req, model_bytes()); });
  kvc::test::TempDir tmp;
  auto req = request_for(server, "/m.gguf", tmp);
  req.free_bytes = [](const fs::path&) { return uint64_t{500'000}; };
  auto r = kvc::fetch::download_model(req);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("not enough disk space") != std::string::npos);
  CHECK(r.error().message.find("488 KiB free") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp.path() / "models" / "m.gguf.part"));  // nothing to resume, nothing left
  CHECK(kvc::fetch::free_disk_bytes(tmp.path()) > 0);              // statvfs of a real directory
}

TEST_CASE("pull: cancelled from another thread, then resumed", "[app][e2e]") {
  LoopbackHttpServer server([&](const HttpRequest& req) {
    HttpResponse r = kvc::test::serve_file(req, model_bytes());
    r.chunk_bytes = 16 * 1024;
    r.chunk_delay_ms = 30;  // about 0.5 MiB/s: two seconds for the file
    return r;
  });
  kvc::test::TempDir tmp;
  auto req = request_for(server, "/m.gguf", tmp);
  std::atomic<bool> cancel{false};
  std::atomic<uint64_t> done{0};
  std::thread canceller([&] {
    while (done.load() < 64 * 1024) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    cancel = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto r = kvc::fetch::download_model(
      req, [&](const kvc::fetch::DownloadProgress& p) { done = p.done_bytes; }, &cancel);
  canceller.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("cancelled") != std::string::npos);
  CHECK(s < 1.8);  // well before the file's two seconds
  const auto kept = size_or_zero(tmp.path() / "models" / "m.gguf.part");
  CHECK(kept >= 64 * 1024);
  CHECK(kept < model_bytes().size());
  auto resumed = kvc::fetch::download_model(req);
  REQUIRE(resumed.ok());
  CHECK(resumed->n_resumed_bytes == kept);
  CHECK(kvc::test::read_file(resumed->path) == model_bytes());
}

namespace {

// kvchat-cli with a shell prefix (ulimit, background + kill), its stderr and exit status.
kvc::test::CliRun shell(const std::string& script) {
  kvc::test::CliRun r;
  FILE* p = ::popen(("sh -c " + kvc::test::quoted(script) + " 2>&1").c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace

TEST_CASE("kvchat-cli pull: a disk that fills keeps the partial file, and the next pull resumes it", "[app][e2e]") {
  LoopbackHttpServer server([&](const HttpRequest& req) { return kvc::test::serve_file(req, model_bytes()); });
  kvc::test::TempDir tmp;
  const std::string cli = kvc::test::quoted(KVC_CLI_PATH) + " pull " + kvc::test::quoted(server.url("/m.gguf")) +
                          " --data-dir " + kvc::test::quoted(tmp.file("data"));
  // A file-size limit of 512 blocks (256 KiB in dash's 512-byte blocks, 512 KiB in bash's) fills "the disk".
  auto full = shell("ulimit -f 512 && exec " + cli);
  INFO(full.out);
  CHECK(full.exit_code == 3);
  CHECK(full.out.find("cannot write the partial file: File too large") != std::string::npos);
  const auto kept = size_or_zero(tmp.path() / "data" / "models" / "m.gguf.part");
  CHECK(kept > 0);
  CHECK(kept < model_bytes().size());
  CHECK_FALSE(fs::exists(tmp.path() / "data" / "models" / "m.gguf"));

  auto done = shell("exec " + cli);
  INFO(done.out);
  REQUIRE(done.exit_code == 0);
  CHECK(done.out.find((tmp.path() / "data" / "models" / "m.gguf").string()) != std::string::npos);
  CHECK(done.out.find("resumed") != std::string::npos);
  CHECK(server.requests().back().header("range") == "bytes=" + std::to_string(kept) + "-");
  CHECK(kvc::test::read_file(tmp.path() / "data" / "models" / "m.gguf") == model_bytes());
}

TEST_CASE("kvchat-cli pull: Ctrl-C cancels with status 130 and keeps the partial file, bad sources are refused",
          "[app][e2e]") {
  LoopbackHttpServer server([&](const HttpRequest& req) {
    HttpResponse r = kvc::test::serve_file(req, model_bytes());
    r.chunk_bytes = 16 * 1024;
    r.chunk_delay_ms = 50;
    return r;
  });
  kvc::test::TempDir tmp;
  const std::string cli = kvc::test::quoted(KVC_CLI_PATH) + " pull " + kvc::test::quoted(server.url("/m.gguf")) +
                          " --data-dir " + kvc::test::quoted(tmp.file("data"));
  // The interrupt goes once the download is under way (its .part file has bytes): sent earlier,
  // before kvchat-cli installs its handler, a background job's SIGINT is ignored (seen under ASan).
  const std::string part = kvc::test::quoted(tmp.file("data/models/m.gguf.part"));
  auto run = shell(cli + " & pid=$!; for i in $(seq 600); do [ -s " + part +
                   " ] && break; sleep 0.05; done; sleep 0.2; kill -INT $pid; wait $pid; echo \"status=$?\"");
  INFO(run.out);
  CHECK(run.out.find("download cancelled") != std::string::npos);
  CHECK(run.out.find("status=130") != std::string::npos);
  CHECK(size_or_zero(tmp.path() / "data" / "models" / "m.gguf.part") > 0);

  auto bad = shell(kvc::test::quoted(KVC_CLI_PATH) + " pull just-a-name.gguf --data-dir " +
                   kvc::test::quoted(tmp.file("data")));
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.find("OWNER/REPO/FILE.gguf") != std::string::npos);
  auto list = shell(kvc::test::quoted(KVC_CLI_PATH) + " pull --list");
  CHECK(list.exit_code == 0);
  CHECK(list.out.find("kvchat-cli pull ") != std::string::npos);
}
