// kvchat: the desktop app. A GLFW window and a Dear ImGui main loop drawing from the chat
// controller's snapshots; --script runs a script against it and exits with its verdict.
#include <CLI/CLI.hpp>

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "app/gui/chat_controller.h"
#include "storage/data_dir.h"
#include "ui/script_runner.h"
#include "ui/shell.h"

namespace {

struct Args {
  std::string model;
  std::string data_dir;
  std::string script;
  std::string screenshot_dir = ".";
  int threads = 0;
  int64_t n_ctx = 0;
  std::vector<int> window_size = {1600, 1000};
};

void glfw_error(int code, const char* what) { std::fprintf(stderr, "kvchat: GLFW error %d: %s\n", code, what); }

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int run(const Args& a) {
  std::optional<kvc::ui::ScriptRunner> runner;
  if (!a.script.empty()) {
    auto script = kvc::ui::load_script(a.script);
    if (!script.ok()) {
      std::fprintf(stderr, "kvchat: %s\n", script.error().message.c_str());
      return 2;
    }
    std::error_code ec;
    std::filesystem::create_directories(a.screenshot_dir, ec);
    if (ec) {
      std::fprintf(stderr, "kvchat: cannot create %s: %s\n", a.screenshot_dir.c_str(), ec.message().c_str());
      return 2;
    }
    runner.emplace(std::move(*script), a.screenshot_dir);
  }

  glfwSetErrorCallback(glfw_error);
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
  io.IniFilename = nullptr;  // the layout is ours; View > Reset layout restores it
  io.ConfigFlags |= ImGuiConfigFlags_NavEnableKeyboard;
  kvc::ui::apply_theme(scale);
  const kvc::ui::Fonts fonts = kvc::ui::load_fonts(scale);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");

  kvc::app::ChatController controller({a.data_dir, a.model, a.threads, a.n_ctx});
  kvc::ui::ScriptHooks hooks;
  kvc::ui::Shell shell;
  if (const char* home = std::getenv("HOME")) shell.model.home = home;
  shell.model.data_dir = kvc::storage::resolve_data_dir(a.data_dir);
  const auto t0 = std::chrono::steady_clock::now();

  while (!glfwWindowShouldClose(window) && !shell.quit) {
    // Headless runs poll; an interactive window waits for input but wakes for streamed text.
    if (runner) {
      glfwPollEvents();
    } else {
      glfwWaitEventsTimeout(controller.busy() ? 1.0 / 60.0 : 0.25);
    }
    const std::shared_ptr<const kvc::ui::AppSnapshot> snap = controller.snapshot();
    const double now_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    hooks.begin_frame();
    if (runner) {
      runner->before_frame(*snap, controller, hooks, now_s);
      if (runner->finished()) break;
    }

    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    kvc::ui::ViewContext ctx{*snap, controller, hooks, fonts, wall_ms()};
    shell.draw(ctx);
    ImGui::Render();

    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window, &fb_w, &fb_h);
    glViewport(0, 0, fb_w, fb_h);
    glClearColor(0.07f, 0.075f, 0.085f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (runner) {
      int win_w = 1, win_h = 1;
      glfwGetWindowSize(window, &win_w, &win_h);
      runner->after_render(hooks, fb_w, fb_h, static_cast<float>(fb_w) / static_cast<float>(std::max(1, win_w)));
      if (runner->finished()) break;
    }
    glfwSwapBuffers(window);
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
  controller.stop();
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"kvchat: local LLM chat that never recomputes its history"};
  app.add_option("-m,--model", a.model, "GGUF model file (default: the built-in demo model, built on first launch)");
  app.add_option("--data-dir", a.data_dir, "kvchat's data directory (default: $KVCHAT_DATA_DIR or ~/.local/share/kvchat)");
  app.add_option("-t,--threads", a.threads, "compute threads (default: one per physical core)")->check(CLI::Range(0, 1024));
  app.add_option("-c,--ctx-size", a.n_ctx, "context length (default: the model's, at most 4096)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app.add_option("--window-size", a.window_size, "window width and height in points (default: 1600 1000)")
      ->expected(2)->check(CLI::Range(320, 16384));
  auto* script = app.add_option("--script", a.script, "run a JSON script of UI steps, then exit (script mode)");
  app.add_option("--screenshot-dir", a.screenshot_dir, "where script mode writes its screenshots")->needs(script);
  app.set_version_flag("--version", std::string("kvchat ") + KVC_VERSION);
  CLI11_PARSE(app, argc, argv);
  return run(a);
}
