#!/usr/bin/env bash
# The app's streaming speed next to the engine's: the kvchat app (script mode, under Xvfb, the
# Memory window open as in the default layout) and `kvchat-cli generate` on the same model,
# threads, sampling and answer length, at turn 1 and turn 10 of a growing conversation (the
# CLI's prompt is as long, in tokens, as the app's at that turn). Prints both tokens/s, their
# ratio app/CLI, the app's time to first token and its frame times while streaming.
#
#   bench/app-vs-cli.sh [BUILD_DIR] [WORK_DIR]
#     BUILD_DIR: where kvchat and kvchat-cli were built (default build/release)
#     WORK_DIR:  scratch (default: a fresh temp dir); the TinyLlama-shaped model is kept there
#   env: MODELS="stories tinyllama" (which ones), N_TOKENS=64 (answer length), THREADS=2,
#        TURNS=10, APP_ARGS (more kvchat options, e.g. "--stream-cpu 10"), KVCHAT, KVCHAT_CLI
#        (binaries, overriding BUILD_DIR's)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build/release}
work=${2:-$(mktemp -d)}
mkdir -p "$work"
app=${KVCHAT:-$build/app/kvchat}
cli=${KVCHAT_CLI:-$build/app/kvchat-cli}
models=${MODELS:-stories tinyllama}
n_tokens=${N_TOKENS:-64}
threads=${THREADS:-2}
turns=${TURNS:-10}
for b in "$app" "$cli"; do
  [[ -x $b ]] || { echo "app-vs-cli: $b is not built (cmake --build --preset release)" >&2; exit 2; }
done
command -v xvfb-run >/dev/null || { echo "app-vs-cli: xvfb-run is not installed (apt-get install xvfb xauth)" >&2; exit 2; }
# The default sampling (core/sampling/sampler.h SamplingParams, the app's and the CLI's), with a fixed seed.
sampling=(--temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05 --seed 42)
sentence="Once upon a time there was a little cat who liked to play in the garden."

model_file() {
  case $1 in
    stories) echo "$here/tests/data/models/stories260K.gguf" ;;
    tinyllama)
      local f=$work/tinyllama-q4_0.gguf
      [[ -f $f ]] || "$cli" mkmodel --preset tinyllama --type q4_0 -o "$f" >&2
      echo "$f" ;;
    *) echo "app-vs-cli: unknown model '$1' (stories, tinyllama)" >&2; exit 2 ;;
  esac
}

# The app's script: a new conversation, TURNS messages; after turn 1 and the last, its state.
write_script() {
  local f=$1 i
  {
    echo '{"steps": ['
    echo '{"do": "wait_model", "timeout_s": 600}, {"do": "wait_idle", "timeout_s": 120},'
    echo '{"do": "key", "key": "ctrl+n"}, {"do": "wait_idle", "timeout_s": 120},'
    echo "{\"do\": \"command\", \"name\": \"set_chat_settings\", \"max_tokens\": $n_tokens},"
    for ((i = 1; i <= turns; ++i)); do
      echo "{\"do\": \"type\", \"widget\": \"chat.input\", \"text\": \"$sentence Tell me part $i.\"},"
      echo '{"do": "click", "widget": "chat.send"}, {"do": "wait_idle", "timeout_s": 600},'
      if ((i == 1 || i == turns)); then
        for k in last_tokens_per_s last_ttft_ms last_reply_tokens last_prompt_tokens frame_ms_stream_p50 \
                 frame_ms_stream_p99 frame_ms_stream_max n_frames_stream; do
          echo "{\"do\": \"print\", \"state\": \"$k\"},"
        done
      fi
    done
    echo '{"do": "assert", "state": "error", "op": "==", "value": ""}, {"do": "quit"}]}'
  } >"$f"
}

# state KEY from the app's output at the n-th print of it.
state() { grep "^kvchat: state $2 = " "$1" | sed -n "${3}p" | sed 's/.* = //'; }

# CLI tokens/s on a prompt of about n_prompt tokens (the sentence repeated).
cli_rate() {
  local model=$1 n_prompt=$2 per reps prompt log
  per=$("$cli" tokenize -m "$model" --no-bos -p "$sentence " | wc -w)
  reps=$(( (n_prompt + per - 1) / per )); ((reps >= 1)) || reps=1
  prompt=$(for ((r = 0; r < reps; ++r)); do printf '%s ' "$sentence"; done)
  log=$work/cli.log
  "$cli" generate -m "$model" -t "$threads" -n "$n_tokens" "${sampling[@]}" -p "$prompt" >/dev/null 2>"$log"
  grep -o 'generated [0-9]* tokens, [0-9.]* tok/s' "$log" | awk '{print $4}'
}

printf '%-10s %5s %8s %9s %9s %7s %9s %10s %10s %10s\n' model turn prompt app_tok_s cli_tok_s ratio ttft_ms \
  frame_p50 frame_p99 frame_max
for name in $models; do
  model=$(model_file "$name")
  script=$work/$name.json
  write_script "$script"
  rm -rf "$work/data-$name"
  out=$work/app-$name.log
  xvfb-run -a -s '-screen 0 1600x1000x24' "$app" ${APP_ARGS:-} -m "$model" -t "$threads" --data-dir "$work/data-$name" \
    --script "$script" --screenshot-dir "$work" >"$out" 2>&1 || { echo "app-vs-cli: the app failed, see $out" >&2; tail -5 "$out" >&2; exit 1; }
  for nth in 1 2; do
    turn=$([[ $nth == 1 ]] && echo 1 || echo "$turns")
    app_rate=$(state "$out" last_tokens_per_s $nth)
    n_prompt=$(state "$out" last_prompt_tokens $nth)
    cli_tps=$(cli_rate "$model" "$n_prompt")
    ratio=$(awk -v a="$app_rate" -v c="$cli_tps" 'BEGIN { printf "%.3f", (c > 0 ? a / c : 0) }')
    printf '%-10s %5s %8s %9.1f %9.1f %7s %9.1f %10.1f %10.1f %10.1f\n' "$name" "$turn" "$n_prompt" "$app_rate" "$cli_tps" \
      "$ratio" "$(state "$out" last_ttft_ms $nth)" "$(state "$out" frame_ms_stream_p50 $nth)" \
      "$(state "$out" frame_ms_stream_p99 $nth)" "$(state "$out" frame_ms_stream_max $nth)"
  done
done
echo "(frame times: the app's work per frame while an answer streamed, ms, over its last 600 such frames)"
