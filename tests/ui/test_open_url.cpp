// Tests of opening links: which URLs open, and that the opener gets the URL as one argument
// with no shell in between (a real spawn of a recording opener).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "support/test_support.h"
#include "ui/open_url.h"

using namespace kvc::ui;

TEST_CASE("open_url: only web and mail links open", "[ui]") {
  CHECK(is_openable_url("https://example.com/a?b=c#d"));
  CHECK(is_openable_url("HTTP://example.com"));
  CHECK(is_openable_url("mailto:someone@example.com"));
  CHECK_FALSE(is_openable_url("https://"));
  CHECK_FALSE(is_openable_url("file:///etc/passwd"));
  CHECK_FALSE(is_openable_url("javascript:alert(1)"));
  CHECK_FALSE(is_openable_url("img.png"));
  CHECK_FALSE(is_openable_url("-–help"));
  CHECK_FALSE(is_openable_url("https://a b"));
  CHECK_FALSE(is_openable_url("https://a\nb"));
  auto st = open_url("file:///etc/passwd");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("not an http(s) or mailto link") != std::string::npos);
}

TEST_CASE("open_url: the opener gets the URL verbatim as its only argument", "[ui]") {
  kvc::test::TempDir tmp;
  const std::string opener = tmp.file("opener.sh");
  {
    std::ofstream f(opener);
    f << "#!/bin/sh\necho \"$#\" > '" << tmp.file("args.tmp") << "'\nprintf '%s' \"$1\" >> '" << tmp.file("args.tmp")
      << "'\nmv '" << tmp.file("args.tmp") << "' '" << tmp.file("args.txt") << "'\n";
  }
  std::filesystem::permissions(opener, std::filesystem::perms::owner_all);
  const std::string url = "https://example.com/$(touch${IFS}" + tmp.file("pwned") + ");`id`&x='y'";
  ::setenv("KVCHAT_URL_OPENER", opener.c_str(), 1);
  auto st = open_url(url);
  REQUIRE(st.ok());
  for (int i = 0; i < 100 && !std::filesystem::exists(tmp.path() / "args.txt"); ++i) ::usleep(50 * 1000);
  CHECK(kvc::test::read_file(tmp.path() / "args.txt") == "1\n" + url);
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "pwned"));
  // An opener that does not exist is an error that says what to do.
  ::setenv("KVCHAT_URL_OPENER", tmp.file("no-such-opener").c_str(), 1);
  st = open_url("https://example.com");
  ::unsetenv("KVCHAT_URL_OPENER");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("could not start") != std::string::npos);
}
