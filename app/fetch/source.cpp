// Download sources: URLs as given, Hugging Face OWNER/REPO/FILE shorthand, file names from URLs.
#include "app/fetch/source.h"

#include <cctype>
#include <vector>

#include "app/fetch/sha256.h"

namespace kvc::fetch {

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A Hugging Face owner or repository name: letters, digits, '-', '_', '.'; not "." or "..".
bool is_hf_name(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

}  // namespace

Result<std::string> resolve_source(const std::string& source) {
  if (starts_with(source, "https://") || starts_with(source, "http://")) {
    const size_t host_begin = source.find("://") + 3;
    if (host_begin >= source.size() || source[host_begin] == '/') {
      return make_error(ErrorCode::invalid_argument, "\"" + source + "\" has no host");
    }
    for (char c : source) {
      if (static_cast<unsigned char>(c) <= ' ') {
        return make_error(ErrorCode::invalid_argument,
                          "\"" + source + "\" holds a space or control character; percent-encode it");
      }
    }
    return source;
  }
  const std::string usage = "\"" + source +
                            "\" is neither an http(s):// URL nor a Hugging Face OWNER/REPO/FILE.gguf "
                            "(for example bartowski/SmolLM2-360M-Instruct-GGUF/SmolLM2-360M-Instruct-Q8_0.gguf)";
  if (source.find("://") != std::string::npos) {
    return make_error(ErrorCode::invalid_argument,
                      "only http:// and https:// URLs can be downloaded, not \"" + source + "\"");
  }
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= source.size()) {
    const size_t slash = source.find('/', begin);
    const size_t end = slash == std::string::npos ? source.size() : slash;
    parts.push_back(source.substr(begin, end - begin));
    if (slash == std::string::npos) break;
    begin = slash + 1;
  }
  if (parts.size() < 3) return make_error(ErrorCode::invalid_argument, usage);
  for (const std::string& p : parts) {
    if (!is_hf_name(p)) return make_error(ErrorCode::invalid_argument, usage);
  }
  std::string path;
  for (size_t i = 2; i < parts.size(); ++i) path += (i > 2 ? "/" : "") + parts[i];
  return "https://huggingface.co/" + parts[0] + "/" + parts[1] + "/resolve/main/" + path;
}

Result<std::string> file_name_from_url(const std::string& url) {
  std::string path = url;
  if (const size_t q = path.find_first_of("?#"); q != std::string::npos) path.resize(q);
  const size_t slash = path.rfind('/');
  const std::string raw = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string name;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size() && hex_value(raw[i + 1]) >= 0 && hex_value(raw[i + 2]) >= 0) {
      name += static_cast<char>(hex_value(raw[i + 1]) * 16 + hex_value(raw[i + 2]));
      i += 2;
    } else {
      name += raw[i];
    }
  }
  if (!check_file_name(name).ok()) {
    return make_error(ErrorCode::invalid_argument,
                      "cannot name the download after \"" + url + "\": give a file name with --output NAME.gguf");
  }
  return name;
}

Status check_file_name(const std::string& name) {
  bool bad = name.empty() || name == "." || name == ".." || name[0] == '.';
  for (char c : name) bad = bad || c == '/' || c == '\\' || static_cast<unsigned char>(c) < ' ';
  if (bad) {
    return make_error(ErrorCode::invalid_argument,
                      "\"" + name +
                          "\" cannot be a file name in the models folder: --output wants a plain name "
                          "such as model-Q4_K_M.gguf");
  }
  return {};
}

std::string sha256_from_etag(const std::string& value) {
  std::string v = value;
  if (starts_with(v, "W/")) v = v.substr(2);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  if (!is_sha256_hex(v)) return {};
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v;
}

}  // namespace kvc::fetch
