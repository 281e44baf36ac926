// Demo scenarios: parsing (with errors that name the scene and step), the player's state
// machine (step / play / pause / advance on completion), and the shipped demos parse.
#include <catch2/catch.hpp>

#include "ui/demo.h"
#include "ui/demo_player.h"

using kvc::ui::Demo;
using kvc::ui::DemoPlayer;
using kvc::ui::DemoState;

namespace {

// Three scenes: the middle one has no steps (caption only), holds differ.
Demo three_scenes() {
  auto d = kvc::ui::parse_demo(R"({"title": "T", "hold_s": 2, "scenes": [
      {"say": "one", "steps": [{"do": "frames", "n": 1}]},
      {"say": "two", "hold_s": 5},
      {"say": "three", "steps": [{"do": "wait_idle"}]}]})");
  REQUIRE(d.ok());
  return std::move(*d);
}

}  // namespace

TEST_CASE("demo: parse scenes, captions, holds and script steps", "[ui]") {
  const Demo d = three_scenes();
  CHECK(d.title == "T");
  REQUIRE(d.scenes.size() == 3);
  CHECK(d.scenes[0].say == "one");
  CHECK(d.scenes[0].hold_s == 2);
  CHECK(d.scenes[1].hold_s == 5);
  CHECK(d.scenes[1].script.steps.empty());
  REQUIRE(d.scenes[2].script.steps.size() == 1);
  CHECK(d.scenes[2].script.steps[0].kind == kvc::ui::StepKind::wait_idle);
}

TEST_CASE("demo: bad scenarios are messages naming the scene and step", "[ui]") {
  auto e = kvc::ui::parse_demo("{");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("not valid JSON") != std::string::npos);
  e = kvc::ui::parse_demo(R"({"scenes": []})");
  REQUIRE_FALSE(e.ok());
  e = kvc::ui::parse_demo(R"({"scenes": [{"say": "a"}, {"steps": []}]})");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("scene 2") != std::string::npos);
  CHECK(e.error().message.find("say") != std::string::npos);
  e = kvc::ui::parse_demo(R"({"scenes": [{"say": "a", "steps": [{"do": "frames", "n": 1}, {"do": "click"}]}]})");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("scene 1: step 2 (click)") != std::string::npos);
  e = kvc::ui::parse_demo(R"({"scenes": [{"say": "a", "hold_s": -1}]})");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("hold_s") != std::string::npos);
}

TEST_CASE("demo: the command step names an app command", "[ui]") {
  auto s = kvc::ui::parse_script(R"({"steps": [{"do": "command", "name": "set_tier_budgets", "t0_bytes": 4096},
                                               {"do": "command", "name": "restart_engine"}]})");
  REQUIRE(s.ok());
  CHECK(s->steps[0].kind == kvc::ui::StepKind::command);
  CHECK(s->steps[0].t0_bytes == 4096);
  CHECK(s->steps[0].t1_bytes == 0);
  CHECK(s->steps[1].name == "restart_engine");
  auto bad = kvc::ui::parse_script(R"({"steps": [{"do": "command", "name": "format_disk"}]})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("unknown command") != std::string::npos);
  bad = kvc::ui::parse_script(R"({"steps": [{"do": "command", "name": "set_tier_budgets", "t1_bytes": -5}]})");
  CHECK_FALSE(bad.ok());
}

TEST_CASE("demo player: nothing runs until step or play, the title is the caption", "[ui]") {
  DemoPlayer p(three_scenes());
  CHECK(p.state() == DemoState::ready);
  CHECK(p.caption() == "T");
  CHECK_FALSE(p.take_start(0.0));
  CHECK_FALSE(p.take_start(100.0));
  CHECK_FALSE(p.current());
}

