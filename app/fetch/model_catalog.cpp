// Reading assets/models/catalog.json.
#include "app/fetch/model_catalog.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "app/fetch/sha256.h"
#include "app/fetch/source.h"

namespace kvc::fetch {

Result<std::vector<CatalogEntry>> parse_catalog(std::string_view json_text) {
  const auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(ErrorCode::invalid_file, "the model catalog is not a JSON object");
  const auto models = j.find("models");
  if (models == j.end() || !models->is_array()) {
    return make_error(ErrorCode::invalid_file, "the model catalog has no \"models\" array");
  }
  std::vector<CatalogEntry> out;
  for (size_t i = 0; i < models->size(); ++i) {
    const auto& m = (*models)[i];
    const std::string where = "model catalog entry " + std::to_string(i + 1);
    if (!m.is_object()) return make_error(ErrorCode::invalid_file, where + " is not an object");
    auto text = [&](const char* key, bool required, std::string& to) -> Status {
      const auto it = m.find(key);
      if (it == m.end() && !required) return {};
      if (it == m.end() || !it->is_string() || it->get<std::string>().empty()) {
        return make_error(ErrorCode::invalid_file, where + ": \"" + key + "\" must be a non-empty string");
      }
      to = it->get<std::string>();
      return {};
    };
    CatalogEntry e;
    KVC_TRY(text("name", true, e.name));
    KVC_TRY(text("source", true, e.source));
    KVC_TRY(text("licence", true, e.licence));
    KVC_TRY(text("needs", false, e.needs));
    KVC_TRY(text("notes", false, e.notes));
    KVC_TRY(text("sha256", false, e.sha256));
    if (!e.sha256.empty() && !is_sha256_hex(e.sha256)) {
      return make_error(ErrorCode::invalid_file, where + ": \"sha256\" must be 64 hex digits");
    }
    const auto size = m.find("size_bytes");
    if (size == m.end() || !size->is_number_unsigned() || size->get<uint64_t>() == 0) {
      return make_error(ErrorCode::invalid_file, where + ": \"size_bytes\" must be a positive integer");
    }
    e.size_bytes = size->get<uint64_t>();
    auto url = resolve_source(e.source);
    if (!url.ok()) return make_error(ErrorCode::invalid_file, where + ": " + url.error().message);
    e.url = *url;
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<CatalogEntry>> load_catalog(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return make_error(ErrorCode::io, "cannot read the model catalog " + file.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  auto r = parse_catalog(ss.str());
  if (!r.ok()) return make_error(r.error().code, file.string() + ": " + r.error().message);
  return r;
}

}  // namespace kvc::fetch
