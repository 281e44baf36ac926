#!/usr/bin/env bash
# KV formats against F16 KV, kvchat and llama.cpp side by side: KL divergence, top-1 agreement
# and perplexity on assets/demo/corpus.txt, plus kvchat's greedy-continuation agreement.
# A developer runs it; nothing in the build or the tests does.
#   usage: [LLAMA_CPP=DIR] bench/kv-quality.sh [BUILD_DIR] [OUT_DIR]
#     BUILD_DIR: a kvchat build (default build/release); OUT_DIR: where the outlier models are
#     written (default BUILD_DIR/kv-quality). LLAMA_CPP: a llama.cpp build with bin/llama-perplexity
#     (e.g. ../shared/anchors/llama.cpp); without it only kvchat's rows are printed.
# Models: stories260K (tests/data, trained; head size 8, which llama.cpp's q4_0 / q8_0 KV
# refuse: their blocks of 32 must divide the head size) and two synthetic models from
# `kvchat-cli mkmodel --k-outliers`, whose key projections carry outlier channels (2 of 32 per
# head at 20x; 4 of 64 at 10x). Both sides score the second half of each 512-token chunk;
# llama.cpp replaces each chunk's first token by BOS, kvchat keeps the text's tokens, so the
# two F16 baselines differ slightly (KL is always against the same side's F16 KV).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build/release}" && pwd)
out=${2:-$build/kv-quality}
cli=$build/app/kvchat-cli
corpus=$root/assets/demo/corpus.txt
ctx=512 chunks=8 greedy=100
[ -x "$cli" ] || { echo "no kvchat-cli in $build (build it first)" >&2; exit 2; }
mkdir -p "$out"

stories=$root/tests/data/models/stories260K.gguf
"$cli" mkmodel -q --type f16 --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768 --qk-std 0.05 \
  --vocab-from="$stories" --k-outliers 2 --k-outlier-scale 20 -o "$out/outliers-hd32.gguf"
"$cli" mkmodel -q --type f16 --dim 512 --layers 4 --heads 8 --kv-heads 2 --ffn 1024 --qk-std 0.05 \
  --vocab-from="$stories" --k-outliers 4 --k-outlier-scale 10 -o "$out/outliers-hd64.gguf"
models=("$stories" "$out/outliers-hd32.gguf" "$out/outliers-hd64.gguf")

echo "| model | KV (K / V) | bytes/token | KL(F16 ‖ KV) nats/token | top-1 agree | ppl (F16 → KV) | greedy: on F16 for | greedy choices agree |"
echo "|---|---|---|---|---|---|---|---|"
for m in "${models[@]}"; do
  name=$(basename "$m" .gguf)
  for kv in int8 int8h int4 int4h int4c; do
    r=$("$cli" perplexity -m "$m" -f "$corpus" --kv-type "$kv" -c $ctx --chunks $chunks --greedy $greedy -q)
    bytes=$(sed -n 's/^kv bytes .*, [^ ]* \([0-9.]*\) per token.*/\1/p' <<<"$r")
    kl=$(sed -n 's/^KL([^)]*)  *\([0-9.]*\) nats.*/\1/p' <<<"$r")
    top=$(sed -n 's/^top-1 agree \([0-9.]*\) %.*/\1/p' <<<"$r")
    p16=$(sed -n 's/^ppl f16  *\([0-9.]*\)$/\1/p' <<<"$r")
    pkv=$(sed -n "s/^ppl $kv  *\([0-9.]*\)\$/\1/p" <<<"$r")
    g=$(sed -n 's/^greedy  *\([0-9]*\) of \([0-9]*\) tokens.*/\1 of \2/p' <<<"$r")
    ga=$(sed -n 's/^  *\([0-9]*\) of \([0-9]*\) greedy choices agree.*/\1 of \2/p' <<<"$r")
    echo "| $name | kvchat $kv | $bytes | $kl | $top % | $p16 → $pkv | $g | $ga |"
  done
  if [ -n "${LLAMA_CPP:-}" ]; then
    ppl=$LLAMA_CPP/bin/llama-perplexity
    export LD_LIBRARY_PATH=$LLAMA_CPP/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    base=$out/$name.kld
    "$ppl" -m "$m" -f "$corpus" -c $ctx --chunks $chunks -fa on --kl-divergence-base "$base" >/dev/null 2>&1
    for t in q8_0 q4_0; do
      if ! r=$("$ppl" -m "$m" -f "$corpus" -c $ctx --chunks $chunks -fa on -ctk $t -ctv $t \
                 --kl-divergence-base "$base" --kl-divergence 2>&1); then
        why=$(grep -o "does not divide n_embd_head_k=[0-9]*" <<<"$r" | head -1 || true)
        echo "| $name | llama.cpp $t | | refused (block of 32 ${why:-: see llama-perplexity}) | | | | |"
        continue
      fi
      # (stdout and stderr interleave: the figures need not start a line)
      kl=$(sed -n 's/.*Mean    KLD: *\([0-9.]*\).*/\1/p' <<<"$r" | head -1)
      top=$(sed -n 's/.*Same top p: *\([0-9.]*\).*/\1/p' <<<"$r" | head -1)
      pq=$(sed -n 's/.*Mean PPL(Q) *: *\([0-9.]*\).*/\1/p' <<<"$r" | head -1)
      pb=$(sed -n 's/.*Mean PPL(base) *: *\([0-9.]*\).*/\1/p' <<<"$r" | head -1)
      echo "| $name | llama.cpp $t | | $kl | $top % | $pb → $pq | | |"
    done
  fi
done
