#!/usr/bin/env bash
# Runs clang-tidy 14 with the tree's .clang-tidy on the sources of core/, kernels/ and storage/
# (the engine and its storage; the GUI and the commands are left to the compiler's warnings).
#   tests/lint/check-tidy.sh SOURCE_DIR BUILD_DIR     (BUILD_DIR holds compile_commands.json)
# Exits 1 listing the findings; skips with the reason without clang-tidy 14.
set -euo pipefail
src="$1"
build="$2"
want=14
tidy=""
for c in clang-tidy-$want clang-tidy; do
  if command -v "$c" >/dev/null 2>&1 && "$c" --version | grep -q "version $want\."; then tidy="$c"; break; fi
done
if [ -z "$tidy" ]; then
  echo "kvc-test-skipped: clang-tidy $want is not installed (packaging/install-deps.sh installs it on Debian 12)"
  exit 0
fi
[ -f "$build/compile_commands.json" ] || { echo "no $build/compile_commands.json: configure the build first" >&2; exit 2; }
cd "$src"
mapfile -d '' files < <(find core kernels storage -name '*.cpp' -print0 | sort -z)
jobs="${KVC_TIDY_JOBS:-$(nproc)}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# clang-tidy runs 4 files at a time, JOBS at once; the findings ("error:" under WarningsAsErrors)
# are collected. The build's -Werror is lifted: the compiler's own warnings are the build's business.
printf '%s\0' "${files[@]}" |
  xargs -0 -P "$jobs" -n 4 "$tidy" -p "$build" --quiet --use-color=false --extra-arg=-Wno-error 2>/dev/null >"$log" || true
if grep -q ': error: ' "$log"; then
  grep -A3 ': error: ' "$log" | head -200
  echo "clang-tidy: $(grep -c ': error: ' "$log") findings (see .clang-tidy; fix them, or NOLINT(check) with the reason)"
  exit 1
fi
echo "clang-tidy: ${#files[@]} files of core/, kernels/ and storage/ are clean"
