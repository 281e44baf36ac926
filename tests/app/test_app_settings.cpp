// DATA_DIR/settings.json: the last model and the remembered KV budget round-trip; a missing
// file gives the defaults, a malformed one or a bad value too, and says which value it dropped.
#include <catch2/catch.hpp>

#include <fstream>

#include "app/gui/app_settings.h"
#include "support/test_support.h"

TEST_CASE("app settings: the last model and KV budget round-trip, a broken value is the default and named", "[app]") {
  kvc::test::TempDir tmp;
  const auto file = tmp.path() / "settings.json";
  auto none = kvc::app::load_app_settings(file);
  CHECK(none.last_model.empty());
  CHECK(none.budgets.t1_bytes == 0);
  CHECK_FALSE(none.serve);  // the API server is off until switched on
  CHECK(none.serve_port == 8080);
  CHECK(none.problem.empty());  // no file yet: nothing to report

  kvc::app::AppSettings s;
  s.last_model = "/models/a b.gguf";
  s.budgets = kvc::KvBudget{1 << 20, 2 << 20, int64_t{3} << 30, int64_t{256} << 20};
  s.serve = true;
  s.serve_port = 18080;
  s.kv_format = kvc::kv::KvFormat::int4h;
  REQUIRE(kvc::app::save_app_settings(file, s).ok());
  const auto back = kvc::app::load_app_settings(file);
  CHECK(back.serve);
  CHECK(back.serve_port == 18080);
  CHECK(back.last_model == s.last_model);
  CHECK(back.budgets == s.budgets);  // the context's KV budget too
  CHECK(back.kv_format == kvc::kv::KvFormat::int4h);
  CHECK(none.kv_format == kvc::kv::KvFormat::f16);
  CHECK(back.problem.empty());
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "settings.json.tmp"));

  { std::ofstream(file) << "{\"last_model\": 5, \"tier_budgets\": {\"t0_bytes\": -4, \"t1_bytes\": \"x\"}"; }
  const auto broken = kvc::app::load_app_settings(file);
  CHECK(broken.last_model.empty());
  CHECK_FALSE(broken.serve);
  CHECK(broken.budgets.t0_bytes == 0);
  CHECK_THAT(broken.problem, Catch::Contains("not a JSON object"));  // the closing brace is missing
  {
    std::ofstream(file) << "{\"last_model\": 5, \"tier_budgets\": {\"t0_bytes\": -4, \"t2_bytes\": 4096}, "
                           "\"serve\": \"yes\", \"serve_port\": 70000}";
  }
  const auto partial = kvc::app::load_app_settings(file);
  CHECK(partial.last_model.empty());
  CHECK(partial.budgets.t0_bytes == 0);
  CHECK(partial.budgets.t2_bytes == 4096);
  CHECK_FALSE(partial.serve);         // not a boolean
  CHECK(partial.serve_port == 8080);  // not a port
  // The first value dropped is named, with what it should be.
  CHECK_THAT(partial.problem, Catch::Contains("\"last_model\" must be a file name, got 5"));
  { std::ofstream(file) << "{\"kv_format\": \"int5\", \"serve_port\": 8081}"; }
  const auto bad_format = kvc::app::load_app_settings(file);
  CHECK(bad_format.kv_format == kvc::kv::KvFormat::f16);
  CHECK(bad_format.serve_port == 8081);
  CHECK_THAT(bad_format.problem,
             Catch::Contains("\"kv_format\" must be one of f16, int8, int4, int8h, int4h or int4c, got \"int5\""));
  { std::ofstream(file) << "{\"tier_budgets\": {\"t1_bytes\": \"x\"}, \"serve_port\": 8081}"; }
  const auto bad_budget = kvc::app::load_app_settings(file);
  CHECK(bad_budget.serve_port == 8081);
  CHECK(bad_budget.budgets.t1_bytes == 0);
  CHECK_THAT(bad_budget.problem,
             Catch::Contains("tier_budgets.t1_bytes must be a byte count (0: the default), got \"x\""));

  // Unwritable: an error, not a crash.
  CHECK_FALSE(kvc::app::save_app_settings(tmp.path() / "no" / "such" / "dir" / "settings.json", s).ok());
}
