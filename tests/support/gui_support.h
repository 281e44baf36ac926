// Helpers for the tests that run the real app under Xvfb: is xvfb-run there, the command line
// that starts the app in a virtual display, and running a command for its exit code and output.
#pragma once

#include <optional>
#include <string>

namespace kvc::test {

// Why the real app cannot run under Xvfb here, or nothing when it can: xvfb-run is missing, or
// KVCHAT_TEST_NO_GUI is set (the sanitizer run, which leaves the GUI to the release suite).
std::optional<std::string> gui_unavailable();
// Runs a shell command line; its stdout and stderr go to `output`. Returns the exit status
// (-1 when it did not exit normally): for a gui_command, the app's own.
int run_command(const std::string& cmd, std::string& output);
// "timeout T xvfb-run ... 'KVC_GUI_PATH'": append the app's arguments. Under AddressSanitizer
// its leak check is off: the GL driver, dlclose()d at exit, leaves allocations only its
// unmapped data pointed to, which LSan reports as leaks.
std::string gui_command(int timeout_s, const std::string& screen = "1600x1000x24");

}  // namespace kvc::test
