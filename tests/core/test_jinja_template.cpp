// The Jinja interpreter: whitespace control, expressions, statements, and malformed or hostile templates failing
// cleanly.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "core/chat/jinja_template.h"
#include "support/sanitizer.h"

using kvc::chat::jinja::Array;
using kvc::chat::jinja::Limits;
using kvc::chat::jinja::Object;
using kvc::chat::jinja::Template;
using kvc::chat::jinja::Value;

namespace {

std::tm noon_2024_07_26() {
  std::tm tm{};
  tm.tm_year = 124;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 12;
  return tm;
}

Object variables() {
  Object user, asst;
  user.set("role", "user");
  user.set("content", "  Hi there  ");
  asst.set("role", "assistant");
  asst.set("content", "<think>\nhmm\n</think>\n\nHello.");
  Object v;
  v.set("messages", Array{Value(user), Value(asst)});
  v.set("add_generation_prompt", true);
  v.set("bos_token", "<s>");
  return v;
}

// The render of `source`, or "ERROR: " and the message.
std::string render(const std::string& source, const Limits& limits = {}) {
  auto t = Template::parse(source, limits);
  if (!t.ok()) return "ERROR: " + t.error().message;
  auto r = t->render(variables(), noon_2024_07_26());
  if (!r.ok()) return "ERROR: " + r.error().message;
  return *r;
}

}  // namespace

TEST_CASE("jinja: whitespace control as Hugging Face renders chat templates", "[core]") {
  // trim_blocks: the newline after %} and #} goes; lstrip_blocks: indentation before {% goes.
  CHECK(render("a\n  {% if true %}\n    b\n  {% endif %}\nc") == "a\n    b\nc");
  CHECK(render("a{# note #}\nb") == "ab");
  CHECK(render("a  {{- ' b ' -}}  c") == "a b c");
  CHECK(render("a\n  {%- if true -%}\n  b\n{%- endif %}") == "ab");
  CHECK(render("  {%+ if true %}x{% endif %}") == "  x");
  CHECK(render("{{ 'x' }}  {% if true %}y{% endif %}") == "x  y");  // a tag before: not at a line start
  CHECK(render("line\n") == "line");                                // the one trailing newline of the source is dropped
  CHECK(render("line\n\n") == "line\n");
  CHECK(render("{% raw %}{{ not run }}{% endraw %}") == "{{ not run }}");
}

TEST_CASE("jinja: expressions follow Python's semantics and Jinja2's precedence", "[core]") {
  CHECK(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }}") ==
        "7 9 3 -4 1 1024");
  CHECK(render("{{ 7 / 2 }} {{ 1.0 }} {{ 10 / 2 }} {{ 0.1 + 0.2 }} {{ 1e-5 }}") ==
        "3.5 1.0 5.0 0.30000000000000004 1e-05");
  CHECK(render("{{ 'a' ~ 1 ~ none ~ true }}|{{ 'a' + 'b' }}|{{ 'ab' * 3 }}") == "a1True|ab|ababab");
  CHECK(render("{{ [1, 'a', none] }} {{ {'k': 'v'} }} {{ none }}") == "[1, 'a', None] {'k': 'v'} ");
  CHECK(render("{{ 'x' if false }}|{{ 'y' if 1 > 0 else 'z' }}|{{ not 1 == 2 }}") == "|y|True");
  CHECK(render("{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' not in {'k': 1} }}") == "True True False");
  CHECK(render("{{ messages[0]['content'] | trim + '!' }}") == "Hi there!");  // a filter binds tighter than +
  CHECK(render("{{ -3 | abs }} {{ [3, 1, 2] | sort | join(',') }}") == "3 1,2,3");
  CHECK(render("{{ 'héllo'[1:3] }}|{{ 'héllo' | length }}|{{ 'abc'[::-1] }}|{{ [1, 2, 3][-1] }}|{{ [1, 2, 3][1:] }}") ==
        "él|5|cba|3|[2, 3]");
  CHECK(render("{{ messages[1].content.split('</think>')[-1].lstrip('\\n') }}") == "Hello.");
  CHECK(render("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'x'.startswith(('y', 'x')) }}") ==
        "['a', 'b', '', 'c'] ['a', 'b'] True");
  CHECK(render("{{ {'b': 1, 'a': [true, none, 'é\"']} | tojson }}") == "{\"b\": 1, \"a\": [true, null, \"é\\\"\"]}");
  CHECK(render("{{ {'a': [1]} | tojson(indent=2) }}") == "{\n  \"a\": [\n    1\n  ]\n}");
  CHECK(render("{{ '{\"k\": [1, 2]}' | from_json | tojson }}") == "{\"k\": [1, 2]}");
  CHECK(render("{{ 'Hi {}, {name}'.format('you', name='me') }}|{{ 'x' | upper }}|{{ 'hello world' | title }}") ==
        "Hi you, me|X|Hello World");
  CHECK(render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='role') | list }}") == "['user']");
  CHECK(
      render("{{ undefined_name }}|{{ undefined_name is defined }}|{{ messages[5] is defined }}|{{ 'a' + nothing }}") ==
      "|False|False|a");
  CHECK(render("{{ strftime_now('%d %b %Y') }}") == "26 Jul 2024");
}

