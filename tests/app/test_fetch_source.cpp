// The pieces of kvchat-cli pull that need no network: SHA-256, sources, ETags, the model catalog.
#include <catch2/catch.hpp>

#include <string>

#include "app/common/demo_model.h"
#include "app/fetch/downloader.h"
#include "app/fetch/model_catalog.h"
#include "app/fetch/sha256.h"
#include "app/fetch/source.h"

using namespace kvc::fetch;

TEST_CASE("sha256: FIPS 180-4 test vectors, fed whole and byte by byte", "[app]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(sha256_hex(two_blocks) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 h;
  for (int i = 0; i < 1000000; ++i) h.update("a", 1);
  CHECK(h.hex_digest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Odd-sized pieces across block boundaries hash like the whole.
  std::string text(1000, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 7 + 3);
  Sha256 pieces;
  for (size_t i = 0; i < text.size(); i += 37) pieces.update(text.data() + i, std::min<size_t>(37, text.size() - i));
  CHECK(pieces.hex_digest() == sha256_hex(text));
}

TEST_CASE("pull sources: URLs as given, Hugging Face OWNER/REPO/FILE as a resolve URL, bad ones named", "[app]") {
  CHECK(*resolve_source("https://example.org/m.gguf") == "https://example.org/m.gguf");
  CHECK(*resolve_source("http://127.0.0.1:8080/a/b.gguf?x=1") == "http://127.0.0.1:8080/a/b.gguf?x=1");
  CHECK(*resolve_source("Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf") ==
        "https://huggingface.co/Qwen/Qwen3-0.6B-GGUF/resolve/main/Qwen3-0.6B-Q8_0.gguf");
  CHECK(*resolve_source("owner/repo/dir/file.gguf") == "https://huggingface.co/owner/repo/resolve/main/dir/file.gguf");
  for (const char* bad : {"", "model.gguf", "owner/repo", "ftp://host/x.gguf", "file:///etc/passwd", "owner/../x.gguf",
                          "https://", "https://host/a b.gguf", "owner/repo/"}) {
    CAPTURE(bad);
    auto r = resolve_source(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == kvc::ErrorCode::invalid_argument);
  }
  CHECK(resolve_source("model.gguf").error().message.find("OWNER/REPO/FILE.gguf") != std::string::npos);
}

TEST_CASE("pull file names: the URL's last part, percent-decoded, unsafe names refused", "[app]") {
  CHECK(*file_name_from_url("https://h/x/Model-Q8_0.gguf?download=true") == "Model-Q8_0.gguf");
  CHECK(*file_name_from_url("https://h/x/My%20Model.gguf") == "My Model.gguf");
  for (const char* bad :
       {"https://h/x/", "https://h/x/%2e%2e", "https://h/a%2Fb.gguf", "https://h/.hidden", "https://h/a%00b"}) {
    CAPTURE(bad);
    auto r = file_name_from_url(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("--output") != std::string::npos);
  }
  CHECK(check_file_name("model-Q4_K_M.gguf").ok());
  for (const char* bad : {"../x.gguf", "a/b.gguf", "", "..", ".x", "a\\b"}) {
    CAPTURE(bad);
    CHECK_FALSE(check_file_name(bad).ok());
  }
  // --output is checked like a name from the URL: nothing lands outside the models folder.
  DownloadRequest req;
  req.url = "http://127.0.0.1:1/x.gguf";
  req.file_name = "../escape.gguf";
  req.models_dir = "/nonexistent-kvchat-models";
  auto r = download_model(req);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == kvc::ErrorCode::invalid_argument);
}

TEST_CASE("published sha256: Hugging Face's quoted ETags, nothing from other ETags", "[app]") {
  const std::string hex = "6F85A640A97CF2BF5B8E764087B1E83DA0FDB51D7C9FAB7D0FECE9385611DF83";
  CHECK(sha256_from_etag("\"" + hex + "\"") == "6f85a640a97cf2bf5b8e764087b1e83da0fdb51d7c9fab7d0fece9385611df83");
  CHECK(sha256_from_etag("W/\"" + hex + "\"") == "6f85a640a97cf2bf5b8e764087b1e83da0fdb51d7c9fab7d0fece9385611df83");
  CHECK(sha256_from_etag("\"5d41402abc4b2a76b9719d911017c592\"").empty());          // an MD5-sized ETag
  CHECK(sha256_from_etag("\"a94a8fe5ccb19ba61c4c0873d391e987982fbbd3\"").empty());  // a git blob's sha1
  CHECK(sha256_from_etag("").empty());
}

TEST_CASE("progress lines: percent, sizes, speed and time left", "[app]") {
  DownloadProgress p;
  p.done_bytes = 512ull << 20;
  p.total_bytes = 2048ull << 20;
  p.bytes_per_s = 16.0 * (1 << 20);
  p.eta_s = 96;
  p.phase = "downloading";
  CHECK(format_progress(p) == " 25% 512 MiB / 2.00 GiB  16.0 MiB/s  1 min 36 s left");
  CHECK(format_duration(7300) == "2 h 1 min");
  CHECK(format_size(1023) == "1023 B");
}

TEST_CASE("model catalog: the shipped list loads, and a broken entry is named", "[app]") {
  auto shipped = load_catalog(kvc::app::asset_dir() / "models" / "catalog.json");
  INFO((shipped.ok() ? "" : shipped.error().message));
  REQUIRE(shipped.ok());
  REQUIRE(shipped->size() >= 3);
  for (const CatalogEntry& e : *shipped) {
    CAPTURE(e.name);
    CHECK(e.url.rfind("https://huggingface.co/", 0) == 0);
    CHECK(e.url.find("/resolve/main/") != std::string::npos);
    CHECK(e.url.size() > 5);
    CHECK(e.url.substr(e.url.size() - 5) == ".gguf");
    CHECK_FALSE(e.licence.empty());
    CHECK(e.size_bytes > 10'000'000);
  }
  auto no_licence = parse_catalog(R"({"models": [{"name": "x", "source": "a/b/c.gguf", "size_bytes": 5}]})");
  REQUIRE_FALSE(no_licence.ok());
  CHECK(no_licence.error().message == "model catalog entry 1: \"licence\" must be a non-empty string");
  auto bad_source =
      parse_catalog(R"({"models": [{"name": "x", "source": "c.gguf", "size_bytes": 5, "licence": "MIT"}]})");
  REQUIRE_FALSE(bad_source.ok());
  CHECK(bad_source.error().message.find("entry 1") != std::string::npos);
  CHECK_FALSE(parse_catalog("[]").ok());
  CHECK_FALSE(
      parse_catalog(R"({"models": [{"name": "x", "source": "a/b/c.gguf", "size_bytes": -1, "licence": "MIT"}]})").ok());
}
