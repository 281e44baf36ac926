// What the app remembers between runs in DATA_DIR/settings.json: the last model loaded, the
// tier budgets set in the Engine window and its "Serve on localhost" switch (the window layout is ImGui's, in
// DATA_DIR/imgui.ini).
#pragma once

#include <filesystem>
#include <string>

#include "core/util/result.h"
#include "ui/engine_state.h"

namespace kvc::app {

struct AppSettings {
  std::string last_model;  // empty: the demo model
  ui::TierBudgets budgets;
  bool serve = false;     // the API server on 127.0.0.1 at start
  int serve_port = 8080;  // its port (kvchat-cli serve's default)
};

// A missing file is the defaults; a malformed one too (it is rewritten on the next save).
AppSettings load_app_settings(const std::filesystem::path& file);
Status save_app_settings(const std::filesystem::path& file, const AppSettings& s);

}  // namespace kvc::app
