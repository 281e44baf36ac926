// What the app remembers between runs in DATA_DIR/settings.json: the last model loaded, the
// KV budget and KV format set in the Engine window and its "Serve on localhost" switch (the window layout is ImGui's,
// in DATA_DIR/imgui.ini).
#pragma once

#include <filesystem>
#include <string>

#include "core/kv/kv_format.h"
#include "core/util/machine_budget.h"
#include "core/util/result.h"

namespace kvc::app {

struct AppSettings {
  std::string last_model;                      // empty: the demo model
  KvBudget budgets;                            // as set in the Engine window (0: the machine's default)
  bool serve = false;                          // the API server on 127.0.0.1 at start
  int serve_port = 8080;                       // its port (kvchat-cli serve's default)
  kv::KvFormat kv_format = kv::KvFormat::f16;  // K and V, as set in the Engine window
  // Why a value of the file was not used (its default was): empty when the file was read whole.
  // A missing file is no problem; the next save rewrites a broken one.
  std::string problem;
};

// A missing file is the defaults; a malformed one or a bad value too, with `problem` saying so.
AppSettings load_app_settings(const std::filesystem::path& file);
Status save_app_settings(const std::filesystem::path& file, const AppSettings& s);

}  // namespace kvc::app
