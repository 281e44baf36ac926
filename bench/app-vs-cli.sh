#!/usr/bin/env bash
# The app's streaming speed next to the engine's: the kvchat app (script mode, under Xvfb, the
# Memory window open as in the default layout) and `kvchat-cli generate` on the same model,
# threads, context size, sampling and answer length, at turn 1 and turn TURNS of a growing
# conversation (the CLI's prompt is as long, in tokens, as the app's at that turn). Both go past
# the end-of-text token (--ignore-eos), so every measured answer is N_TOKENS long and both count
# the same decode: tokens after the first over the time after the first.
#
# ROUNDS rounds, app and CLI alternated (odd rounds app first, even rounds CLI first; the models
# alternate inside a round), so that a change in the machine's load hits both alike. Prints every
# run, then per model and turn: the medians, the ranges [min-max], the ratio app/CLI of the
# medians and the median and range of the rounds' own ratios; the app's time to first token and
# its frame times while streaming; the load average before and after.
#
#   bench/app-vs-cli.sh [BUILD_DIR] [WORK_DIR]
#     BUILD_DIR: where kvchat and kvchat-cli were built (default build/release)
#     WORK_DIR:  scratch (default: a fresh temp dir); the TinyLlama-shaped model is kept there
#   env: MODELS="stories tinyllama" (which ones), ROUNDS=5, THREADS=2, TURNS=10,
#        N_TOKENS (the measured answers, turns 1 and TURNS; default 2048 for stories260K, 128 for
#        the TinyLlama shape: 1-5 s of decode each on 2 cores), N_FILL=64 (the answers in between),
#        CTX=8192 (context size, both: room for stories260K's long answers), APP_ARGS (more kvchat
#        options, e.g. "--stream-cpu 10"), KVCHAT, KVCHAT_CLI (binaries, overriding BUILD_DIR's)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build/release}
work=${2:-$(mktemp -d)}
mkdir -p "$work"
app=${KVCHAT:-$build/app/kvchat}
cli=${KVCHAT_CLI:-$build/app/kvchat-cli}
models=${MODELS:-stories tinyllama}
rounds=${ROUNDS:-5}
threads=${THREADS:-2}
turns=${TURNS:-10}
n_fill=${N_FILL:-64}
ctx=${CTX:-8192}
for b in "$app" "$cli"; do
  [[ -x $b ]] || { echo "app-vs-cli: $b is not built (cmake --build --preset release)" >&2; exit 2; }
