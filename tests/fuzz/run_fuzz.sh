#!/usr/bin/env bash
# Builds a fuzz target with the "fuzz" preset and fuzzes it for SECONDS seconds.
#   usage: tests/fuzz/run_fuzz.sh SECONDS [gguf|jinja]   (default gguf)
# gguf: the GGUF reader. Seeds: the first 64 KiB of each GGUF in tests/data (a model, vocabularies,
# tensor slices), small files from fuzz_gguf_seeds and the past failures kept in tests/fuzz/seeds/.
# jinja: the chat template interpreter. Seeds: the model templates in tests/data/templates.
# Exits non-zero, printing the crash input's path (kept in a temp dir), if the fuzzer finds
# a crash; on success the temp dir is removed.
set -euo pipefail

seconds="${1:?usage: tests/fuzz/run_fuzz.sh SECONDS [gguf|jinja]}"
target="${2:-gguf}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
jobs="${KVC_FUZZ_BUILD_JOBS:-2}"

cd "$root"
cmake --preset fuzz >/dev/null

work="$(mktemp -d "${TMPDIR:-/tmp}/kvchat-fuzz.XXXXXX")"
corpus="$work/corpus"
artifacts="$work/artifacts"
mkdir -p "$corpus" "$artifacts"

if [ "$target" = jinja ]; then
  cmake --build --preset fuzz -j"$jobs" --target fuzz_jinja
  cp tests/data/templates/*.jinja "$corpus"/
  status=0
  ./build/fuzz/tests/fuzz/fuzz_jinja "$corpus" -max_total_time="$seconds" -max_len=16384 -rss_limit_mb=2048 \
    -timeout=10 -artifact_prefix="$artifacts/" -print_final_stats=1 2>&1 | tee "$work/fuzz.log" || status=$?
  crashes=("$artifacts"/*)
  if [ "$status" -ne 0 ] || [ -e "${crashes[0]:-}" ]; then
    echo "run_fuzz: the fuzzer found a problem (exit $status):" >&2
    for c in "${crashes[@]}"; do echo "  crash input: $c" >&2; done
    exit 1
  fi
  echo "run_fuzz: no crash in $seconds s"
  rm -rf "$work"
  exit 0
fi
[ "$target" = gguf ] || { echo "run_fuzz: unknown target $target (gguf or jinja)" >&2; exit 2; }
cmake --build --preset fuzz -j"$jobs" --target fuzz_gguf fuzz_gguf_seeds

./build/fuzz/tests/fuzz/fuzz_gguf_seeds "$corpus"
cp tests/fuzz/seeds/* "$corpus"/  # inputs that once failed (regressions)
shopt -s nullglob
n_models=0
for m in tests/data/*/*.gguf; do
  head -c 65536 "$m" >"$corpus/model-$(basename "$m")"
  n_models=$((n_models + 1))
done
echo "run_fuzz: $n_models GGUF seeds from tests/data, corpus in $corpus"

status=0
./build/fuzz/tests/fuzz/fuzz_gguf "$corpus" \
  -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
  -artifact_prefix="$artifacts/" -print_final_stats=1 2>&1 | tee "$work/fuzz.log" || status=$?

crashes=("$artifacts"/*)
if [ "$status" -ne 0 ] || [ "${#crashes[@]}" -gt 0 ]; then
  echo "run_fuzz: the fuzzer found a problem (exit $status):" >&2
  for c in "${crashes[@]}"; do echo "  crash input: $c" >&2; done
  exit 1
fi
echo "run_fuzz: no crash in $seconds s"
rm -rf "$work"
