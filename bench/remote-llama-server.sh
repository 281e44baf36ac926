#!/usr/bin/env bash
# The app's remote model source against llama.cpp's llama-server: the same GUI script the CTest
# remote test runs against kvchat-cli serve (assets/scripts/remote-chat.json.in: list the
# server's models, connect, two turns, the Memory window), in script mode under Xvfb. Prints the
# client-side TTFT and tokens/s of each answer, the prompt tokens the server said were cached,
# and what the Memory window made of llama-server's /metrics. A developer command, not a test.
#   usage: bench/remote-llama-server.sh [LLAMA_CPP_BIN_DIR] [MODEL.gguf] [KVCHAT_BUILD_DIR]
#   defaults: ../shared/anchors/llama.cpp/bin, tests/data/models/stories260K.gguf, build/release
#   environment: SHOTS=DIR keeps the Memory window's screenshot there
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
llama=${1:-$root/../shared/anchors/llama.cpp/bin}
model=$(realpath "${2:-$root/tests/data/models/stories260K.gguf}")
build=$(cd "${3:-$root/build/release}" && pwd)
app=$build/app/kvchat
for f in "$app" "$llama/llama-server" "$model"; do
  [ -e "$f" ] || { echo "missing: $f" >&2; exit 1; }
done
command -v xvfb-run > /dev/null || { echo "xvfb-run is not installed (apt-get install xvfb xauth)" >&2; exit 1; }
tmp=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
LD_LIBRARY_PATH=$llama "$llama/llama-server" -m "$model" --host 127.0.0.1 --port "$port" -t 2 -c 2048 \
  --metrics --alias bench-model > "$tmp/llama-server.log" 2>&1 &
pid=$!
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
  sleep 0.5
done
curl -sf "http://127.0.0.1:$port/health" > /dev/null || { cat "$tmp/llama-server.log" >&2; exit 1; }

sed -e "s|@URL@|http://127.0.0.1:$port/v1|" -e "s|@KEY@||" -e "s|@MODEL@|bench-model|" -e "s|@EXTRA_STEPS@||" \
  "$root/assets/scripts/remote-chat.json.in" > "$tmp/remote.json"
echo "llama-server $("$llama/llama-server" --version 2>&1 | head -1) on $(basename "$model"), port $port"
timeout 600 xvfb-run -a -s "-screen 0 1600x1000x24" "$app" -m "$model" -t 2 --data-dir "$tmp/data" \
  --script "$tmp/remote.json" --screenshot-dir "$tmp/shots" > "$tmp/app.log" 2>&1 || {
  cat "$tmp/app.log" >&2
  exit 1
}
grep -E "kvchat: state|script passed" "$tmp/app.log"
if [ -n "${SHOTS:-}" ]; then mkdir -p "$SHOTS" && cp "$tmp"/shots/*.png "$SHOTS"/; fi
