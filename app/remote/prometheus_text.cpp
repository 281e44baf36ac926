// Parsing Prometheus text pages into samples.
#include "app/remote/prometheus_text.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace kvc::remote {

namespace {

bool name_char(char c, bool first) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
  return alpha || (!first && c >= '0' && c <= '9');
}

void skip_spaces(std::string_view s, size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
}

std::optional<double> parse_value(std::string_view v) {
  if (v == "+Inf" || v == "Inf") return std::numeric_limits<double>::infinity();
  if (v == "-Inf") return -std::numeric_limits<double>::infinity();
  if (v == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (v.empty()) return std::nullopt;
  const std::string text(v);
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return d;
}

// One sample line; nullopt when it is not one.
std::optional<PromSample> parse_line(std::string_view line) {
  PromSample s;
  size_t i = 0;
  skip_spaces(line, i);
  const size_t name_begin = i;
  while (i < line.size() && name_char(line[i], i == name_begin)) ++i;
  if (i == name_begin) return std::nullopt;
  s.name = std::string(line.substr(name_begin, i - name_begin));
  if (i < line.size() && line[i] == '{') {
    ++i;
    for (;;) {
      skip_spaces(line, i);
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      const size_t key_begin = i;
      while (i < line.size() && name_char(line[i], i == key_begin)) ++i;
      if (i == key_begin) return std::nullopt;
      std::string key(line.substr(key_begin, i - key_begin));
      skip_spaces(line, i);
      if (i >= line.size() || line[i] != '=') return std::nullopt;
      ++i;
      skip_spaces(line, i);
      if (i >= line.size() || line[i] != '"') return std::nullopt;
      ++i;
      std::string value;
      bool closed = false;
      while (i < line.size()) {
        const char c = line[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\' && i < line.size()) {
          const char e = line[i++];
          value += e == 'n' ? '\n' : e;
          continue;
        }
        value += c;
      }
      if (!closed) return std::nullopt;
      s.labels[std::move(key)] = std::move(value);
      skip_spaces(line, i);
      if (i < line.size() && line[i] == ',') ++i;
    }
  }
  skip_spaces(line, i);
  size_t end = i;
  while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
  const auto v = parse_value(line.substr(i, end - i));
  if (!v) return std::nullopt;
  s.value = *v;
  // An optional timestamp may follow; anything else is not a sample.
  size_t j = end;
  skip_spaces(line, j);
  if (j < line.size()) {
    size_t k = j;
    if (line[k] == '-') ++k;
    while (k < line.size() && line[k] >= '0' && line[k] <= '9') ++k;
    skip_spaces(line, k);
    if (k != line.size()) return std::nullopt;
  }
  return s;
}

}  // namespace

PromPage parse_prometheus_text(std::string_view text) {
  PromPage page;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t i = 0;
    skip_spaces(line, i);
    if (i == line.size() || line[i] == '#') continue;
    if (auto s = parse_line(line)) {
      page.samples.push_back(std::move(*s));
    } else {
      if (page.n_bad_lines++ == 0) page.first_bad_line = std::string(line.substr(0, 80));
    }
  }
  return page;
}

std::optional<double> sum_of(const PromPage& page, std::string_view name) {
  std::optional<double> sum;
  for (const PromSample& s : page.samples) {
    if (s.name == name && !std::isnan(s.value)) sum = sum.value_or(0) + s.value;
  }
  return sum;
}

std::optional<double> mean_of(const PromPage& page, std::string_view name) {
  double sum = 0;
  int n = 0;
  for (const PromSample& s : page.samples) {
    if (s.name == name && !std::isnan(s.value)) {
      sum += s.value;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

std::optional<double> sum_where(const PromPage& page, std::string_view name, std::string_view key,
                                std::string_view value) {
  std::optional<double> sum;
  for (const PromSample& s : page.samples) {
    if (s.name != name || std::isnan(s.value)) continue;
    const auto it = s.labels.find(std::string(key));
    if (it != s.labels.end() && it->second == value) sum = sum.value_or(0) + s.value;
  }
  return sum;
}

}  // namespace kvc::remote