TEST_CASE("demo player: step runs one scene, then waits", "[ui]") {
  DemoPlayer p(three_scenes());
  p.step();
  auto s = p.take_start(0.0);
  REQUIRE(s);
  CHECK(*s == 0);
  CHECK(p.state() == DemoState::running);
  CHECK(p.caption() == "one");
  CHECK_FALSE(p.take_start(0.1));  // one start per step
  p.step();                        // ignored while a scene runs
  p.scene_done(1.0, true, {});
  CHECK(p.state() == DemoState::ready);
  CHECK_FALSE(p.take_start(50.0));  // paused: no hold, no advance
  CHECK(p.caption() == "one");      // the last caption stays
  p.step();
  s = p.take_start(50.0);
  REQUIRE(s);
  CHECK(*s == 1);
  CHECK(p.caption() == "two");
}

TEST_CASE("demo player: play advances on completion after each scene's hold, to the end", "[ui]") {
  DemoPlayer p(three_scenes());
  p.play();
  CHECK(p.playing());
  REQUIRE(p.take_start(0.0) == std::optional<size_t>(0));
  p.scene_done(1.0, true, {});
  CHECK(p.state() == DemoState::holding);
  CHECK_FALSE(p.take_start(2.9));  // scene 0 holds 2 s after it finished at 1.0
  REQUIRE(p.take_start(3.0) == std::optional<size_t>(1));
  p.scene_done(3.0, true, {});
  CHECK_FALSE(p.take_start(7.9));  // scene 1 holds 5 s
  REQUIRE(p.take_start(8.0) == std::optional<size_t>(2));
  p.scene_done(9.0, true, {});
  CHECK(p.state() == DemoState::finished);
  CHECK(p.done());
  CHECK_FALSE(p.playing());
  CHECK(p.caption() == "three");
  p.play();
  p.step();
  CHECK_FALSE(p.take_start(100.0));  // nothing after the end
}

TEST_CASE("demo player: pause stops after the running scene, a hold ends at once", "[ui]") {
  DemoPlayer p(three_scenes());
  p.toggle();  // space: play
  REQUIRE(p.take_start(0.0));
  p.toggle();  // space: pause while running
  CHECK_FALSE(p.playing());
  CHECK(p.state() == DemoState::running);
  p.scene_done(1.0, true, {});
  CHECK(p.state() == DemoState::ready);
  CHECK_FALSE(p.take_start(100.0));

  p.play();
  REQUIRE(p.take_start(100.0) == std::optional<size_t>(1));
  p.scene_done(100.0, true, {});
  CHECK(p.state() == DemoState::holding);
  p.pause();
  CHECK(p.state() == DemoState::ready);
  CHECK_FALSE(p.take_start(200.0));
}

TEST_CASE("demo player: step during a hold skips the rest of it and stops playing", "[ui]") {
  DemoPlayer p(three_scenes());
  p.play();
  REQUIRE(p.take_start(0.0));
  p.scene_done(0.0, true, {});
  p.step();
  REQUIRE(p.take_start(0.1) == std::optional<size_t>(1));
  CHECK_FALSE(p.playing());
  p.scene_done(0.2, true, {});
  CHECK(p.state() == DemoState::ready);
}

TEST_CASE("demo player: a failed scene stops the demo with its message", "[ui]") {
  DemoPlayer p(three_scenes());
  p.play();
  REQUIRE(p.take_start(0.0));
  p.scene_done(0.5, false, "step 1 (frames) failed: boom");
  CHECK(p.state() == DemoState::failed);
  CHECK(p.done());
  CHECK(p.message() == "scene 1: step 1 (frames) failed: boom");
  p.play();
  CHECK_FALSE(p.take_start(10.0));
}

TEST_CASE("demo player: an override hold applies to every scene", "[ui]") {
  DemoPlayer p(three_scenes());
  p.override_hold(0);
  p.play();
  REQUIRE(p.take_start(0.0));
  p.scene_done(1.0, true, {});
  REQUIRE(p.take_start(1.0) == std::optional<size_t>(1));
}

TEST_CASE("demo: every shipped scenario parses", "[ui]") {
  const auto files = kvc::ui::list_demos(std::filesystem::path(KVC_ASSET_DIR) / "demo");
  REQUIRE(files.size() >= 4);
  for (const auto& f : files) {
    CAPTURE(f.string());
    auto d = kvc::ui::load_demo(f);
    INFO((d.ok() ? std::string() : d.error().message));
    CHECK(d.ok());
  }
}