TEST_CASE("jinja: statements, loops, scoping, namespaces and macros", "[core]") {
  CHECK(
      render("{% for m in messages %}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}") ==
      "0TrueFalse2 1FalseTrue2 ");
  CHECK(render("{% for x in [] %}a{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{% endfor %}") == "24");
  CHECK(render("{% for x in [1, 2, 3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}") == "13");
  CHECK(render("{% for x in [1, 2, 3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}") == "1");
  CHECK(render("{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}") == "a=1;b=2;");
  // A loop's set does not leak; a namespace carries state out of it.
  CHECK(render("{% set x = 1 %}{% for i in [5] %}{% set x = i %}{% endfor %}{{ x }}") == "1");
  CHECK(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}") ==
        "6");
  CHECK(render("{% if false %}a{% elif 0 %}b{% elif 'x' %}c{% else %}d{% endif %}") == "c");
  CHECK(render("{% set messages = messages[1:] %}{{ messages | length }}") == "1");
  CHECK(
      render(
          "{% macro greet(who, punct='!') %}Hi {{ who }}{{ punct }}{% endmacro %}{{ greet('you') }}{{ greet('me', '?') }}") ==
      "Hi you!Hi me?");
  CHECK(render("{% set block %}  inside  {% endset %}[{{ block }}]{% filter upper %}loud{% endfilter %}") ==
        "[  inside  ]LOUD");
  CHECK(render("{% set l = [] %}{% do l.append(1) %}{{ l.append(2) or l }}") == "[1, 2]");
  CHECK(render("{% generation %}kept{% endgeneration %}") == "kept");
  CHECK(render("{% for x in [1, 2] %}{{ loop.cycle('a', 'b') }}{% endfor %}") == "ab");
}

TEST_CASE("jinja: malformed templates are errors naming the line, never crashes", "[core]") {
  const std::pair<const char*, const char*> bad[] = {
      {"a\n{% if true %}b", "line 2: '{% if %}' opened here is never closed"},
      {"{% for x in y %}", "never closed (expected '{% endfor %}')"},
      {"{{ x", "'{{' opened here is never closed with '}}'"},
      {"{% if x", "'{%' opened here is never closed with '%}'"},
      {"{# note", "the comment '{#' opened here is never closed"},
      {"{{ 'abc }}", "a string opened here is never closed"},
      {"{% endif %}", "'{% endif %}' has no open block to close here"},
      {"{% include 'x.jinja' %}", "the tag '{% include %}' is not supported"},
      {"{{ x | no_such_filter }}", "unknown filter 'no_such_filter'"},
      {"{{ x is no_such_test }}", "unknown test 'no_such_test'"},
      {"{{ 1 + }}", "the tag ends where an expression should continue"},
      {"{{ x ? y }}", "unexpected character '?'"},
      {"{% break %}", "'{% break %}' outside a loop"},
      {"{{ }}", "an empty '{{ }}'"},
      {"\n\n{{ raise_exception('No system role') }}", "line 3: the template rejects this conversation: No system role"},
      {"{{ 1 / 0 }}", "division by zero"},
      {"{{ 'a' + 1 }}", "cannot add string and integer"},
      {"{{ x() }}", "'x' is undefined: it cannot be called"},
  };
  for (const auto& [source, message] : bad) {
    INFO(source);
    CHECK_THAT(render(source), Catch::StartsWith("ERROR: chat template") && Catch::Contains(message));
  }
}

