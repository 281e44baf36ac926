#!/usr/bin/env bash
# kvchat against llama.cpp on a mixture-of-experts file: kvchat-cli bench and llama-bench on the same
# Qwen3-30B-A3B-shaped file (mkmodel --preset qwen3-30b-a3b, LAYERS of its 48, Q4_0; PRESET=gpt-oss-20b
# TYPE=mxfp4_moe: gpt-oss-20b's shape, experts MXFP4, LAYERS of its 24), 2 threads,
# pp128 / tg32, 3 repetitions each (their median), the order flipped each round; prints each round
# and the median of the rounds' ratios (kvchat / llama.cpp) with their range.
#   usage: bench/moe-compare.sh LLAMA_CPP_BIN_DIR [ROUNDS]
#   environment: MOE_WORK (/tmp/kvchat-moe: the file, 370 MB a layer), LAYERS (12), TYPE (q4_0)
# Needs the release build and python3. Run it with the machine otherwise idle.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
lb=$1/llama-bench rounds=${2:-5}
cli=$root/build/release/app/kvchat-cli
work=${MOE_WORK:-/tmp/kvchat-moe} layers=${LAYERS:-12} type=${TYPE:-q4_0} preset=${PRESET:-qwen3-30b-a3b}
mkdir -p "$work"
m=$work/$preset-l$layers-$type.gguf
[ -f "$m" ] || "$cli" mkmodel --preset "$preset" --layers "$layers" --type "$type" -q -o "$m"
kv() {
  "$cli" bench -m "$m" -t 2 --pp 128 --tg 32 -r 3 --json -q |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.2f %.2f" % (j["prefill_tok_s"], j["decode_tok_s"]))'
}
ll() {
  "$lb" -m "$m" -t 2 -p 128 -n 32 -r 3 -o json 2>/dev/null | python3 -c '
import json, sys, statistics as st
d = json.load(sys.stdin)
pp = [x["samples_ts"] for x in d if x["n_gen"] == 0][0]
tg = [x["samples_ts"] for x in d if x["n_prompt"] == 0][0]
print("%.2f %.2f" % (st.median(pp), st.median(tg)))'
}
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
echo "round | kvchat pp128 tg32 | llama.cpp pp128 tg32 | load average"
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then k=$(kv); l=$(ll); else l=$(ll); k=$(kv); fi
  echo "$r $k $l $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$rows"
done
python3 - "$rows" <<'PY'
import sys, statistics as st
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
for name, i in (("prefill pp128", 1), ("decode tg32", 2)):
    r = [x[i] / x[i + 2] for x in rows]
    print("%s: %.2fx (%.2f-%.2f); kvchat %.1f tok/s, llama.cpp %.1f tok/s (medians of %d rounds)" %
          (name, st.median(r), min(r), max(r), st.median([x[i] for x in rows]), st.median([x[i + 2] for x in rows]),
           len(rows)))
PY
