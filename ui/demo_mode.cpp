// Demo mode: runs the player's scenes through the script runner and draws the caption bar.
#include "ui/demo_mode.h"

#include <imgui.h>

#include <algorithm>

namespace kvc::ui {

DemoMode::DemoMode(Demo demo, std::filesystem::path screenshot_dir)
    : player_(std::move(demo)), dir_(std::move(screenshot_dir)) {}

void DemoMode::before_frame(const AppSnapshot& snap, AppCommands& cmd, ScriptHooks& hooks, double now_s) {
  now_s_ = now_s;
  if (auto scene = player_.take_start(now_s)) {
    const Script& script = player_.demo().scenes[*scene].script;
    if (script.steps.empty()) {
      player_.scene_done(now_s, true, {});
      return;
    }
    runner_.emplace(script, dir_);
  }
  if (!runner_) return;
  runner_->before_frame(snap, cmd, hooks, now_s);
  if (runner_->finished()) {
    player_.scene_done(now_s, runner_->exit_code() == 0, runner_->message());
    runner_.reset();
  }
}

void DemoMode::after_render(const ScriptHooks& hooks, int fb_width, int fb_height, float fb_scale) {
  if (!runner_) return;
  runner_->after_render(hooks, fb_width, fb_height, fb_scale);
  if (runner_->finished()) {
    player_.scene_done(now_s_, runner_->exit_code() == 0, runner_->message());
    runner_.reset();
  }
}

void DemoMode::draw(ViewContext& ctx) {
  const ImGuiIO& io = ImGui::GetIO();
  if (!io.WantTextInput) {
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Space), false)) player_.toggle();
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow), false)) player_.step();
  }
  if (!ImGui::Begin(k_demo_window, nullptr, ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoTitleBar)) {
    ImGui::End();
    return;
  }
  ctx.hooks.note_window(k_demo_window);
  const DemoState st = player_.state();
  const std::string position = player_.current()
                                   ? std::to_string(*player_.current() + 1) + " / " + std::to_string(player_.n_scenes())
                                   : "0 / " + std::to_string(player_.n_scenes());
  ImGui::TextDisabled("%s  ·  scene %s  ·  %s", player_.demo().title.c_str(), position.c_str(),
                      st == DemoState::running ? "running"
                      : player_.playing()      ? "playing"
                                               : to_string(st));
  ImGui::SameLine();
  const float buttons_w = ImGui::CalcTextSize("Step  Play  Pause").x + 8 * ImGui::GetStyle().FramePadding.x;
  ImGui::SetCursorPosX(std::max(ImGui::GetCursorPosX(), ImGui::GetWindowContentRegionMax().x - buttons_w));
  const bool can_start = st == DemoState::ready || st == DemoState::holding;
  if (!can_start) ImGui::BeginDisabled();
  if (named_button(ctx.hooks, "demo.step", "Step")) player_.step();
  if (!can_start) ImGui::EndDisabled();
  ImGui::SameLine();
  if (player_.playing()) {
    if (named_button(ctx.hooks, "demo.pause", "Pause")) player_.pause();
  } else {
    if (player_.done()) ImGui::BeginDisabled();
    if (named_button(ctx.hooks, "demo.play", "Play")) player_.play();
    if (player_.done()) ImGui::EndDisabled();
  }
  ImGui::Separator();
  ImGui::PushFont(ctx.fonts.large);
  ImGui::PushTextWrapPos(0);
  ImGui::TextUnformatted(player_.caption().c_str());
  ImGui::PopTextWrapPos();
  ImGui::PopFont();
  if (st == DemoState::failed) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::error);
    ImGui::TextWrapped("%s", player_.message().c_str());
    ImGui::PopStyleColor();
  } else if (!player_.current()) {
    ImGui::TextDisabled("Space: play / pause   ·   Right arrow: next scene");
  } else if (st == DemoState::finished) {
    ImGui::TextDisabled("The end.");
  }
  ImGui::End();
}

}  // namespace kvc::ui
