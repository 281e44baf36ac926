// Tests of the views' number formatting.
#include <catch2/catch.hpp>

#include "ui/format.h"

using namespace kvc::ui;

TEST_CASE("format_bytes uses binary units with one decimal", "[ui]") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1024) == "1.0 KiB");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(12.3 * 1024 * 1024) == "12.3 MiB");
  CHECK(format_bytes(2.0 * 1024 * 1024 * 1024) == "2.0 GiB");
}

TEST_CASE("format_duration_ms picks ms, s or min", "[ui]") {
  CHECK(format_duration_ms(0.42) == "0.42 ms");
  CHECK(format_duration_ms(85.4) == "85 ms");
  CHECK(format_duration_ms(1250) == "1.25 s");
  CHECK(format_duration_ms(125'000) == "2 min 05 s");
}

TEST_CASE("format_tok_per_s divides tokens by time", "[ui]") {
  CHECK(format_tok_per_s(100, 4000) == "25.0 tok/s");
  CHECK(format_tok_per_s(5, 1000) == "5.00 tok/s");
  CHECK(format_tok_per_s(0, 1000) == "-");
  CHECK(format_tok_per_s(10, 0) == "-");
}

TEST_CASE("format_params and format_age", "[ui]") {
  CHECK(format_params(999) == "999");
  CHECK(format_params(260'000) == "260K");
  CHECK(format_params(15'200'000) == "15.2M");
  CHECK(format_params(1'100'000'000) == "1.1B");
  const int64_t now = 1'700'000'000'000;
  CHECK(format_age(now - 5'000, now) == "just now");
  CHECK(format_age(now - 5 * 60'000, now) == "5 min ago");
  CHECK(format_age(now - 3 * 3'600'000, now) == "3 h ago");
  CHECK(format_age(now - 86'400'000, now) == "yesterday");
  CHECK(format_age(now - 3 * 86'400'000, now) == "3 days ago");
}

TEST_CASE("utf8 pop back: removes whole code points", "[ui]") {
  std::string s = "ab\xC3\xA9\xE2\x86\x92";  // "abé→"
  utf8_pop_back(s);
  CHECK(s == "ab\xC3\xA9");
  utf8_pop_back(s);
  CHECK(s == "ab");
  utf8_pop_back(s);
  CHECK(s == "a");
  std::string empty;
  utf8_pop_back(empty);
  CHECK(empty.empty());
}

TEST_CASE("prefill line: the tokens to compute, and the time once it is worth showing", "[ui]") {
  CHECK(format_prefill(1234, 120) == "prefilling 1234 new tokens...");
  CHECK(format_prefill(1, 0) == "prefilling 1 new token...");
  CHECK(format_prefill(5000, 3200) == "prefilling 5000 new tokens... " + format_duration_ms(3200));
}