done
command -v xvfb-run >/dev/null || { echo "app-vs-cli: xvfb-run is not installed (apt-get install xvfb xauth)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "app-vs-cli: python3 is needed for the summary" >&2; exit 2; }
((rounds >= 1 && turns >= 2)) || { echo "app-vs-cli: ROUNDS must be >= 1 and TURNS >= 2" >&2; exit 2; }
# The default sampling (core/sampling/sampler.h SamplingParams, the app's and the CLI's); the
# CLI's seed is fixed, the app draws one: the cost of a token does not depend on which it is.
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
measured_tokens() {
  if [[ -n ${N_TOKENS:-} ]]; then echo "$N_TOKENS"; elif [[ $1 == stories ]]; then echo 2048; else echo 128; fi
}

# The app's script: a new conversation, TURNS messages; turns 1 and TURNS answer n_measured
# tokens, the others n_fill; after turns 1 and TURNS, its state.
write_script() {
  local f=$1 n_measured=$2 i n
  {
    echo '{"steps": ['
    echo '{"do": "wait_model", "timeout_s": 600}, {"do": "wait_idle", "timeout_s": 120},'
    echo '{"do": "key", "key": "ctrl+n"}, {"do": "wait_idle", "timeout_s": 120},'
    for ((i = 1; i <= turns; ++i)); do
      n=$n_fill
      ((i == 1 || i == turns)) && n=$n_measured
      echo "{\"do\": \"command\", \"name\": \"set_chat_settings\", \"max_tokens\": $n}, {\"do\": \"wait_idle\", \"timeout_s\": 120},"
      echo "{\"do\": \"type\", \"widget\": \"chat.input\", \"text\": \"$sentence Tell me part $i.\"},"
      echo '{"do": "click", "widget": "chat.send"}, {"do": "wait_idle", "timeout_s": 600},'
      if ((i == 1 || i == turns)); then
        for k in last_tokens_per_s last_ttft_ms last_reply_tokens last_prompt_tokens frame_ms_stream_p50 \
                 frame_ms_stream_p99 frame_ms_stream_max n_frames_stream ui_cpu_share_stream; do
          echo "{\"do\": \"print\", \"state\": \"$k\"},"
        done
      fi
    done
    echo '{"do": "assert", "state": "error", "op": "==", "value": ""}, {"do": "quit"}]}'
  } >"$f"
}

# state KEY from the app's output at the n-th print of it.
state() { grep "^kvchat: state $2 = " "$1" | sed -n "${3}p" | sed 's/.* = //'; }

# A prompt of exactly n_prompt tokens (BOS included, as generate counts it): whole sentences while
# they fit, then " a" (one token each); checked with the model's own tokenizer.
cli_prompt() {
  local model=$1 n_prompt=$2 per reps prompt n saved
  saved=$work/prompt-$(basename "$model" .gguf)-$n_prompt.txt
  [[ -f $saved ]] && { cat "$saved"; return; }
  per=$("$cli" tokenize -m "$model" --no-bos -p "$sentence " | wc -w)
  reps=$(( n_prompt / per - 1 )); ((reps >= 0)) || reps=0
  prompt=$(for ((r = 0; r < reps; ++r)); do printf '%s ' "$sentence"; done)
  prompt=${prompt% }
  n=$("$cli" tokenize -m "$model" -p "$prompt" | wc -w)
  while ((n + per <= n_prompt)); do
    prompt+=" $sentence"
    n=$("$cli" tokenize -m "$model" -p "$prompt" | wc -w)
  done
  while ((n < n_prompt)); do
    prompt+=" a"
    n=$("$cli" tokenize -m "$model" -p "$prompt" | wc -w)
  done
  ((n == n_prompt)) || { echo "app-vs-cli: cannot make a prompt of $n_prompt tokens (got $n)" >&2; exit 1; }
  printf '%s' "$prompt" | tee "$saved"
}

# CLI: tokens/s, tokens generated and prompt tokens, on a prompt of n_prompt tokens.
cli_run() {
  local model=$1 n_prompt=$2 n_tokens=$3 prompt log
  prompt=$(cli_prompt "$model" "$n_prompt")
  log=$work/cli.log
  "$cli" generate -m "$model" -t "$threads" -c "$ctx" -n "$n_tokens" --ignore-eos "${sampling[@]}" -p "$prompt" \
    >/dev/null 2>"$log" || { echo "app-vs-cli: kvchat-cli generate failed:" >&2; tail -5 "$log" >&2; exit 1; }
  grep -o 'prompt: [0-9]* tokens.*generated [0-9]* tokens, [0-9.]* tok/s' "$log" | awk '{print $(NF-1), $(NF-3), $2}'
}

runs=$work/runs.tsv
echo -e "model\tround\tside\tturn\ttok_s\ttokens\tprompt\tttft_ms\tframe_p50\tframe_p99\tframe_max\tn_frames\tui_cpu" >"$runs"
declare -A prompt_len  # model,turn -> the app's prompt tokens (the CLI's length)

run_app() {  # name model round
  local name=$1 model=$2 round=$3 out nth turn
  out=$work/app-$name-$round.log
  rm -rf "$work/data-$name"
  xvfb-run -a -s '-screen 0 1600x1000x24' "$app" ${APP_ARGS:-} -m "$model" -t "$threads" -c "$ctx" --ignore-eos \
    --data-dir "$work/data-$name" --script "$work/$name.json" --screenshot-dir "$work" >"$out" 2>&1 ||
    { echo "app-vs-cli: the app failed, see $out" >&2; tail -5 "$out" >&2; exit 1; }
  for nth in 1 2; do
    turn=$([[ $nth == 1 ]] && echo 1 || echo "$turns")
    prompt_len[$name,$turn]=$(state "$out" last_prompt_tokens $nth)
    echo -e "$name\t$round\tapp\t$turn\t$(state "$out" last_tokens_per_s $nth)\t$(state "$out" last_reply_tokens $nth)\t${prompt_len[$name,$turn]}\t$(state "$out" last_ttft_ms $nth)\t$(state "$out" frame_ms_stream_p50 $nth)\t$(state "$out" frame_ms_stream_p99 $nth)\t$(state "$out" frame_ms_stream_max $nth)\t$(state "$out" n_frames_stream $nth)\t$(state "$out" ui_cpu_share_stream $nth)" >>"$runs"
  done
}

run_cli() {  # name model round n_tokens
  local name=$1 model=$2 round=$3 n_tokens=$4 turn r tok_s n_gen n_prompt
  for turn in 1 "$turns"; do
    r=$(cli_run "$model" "${prompt_len[$name,$turn]}" "$n_tokens")
    read -r tok_s n_gen n_prompt <<<"$r"
    echo -e "$name\t$round\tcli\t$turn\t$tok_s\t$n_gen\t$n_prompt\t\t\t\t\t\t" >>"$runs"
  done
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A model_path
for name in $models; do
  model_path[$name]=$(model_file "$name")
  write_script "$work/$name.json" "$(measured_tokens "$name")"
done
for ((round = 1; round <= rounds; ++round)); do
  for name in $models; do
    # The CLI's prompts are as long as the app's: the app goes first until its lengths are known.
    if ((round % 2 == 1)) || [[ -z ${prompt_len[$name,1]:-} ]]; then
      run_app "$name" "${model_path[$name]}" "$round"
      run_cli "$name" "${model_path[$name]}" "$round" "$(measured_tokens "$name")"
    else
      run_cli "$name" "${model_path[$name]}" "$round" "$(measured_tokens "$name")"
      run_app "$name" "${model_path[$name]}" "$round"
    fi
  done
  echo "app-vs-cli: round $round of $rounds done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$runs" "$load_before" "$load_after" "$rounds" <<'PY'
import csv, statistics, sys
runs, load_before, load_after, n_rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = list(csv.DictReader(open(runs), delimiter="\t"))
print("every run:")
print(open(runs).read().rstrip())
def f(v):
    return float(v) if v not in ("", None) else float("nan")
def med(v):
    return statistics.median(v) if v else float("nan")
def rng(v, fmt="{:.1f}"):
    return (fmt + "-" + fmt).format(min(v), max(v)) if v else "-"
print()
print(f"{'model':10} {'turn':>4} {'prompt':>6} {'tokens':>6} {'app tok/s (median, range)':>26} "
      f"{'CLI tok/s (median, range)':>26} {'app/CLI':>7} {'rounds app/CLI (median, range)':>31} "
      f"{'app TTFT ms':>11} {'frame p50 / p99 / max ms':>24}")
problems = []
models = list(dict.fromkeys(r["model"] for r in rows))
for m in models:
    for turn in sorted({int(r["turn"]) for r in rows if r["model"] == m}):
        sel = [r for r in rows if r["model"] == m and int(r["turn"]) == turn]
        app = [r for r in sel if r["side"] == "app"]
        cli = [r for r in sel if r["side"] == "cli"]
        a = [f(r["tok_s"]) for r in app]
        c = [f(r["tok_s"]) for r in cli]
        by_round = {}
        for r in sel:
            by_round.setdefault(r["round"], {})[r["side"]] = f(r["tok_s"])
        per_round = [v["app"] / v["cli"] for v in by_round.values() if v.get("cli", 0) > 0 and "app" in v]
        tokens = sorted({r["tokens"] for r in sel})
        prompts = sorted({r["prompt"] for r in sel})
        if len(prompts) != 1:
            problems.append(f"{m} turn {turn}: the prompts differ in length ({', '.join(prompts)} tokens): "
                            "not the same context")
        if len(tokens) != 1:
            problems.append(f"{m} turn {turn}: the answers differ in length ({', '.join(tokens)} tokens): "
                            "not the same decode")
        ratio = med(a) / med(c) if c and med(c) > 0 else float("nan")
        p50 = med([f(r["frame_p50"]) for r in app])
        p99 = max(f(r["frame_p99"]) for r in app)
        fmax = max(f(r["frame_max"]) for r in app)
        print(f"{m:10} {turn:4d} {app[0]['prompt']:>6} {'/'.join(tokens):>6} "
              f"{med(a):9.1f} [{rng(a):>15}] {med(c):9.1f} [{rng(c):>15}] {ratio:7.3f} "
              f"{med(per_round):13.3f} [{rng(per_round, '{:.3f}'):>15}] "
              f"{med([f(r['ttft_ms']) for r in app]):11.1f} {p50:8.1f} / {p99:5.1f} / {fmax:5.1f}")
print(f"({n_rounds} rounds; frame times: the app's work per frame while an answer streamed, over its last "
      "600 such frames: the median of the runs' p50, the largest p99 and max)")
print(f"load average (1, 5, 15 min) before: {load_before}; after: {load_after}")
for p in problems:
    print("app-vs-cli: " + p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
