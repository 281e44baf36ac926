// Demo mode in the app: a DemoPlayer, the script runner of its current scene, and the caption
// bar with Step / Play / Pause (keys: space = play/pause, right arrow = step).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "ui/demo_player.h"
#include "ui/script_runner.h"
#include "ui/views.h"

namespace kvc::ui {

inline constexpr const char* k_demo_window = "Demo";

class DemoMode {
 public:
  DemoMode(Demo demo, std::filesystem::path screenshot_dir);

  DemoPlayer& player() { return player_; }
  const DemoPlayer& player() const { return player_; }

  // Once per frame before the views draw: starts due scenes and advances the running one.
  void before_frame(const AppSnapshot& snap, AppCommands& cmd, ScriptHooks& hooks, double now_s);
  // Once per frame after rendering (the scene's screenshots).
  void after_render(const ScriptHooks& hooks, int fb_width, int fb_height, float fb_scale);
  // The caption bar: one window placed by the shell's layout.
  void draw(ViewContext& ctx);

 private:
  DemoPlayer player_;
  std::filesystem::path dir_;
  std::optional<ScriptRunner> runner_;  // the running scene's steps
  double now_s_ = 0;
};

}  // namespace kvc::ui
