// The main window's frame: menu bar, keyboard shortcuts, the layout of the four windows.
#pragma once

#include "ui/views.h"

namespace kvc::ui {

struct Shell {
  ConversationsView conversations;
  ChatView chat;
  ModelView model;
  MemoryView memory;
  bool reset_layout = true;  // place the windows on the next frame (first frame, View > Reset layout, resize)
  bool quit = false;

  void draw(ViewContext& ctx);

 private:
  void shortcuts(ViewContext& ctx);
  void layout(float menu_h);
  ImVec2 last_display_{0, 0};
};

}  // namespace kvc::ui
