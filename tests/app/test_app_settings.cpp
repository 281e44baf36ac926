// DATA_DIR/settings.json: the last model and the remembered tier budgets round-trip; a missing
// or malformed file gives the defaults.
#include <catch2/catch.hpp>

#include <fstream>

#include "app/gui/app_settings.h"
#include "support/test_support.h"

TEST_CASE("app settings: the last model and tier budgets round-trip, a broken file is the defaults", "[app]") {
  kvc::test::TempDir tmp;
  const auto file = tmp.path() / "settings.json";
  auto none = kvc::app::load_app_settings(file);
  CHECK(none.last_model.empty());
  CHECK(none.budgets.t1_bytes == 0);
  CHECK_FALSE(none.serve);  // the API server is off until switched on
  CHECK(none.serve_port == 8080);

  kvc::app::AppSettings s;
  s.last_model = "/models/a b.gguf";
  s.budgets = kvc::ui::TierBudgets{1 << 20, 2 << 20, int64_t{3} << 30};
  s.serve = true;
  s.serve_port = 18080;
  REQUIRE(kvc::app::save_app_settings(file, s).ok());
  const auto back = kvc::app::load_app_settings(file);
  CHECK(back.serve);
  CHECK(back.serve_port == 18080);
  CHECK(back.last_model == s.last_model);
  CHECK(back.budgets.t0_bytes == s.budgets.t0_bytes);
  CHECK(back.budgets.t1_bytes == s.budgets.t1_bytes);
  CHECK(back.budgets.t2_bytes == s.budgets.t2_bytes);
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "settings.json.tmp"));

  { std::ofstream(file) << "{\"last_model\": 5, \"tier_budgets\": {\"t0_bytes\": -4, \"t1_bytes\": \"x\"}"; }
  const auto broken = kvc::app::load_app_settings(file);
  CHECK(broken.last_model.empty());
  CHECK_FALSE(broken.serve);
  CHECK(broken.budgets.t0_bytes == 0);
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

  // Unwritable: an error, not a crash.
  CHECK_FALSE(kvc::app::save_app_settings(tmp.path() / "no" / "such" / "dir" / "settings.json", s).ok());
}
