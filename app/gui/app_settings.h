// What the app remembers between runs in DATA_DIR/settings.json: the last model loaded and the
// tier budgets set in the Engine window (the window layout is ImGui's, in DATA_DIR/imgui.ini).
#pragma once

#include <filesystem>
#include <string>

#include "core/util/result.h"
#include "ui/engine_state.h"

namespace kvc::app {

struct AppSettings {
  std::string last_model;  // empty: the demo model
  ui::TierBudgets budgets;
};

// A missing file is the defaults; a malformed one too (it is rewritten on the next save).
AppSettings load_app_settings(const std::filesystem::path& file);
Status save_app_settings(const std::filesystem::path& file, const AppSettings& s);

}  // namespace kvc::app
