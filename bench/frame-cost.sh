#!/usr/bin/env bash
# What a frame of the app's full layout costs with nothing streaming: the kvchat app in script mode
# under Xvfb (1600x1000, a fresh data directory, so the default layout with the Memory window open)
# answers two messages on stories260K (400 tokens each), then draws 600 frames as fast as it can and
# prints the frame times (the main loop's work per frame, events to buffers swapped): frame_ms_p50
# and frame_ms_p99, and a frame's CPU time (frame_cpu_ms: the window thread's and the GL driver's
# threads', the median of the last 15 frames). Under Xvfb the GL driver is Mesa's llvmpipe, so
# this is mostly pixels shaded.
#
#   bench/frame-cost.sh [BUILD_DIR] [WORK_DIR]     env: ROUNDS=3, APP_ARGS (more kvchat options)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build/release}
work=${2:-$(mktemp -d)}
app=${KVCHAT:-$build/app/kvchat}
rounds=${ROUNDS:-3}
[[ -x $app ]] || { echo "frame-cost: $app is not built (cmake --build --preset release)" >&2; exit 2; }
command -v xvfb-run >/dev/null || { echo "frame-cost: xvfb-run is not installed (apt-get install xvfb xauth)" >&2; exit 2; }
mkdir -p "$work"
cat >"$work/frames.json" <<'JSON'
{"steps": [
{"do": "wait_model", "timeout_s": 600}, {"do": "wait_idle", "timeout_s": 120},
{"do": "key", "key": "ctrl+n"}, {"do": "wait_idle", "timeout_s": 120},
{"do": "command", "name": "set_chat_settings", "max_tokens": 400}, {"do": "wait_idle", "timeout_s": 120},
{"do": "type", "widget": "chat.input", "text": "Once upon a time there was a little cat."},
{"do": "click", "widget": "chat.send"}, {"do": "wait_idle", "timeout_s": 600},
{"do": "type", "widget": "chat.input", "text": "Tell me more about the cat."},
{"do": "click", "widget": "chat.send"}, {"do": "wait_idle", "timeout_s": 600},
{"do": "frames", "n": 30}, {"do": "screenshot", "name": "frame-cost"},
{"do": "frames", "n": 600},
{"do": "print", "state": "frame_ms_p50"}, {"do": "print", "state": "frame_ms_p99"},
{"do": "print", "state": "frame_cpu_ms"}
]}
JSON
for ((r = 1; r <= rounds; ++r)); do
  rm -rf "$work/data"
  # shellcheck disable=SC2086
  out=$(xvfb-run -a -s '-screen 0 1600x1000x24' "$app" ${APP_ARGS:-} -m "$here/tests/data/models/stories260K.gguf" \
          -t 2 --ignore-eos --data-dir "$work/data" --script "$work/frames.json" --screenshot-dir "$work" 2>&1) ||
    { echo "frame-cost: the app failed:" >&2; echo "$out" | tail -5 >&2; exit 1; }
  p50=$(echo "$out" | sed -n 's/^kvchat: state frame_ms_p50 = //p')
  p99=$(echo "$out" | sed -n 's/^kvchat: state frame_ms_p99 = //p')
  cpu=$(echo "$out" | sed -n 's/^kvchat: state frame_cpu_ms = //p')
  printf 'round %d: frame p50 %.1f ms, p99 %.1f ms; CPU a frame %.1f ms\n' "$r" "$p50" "$p99" "$cpu"
done
echo "(the last round's screenshot: $work/frame-cost.png)"
