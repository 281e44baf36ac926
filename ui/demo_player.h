// The demo player's state machine: which scene runs, and whether it goes on by itself.
//
//            step / play                 scene's steps done
//   ready ───────────────▶ running ─────────────────────────▶ ready     (paused)
//     ▲                      │  │                         └──▶ holding   (playing: caption stays hold_s)
//     │        pause         │  └── a step failed ──▶ failed
//     └──────────────────── holding ── hold_s passed / step ──▶ running (next scene)
//   after the last scene: finished
//
// The player runs no steps itself: the host asks take_start() each frame, runs that scene's
// script, and reports scene_done(). Pure logic, so it is tested without a window.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "ui/demo.h"

namespace kvc::ui {

enum class DemoState { ready, running, holding, finished, failed };
const char* to_string(DemoState s);

class DemoPlayer {
 public:
  explicit DemoPlayer(Demo demo);

  // Right arrow / Step: runs the next scene, then stops (skips the rest of a hold).
  void step();
  // Space toggles between these. Play runs scene after scene, each caption held hold_s.
  void play();
  // Stops after the running scene; a hold ends at once.
  void pause();
  void toggle();
  // Every scene's hold becomes this long (a test or a recording plays faster).
  void override_hold(double hold_s) { hold_override_ = hold_s; }

  // Once per frame, before the host runs steps: the scene to start now, if any.
  std::optional<size_t> take_start(double now_s);
  // The host finished running the current scene's steps (ok == false: why in message).
  void scene_done(double now_s, bool ok, const std::string& message);

  DemoState state() const { return state_; }
  bool playing() const { return playing_; }
  const Demo& demo() const { return demo_; }
  size_t n_scenes() const { return demo_.scenes.size(); }
  // The scene whose caption shows: the running or last run one; none before the first step.
  std::optional<size_t> current() const { return current_; }
  // The caption on screen: the current scene's "say", or the title before the first scene.
  const std::string& caption() const;
  const std::string& message() const { return message_; }  // why it failed
  bool done() const { return state_ == DemoState::finished || state_ == DemoState::failed; }

 private:
  double hold_of(size_t scene) const { return hold_override_ >= 0 ? hold_override_ : demo_.scenes[scene].hold_s; }

  Demo demo_;
  DemoState state_ = DemoState::ready;
  bool playing_ = false;
  bool start_due_ = false;  // ready -> running on the next take_start
  size_t next_ = 0;         // the scene step/play starts; == n_scenes() once all ran
  std::optional<size_t> current_;
  double hold_until_s_ = 0;
  double hold_override_ = -1;  // < 0: each scene's own hold_s
  std::string message_;
};

}  // namespace kvc::ui