TEST_CASE("jinja: hostile templates stop at a limit quickly", "[core]") {
  const auto start = std::chrono::steady_clock::now();
  // Deep nesting: blocks and expressions, far past the depth limit.
  std::string blocks;
  for (int i = 0; i < 100000; ++i) blocks += "{% if true %}";
  CHECK_THAT(render(blocks), Catch::Contains("nests blocks or expressions deeper than 128 levels"));
  const auto nested = [](char open, char close) {
    return std::string(100000, open) + "1" + std::string(100000, close);
  };
  CHECK_THAT(render("{{ " + nested('(', ')') + " }}"), Catch::Contains("deeper than 128 levels"));
  CHECK_THAT(render("{{ " + nested('[', ']') + " }}"), Catch::Contains("deeper than 128 levels"));
  CHECK_THAT(render("{{ " + std::string(100000, '-') + "1 }}"), Catch::Contains("deeper than 128 levels"));
  CHECK_THAT(render("{{ " + std::string(100000, '(') + " }}"), Catch::Contains("never closed"));
  // A loop writing 100 MB (100,000 times 1 KB): stopped at the output limit, not after writing it all.
  CHECK_THAT(render("{% for i in range(100000) %}" + std::string(1000, 'x') + "{% endfor %}"),
             Catch::Contains("the template's output passed the limit of 32 MiB"));
  // The same through nested loops of short writes: stopped by the work it takes first.
  CHECK_THAT(render("{% for i in range(100000) %}{% for j in range(100) %}0123456789{% endfor %}{% endfor %}"),
             Catch::Contains("steps of work"));
  // A string doubled past the limit, and one built slowly inside a namespace.
  CHECK_THAT(render("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
             Catch::Contains("passes the limit of"));
  CHECK_THAT(render("{{ 'x' * 100000000000 }}"), Catch::Contains("passes the limit"));
  // Work without output: nested loops, a huge range, a macro calling itself.
  CHECK_THAT(render("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}"),
             Catch::Contains("steps of work"));
  CHECK_THAT(render("{% for i in range(100000000) %}{% endfor %}"), Catch::Contains("a list of 100000000 items"));
  CHECK_THAT(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), Catch::Contains("deeper than 128"));
  CHECK_THAT(render("{% set ns = namespace(l=[1]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"),
             Catch::Contains("a list of"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Without the limits these would run for hours or exhaust memory. About 1.5 s in a release
  // build; a sanitizer (the debug, asan, fuzz and tsan presets) makes it ~15x slower.
#ifdef NDEBUG
  CHECK(seconds < (kvc::test::under_sanitizer() ? 150.0 : 10.0));
#else
  CHECK(seconds < 150.0);
#endif
  // Smaller limits are honoured.
  Limits small;
  small.max_output_bytes = 1000;
  CHECK_THAT(render("{% for i in range(200) %}0123456789{% endfor %}", small), Catch::Contains("limit"));
  CHECK(render("{% for i in range(50) %}0123456789{% endfor %}", small).size() == 500);
}

TEST_CASE("jinja: values nested or chained past any stack are errors, and are freed without recursion", "[core]") {
  // A left-deep chain built by a loop in the parser, not by recursion.
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += " + 1";
  CHECK_THAT(render(sum + " }}"), Catch::Contains("an expression nests deeper than 512 levels"));
  std::string attrs = "{{ x";
  for (int i = 0; i < 100000; ++i) attrs += ".a";
  CHECK_THAT(render(attrs + " }}"), Catch::Contains("nests deeper than 512"));
  std::string filters = "{{ 'x'";
  for (int i = 0; i < 100000; ++i) filters += " | trim";
  CHECK_THAT(render(filters + " }}"), Catch::Contains("nests deeper than 512"));
  // A list nested 300,000 deep at run time (each new list appended to the last): freed without
  // recursing (recursive destructors would need ~100 MB of stack); printing it is an error.
  const std::string deep =
      "{% set ns = namespace(tail=[]) %}{% set root = ns.tail %}{% for i in range(300000) %}{% set next = [] %}"
      "{% do ns.tail.append(next) %}{% set ns.tail = next %}{% endfor %}";
  CHECK(render(deep + "done") == "done");
  CHECK_THAT(render(deep + "{{ root }}"), Catch::Contains("nested deeper than 64 levels"));
  CHECK_THAT(render(deep + "{{ root == root }}"), Catch::Contains("nested deeper than 64 levels"));
  CHECK_THAT(render(deep + "{{ root | tojson }}"), Catch::Contains("nested deeper than 64 levels"));
  // Wrapping a growing list again and again costs its size each time: stopped by the work limit.
  CHECK_THAT(render("{% set ns = namespace(l=[]) %}{% for i in range(1000000) %}{% set ns.l = [ns.l] %}{% endfor %}"),
             Catch::Contains("steps of work"));
  // A list holding itself.
  CHECK_THAT(render("{% set l = [] %}{% do l.append(l) %}"), Catch::Contains("a list or dict cannot hold itself"));
  CHECK_THAT(render("{% set a = [] %}{% set b = [a] %}{% do a.append({'x': [b]}) %}"),
             Catch::Contains("cannot hold itself"));
  CHECK_THAT(render("{% set ns = namespace() %}{% set ns.me = [ns] %}"), Catch::Contains("cannot hold itself"));
  CHECK_THAT(render("{% set d = {} %}{% do d.update(me=d) %}"), Catch::Contains("cannot hold itself"));
  CHECK(render("{% set a = [] %}{% set b = [a, a] %}{% do b.append(a) %}{{ b }}") ==
        "[[], [], []]");  // shared, no cycle
  CHECK_THAT(render("{{ ('[' * 100000) | from_json }}"), Catch::Contains("nests deeper than 64 levels"));
  // Macros whose bodies nest deep, calling each other: bounded by the run-time recursion limit.
  std::string nested_ifs;
  for (int i = 0; i < 100; ++i) nested_ifs += "{% if true %}";
  std::string ends;
  for (int i = 0; i < 100; ++i) ends += "{% endif %}";
  CHECK_THAT(render("{% macro f(n) %}" + nested_ifs + "{{ f(n + 1) }}" + ends + "{% endmacro %}{{ f(0) }}"),
             Catch::Contains("deeper than"));
}

TEST_CASE("jinja: integer overflow and huge repetitions are errors", "[core]") {
  CHECK_THAT(render("{{ 9223372036854775807 + 1 }}"), Catch::Contains("integer overflow"));
  CHECK_THAT(render("{{ 3037000500 * 3037000500 }}"), Catch::Contains("integer overflow"));
  CHECK_THAT(render("{{ 2 ** 64 }}"), Catch::Contains("integer overflow"));
  CHECK(render("{{ 2 ** 62 }} {{ 1 ** 100000000000 }} {{ (-1) ** 100000000001 }}") == "4611686018427387904 1 -1");
  CHECK_THAT(render("{{ 'ab' * 9223372036854775807 }}"), Catch::Contains("passes the limits"));
  CHECK_THAT(render("{{ [1] * 9223372036854775807 }}"), Catch::Contains("passes the limits"));
  CHECK_THAT(render("{{ range(-9223372036854775807, 9223372036854775807) }}"), Catch::Contains("too far apart"));
  CHECK_THAT(render("{{ range(0, 9223372036854775807, 3) }}"), Catch::Contains("a list of"));
}
