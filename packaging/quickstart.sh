#!/usr/bin/env bash
# kvchat's quick start: install what is missing, build, then run the app or the tests.
#   packaging/quickstart.sh demo   open the kvchat app on the built-in demo model (built on first run);
#                                  without a display, chat with it in the terminal instead
#   packaging/quickstart.sh test   run the whole test suite, the package install test, a short fuzz run
#                                  and the tests that need no display again under clang's ASan + UBSan
#                                  (KVCHAT_ASAN_CORE=0 leaves them out; KVCHAT_ASAN=1 adds the whole suite
#                                  but the GUI under GCC's)
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-demo}"
case "$mode" in demo|test) ;; *) echo "usage: $0 demo|test" >&2; exit 2 ;; esac

packaging/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release

if [ "$mode" = demo ]; then
  if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then exec build/release/app/kvchat; fi
  exec build/release/app/kvchat-cli chat
fi

ctest --preset release
tests/skipped-summary.sh build/release
# KVCHAT_ASAN=1: the same suite but the GUI cases again under AddressSanitizer + UBSan (about
# 23 CPU-minutes to build before the suite runs at ASan speed: more than CI's 30 minutes on 2 cores allow).
if [ "${KVCHAT_ASAN:-0}" = 1 ]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan
  ctest --preset asan
fi
packaging/test-install.sh
tests/fuzz/run_fuzz.sh "${KVCHAT_FUZZ_SECONDS:-60}"
# The core, kernels and storage tests and the app's controller, turn runner and write-error tests
# again under clang's ASan + UBSan (kvc_core_tests and kvc_app_tests, tests/sanitized/), on the
# fuzz build's instrumented libraries and the release build's test models; the [slow] parity
# cases are left to the release suite. About 10 CPU-minutes to build and run (BENCHMARKS.md, "The
# sanitizers"); KVCHAT_ASAN_CORE=0 leaves it out.
if [ "${KVCHAT_ASAN_CORE:-1}" = 1 ]; then
  cmake --build --preset fuzz -j"${KVC_FUZZ_BUILD_JOBS:-2}" --target kvc_core_tests kvc_app_tests
  ctest --preset asan-core
  tests/skipped-summary.sh build/fuzz
fi
