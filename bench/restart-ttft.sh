#!/usr/bin/env bash
# Restart time to first token with the store's files dropped from the OS page cache
# (posix_fadvise DONTNEED on kv_cache.db and its -wal before the new process starts) next to the
# warm restart (the files still in the page cache), through kvchat-cli bench-cache: a new process
# resumes a long conversation from the disk tier either way. Times: on a busy machine they say
# little, re-run quiet. The counts (tokens from T2, recomputed) do not depend on load.
#   usage: bench/restart-ttft.sh [MODEL.gguf] [HISTORY_TOKENS]   (KVCHAT_CLI=... to pick the binary)
#   default model: a synthetic llama (dim 512, 8 layers, Q8_0) made with kvchat-cli mkmodel.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cli=${KVCHAT_CLI:-$root/build/release/app/kvchat-cli}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=${1:-}
history=${2:-1200}
if [ -z "$model" ]; then
  model=$tmp/bench-512x8.gguf
  "$cli" mkmodel -q --ctx 4096 --dim 512 --layers 8 --heads 8 --kv-heads 4 --ffn 1536 --type q8_0 \
    --vocab-from "$root/tests/data/models/stories260K.gguf" -o "$model"
fi
load=$(cut -d' ' -f1 /proc/loadavg)
echo "== kvchat-cli bench-cache -m $(basename "$model") -t 2 --history $history --new 20 -r 3 --json   (load average $load, $(nproc) CPUs)"
"$cli" bench-cache -m "$model" -t 2 --history "$history" --new 20 -r 3 --json --data-dir "$tmp/data" -q > "$tmp/out.json"
python3 - "$tmp/out.json" "$load" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
busy = " (busy machine: load average %s)" % sys.argv[2] if float(sys.argv[2]) > 1.5 else ""
print("restart TTFT, medians of %d%s:" % (j["repetitions"], busy))
print("  warm restart (store in the page cache)      %8.1f ms   T2 tokens %d, recomputed %d" % (
    j["ttft_restart_ms"], j["restart"]["cached_t2_tokens"], j["restart"]["recomputed_history_tokens"]))
print("  cold restart (store dropped from the cache) %8.1f ms   T2 tokens %d, recomputed %d" % (
    j["ttft_restart_page_cache_dropped_ms"], j["restart_page_cache_dropped"]["cached_t2_tokens"],
    j["restart_page_cache_dropped"]["recomputed_history_tokens"]))
print("  cold / warm: %.2fx; T2 restore %.0f MB/s warm, %.0f MB/s dropped; store bytes resident after the drop: %d" % (
    j["ttft_restart_page_cache_dropped_ms"] / max(j["ttft_restart_ms"], 1e-9), j["restart_t2_restore_mb_s"],
    j["restart_page_cache_dropped_t2_restore_mb_s"], j["store_bytes_resident_after_drop"]))
print("  for reference: cold prefill %.1f ms, history on T0 %.1f ms" % (j["ttft_cold_ms"], j["ttft_t0_ms"]))
PY
