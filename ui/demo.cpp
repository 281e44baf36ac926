// Parsing demo scenarios.
#include "ui/demo.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace kvc::ui {

namespace {

using nlohmann::json;

Error scene_error(size_t index, const std::string& what) {
  return make_error(ErrorCode::invalid_argument, "scene " + std::to_string(index) + ": " + what);
}

Result<double> hold_of(const json& j, double fallback, const std::string& where) {
  auto it = j.find("hold_s");
  if (it == j.end()) return fallback;
  if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 3600) {
    return make_error(ErrorCode::invalid_argument, where + "\"hold_s\" must be a number of seconds in [0, 3600]");
  }
  return it->get<double>();
}

}  // namespace

Result<Demo> parse_demo(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return make_error(ErrorCode::invalid_argument, "the demo is not valid JSON");
  if (!j.is_object() || !j.contains("scenes") || !j["scenes"].is_array() || j["scenes"].empty()) {
    return make_error(ErrorCode::invalid_argument, "the demo must be an object with a non-empty \"scenes\" array");
  }
  Demo demo;
  if (auto t = j.find("title"); t != j.end()) {
    if (!t->is_string()) return make_error(ErrorCode::invalid_argument, "\"title\" must be a string");
    demo.title = t->get<std::string>();
  }
  auto default_hold = hold_of(j, 3.0, "");
  if (!default_hold.ok()) return default_hold.error();
  size_t index = 0;
  for (const auto& sj : j["scenes"]) {
    ++index;
    if (!sj.is_object())
      return scene_error(index, "a scene must be an object like {\"say\": \"...\", \"steps\": [...]}");
    DemoScene scene;
    auto say = sj.find("say");
    if (say == sj.end() || !say->is_string() || say->get<std::string>().empty()) {
      return scene_error(index, "\"say\" (the presenter's caption) must be a non-empty string");
    }
    scene.say = say->get<std::string>();
    auto hold = hold_of(sj, *default_hold, "scene " + std::to_string(index) + ": ");
    if (!hold.ok()) return hold.error();
    scene.hold_s = *hold;
    if (auto steps = sj.find("steps"); steps != sj.end()) {
      if (!steps->is_array()) return scene_error(index, "\"steps\" must be an array of script steps");
      if (!steps->empty()) {
        auto script = parse_script(json{{"steps", *steps}}.dump());
        if (!script.ok()) return scene_error(index, script.error().message);
        scene.script = std::move(*script);
      }
    }
    demo.scenes.push_back(std::move(scene));
  }
  return demo;
}

Result<Demo> load_demo(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) return make_error(ErrorCode::io, "cannot open demo " + path.string());
  std::stringstream ss;
  ss << f.rdbuf();
  auto d = parse_demo(ss.str());
  if (!d.ok()) return make_error(d.error().code, path.string() + ": " + d.error().message);
  if (d->title.empty()) d->title = path.stem().string();
  return d;
}

std::vector<std::filesystem::path> list_demos(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".json") out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kvc::ui
