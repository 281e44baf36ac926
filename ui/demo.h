// Demo mode's scenarios: scenes, each a presenter's caption ("say") and the script steps it plays.
//
//   {"title": "One system prompt, many conversations",
//    "hold_s": 3,
//    "scenes": [
//      {"say": "Every chat starts with the same 300-token system prompt.",
//       "steps": [{"do": "wait_model"}, {"do": "key", "key": "ctrl+n"}, ...]},
//      {"say": "The second chat reuses it: look at the cached tokens.", "hold_s": 5, "steps": [...]}
//    ]}
//
// Steps are script mode's (ui/script.h); a scene without steps only shows its caption.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"
#include "ui/script.h"

namespace kvc::ui {

// Invariant (parse_demo): say is non-empty; hold_s >= 0.
struct DemoScene {
  std::string say;
  Script script;        // may have no steps
  double hold_s = 3.0;  // playing: how long the caption stays after the steps finish
};

// Invariant (parse_demo): at least one scene.
struct Demo {
  std::string title;
  std::vector<DemoScene> scenes;
};

// Errors name the scene and step: "scene 2: step 3 (click): \"widget\" must be a non-empty string".
Result<Demo> parse_demo(std::string_view json_text);
Result<Demo> load_demo(const std::filesystem::path& path);

// The demos in a folder (*.json), sorted by file name; empty when the folder is missing.
std::vector<std::filesystem::path> list_demos(const std::filesystem::path& dir);

}  // namespace kvc::ui
