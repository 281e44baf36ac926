// The curated list of small GGUF models offered for download: data in assets/models/catalog.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace kvc::fetch {

struct CatalogEntry {
  std::string name;
  std::string source;       // what kvchat-cli pull takes: a URL or OWNER/REPO/FILE.gguf
  std::string url;          // source resolved (resolve_source)
  uint64_t size_bytes = 0;  // approximate
  std::string licence;
  std::string needs;
  std::string notes;
  std::string sha256;  // optional: checked when the server publishes none
};

// Parses the catalog; every entry needs name, source (resolvable), size_bytes and licence.
// Errors name the entry and field.
Result<std::vector<CatalogEntry>> parse_catalog(std::string_view json_text);
Result<std::vector<CatalogEntry>> load_catalog(const std::filesystem::path& file);

}  // namespace kvc::fetch
