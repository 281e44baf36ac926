// The remote servers the app has used, one entry per server (DATA_DIR/remote/servers.json), and
// their API keys, kept apart in DATA_DIR/remote/keys.json with user-only permissions (0600).
//
// servers.json holds no secret: {"last": URL, "servers": [{"url", "model", "timeout_s"}, ...]}.
// keys.json: {"URL": "KEY", ...}; written to a 0600 temporary file and renamed over the old one,
// and set back to 0600 if someone widened it. No function here logs or returns a key in a message.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/util/result.h"

namespace kvc::remote {

struct ServerSettings {
  std::string url;  // normalized base URL (remote_client.h)
  std::string model;
  double timeout_s = 60;
};

struct RemoteSettings {
  std::vector<ServerSettings> servers;  // most recently used first
  std::string last_url;
};

// A missing file is no servers; a damaged one is an error naming it.
Result<RemoteSettings> load_remote_settings(const std::filesystem::path& dir);
Status save_remote_settings(const std::filesystem::path& dir, const RemoteSettings& s);
// Puts `server` first (replacing the entry of the same URL) and makes it the last used.
void remember_server(RemoteSettings& s, const ServerSettings& server);
const ServerSettings* find_server(const RemoteSettings& s, const std::string& url);

// The key stored for url ("" when none).
Result<std::string> load_api_key(const std::filesystem::path& dir, const std::string& url);
// Stores (or, with an empty key, forgets) url's key.
Status store_api_key(const std::filesystem::path& dir, const std::string& url, const std::string& key);

}  // namespace kvc::remote
