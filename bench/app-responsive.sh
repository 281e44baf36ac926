#!/usr/bin/env bash
# Frame times while an answer streams and the user works in the window: the kvchat app in script
# mode under Xvfb (1600x1000, a fresh data directory: the default layout, Memory window open), on
# a TinyLlama-shaped Q4_0 (kvchat-cli mkmodel) with -t THREADS. A first conversation gets three
# answers (a history to switch to); a second one asks for a 1,000-token answer (~30 s of decode on
# 2 cores), and while it streams the script types into the input, pages the history up and down
# (PageUp / PageDown), switches to the first conversation and back (Ctrl+Down / Ctrl+Up) and
# checks the answer was still streaming after all of it. Prints, per round, the frame times while
# answers streamed (the main loop's work per frame, events to buffers swapped: p50, p99, max),
# how many frames that was, and the long answer's tokens/s.
#
#   bench/app-responsive.sh [BUILD_DIR] [WORK_DIR]   env: ROUNDS=3, THREADS=2, APP_ARGS (more kvchat options)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build/release}
work=${2:-$(mktemp -d)}
app=${KVCHAT:-$build/app/kvchat}
cli=${KVCHAT_CLI:-$build/app/kvchat-cli}
rounds=${ROUNDS:-3}
threads=${THREADS:-2}
for b in "$app" "$cli"; do
  [[ -x $b ]] || { echo "app-responsive: $b is not built (cmake --build --preset release)" >&2; exit 2; }
done
command -v xvfb-run >/dev/null || { echo "app-responsive: xvfb-run is not installed (apt-get install xvfb xauth)" >&2; exit 2; }
mkdir -p "$work"
model=$work/tinyllama-q4_0.gguf
[[ -f $model ]] || "$cli" mkmodel --preset tinyllama --type q4_0 -o "$model" >&2

ask() {  # text max_tokens
  echo "{\"do\": \"command\", \"name\": \"set_chat_settings\", \"max_tokens\": $2}, {\"do\": \"wait_idle\", \"timeout_s\": 120},"
  echo "{\"do\": \"type\", \"widget\": \"chat.input\", \"text\": \"$1\"}, {\"do\": \"click\", \"widget\": \"chat.send\"},"
}
{
  echo '{"steps": ['
  echo '{"do": "wait_model", "timeout_s": 600}, {"do": "wait_idle", "timeout_s": 120},'
  echo '{"do": "key", "key": "ctrl+n"}, {"do": "wait_idle", "timeout_s": 120},'
  for i in 1 2 3; do
    ask "Once upon a time there was a little cat. Tell me part $i." 64
    echo '{"do": "wait_idle", "timeout_s": 600},'
  done
  echo '{"do": "key", "key": "ctrl+n"}, {"do": "wait_idle", "timeout_s": 120},'
  ask "Tell me a long story about a dog." 1000
  echo '{"do": "wait_state", "state": "generating", "op": "==", "value": 1, "timeout_s": 120},'
  echo '{"do": "type", "widget": "chat.input", "text": "typed while the answer streams"},'
  echo '{"do": "key", "key": "page_up"}, {"do": "frames", "n": 2}, {"do": "key", "key": "page_down"}, {"do": "frames", "n": 2},'
  echo '{"do": "key", "key": "ctrl+down"}, {"do": "frames", "n": 3}, {"do": "key", "key": "page_up"}, {"do": "frames", "n": 2},'
  echo '{"do": "key", "key": "ctrl+up"}, {"do": "frames", "n": 3},'
  echo '{"do": "assert", "state": "generating", "op": "==", "value": 1},'
  echo '{"do": "wait_idle", "timeout_s": 600},'
  for k in frame_ms_stream_p50 frame_ms_stream_p99 frame_ms_stream_max n_frames_stream last_tokens_per_s; do
    echo "{\"do\": \"print\", \"state\": \"$k\"},"
  done
  echo '{"do": "assert", "state": "error", "op": "==", "value": ""}, {"do": "quit"}]}'
} >"$work/responsive.json"

for ((r = 1; r <= rounds; ++r)); do
  rm -rf "$work/data"
  # shellcheck disable=SC2086
  out=$(xvfb-run -a -s '-screen 0 1600x1000x24' "$app" ${APP_ARGS:-} -m "$model" -t "$threads" --ignore-eos \
          --data-dir "$work/data" --script "$work/responsive.json" --screenshot-dir "$work" 2>&1) ||
    { echo "app-responsive: the app failed:" >&2; echo "$out" | tail -5 >&2; exit 1; }
  get() { echo "$out" | sed -n "s/^kvchat: state $1 = //p"; }
  printf 'round %d: frames while answers streamed: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d frames); the long answer %.1f tok/s\n' \
    "$r" "$(get frame_ms_stream_p50)" "$(get frame_ms_stream_p99)" "$(get frame_ms_stream_max)" \
    "$(get n_frames_stream)" "$(get last_tokens_per_s)"
done
