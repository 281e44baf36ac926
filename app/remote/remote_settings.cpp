// Remembered remote servers and their API keys on disk.
#include "app/remote/remote_settings.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kvc::remote {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* k_servers_file = "servers.json";
constexpr const char* k_keys_file = "keys.json";

Result<json> read_json(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return json::object();
  std::ifstream in(file, std::ios::binary);
  if (!in) return make_error(ErrorCode::io, "cannot read " + file.string() + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (!j.is_object()) {
    return make_error(ErrorCode::invalid_file, file.string() + " is not a JSON object; delete it to start afresh");
  }
  return j;
}

// Writes text to file through a temporary file created with `mode`, renamed over it.
Status write_file(const fs::path& file, const std::string& text, mode_t mode) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec) return make_error(ErrorCode::io, "cannot create " + file.parent_path().string() + ": " + ec.message());
  ::chmod(file.parent_path().c_str(), 0700);
  const std::string tmp = file.string() + ".tmp";
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return make_error(ErrorCode::io, "cannot write " + tmp + ": " + std::strerror(errno));
  ::fchmod(fd, mode);  // whatever the umask
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return make_error(ErrorCode::io, "cannot write " + tmp + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return make_error(ErrorCode::io, "cannot replace " + file.string() + ": " + why);
  }
  return {};
}

}  // namespace

Result<RemoteSettings> load_remote_settings(const fs::path& dir) {
  auto j = read_json(dir / k_servers_file);
  if (!j.ok()) return j.error();
  RemoteSettings s;
  if (j->contains("last") && (*j)["last"].is_string()) s.last_url = (*j)["last"].get<std::string>();
  if (j->contains("servers") && (*j)["servers"].is_array()) {
    for (const json& e : (*j)["servers"]) {
      if (!e.is_object() || !e.contains("url") || !e["url"].is_string()) continue;
      ServerSettings v;
      v.url = e["url"].get<std::string>();
      if (e.contains("model") && e["model"].is_string()) v.model = e["model"].get<std::string>();
      if (e.contains("timeout_s") && e["timeout_s"].is_number() && e["timeout_s"].get<double>() > 0) {
        v.timeout_s = e["timeout_s"].get<double>();
      }
      s.servers.push_back(std::move(v));
    }
  }
  return s;
}

Status save_remote_settings(const fs::path& dir, const RemoteSettings& s) {
  json j = {{"last", s.last_url}, {"servers", json::array()}};
  for (const ServerSettings& v : s.servers) {
    j["servers"].push_back({{"url", v.url}, {"model", v.model}, {"timeout_s", v.timeout_s}});
  }
  return write_file(dir / k_servers_file, j.dump(2) + "\n", 0644);
}

void remember_server(RemoteSettings& s, const ServerSettings& server) {
  std::erase_if(s.servers, [&](const ServerSettings& v) { return v.url == server.url; });
  s.servers.insert(s.servers.begin(), server);
  s.last_url = server.url;
}

const ServerSettings* find_server(const RemoteSettings& s, const std::string& url) {
  for (const ServerSettings& v : s.servers) {
    if (v.url == url) return &v;
  }
  return nullptr;
}

Result<std::string> load_api_key(const fs::path& dir, const std::string& url) {
  const fs::path file = dir / k_keys_file;
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) ::chmod(file.c_str(), 0600);
  auto j = read_json(file);
  if (!j.ok()) return j.error();
  if (j->contains(url) && (*j)[url].is_string()) return (*j)[url].get<std::string>();
  return std::string();
}

Status store_api_key(const fs::path& dir, const std::string& url, const std::string& key) {
  auto j = read_json(dir / k_keys_file);
  json keys = j.ok() ? *j : json::object();  // a damaged key file is replaced
  if (key.empty()) {
    if (!keys.contains(url)) return {};
    keys.erase(url);
  } else {
    if (keys.contains(url) && keys[url] == key) {
      ::chmod((dir / k_keys_file).c_str(), 0600);
      return {};
    }
    keys[url] = key;
  }
  return write_file(dir / k_keys_file, keys.dump(2) + "\n", 0600);
}

}  // namespace kvc::remote
