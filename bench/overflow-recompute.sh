#!/usr/bin/env bash
# Context overflow, measured in tokens: a 60-turn conversation on a model with a 512-token context,
# the mean prompt tokens recomputed per turn against the mean new tokens per turn (message +
# answer), for kvchat (kvchat-cli chat --summary) and, with LLAMA_CPP set, for llama-server
# --context-shift on the same messages. Counts, not times: they do not depend on the machine's load.
#   usage: bench/overflow-recompute.sh [KVCHAT_CLI]     (default build/release/app/kvchat-cli)
#          LLAMA_CPP=/path/to/llama.cpp bench/overflow-recompute.sh    (its bin/llama-server)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cli=${1:-$root/build/release/app/kvchat-cli}
conversation=$root/tests/data/conversations/sixty-turns.txt
system="You are a storyteller. You tell short, happy stories about animals, children and their friends."
n_predict=48
tmp=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# The model of the tests (tests/app/test_chat_overflow.cpp): a small llama trained for 512 tokens.
"$cli" mkmodel -q --ctx 512 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --type q8_0 \
  --vocab-from "$root/tests/data/models/stories260K.gguf" -o "$tmp/ctx512.gguf"

echo "== kvchat: kvchat-cli chat -m ctx512.gguf -n $n_predict --temp 0 --summary (60 turns, context 512)"
"$cli" chat -m "$tmp/ctx512.gguf" -t 2 -n "$n_predict" --temp 0 --summary -q --data-dir "$tmp/data" \
  --system "$system" < "$conversation" 2> "$tmp/chat.log" | grep '^summary:' || { cat "$tmp/chat.log" >&2; exit 1; }

if [ -z "${LLAMA_CPP:-}" ]; then
  echo "(set LLAMA_CPP to a llama.cpp build to compare with llama-server --context-shift)"
  exit 0
fi
bin=$LLAMA_CPP/bin
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# llama-server on the same file and context. The client sends kvchat's prompt text (the model has
# no chat template: "SYSTEM\n\nUser: ...\nAssistant:"), greedy, 48 tokens an answer. Byte tokens
# are banned there (logit_bias): the random model's stray bytes otherwise make llama-server answer
# 500 ("does not match the expected Content-only format").
run_llama() {  # $1: label, $2: client mode, then llama-server's extra options
  local label=$1 mode=$2
  shift 2
  LD_LIBRARY_PATH=$bin "$bin/llama-server" -m "$tmp/ctx512.gguf" -c 512 -np 1 -t 2 --port "$port" \
    --context-shift "$@" > "$tmp/llama-server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && break
    sleep 0.2
  done
  echo "== llama.cpp: llama-server -c 512 --context-shift $* ; client: $label"
  python3 - "$port" "$mode" "$conversation" "$system" "$n_predict" <<'PY'
import json, sys, urllib.error, urllib.request
port, mode, conversation, system, n_predict = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
n_ctx = 512

def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        return json.load(urllib.request.urlopen(req))
    except urllib.error.HTTPError as e:
        return {"error": json.loads(e.read().decode()).get("error", {}).get("message", str(e.code))}

def n_tokens(text, special):
    return len(post("/tokenize", {"content": text, "add_special": special})["tokens"])

def render(turns):  # [(user, answer or None)]
    out = system + "\n\n"
    for i, (u, a) in enumerate(turns):
        out += ("" if i == 0 else "\n") + "User: " + u + "\nAssistant:" + (a if a is not None else "")
    return out

messages = open(conversation).read().splitlines()
turns, kept = [], 0  # kept: first turn the client still sends (drop-oldest)
n_turns = n_new = n_computed = n_recomputed = n_cut = 0
failed = None
for i, m in enumerate(messages):
    turns.append((m, None))
    if mode == "drop-oldest":
        before = kept
        while kept < len(turns) - 1 and n_tokens(render(turns[kept:]), True) + n_predict > n_ctx:
            kept += 1
        n_cut += kept != before
    prompt = render(turns[kept:])
    r = post("/completion", {"prompt": prompt, "n_predict": n_predict, "temperature": 0, "cache_prompt": True,
                             "stop": ["\nUser:"], "logit_bias": [[t, False] for t in range(3, 259)]})
    if "error" in r:
        failed = f"turn {i + 1} refused: {r['error']}"
        break
    t = r["timings"]
    segment = n_tokens(("" if i == 0 else "\n") + "User: " + m + "\nAssistant:", i == 0)
    n_turns += 1
    n_new += segment + t["predicted_n"]
    n_computed += t["prompt_n"]
    n_recomputed += max(0, t["prompt_n"] - segment)
    turns[-1] = (m, r["content"])
n = max(n_turns, 1)
fresh, recomputed = n_new / n, n_recomputed / n
print(f"summary: {n_turns} turns, {n_cut} context cuts | new tokens per turn {fresh:.1f} | "
      f"prompt tokens computed per turn {n_computed / n:.1f} | recomputed per turn {recomputed:.1f} "
      f"({recomputed / fresh if fresh else 0:.2f}x new)" + (f" | {failed}" if failed else ""))
PY
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

run_llama "resends the whole history" resend
run_llama "drops the oldest turns to fit (n_ctx - n_predict)" drop-oldest
run_llama "drops the oldest turns to fit, KV shifting reuse" drop-oldest --cache-reuse 16
