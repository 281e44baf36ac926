#!/usr/bin/env bash
# The official `openai` and `@anthropic-ai/sdk` npm clients that tests/server drives kvchat-cli serve
# with, installed into OUT_DIR/node_modules by CTest's test_models fixture. package-lock.json pins
# openai 4.95.0, @anthropic-ai/sdk 0.71.2 and every one of their dependencies to an exact version and npm's sha512 of its tarball (npm ci
# refuses a tarball that does not match); tarballs are cached in ~/.cache/kvchat-test/npm.
#   usage: tests/server/fetch-openai-client.sh OUT_DIR
# Without node, npm or the registry, OUT_DIR/openai-missing.txt says why (the client tests then
# skip); KVCHAT_REQUIRE_NPM=1 makes that an error instead (CI).
set -euo pipefail

if [ $# -ne 1 ]; then echo "usage: $0 OUT_DIR" >&2; exit 2; fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
rm -f "$out/openai-missing.txt"

missing() {
  echo "$1" >"$out/openai-missing.txt"
  if [ "${KVCHAT_REQUIRE_NPM:-0}" = 1 ]; then echo "fetch-openai-client: $1" >&2; exit 1; fi
  echo "fetch-openai-client: $1; the openai client tests will be skipped" >&2
  exit 0
}

command -v node >/dev/null 2>&1 || missing "node is not installed (apt-get install nodejs npm), so the openai client was not fetched"
command -v npm >/dev/null 2>&1 || missing "npm is not installed (apt-get install npm), so the openai client was not fetched"

installed="$out/node_modules/.package-lock.json"
if [ -f "$installed" ] && [ "$installed" -nt "$here/package-lock.json" ] && [ -f "$out/node_modules/openai/version.js" ] &&
  [ -f "$out/node_modules/@anthropic-ai/sdk/version.js" ]; then
  exit 0  # already installed from this lock file
fi
cp "$here/package.json" "$here/package-lock.json" "$out/"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kvchat-test/npm"
mkdir -p "$cache"
(cd "$out" && npm ci --cache "$cache" --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error) \
  >"$out/npm-ci.log" 2>&1 || missing "npm ci of the pinned openai and anthropic clients failed: $(tail -n 1 "$out/npm-ci.log")"
version=$(cd "$out" && node -e "process.stdout.write(require('openai/version').VERSION)")
if [ "$version" != "4.95.0" ]; then
  echo "fetch-openai-client: installed openai $version, not the pinned 4.95.0" >&2
  exit 1
fi
version=$(cd "$out" && node -e "process.stdout.write(require('@anthropic-ai/sdk/version').VERSION)")
if [ "$version" != "0.71.2" ]; then
  echo "fetch-openai-client: installed @anthropic-ai/sdk $version, not the pinned 0.71.2" >&2
  exit 1
fi
