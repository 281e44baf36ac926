#!/usr/bin/env bash
# Two kvchat-cli builds side by side (A = before, B = after): `bench` and `bench-cache` (the
# BENCHMARKS.md commands) alternated A B B A per round on the same model, so that load drifts
# hit both alike. Prints each metric's median per build and the ratio B / A (> 1: B is faster
# for tok/s; < 1: B is faster for ms).
#   usage: bench/ab-engine.sh CLI_A CLI_B MODEL.gguf [ROUNDS (3)]
#   environment: BENCH_ARGS (-t 2 --pp 128 --tg 32 -r 5), CACHE_ARGS (-t 2 --history 1200 --new 20 -r 3),
#                SKIP_CACHE=1 to run `bench` only
set -euo pipefail

a=${1:?usage: $0 CLI_A CLI_B MODEL.gguf [ROUNDS]} b=${2:?} model=${3:?} rounds=${4:-3}
bench_args=${BENCH_ARGS:--t 2 --pp 128 --tg 32 -r 5}
cache_args=${CACHE_ARGS:--t 2 --history 1200 --new 20 -r 3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # label cli round
  # shellcheck disable=SC2086
  "$2" bench -m "$model" $bench_args --json >"$out/bench-$1-$3.json"
  if [ -z "${SKIP_CACHE:-}" ]; then
    # shellcheck disable=SC2086
    "$2" bench-cache -m "$model" $cache_args --json >"$out/cache-$1-$3.json"
  fi
}
for r in $(seq 1 "$rounds"); do
  run A "$a" "$r"
  run B "$b" "$r"
  run B "$b" "$r-2"
  run A "$a" "$r-2"
  echo "round $r of $rounds done" >&2
done

python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
metrics = {"bench": ["prefill_tok_s", "decode_tok_s"],
           "cache": ["ttft_cold_ms", "ttft_t0_ms", "ttft_t1_ms", "ttft_t2_ms", "ttft_restart_ms",
                     "ttft_restart_same_prompt_ms", "prefill_new_only_ms"]}
print(f"{'metric':32} {'A median':>12} {'B median':>12} {'B/A':>7}  runs")
for kind, names in metrics.items():
    runs = {side: [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, f"{kind}-{side}-*.json")))]
            for side in "AB"}
    if not runs["A"]:
        continue
    for n in names:
        va = [j[n] for j in runs["A"] if n in j]
        vb = [j[n] for j in runs["B"] if n in j]
        if not va or not vb:
            continue
        ma, mb = statistics.median(va), statistics.median(vb)
        print(f"{kind + ' ' + n:32} {ma:12.1f} {mb:12.1f} {mb / ma if ma else 0:7.3f}  {len(va)}+{len(vb)}")
        print(f"{'':32} A runs {' '.join(f'{x:.1f}' for x in va)} | B runs {' '.join(f'{x:.1f}' for x in vb)}")

# Counts do not depend on load: every bench-cache field that is not a time, a rate or a pid
# (tokens cached per tier per case and per turn, recomputed tokens, bytes read) must agree.
def flat(j, p=""):
    if isinstance(j, dict):
        return {k2: v2 for k, v in j.items() for k2, v2 in flat(v, p + "." + k).items()}
    if isinstance(j, list):
        return {k2: v2 for i, v in enumerate(j) for k2, v2 in flat(v, f"{p}[{i}]").items()}
    return {p: j}
files = sorted(glob.glob(os.path.join(out, "cache-*.json")))
if files:
    fields = [flat(json.load(open(f))) for f in files]
    keys = [k for k in fields[0] if not any(s in k for s in ("_ms", "mb_s", "pid", "model"))]
    differ = [k for k in keys if len({repr(f.get(k)) for f in fields}) > 1]
    print(f"bench-cache counts: {len(keys)} fields, {len(keys) - len(differ)} equal in all {len(files)} runs"
          + (f"; differ: {differ}" if differ else ""))
PY
