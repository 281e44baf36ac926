// DATA_DIR/settings.json, written whole to a temporary file and renamed over the old one.
#include "app/gui/app_settings.h"

#include <nlohmann/json.hpp>

#include <fstream>

#include "storage/file_write.h"

namespace kvc::app {

namespace {

using nlohmann::json;

// Notes the first value that is not used, naming it and what it should be.
void note(AppSettings& s, const std::string& what) {
  if (s.problem.empty()) s.problem = what;
}

}  // namespace

AppSettings load_app_settings(const std::filesystem::path& file) {
  AppSettings s;
  std::ifstream in(file);
  if (!in) return s;
  const std::string where = file.string() + ": ";
  const auto j = json::parse(in, nullptr, false);
  if (!j.is_object()) {
    note(s, where + "not a JSON object; the defaults are used until the next save rewrites it");
    return s;
  }
  const std::string defaulted = "; its default is used (the next save rewrites the file)";
  if (auto it = j.find("last_model"); it != j.end()) {
    if (it->is_string()) {
      s.last_model = it->get<std::string>();
    } else {
      note(s, where + "\"last_model\" must be a file name, got " + it->dump() + defaulted);
    }
  }
  if (auto b = j.find("tier_budgets"); b != j.end()) {
    if (!b->is_object()) note(s, where + "\"tier_budgets\" must be an object, got " + b->dump() + defaulted);
    auto bytes = [&](const char* key) -> int64_t {
      if (!b->is_object()) return 0;
      const auto v = b->find(key);
      if (v == b->end()) return 0;
      if (v->is_number_integer() && v->get<int64_t>() >= 0) return v->get<int64_t>();
      note(s, where + "tier_budgets." + key + " must be a byte count (0: the default), got " + v->dump() + defaulted);
      return 0;
    };
    s.budgets = KvBudget{bytes("t0_bytes"), bytes("t1_bytes"), bytes("t2_bytes"), bytes("ctx_kv_bytes")};
  }
  if (auto v = j.find("serve"); v != j.end()) {
    if (v->is_boolean()) {
      s.serve = v->get<bool>();
    } else {
      note(s, where + "\"serve\" must be true or false, got " + v->dump() + defaulted);
    }
  }
  if (auto v = j.find("serve_port"); v != j.end()) {
    if (v->is_number_integer() && v->get<int64_t>() >= 0 && v->get<int64_t>() <= 65535) {
      s.serve_port = static_cast<int>(v->get<int64_t>());
    } else {
      note(s, where + "\"serve_port\" must be a port in [0, 65535], got " + v->dump() + defaulted);
    }
  }
  if (auto v = j.find("kv_format"); v != j.end()) {
    const auto f = v->is_string() ? kv::parse_kv_format(v->get<std::string>()) : std::nullopt;
    if (f) {
      s.kv_format = *f;
    } else {
      note(s, where + "\"kv_format\" must be one of " + std::string(kv::k_kv_format_names) + ", got " + v->dump() +
                  defaulted);
    }
  }
  return s;
}

Status save_app_settings(const std::filesystem::path& file, const AppSettings& s) {
  const json j = {{"last_model", s.last_model},
                  {"tier_budgets",
                   {{"t0_bytes", s.budgets.t0_bytes},
                    {"t1_bytes", s.budgets.t1_bytes},
                    {"t2_bytes", s.budgets.t2_bytes},
                    {"ctx_kv_bytes", s.budgets.ctx_kv_bytes}}},
                  {"serve", s.serve},
                  {"serve_port", s.serve_port},
                  {"kv_format", std::string(kv::kv_format_name(s.kv_format))}};
  return storage::write_file_replacing(file, j.dump(2) + "\n", "settings file");
}

}  // namespace kvc::app
