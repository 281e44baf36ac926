// kvchat: the desktop app. A GLFW window and a Dear ImGui main loop drawing from the chat
// controller's snapshots; --script runs a script against it and exits with its verdict; --demo
// plays a demo scenario (captions, Step / Play / Pause) in the presenter layout.
#include <CLI/CLI.hpp>

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
#include <imgui_internal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "app/common/demo_model.h"
#include "app/gui/chat_controller.h"
#include "kernels/cpu/thread_pool.h"
#include "storage/data_dir.h"
#include "ui/demo_mode.h"
#include "ui/frame_pacer.h"
#include "ui/frame_stats.h"
#include "ui/glyph_atlas.h"
#include "ui/script_runner.h"
#include "ui/shell.h"
#include "ui/thread_cpu.h"

namespace {

struct Args {
  std::string model;
  std::string data_dir;
  std::string script;
  std::string screenshot_dir = ".";
  int threads = 0;
  int64_t n_ctx = 0;
  int64_t ctx_memory_mib = 0;
  std::string demo;
  bool presenter = false;
  bool demo_play = false;   // start playing at once
  bool demo_exit = false;   // quit when the demo ends, with its verdict (tests, recordings)
  double demo_hold_s = -1;  // < 0: each scene's own
  std::vector<int> window_size = {1600, 1000};
  std::string replay_answer;  // a file: every turn streams its text instead of the model's
  double busy_fps = 30;       // frames a second at most while the worker is busy (an answer streams)
  double busy_cpu_pct = 3;    // and the share of one core its frames may take then (ui/frame_pacer.h)
  bool ignore_eos = false;    // answers go on past the end-of-text token (bench/app-vs-cli.sh)
};

// Loads a demo and starts it in the presenter layout; a bad file is reported, never fatal.
std::unique_ptr<kvc::ui::DemoMode> start_demo(const std::filesystem::path& file, const Args& a, kvc::ui::Shell& shell) {
  auto demo = kvc::ui::load_demo(file);
  if (!demo.ok()) {
    std::fprintf(stderr, "kvchat: %s\n", demo.error().message.c_str());
    return nullptr;
  }
  auto mode = std::make_unique<kvc::ui::DemoMode>(std::move(*demo), a.screenshot_dir);
  if (a.demo_hold_s >= 0) mode->player().override_hold(a.demo_hold_s);
  if (a.demo_play) mode->player().play();
  shell.demo = mode.get();
  shell.presenter = true;
  shell.reset_layout = true;
  return mode;
}

void glfw_error(int code, const char* what) { std::fprintf(stderr, "kvchat: GLFW error %d: %s\n", code, what); }

// The font atlas's glyphs are drawn texel for pixel (ui/theme.h): sampling it without filtering
// draws the same text, and under Mesa's software rasterizer a frame costs ~15 % less.
void use_nearest_filter(ImTextureID texture) {
  glBindTexture(GL_TEXTURE_2D, static_cast<GLuint>(reinterpret_cast<intptr_t>(texture)));
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int run(const Args& a) {
  std::optional<kvc::ui::ScriptRunner> runner;
  if (!a.script.empty() || !a.demo.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(a.screenshot_dir, ec);
    if (ec) {
      std::fprintf(stderr, "kvchat: cannot create %s: %s\n", a.screenshot_dir.c_str(), ec.message().c_str());
      return 2;
    }
  }
  if (!a.demo.empty()) {
    if (auto d = kvc::ui::load_demo(a.demo); !d.ok()) {
      std::fprintf(stderr, "kvchat: %s\n", d.error().message.c_str());
      return 2;
    }
  }
  if (!a.script.empty()) {
    auto script = kvc::ui::load_script(a.script);
    if (!script.ok()) {
      std::fprintf(stderr, "kvchat: %s\n", script.error().message.c_str());
      return 2;
    }
    runner.emplace(std::move(*script), a.screenshot_dir);
  }

  glfwSetErrorCallback(glfw_error);
  std::string replay;
  if (!a.replay_answer.empty()) {
    std::ifstream f(a.replay_answer, std::ios::binary);
    std::stringstream text;
    text << f.rdbuf();
    replay = text.str();
    if (!f || replay.empty()) {
      std::fprintf(stderr, "kvchat: --replay-answer %s: cannot read it, or it is empty\n", a.replay_answer.c_str());
      return 2;
    }
  }
  const std::vector<int> threads_before_gl = kvc::ui::process_thread_ids();
  if (!glfwInit()) {
    std::fprintf(stderr, "kvchat: cannot open a window (no display? run under xvfb-run for headless use)\n");
    return 3;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_SCALE_TO_MONITOR, GLFW_TRUE);
  GLFWwindow* window = glfwCreateWindow(a.window_size[0], a.window_size[1], "kvchat", nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "kvchat: cannot create an OpenGL 3.3 window\n");
    glfwTerminate();
    return 3;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(1);

  float scale_x = 1.0f, scale_y = 1.0f;
  glfwGetWindowContentScale(window, &scale_x, &scale_y);
  const float scale = std::max(1.0f, std::max(scale_x, scale_y));

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  // The window layout persists in DATA_DIR/imgui.ini; View > Reset layout restores the default.
  const std::filesystem::path data_dir = kvc::storage::resolve_data_dir(a.data_dir);
  const std::string ini_path = (data_dir / "imgui.ini").string();
  std::error_code ini_ec;
  const bool saved_layout = std::filesystem::exists(ini_path, ini_ec);
  io.IniFilename = kvc::storage::ensure_dir(data_dir).ok() ? ini_path.c_str() : nullptr;
  io.ConfigFlags |= ImGuiConfigFlags_NavEnableKeyboard;
  kvc::ui::apply_theme(scale);
  // The atlas holds the glyphs of what is shown: built again between frames when new text needs
  // more (ui/glyph_atlas.h); the fonts below are then new ones.
  kvc::ui::GlyphAtlas glyphs = kvc::ui::GlyphAtlas::debian();
  kvc::ui::Fonts fonts, presenter_fonts;
  const float presenter_scale = scale * kvc::ui::k_presenter_font_scale;
  glyphs.build(*io.Fonts, scale, presenter_scale, fonts, presenter_fonts);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  // The threads the GL driver started (Mesa's llvmpipe rasterizes on its own threads): a
  // frame's cost is their CPU time and this thread's.
  const std::vector<int> gl_threads = kvc::ui::new_threads(threads_before_gl, kvc::ui::process_thread_ids());
  auto window_cpu_s = [&gl_threads] { return kvc::ui::thread_cpu_s() + kvc::ui::threads_cpu_s(gl_threads); };

  // The worker wakes the main loop's paced wait (glfwPostEmptyEvent is thread-safe) while GLFW
  // is up: the controller's worker may finish a task after glfwTerminate.
  std::mutex glfw_mu;
  bool glfw_up = true;
  auto wake_ui = [&glfw_mu, &glfw_up] {
    std::lock_guard lock(glfw_mu);
    if (glfw_up) glfwPostEmptyEvent();
  };
  kvc::app::ChatController controller(
      {a.data_dir, a.model, a.threads, a.n_ctx, a.ctx_memory_mib << 20, replay, wake_ui, a.ignore_eos});
  kvc::ui::ScriptHooks hooks;
  kvc::ui::Shell shell;
  if (const char* home = std::getenv("HOME")) shell.model.home = home;
  shell.model.data_dir = data_dir;
  shell.restore_layout = saved_layout && !a.presenter && a.demo.empty();
  shell.presenter = a.presenter;
  shell.presenter_fonts = &presenter_fonts;
  shell.demo_files = kvc::ui::list_demos(kvc::app::asset_dir() / "demo");
  std::unique_ptr<kvc::ui::DemoMode> demo;
  if (!a.demo.empty()) demo = start_demo(a.demo, a, shell);
  ImTextureID font_texture = nullptr;  // the atlas texture sampled without filtering (ui/theme.h)
  const auto t0 = std::chrono::steady_clock::now();
  // Frame work times (events in to buffers swapped, the waits left out), all and while an
  // answer streams; script mode reads them as frame_ms_* and frame_ms_stream_*.
  kvc::ui::FrameStats frames_all, frames_stream;
  auto last_frame = std::chrono::steady_clock::now();
  std::shared_ptr<const kvc::ui::AppSnapshot> drawn;  // the snapshot the last frame drew
  std::shared_ptr<const kvc::ui::AppSnapshot> noted;  // the last one whose text the atlas has seen
  // While the worker is busy frames are paced by their CPU cost (at most --stream-fps a second,
  // and at most --stream-cpu % of a core); the window's CPU and wall time while streaming.
  kvc::ui::FramePacer pacer(kvc::ui::FramePacing{a.busy_fps, 1, a.busy_cpu_pct / 100});
  double stream_cpu_s = 0, stream_wall_s = 0;
  double last_cpu_s = window_cpu_s();
  auto last_end = std::chrono::steady_clock::now();

  while (!glfwWindowShouldClose(window) && !shell.quit) {
    // While the worker is busy (an answer streaming) frames come as the pacer says, headless
    // runs too: the cores go to the engine. Idle, headless runs poll (scripts step frame by
    // frame); an interactive window waits for input.
    const bool busy = controller.busy();
    // The pacer holds while an answer is computed, from the click that asked for it: a frame
    // that showed the first snapshot of the turn at once would land in its decode (the whole of
    // a short stories260K answer). Other busy work (a download, loading a model) gets frames at
    // --stream-fps.
    const bool answering = controller.answering() || (drawn && drawn->chat.generating);
    const double interval_s = answering ? pacer.interval_s() : 1.0 / a.busy_fps;
    const double since_last = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_frame).count();
    if (busy) {
      const double left = interval_s - since_last;
      if (left > 0) {
        glfwWaitEventsTimeout(left);
      } else {
        glfwPollEvents();
      }
    } else if (runner || demo) {
      glfwPollEvents();
    } else {
      glfwWaitEventsTimeout(0.25);
    }
    const auto frame_start = std::chrono::steady_clock::now();
    const double frame_start_cpu_s = window_cpu_s();
    const std::shared_ptr<const kvc::ui::AppSnapshot> snap = controller.snapshot();
    // An interactive window that woke early (input) during a stream draws at once; one whose
    // wait ran out with nothing new to show skips the redraw and waits another period.
    const bool timed_out = std::chrono::duration<double>(frame_start - last_frame).count() >= interval_s;
    last_frame = frame_start;
    if (busy && !runner && !demo && snap == drawn && timed_out) continue;
    drawn = snap;
    // The frame takes a core from the engine's compute threads while it is built and drawn
    // (under a software renderer, ~20 ms of both cores' time): lent, it costs the engine that
    // core; taken by preemption, it would stall every compute thread at its next join.
    const kvc::kernels::CoreLoan frame_core;
    // What this frame asks of the worker (a send) starts once the frame is on screen.
    struct CommandHold {
      kvc::app::ChatController& c;
      explicit CommandHold(kvc::app::ChatController& controller) : c(controller) { c.hold_commands(); }
      ~CommandHold() { c.release_commands(); }
      CommandHold(const CommandHold&) = delete;
      CommandHold& operator=(const CommandHold&) = delete;
    } hold(controller);
    const double now_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    hooks.begin_frame();
    if (runner) {
      runner->before_frame(*snap, controller, hooks, now_s);
      if (runner->finished()) break;
    }
    if (shell.demo_requested) {
      if (auto next = start_demo(*shell.demo_requested, a, shell)) demo = std::move(next);
      shell.demo_requested.reset();
    }
    if (demo) {
      demo->before_frame(*snap, controller, hooks, now_s);
      if (a.demo_exit && demo->player().done()) break;
    }

    if (snap != noted) glyphs.note_snapshot(*snap);
    noted = snap;
    if (glyphs.needs_build()) {
      glyphs.build(*io.Fonts, scale, presenter_scale, fonts, presenter_fonts);
      if (font_texture) {  // the backend's texture of the old atlas: made again from the new one
        ImGui_ImplOpenGL3_DestroyFontsTexture();
        ImGui_ImplOpenGL3_CreateFontsTexture();
        font_texture = nullptr;  // filtered below (GL may hand out the same texture name again)
      }
    }
    ImGui_ImplOpenGL3_NewFrame();
    if (io.Fonts->TexID != font_texture) {  // the backend made the atlas's texture (first frame, a rebuild)
      font_texture = io.Fonts->TexID;
      use_nearest_filter(font_texture);
    }
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    kvc::ui::ViewContext ctx{*snap, controller, hooks, fonts, wall_ms()};
    shell.draw(ctx);
    // What is typed (or pasted) into the active text box needs glyphs too.
    if (const ImGuiInputTextState* typing = ImGui::GetInputTextState(ImGui::GetActiveID())) {
      glyphs.note_wide(typing->TextW.Data, static_cast<size_t>(typing->CurLenW));
    }
    ImGui::Render();

    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window, &fb_w, &fb_h);
    glViewport(0, 0, fb_w, fb_h);
    glClearColor(0.07f, 0.075f, 0.085f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (runner || demo) {
      int win_w = 1, win_h = 1;
      glfwGetWindowSize(window, &win_w, &win_h);
      const float fb_scale = static_cast<float>(fb_w) / static_cast<float>(std::max(1, win_w));
      if (runner) runner->after_render(hooks, fb_w, fb_h, fb_scale);
      if (demo) demo->after_render(hooks, fb_w, fb_h, fb_scale);
      if (runner && runner->finished()) break;
    }
    glfwSwapBuffers(window);
    const auto frame_end = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(frame_end - frame_start).count();
    frames_all.add(ms);
    const double cpu_s = window_cpu_s();
    pacer.add(cpu_s - frame_start_cpu_s);
    if (snap->chat.generating) {
      frames_stream.add(ms);
      stream_cpu_s += cpu_s - last_cpu_s;
      stream_wall_s += std::chrono::duration<double>(frame_end - last_end).count();
    }
    last_cpu_s = cpu_s;
    last_end = frame_end;
    if (runner) {
      const kvc::ui::FrameSummary all = frames_all.summary(), stream = frames_stream.summary();
      // Vertices the frame sent to the renderer: what is on screen, however long the texts.
      hooks.set_fact("frame_vertices", static_cast<double>(ImGui::GetDrawData()->TotalVtxCount));
      // The font atlas: its size, how often it was built, the extra characters it holds, and how
      // many of those the chat, title and input fonts lack (0 once built).
      hooks.set_fact("font_atlas_width", static_cast<double>(io.Fonts->TexWidth));
      hooks.set_fact("font_atlas_height", static_cast<double>(io.Fonts->TexHeight));
      hooks.set_fact("font_atlas_builds", static_cast<double>(glyphs.n_builds()));
      hooks.set_fact("font_atlas_build_ms", glyphs.last_build_ms());
      hooks.set_fact("font_extra_glyphs", static_cast<double>(glyphs.n_needed()));
      hooks.set_fact("font_glyphs_missing",
                     static_cast<double>(glyphs.n_missing(fonts.regular) + glyphs.n_missing(fonts.large) +
                                         glyphs.n_missing(fonts.mono)));
      hooks.set_fact("frame_ms_p50", all.p50_ms);
      hooks.set_fact("frame_ms_p99", all.p99_ms);
      hooks.set_fact("frame_ms_max", all.max_ms);
      hooks.set_fact("frame_ms_stream_p50", stream.p50_ms);
      hooks.set_fact("frame_ms_stream_p99", stream.p99_ms);
      hooks.set_fact("frame_ms_stream_max", stream.max_ms);
      hooks.set_fact("n_frames_stream", static_cast<double>(stream.n));
      // The pacer's frame cost (CPU) and wait between streamed frames now, and the window's
      // share of a core while answers streamed (its CPU time over the wall time: a busy machine
      // does not change it).
      hooks.set_fact("frame_cpu_ms", 1000 * pacer.cost_s());
      hooks.set_fact("frame_interval_ms_stream", 1000 * pacer.interval_s());
      hooks.set_fact("ui_cpu_share_stream", stream_wall_s > 0 ? stream_cpu_s / stream_wall_s : 0.0);
    }
  }

  int rc = 0;
  if (runner) {
    if (!runner->finished()) {
      std::fprintf(stderr, "kvchat: the window closed before the script finished\n");
      rc = 1;
    } else {
      std::fprintf(stderr, "kvchat: %s\n", runner->message().c_str());
      rc = runner->exit_code();
    }
  }
  if (demo && a.demo_exit) {
    const kvc::ui::DemoPlayer& p = demo->player();
    if (p.state() == kvc::ui::DemoState::finished) {
      std::fprintf(stderr, "kvchat: demo finished: %zu scenes\n", p.n_scenes());
    } else {
      std::fprintf(stderr, "kvchat: demo %s: %s\n", kvc::ui::to_string(p.state()),
                   p.message().empty() ? "the window closed first" : p.message().c_str());
      rc = 1;
    }
  }
  controller.stop();
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  {
    std::lock_guard lock(glfw_mu);
    glfw_up = false;
  }
  glfwDestroyWindow(window);
  glfwTerminate();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"kvchat: local LLM chat that never recomputes its history"};
  app.add_option("-m,--model", a.model, "GGUF model file (default: the built-in demo model, built on first launch)");
  app.add_option("--data-dir", a.data_dir,
                 "kvchat's data directory (default: $KVCHAT_DATA_DIR or ~/.local/share/kvchat)");
  app.add_option("-t,--threads", a.threads, "compute threads (default: one per physical core)")
      ->check(CLI::Range(0, 1024));
  app.add_option("-c,--ctx-size", a.n_ctx,
                 "context length (default: the model's trained context, cut to what --ctx-memory holds)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app.add_option("--ctx-memory", a.ctx_memory_mib,
                 "MiB that one context's KV cache (F16) may take (default 1024; also in Engine > Tier budgets)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--window-size", a.window_size, "window width and height in points (default: 1600 1000)")
      ->expected(2)
      ->check(CLI::Range(320, 16384));
  auto* script = app.add_option("--script", a.script, "run a JSON script of UI steps, then exit (script mode)");
  auto* demo = app.add_option("--demo", a.demo, "play a demo scenario (JSON, see assets/demo/) in the presenter layout")
                   ->excludes(script);
  app.add_option("--replay-answer", a.replay_answer,
                 "answer every message with this file's text, streamed (screenshots and tests of rendering)");
  app.add_option("--stream-fps", a.busy_fps, "frames a second at most while an answer streams (default 30)")
      ->check(CLI::Range(1.0, 240.0));
  app.add_option("--stream-cpu", a.busy_cpu_pct,
                 "percent of one core the window's frames may take while an answer streams (default 3; fewer "
                 "frames when each costs more, at least 1 a second)")
      ->check(CLI::Range(0.5, 100.0));
  app.add_flag("--ignore-eos", a.ignore_eos,
               "answers go on past the end-of-text token to their max tokens (benchmarks: answers of a known "
               "length)");
  app.add_option("--screenshot-dir", a.screenshot_dir, "where script and demo mode write their screenshots");
  app.add_flag("--presenter", a.presenter, "start in the presenter layout (large fonts, chat and memory side by side)");
  app.add_flag("--demo-play", a.demo_play, "start playing the demo at once (default: wait for Space or Step)")
      ->needs(demo);
  app.add_flag("--demo-exit", a.demo_exit, "quit when the demo ends; exit status 1 if a step failed")->needs(demo);
  app.add_option("--demo-hold", a.demo_hold_s, "seconds each caption stays while playing (default: the scene's)")
      ->check(CLI::Range(0.0, 3600.0))
      ->needs(demo);
  app.set_version_flag("--version", std::string("kvchat ") + KVC_VERSION);
  CLI11_PARSE(app, argc, argv);
  return run(a);
}
