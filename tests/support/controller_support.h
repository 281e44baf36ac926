// Waiting for the app's ChatController in tests: its model loaded and no work left.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "app/gui/chat_controller.h"

namespace kvc::test {

// Returns once the controller's model is ready, it is not busy and nothing streams; fails the
// test when the model fails to load or `limit` passes first.
inline void settle(app::ChatController& c, std::chrono::seconds limit = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto s = c.snapshot();
    if (s->model.status == ui::ModelStatus::ready && !c.busy() && !s->chat.generating) return;
    REQUIRE(s->model.status != ui::ModelStatus::failed);
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace kvc::test
