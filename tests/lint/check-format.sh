#!/usr/bin/env bash
# Checks that every C++/CUDA source of the tree is formatted by .clang-format (clang-format 14,
# Debian 12's; other versions format differently, so they skip with the reason).
#   tests/lint/check-format.sh SOURCE_DIR          check (exit 1 listing the files that differ)
#   tests/lint/check-format.sh SOURCE_DIR --fix    reformat them in place
set -euo pipefail
src="$1"
want=14
cf=""
for c in clang-format-$want clang-format; do
  if command -v "$c" >/dev/null 2>&1 && "$c" --version | grep -q "version $want\."; then cf="$c"; break; fi
done
if [ -z "$cf" ]; then
  echo "kvc-test-skipped: clang-format $want is not installed (packaging/install-deps.sh installs it on Debian 12)"
  exit 0
fi
cd "$src"
mapfile -d '' files < <(find app core kernels storage ui tests \
  -path tests/data -prune -o -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z)
if [ "${2:-}" = "--fix" ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
if ! out="$("$cf" --dry-run --Werror "${files[@]}" 2>&1)"; then
  echo "$out" | grep -o '^[^:]*:[0-9]*:[0-9]*: ' | cut -d: -f1 | sort -u | sed 's/^/not formatted: /'
  echo "run: tests/lint/check-format.sh . --fix   (then review and commit)"
  exit 1
fi
echo "format: ${#files[@]} files match .clang-format"
