// Tests of splitting messages into prose and fenced code blocks.
#include <catch2/catch.hpp>

#include "ui/markdown.h"

using namespace kvc::ui;
using Kind = TextBlock::Kind;

TEST_CASE("plain text is one prose block", "[ui]") {
  const auto b = split_code_blocks("hello\nworld");
  REQUIRE(b.size() == 1);
  CHECK(b[0].kind == Kind::prose);
  CHECK(b[0].text == "hello\nworld");
  CHECK(split_code_blocks("").empty());
}

TEST_CASE("a fenced block between prose, with its language", "[ui]") {
  const auto b = split_code_blocks("Try this:\n```cpp\nint main() {\n  return 0;\n}\n```\nDone.");
  REQUIRE(b.size() == 3);
  CHECK(b[0].kind == Kind::prose);
  CHECK(b[0].text == "Try this:");
  CHECK(b[1].kind == Kind::code);
  CHECK(b[1].language == "cpp");
  CHECK(b[1].text == "int main() {\n  return 0;\n}");
  CHECK(b[1].closed);
  CHECK(b[2].kind == Kind::prose);
  CHECK(b[2].text == "Done.");
}

TEST_CASE("an unclosed fence (still streaming) is an open code block", "[ui]") {
  const auto b = split_code_blocks("```\nx = 1\ny =");
  REQUIRE(b.size() == 1);
  CHECK(b[0].kind == Kind::code);
  CHECK(b[0].language.empty());
  CHECK(b[0].text == "x = 1\ny =");
  CHECK_FALSE(b[0].closed);
}

TEST_CASE("fences indented up to 3 spaces count, inline backticks do not", "[ui]") {
  auto b = split_code_blocks("a\n   ```py\nprint(1)\n   ```");
  REQUIRE(b.size() == 2);
  CHECK(b[1].language == "py");
  CHECK(b[1].text == "print(1)");
  b = split_code_blocks("use ```x``` inline\n    ```not a fence");
  REQUIRE(b.size() == 1);
  CHECK(b[0].kind == Kind::prose);
}

TEST_CASE("two code blocks in a row", "[ui]") {
  const auto b = split_code_blocks("```a\n1\n```\n```b\n2\n```");
  REQUIRE(b.size() == 2);
  CHECK(b[0].language == "a");
  CHECK(b[0].text == "1");
  CHECK(b[1].language == "b");
  CHECK(b[1].text == "2");
}
