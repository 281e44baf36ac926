#!/usr/bin/env bash
# Lists the test cases of the last CTest run that skipped (KVC_SKIP), each with its reason,
# read from CTest's log: CTest's own summary names them but does not say why.
#   usage: tests/skipped-summary.sh [BUILD_DIR]   (default build/release)
set -euo pipefail
log="${1:-build/release}/Testing/Temporary/LastTest.log"
[ -f "$log" ] || { echo "no CTest log at $log: run ctest first" >&2; exit 1; }
awk '
  /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); name = $0; next }
  /kvc-test-skipped: / { sub(/.*kvc-test-skipped: /, ""); reason = $0; reading = 1; next }
  reading && /^ *$/ { printf "  skipped: %s\n           why: %s\n", name, reason; reading = 0; n++; next }
  reading { sub(/^ +/, ""); reason = reason " " $0; next }
  END { if (n) printf "%d test case(s) skipped\n", n; else print "no test case skipped" }
' "$log"
