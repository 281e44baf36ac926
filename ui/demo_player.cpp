// The demo player's state machine.
#include "ui/demo_player.h"

#include "core/util/assert.h"

namespace kvc::ui {

const char* to_string(DemoState s) {
  switch (s) {
    case DemoState::ready: return "ready";
    case DemoState::running: return "running";
    case DemoState::holding: return "holding";
    case DemoState::finished: return "finished";
    case DemoState::failed: return "failed";
  }
  return "?";
}

DemoPlayer::DemoPlayer(Demo demo) : demo_(std::move(demo)) { KVC_ASSERT(!demo_.scenes.empty()); }

void DemoPlayer::step() {
  if (state_ == DemoState::ready || state_ == DemoState::holding) {
    playing_ = false;
    state_ = DemoState::ready;
    start_due_ = true;
  }
}

void DemoPlayer::play() {
  if (done()) return;
  playing_ = true;
  if (state_ == DemoState::ready) start_due_ = true;
}

void DemoPlayer::pause() {
  playing_ = false;
  if (state_ == DemoState::holding) state_ = DemoState::ready;
  if (state_ == DemoState::ready) start_due_ = false;
}

void DemoPlayer::toggle() {
  if (playing_) {
    pause();
  } else {
    play();
  }
}

std::optional<size_t> DemoPlayer::take_start(double now_s) {
  if (state_ == DemoState::holding && now_s >= hold_until_s_) {
    state_ = DemoState::ready;
    start_due_ = true;
  }
  if (state_ != DemoState::ready || !start_due_) return std::nullopt;
  KVC_ASSERT(next_ < demo_.scenes.size());
  start_due_ = false;
  state_ = DemoState::running;
  current_ = next_++;
  return current_;
}

void DemoPlayer::scene_done(double now_s, bool ok, const std::string& message) {
  KVC_ASSERT(state_ == DemoState::running);
  if (!ok) {
    state_ = DemoState::failed;
    playing_ = false;
    message_ = "scene " + std::to_string(*current_ + 1) + ": " + message;
    return;
  }
  if (next_ == demo_.scenes.size()) {
    state_ = DemoState::finished;
    playing_ = false;
    return;
  }
  if (playing_) {
    state_ = DemoState::holding;
    hold_until_s_ = now_s + hold_of(*current_);
  } else {
    state_ = DemoState::ready;
  }
}

const std::string& DemoPlayer::caption() const { return current_ ? demo_.scenes[*current_].say : demo_.title; }

}  // namespace kvc::ui
