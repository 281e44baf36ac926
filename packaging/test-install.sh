#!/usr/bin/env bash
# Builds the .deb, unpacks it into a scratch root (dpkg -x) and runs what it installed:
# kvchat-cli --version and a short generation with stories260K (tests/data), kvchat --version.
#   packaging/test-install.sh [BUILD_DIR]     (default: build/release)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
model="$(pwd)/tests/data/models/stories260K.gguf"

[ -f "$build/CMakeCache.txt" ] || cmake --preset release >/dev/null
cmake --build "$build" -j2 --target kvchat kvchat-cli
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls -t "$build"/kvchat_*.deb | head -n1)
echo "kvchat: built $deb"
dpkg-deb --info "$deb" | sed -n '/Depends/p'

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dpkg -x "$deb" "$root"
for f in usr/bin/kvchat usr/bin/kvchat-cli usr/share/applications/kvchat.desktop \
         usr/share/icons/hicolor/scalable/apps/kvchat.svg usr/share/kvchat/assets/demo/corpus.txt \
         usr/share/kvchat/assets/scripts/smoke.json usr/share/kvchat/assets/models/catalog.json; do
  [ -e "$root/$f" ] || { echo "kvchat: the package lacks $f" >&2; exit 1; }
done

"$root/usr/bin/kvchat-cli" --version
"$root/usr/bin/kvchat" --version
out=$(KVCHAT_DATA_DIR="$root/data" KVCHAT_ASSET_DIR= "$root/usr/bin/kvchat-cli" generate \
      -m "$model" -p "Once upon a time" -n 24 --temp 0 -q)
echo "kvchat: generated: $out"
[ -n "$out" ] || { echo "kvchat: the installed kvchat-cli generated nothing" >&2; exit 1; }
echo "kvchat: install test passed"
