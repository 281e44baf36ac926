// UTF-8 cuts at code point boundaries: prefixes, the next boundary, dropping the last code point.
#include <catch2/catch.hpp>

#include <string>

#include "core/util/utf8.h"

TEST_CASE("utf8: a prefix never ends inside a sequence, and keeps a whole last code point", "[core]") {
  const std::string s = "ab\xC3\xA9\xE2\x82\xAC";  // "abé€": 2 + 2 + 3 bytes
  CHECK(kvc::utf8_prefix(s, 100) == s);
  CHECK(kvc::utf8_prefix(s, 4) == "ab\xC3\xA9");  // é whole
  CHECK(kvc::utf8_prefix(s, 3) == "ab");          // é cut: left out
  CHECK(kvc::utf8_prefix(s, 6) == "ab\xC3\xA9");  // € cut after 2 of 3 bytes
  CHECK(kvc::utf8_prefix(s, 0).empty());
  CHECK(kvc::utf8_boundary_at_or_after(s, 3) == 4);
  CHECK(kvc::utf8_boundary_at_or_after(s, 4) == 4);
  CHECK(kvc::utf8_boundary_at_or_after(s, 5) == 7);
  CHECK(kvc::utf8_boundary_at_or_after(s, 99) == s.size());
  std::string t = s;
  kvc::utf8_pop_back(t);
  CHECK(t == "ab\xC3\xA9");
  kvc::utf8_pop_back(t);
  CHECK(t == "ab");
  kvc::utf8_pop_back(t);
  CHECK(t == "a");
  t.clear();
  kvc::utf8_pop_back(t);
  CHECK(t.empty());
}
