// The main window's frame: menu bar, keyboard shortcuts, the layout of the four windows.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "ui/tool_windows.h"
#include "ui/views.h"

namespace kvc::ui {

class DemoMode;

struct Shell {
  ConversationsView conversations;
  ChatView chat;
  ModelView model;
  MemoryView memory;
  KvCalculatorView kv_calculator;
  EngineView engine;
  // Presenter layout: chat and memory side by side under the demo's caption, large fonts.
  bool presenter = false;
  const Fonts* presenter_fonts = nullptr;               // set by the app; the views draw with these when presenting
  DemoMode* demo = nullptr;                             // the running demo, if any (owned by the app)
  std::vector<std::filesystem::path> demo_files;        // the Demo menu
  std::optional<std::filesystem::path> demo_requested;  // picked in the Demo menu; the app starts it
  bool reset_layout = true;     // place the windows on the next frame (first frame, View > Reset layout, resize)
  bool restore_layout = false;  // the first frame keeps the windows where imgui.ini put them
  bool quit = false;

  void draw(ViewContext& ctx);

 private:
  void shortcuts(ViewContext& ctx);
  void layout(float menu_h);
  void presenter_layout(float menu_h);
  bool was_presenter_ = false;
  ImVec2 last_display_{0, 0};
};

}  // namespace kvc::ui
