#!/usr/bin/env bash
# Whole small models as seeds for fuzz_model (and inputs for its CTest replay): one per
# architecture and weight type, and every hostile variant of `mkmodel --break`, each under
# 64 KiB so that the fuzzer can mutate all of it.
#   usage: tests/fuzz/make-model-seeds.sh KVCHAT_CLI OUT_DIR
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 KVCHAT_CLI OUT_DIR" >&2; exit 2; fi
cli=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
# The stories260K tokenizer (512 pieces) and a shape of width 32, one layer, tied embeddings.
shape=(--dim 32 --layers 1 --heads 2 --kv-heads 1 --ffn 32 --ctx 64 --tied -t 1 -q
       --vocab-from "$root/tests/data/models/stories260K.gguf")
for arch in llama llama3 qwen2 phi3 smollm3; do
  for type in f16 q8_0 q4_0; do
    "$cli" mkmodel "${shape[@]}" --arch "$arch" --type "$type" -o "$out/$arch-$type.gguf"
  done
done
"$cli" mkmodel "${shape[@]}" --arch qwen3 --head-dim 16 --type q8_0 -o "$out/qwen3-q8_0.gguf"
"$cli" mkmodel "${shape[@]}" --arch qwen3moe --head-dim 16 --experts 4 --experts-used 2 --expert-ffn 32 --type q8_0 \
  -o "$out/qwen3moe-q8_0.gguf"
for variant in $("$cli" mkmodel --break list | cut -d' ' -f1); do
  [ "$variant" = huge-template ] && continue  # 100 MiB: not a seed
  "$cli" mkmodel "${shape[@]}" --type q8_0 --break "$variant" -o "$out/break-$variant.gguf"
done
