#!/usr/bin/env bash
# Builds the fuzz targets with the "fuzz" preset (clang, libFuzzer, ASan + UBSan) and runs each
# for a third of SECONDS (or one target for all of it):
#   fuzz_gguf   the GGUF reader. Seeds: the first 64 KiB of each GGUF in tests/data, small files
#               from fuzz_gguf_seeds, the model seeds below, the past failures in tests/fuzz/seeds/
#   fuzz_model  the whole load path, up to a forward pass. Seeds: whole small models of every
#               architecture and every hostile variant (make-model-seeds.sh, written with the
#               release build's kvchat-cli), and tests/fuzz/seeds/ (CTest replays both)
#   fuzz_jinja  the chat template interpreter. Seeds: the model templates in tests/data/templates
#   fuzz_request  the server's request head scan and body parsers. Seeds: tests/fuzz/request-seeds
#   fuzz_grammar  the JSON-schema compiler and the grammar matcher's token masks. Seeds:
#               tests/fuzz/grammar-seeds (a schema, a NUL, then text for the matcher)
#   usage: tests/fuzz/run_fuzz.sh SECONDS [gguf|model|jinja|request|grammar]
# Exits non-zero, printing the crash input's path (kept in a temp dir) and the log's end, if a
# fuzzer finds a crash; on success the temp dir is removed.
set -euo pipefail

seconds="${1:?usage: tests/fuzz/run_fuzz.sh SECONDS [gguf|model|jinja|request|grammar]}"
only="${2:-}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
jobs="${KVC_FUZZ_BUILD_JOBS:-2}"
case "$only" in "" | gguf | model | jinja | request | grammar) ;; *) echo "run_fuzz: unknown target $only (gguf, model, jinja, request or grammar)" >&2; exit 2 ;; esac

cd "$root"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$jobs" --target fuzz_gguf fuzz_gguf_seeds fuzz_model fuzz_jinja fuzz_request fuzz_grammar
cli=build/release/app/kvchat-cli
[ -x "$cli" ] || { cmake --preset release >/dev/null && cmake --build --preset release -j"$jobs" --target kvchat-cli; }

work="$(mktemp -d "${TMPDIR:-/tmp}/kvchat-fuzz.XXXXXX")"
artifacts="$work/artifacts"
mkdir -p "$work/gguf" "$work/model" "$work/jinja" "$work/request" "$work/grammar" "$artifacts"

./build/fuzz/tests/fuzz/fuzz_gguf_seeds "$work/gguf"
shopt -s nullglob
for m in tests/data/*/*.gguf; do head -c 65536 "$m" >"$work/gguf/model-$(basename "$m")"; done
tests/fuzz/make-model-seeds.sh "$cli" "$work/model"
cp tests/fuzz/seeds/* "$work/model"/
cp "$work/model"/* "$work/gguf"/
cp tests/data/templates/*.jinja "$work/jinja"/
cp tests/fuzz/request-seeds/* "$work/request"/
cp tests/fuzz/grammar-seeds/* "$work/grammar"/

targets=(gguf model jinja request grammar)
[ -n "$only" ] && targets=("$only")
each=$(((seconds + ${#targets[@]} - 1) / ${#targets[@]}))
status=0
for t in "${targets[@]}"; do
  max_len=65536
  [ "$t" = jinja ] && max_len=16384
  echo "run_fuzz: fuzz_$t for $each s on $(ls "$work/$t" | wc -l) seeds"
  ./build/fuzz/tests/fuzz/fuzz_"$t" "$work/$t" -max_total_time="$each" -max_len="$max_len" -rss_limit_mb=2048 \
    -timeout=20 -artifact_prefix="$artifacts/$t-" -print_final_stats=1 >"$work/$t.log" 2>&1 || status=$?
  grep -E "DONE|stat::number_of_executed_units|stat::new_units_added|ERROR|SUMMARY" "$work/$t.log" | tail -6 || true
done

crashes=("$artifacts"/*)
if [ "$status" -ne 0 ] || [ "${#crashes[@]}" -gt 0 ]; then
  echo "run_fuzz: a fuzzer found a problem (exit $status):" >&2
  for c in "${crashes[@]}"; do echo "  crash input: $c" >&2; done
  for l in "$work"/*.log; do echo "--- $l" >&2; tail -n 40 "$l" >&2; done
  exit 1
fi
echo "run_fuzz: no crash in $seconds s"
rm -rf "$work"
