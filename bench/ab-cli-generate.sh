#!/usr/bin/env bash
# Two kvchat-cli builds side by side (A = before, B = after), whole process: `generate` (load,
# prefill, decode, exit) timed from outside, alternated A B B A per round so that load drifts hit
# both alike. The settings are given explicitly (greedy, no repetition penalty), so both builds do
# the same work whatever their defaults; their outputs must be identical, and the script says so.
# Prints each build's median wall time and decode tok/s (as generate reports it) and B / A.
#   usage: bench/ab-cli-generate.sh CLI_A CLI_B MODEL.gguf [ROUNDS (3)]
#   environment: GEN_ARGS (-t 2 -n 32 -p "Once upon a time")
set -euo pipefail

a=${1:?usage: $0 CLI_A CLI_B MODEL.gguf [ROUNDS]} b=${2:?} model=${3:?} rounds=${4:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # label cli run-name
  local t0 t1
  t0=$(date +%s.%N)
  if [ -n "${GEN_ARGS:-}" ]; then
    # shellcheck disable=SC2086
    "$2" generate -m "$model" $GEN_ARGS --temp 0 --repeat-penalty 1 --seed 0 >"$out/$1-$3.out" 2>"$out/$1-$3.err"
  else
    "$2" generate -m "$model" -t 2 -n 32 -p "Once upon a time" --temp 0 --repeat-penalty 1 --seed 0 \
      >"$out/$1-$3.out" 2>"$out/$1-$3.err"
  fi
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}' >"$out/$1-$3.wall"
}
for r in $(seq 1 "$rounds"); do
  run A "$a" "$r"
  run B "$b" "$r"
  run B "$b" "$r-2"
  run A "$a" "$r-2"
  echo "round $r of $rounds done" >&2
done

python3 - "$out" <<'PY'
import glob, os, re, statistics, sys
out = sys.argv[1]
def runs(side, ext):
    return sorted(glob.glob(os.path.join(out, f"{side}-*.{ext}")))
wall = {s: [float(open(f).read()) for f in runs(s, "wall")] for s in "AB"}
tok_s = {s: [float(m.group(1)) for f in runs(s, "err") for m in [re.search(r"generated \d+ tokens, ([0-9.]+) tok/s", open(f).read())] if m]
         for s in "AB"}
print(f"{'metric':24} {'A median':>10} {'B median':>10} {'B/A':>7}  runs")
for name, v in [("wall s (whole process)", wall), ("decode tok/s", tok_s)]:
    ma, mb = statistics.median(v["A"]), statistics.median(v["B"])
    print(f"{name:24} {ma:10.3f} {mb:10.3f} {mb / ma if ma else 0:7.3f}  {len(v['A'])}+{len(v['B'])}")
    print(f"{'':24} A {' '.join(f'{x:.2f}' for x in v['A'])} | B {' '.join(f'{x:.2f}' for x in v['B'])}")
texts = {open(f).read() for s in "AB" for f in runs(s, "out")}
print("outputs: identical in every run" if len(texts) == 1 else f"outputs: {len(texts)} different texts")
sys.exit(0 if len(texts) == 1 else 1)
PY
