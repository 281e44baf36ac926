// Named widgets that script mode can type into and click, and small ImGui helpers (std::string input).
#pragma once

#include <imgui.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kvc::ui {

// The meeting point of the views and script mode. Views mark their named widgets each frame
// and take pending text or clicks; the script runner sets those and reads what was seen.
// UI thread only.
class ScriptHooks {
 public:
  struct Rect {
    ImVec2 min, max;  // in window coordinates (points, not framebuffer pixels)
  };

  void begin_frame();
  void set_text(const std::string& widget, std::string text) { texts_[widget] = std::move(text); }
  void request_click(const std::string& widget) { clicks_.insert(widget); }
  void request_key(const std::string& key) { keys_.insert(key); }
  // What views call: true once for a pending request.
  bool take_text(const std::string& widget, std::string& out);
  bool take_click(const std::string& widget);
  bool take_key(const std::string& key);
  bool pending(const std::string& widget) const { return texts_.count(widget) || clicks_.count(widget); }
  bool key_pending(const std::string& key) const { return keys_.count(key) != 0; }

  void note_widget(const std::string& widget) { seen_.insert(widget); }
  bool seen_last_frame(const std::string& widget) const { return seen_prev_.count(widget) != 0; }
  std::string seen_list() const;
  void note_window(const std::string& title);  // call between Begin and End
  // What a view drew that a script may assert on (e.g. the Markdown structure of the last
  // answer); kept until set again.
  void set_fact(const std::string& key, double value) { numbers_[key] = value; }
  void set_fact(const std::string& key, std::string value) { strings_[key] = std::move(value); }
  const std::map<std::string, double>& number_facts() const { return numbers_; }
  const std::map<std::string, std::string>& string_facts() const { return strings_; }
  std::optional<Rect> window_rect(const std::string& title) const;

 private:
  std::map<std::string, std::string> texts_;
  std::set<std::string> clicks_;
  std::set<std::string> keys_;
  std::set<std::string> seen_, seen_prev_;
  std::map<std::string, Rect> windows_;
  std::map<std::string, double> numbers_;
  std::map<std::string, std::string> strings_;
};

// A button a script can press by name.
bool named_button(ScriptHooks& hooks, const std::string& name, const char* label, ImVec2 size = ImVec2(0, 0));
// Single-line or (size.y > 0) multi-line input over a std::string; a script can type into it.
// Returns ImGui's result (true on edit, or on Enter with ImGuiInputTextFlags_EnterReturnsTrue);
// text set by a script replaces the content without counting as an edit.
bool named_input(ScriptHooks& hooks, const std::string& name, const char* label, std::string& text,
                 ImGuiInputTextFlags flags = 0, ImVec2 size = ImVec2(0, 0), const char* hint = nullptr);
// An active text field shows its own copy of its text: one whose text was changed from outside
// (a message handed back to the input box) is let go, so that it shows the new text. True when
// the field `label` (in the current ID scope) was active.
bool release_text_field(const char* label);
// Plain std::string inputs (no script name).
// text shortened with "…" (whole code points) until it is at most max_w wide in the current font.
std::string ellipsize(std::string text, float max_w);
// Disabled-coloured text that wraps at the window's edge instead of running past it.
void text_disabled_wrapped(const char* text);
bool input_string(const char* label, std::string& text, ImGuiInputTextFlags flags = 0);
bool input_string_multiline(const char* label, std::string& text, ImVec2 size, ImGuiInputTextFlags flags = 0);

}  // namespace kvc::ui
