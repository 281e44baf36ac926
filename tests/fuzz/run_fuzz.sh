#!/usr/bin/env bash
# Builds the fuzz targets with the "fuzz" preset (clang, libFuzzer, ASan + UBSan) and runs
# each for half of SECONDS: fuzz_gguf (the GGUF reader) and fuzz_model (the whole load path,
# up to a forward pass). Seeds: the first 64 KiB of each GGUF in tests/data, small files from
# fuzz_gguf_seeds, whole small models of every architecture and the hostile variants
# (make-model-seeds.sh, written with the release build's kvchat-cli), and the past failures
# kept in tests/fuzz/seeds/ (which CTest replays).
# Exits non-zero, printing the crash input's path (kept in a temp dir), if the fuzzer finds
# a crash; on success the temp dir is removed.
set -euo pipefail

seconds="${1:?usage: tests/fuzz/run_fuzz.sh SECONDS}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
jobs="${KVC_FUZZ_BUILD_JOBS:-2}"

cd "$root"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$jobs" --target fuzz_gguf fuzz_gguf_seeds fuzz_model
cli=build/release/app/kvchat-cli
[ -x "$cli" ] || { cmake --preset release >/dev/null && cmake --build --preset release -j"$jobs" --target kvchat-cli; }

work="$(mktemp -d "${TMPDIR:-/tmp}/kvchat-fuzz.XXXXXX")"
corpus="$work/corpus"
artifacts="$work/artifacts"
mkdir -p "$corpus" "$artifacts"

./build/fuzz/tests/fuzz/fuzz_gguf_seeds "$corpus"
cp tests/fuzz/seeds/* "$corpus"/  # inputs that once failed (regressions)
shopt -s nullglob
n_models=0
for m in tests/data/*/*.gguf; do
  head -c 65536 "$m" >"$corpus/model-$(basename "$m")"
  n_models=$((n_models + 1))
done
echo "run_fuzz: $n_models GGUF seeds from tests/data, corpus in $corpus"
models="$work/models"
tests/fuzz/make-model-seeds.sh "$cli" "$models"
cp "$models"/* "$corpus"/
cp tests/fuzz/seeds/* "$models"/

status=0
half=$(((seconds + 1) / 2))
for target in fuzz_gguf fuzz_model; do
  dir=$corpus
  [ "$target" = fuzz_model ] && dir=$models
  echo "run_fuzz: $target for $half s on $(ls "$dir" | wc -l) seeds"
  ./build/fuzz/tests/fuzz/$target "$dir" \
    -max_total_time="$half" -max_len=65536 -rss_limit_mb=2048 -timeout=20 \
    -artifact_prefix="$artifacts/$target-" -print_final_stats=1 >"$work/$target.log" 2>&1 || status=$?
  grep -E "DONE|stat::number_of_executed_units|stat::new_units_added|ERROR|SUMMARY" "$work/$target.log" | tail -6 || true
done

crashes=("$artifacts"/*)
if [ "$status" -ne 0 ] || [ "${#crashes[@]}" -gt 0 ]; then
  echo "run_fuzz: the fuzzer found a problem (exit $status):" >&2
  for c in "${crashes[@]}"; do echo "  crash input: $c" >&2; done
  for l in "$work"/*.log; do echo "--- $l" >&2; tail -n 40 "$l" >&2; done
  exit 1
fi
echo "run_fuzz: no crash in $seconds s"
rm -rf "$work"
