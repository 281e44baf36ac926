// DATA_DIR/settings.json, written whole to a temporary file and renamed over the old one.
#include "app/gui/app_settings.h"

#include <nlohmann/json.hpp>

#include <fstream>

#include "storage/file_write.h"

namespace kvc::app {

AppSettings load_app_settings(const std::filesystem::path& file) {
  AppSettings s;
  std::ifstream in(file);
  if (!in) return s;
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return s;
  if (auto it = j.find("last_model"); it != j.end() && it->is_string()) s.last_model = it->get<std::string>();
  if (auto b = j.find("tier_budgets"); b != j.end() && b->is_object()) {
    auto bytes = [&](const char* key) -> int64_t {
      const auto v = b->find(key);
      return v != b->end() && v->is_number_integer() && v->get<int64_t>() > 0 ? v->get<int64_t>() : 0;
    };
    s.budgets = ui::TierBudgets{bytes("t0_bytes"), bytes("t1_bytes"), bytes("t2_bytes")};
  }
  if (auto v = j.find("serve"); v != j.end() && v->is_boolean()) s.serve = v->get<bool>();
  if (auto v = j.find("serve_port"); v != j.end() && v->is_number_integer()) {
    const int64_t port = v->get<int64_t>();
    if (port >= 0 && port <= 65535) s.serve_port = static_cast<int>(port);
  }
  return s;
}

Status save_app_settings(const std::filesystem::path& file, const AppSettings& s) {
  const nlohmann::json j = {
      {"last_model", s.last_model},
      {"tier_budgets",
       {{"t0_bytes", s.budgets.t0_bytes}, {"t1_bytes", s.budgets.t1_bytes}, {"t2_bytes", s.budgets.t2_bytes}}},
      {"serve", s.serve},
      {"serve_port", s.serve_port}};
  return storage::write_file_replacing(file, j.dump(2) + "\n", "settings file");
}

}  // namespace kvc::app
