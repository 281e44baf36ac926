#!/usr/bin/env bash
# kvchat-cli serve against llama-server, side by side, through one OpenAI-speaking load driver
# (tests/server/load_driver.mjs, the official openai npm client): N conversations with
# 1,000-token histories, round-robin, one request at a time, more conversations than either
# server has slots; then each server is restarted and every conversation asks once more.
# Prints each run's JSON and a table of TTFT (client side: request to first content token) per
# turn, inter-token latency p50/p99 (client side: gaps between content chunks' arrivals) and
# prompt tokens served from cache. Servers alternate; ROUNDS repeats the pair.
#   usage: bench/serve-load.sh LLAMA_CPP_BIN_DIR [KVCHAT_BUILD_DIR]   (default build/release)
#   environment: CONVERSATIONS (8), SLOTS (4), TURNS (3), HISTORY_WORDS (900), ROUNDS (1)
# Needs the build's test fixtures (ctest --preset release -R test_ once): the qwen2 vocabulary
# and the openai client in BUILD/test-npm.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
llama=${1:?usage: $0 LLAMA_CPP_BIN_DIR [KVCHAT_BUILD_DIR]}
build=$(cd "${2:-$root/build/release}" && pwd)
cli=$build/app/kvchat-cli
npm=$build/test-npm/node_modules
vocab=$build/test-models/ggml-vocab-qwen2.gguf
n_conv=${CONVERSATIONS:-8} slots=${SLOTS:-4} turns=${TURNS:-3} words=${HISTORY_WORDS:-900} rounds=${ROUNDS:-1}
for f in "$cli" "$llama/llama-server" "$vocab" "$npm/openai"; do
  [ -e "$f" ] || { echo "missing: $f (build, and run ctest --preset release -R test_ for the fixtures)" >&2; exit 1; }
done
tmp=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# A small Qwen2-vocabulary llama (chatml template from the vocabulary), Q8_0: prefill of a
# 1,000-token history costs enough that a cache miss shows in TTFT.
"$cli" mkmodel -q --dim 512 --layers 8 --heads 8 --kv-heads 2 --ffn 1536 --type q8_0 --ctx 4096 \
  --vocab-from "$vocab" -o "$tmp/load.gguf"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
per_slot=2048

start() {  # $1: kvchat | llama
  if [ "$1" = kvchat ]; then
    "$cli" serve -q -m "$tmp/load.gguf" -t 2 -c $per_slot --parallel "$slots" --port "$port" \
      --data-dir "$tmp/kvchat-data" > "$tmp/server.log" 2>&1 &
  else
    LD_LIBRARY_PATH=$llama "$llama/llama-server" -m "$tmp/load.gguf" -t 2 -c $((per_slot * slots)) -np "$slots" \
      --port "$port" --jinja --slot-save-path "$tmp/llama-slots" > "$tmp/server.log" 2>&1 &
  fi
  pid=$!
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && return 0
    sleep 0.2
  done
  cat "$tmp/server.log" >&2
  exit 1
}
stop() {
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
}
drive() {  # $1: server, $2: turns, $3: label
  local ban=
  [ "$1" = llama ] && ban=3-258  # qwen2's byte tokens stay in both vocabularies; llama-server 500s on a stray one
  LOAD_STATE=$tmp/$1.state LOAD_BAN_TOKENS=$ban node "$root/tests/server/load_driver.mjs" "$npm" \
    "http://127.0.0.1:$port/v1" load "$n_conv" "$2" 16 round-robin "$words" > "$tmp/$1-$3.json" || true
  echo "$1 $3: $(cat "$tmp/$1-$3.json")"
}

mkdir -p "$tmp/llama-slots"
for round in $(seq "$rounds"); do
  for server in kvchat llama; do
    rm -rf "$tmp/$server.state" "$tmp/kvchat-data"
    start "$server"; drive "$server" "$turns" "r$round-warm"; stop
    start "$server"; drive "$server" 1 "r$round-restart"; stop
  done
done

echo
echo "commit $(git -C "$root" rev-parse --short HEAD), $n_conv conversations round-robin, $slots slots, ~1,000-token histories"
python3 - "$tmp" "$rounds" <<'PY'
import json, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
def load(server, label):
    try:
        return json.load(open(f"{tmp}/{server}-{label}.json"))
    except Exception:
        return None
print("| server | round | turn 1 TTFT p50 (ms) | later turns TTFT p50 (ms) | after restart TTFT p50 (ms) | ITL p50 / p99 (ms) | cached/prompt after restart | errors |")
print("|---|---|---|---|---|---|---|---|")
def ms(v):
    return "-" if v is None else f"{v:.1f}"
for r in range(1, rounds + 1):
    for server in ("kvchat", "llama"):
        w, x = load(server, f"r{r}-warm"), load(server, f"r{r}-restart")
        if not w or not x:
            print(f"| {server} | {r} | (run failed) | | | | | |"); continue
        later = [t["ttft_p50_ms"] for t in w["per_turn"][1:] if t["ttft_p50_ms"] is not None]
        pt = x["per_turn"][0]
        print(f"| {server} | {r} | {w['per_turn'][0]['ttft_p50_ms']:.0f} | {sum(later)/len(later):.0f} | "
              f"{pt['ttft_p50_ms']:.0f} | {ms(w.get('itl_p50_ms'))} / {ms(w.get('itl_p99_ms'))} | "
              f"{pt['cached_mean']:.0f}/{pt['prompt_mean']:.0f} | {w['n_errors'] + x['n_errors']} |")
PY
