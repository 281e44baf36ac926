#!/usr/bin/env bash
# Regenerates tests/data/references from llama.cpp: run by a developer, never by the tests.
#   usage: LLAMA_CPP=DIR tests/data/make-references.sh [BUILD_DIR]   (default build/release)
#   ONLY="NAME..." (synthetic models' names): regenerate only those models' references and
#   their SHA256SUMS lines, leaving every other file as it is.
# DIR is a llama.cpp build whose bin/ holds llama-dump-logits (source: llama-dump-logits.cpp
# here), llama-server, llama-quantize and test-tokenizer-0. BUILD_DIR is a kvchat build
# (kvchat-cli, tests/kvc_gguf_slice). Needs python3 (standard library only) and curl.
#
# What it writes, and why each is what the tests compare with:
#   SHA256SUMS                    the synthetic models' hashes (mkmodel is deterministic)
#   <model>.reference.txt         prompt ids (llama.cpp's tokenizer, BOS added), greedy ids and text
#                                 (the llama3 / qwen3 / phi3 / smollm3 models: a 486-token prompt from
#                                 assets/demo/corpus.txt; llama-dump-logits runs them with a 512-token context;
#                                 the gemma2 / gemma3 / gpt-oss / deepseek2 / lfm2 ones: its first 200 tokens or so,
#                                 past their windows of 64 and 32)
#   <model>.logits.f16            logits at the prompt positions its reference.txt's "logit_rows:"
#                                 line lists (every one, or every 3rd / 4th and the last), float16
#   stories260K.reference.logits.f32   the same for stories260K in float32 (small: 5 x 512)
#   llama-quantize-<type>.slice.gguf   the first 16 rows of every tensor of tiny-gqa-f16
#                                 quantized by llama-quantize (its bytes, not ours)
#   llama-quantize-w320-<type>.slice.gguf   the same for tiny-w320-f16 (its types: the fallbacks)
#   mxfp4-llama.bin               llama.cpp's MXFP4 dequantization and reference quantization of
#                                 pseudo-random blocks (mxfp4-reference.c here, linked against its
#                                 libggml-base; needs a C compiler)
# The vocabularies' .inp/.out cases are llama.cpp's own files (but Gemma's .out, which this
# script writes with llama-tokenize); it checks that llama.cpp's test-tokenizer-0 passes them.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build/release}" && pwd)
: "${LLAMA_CPP:?set LLAMA_CPP to a llama.cpp build folder (with bin/llama-dump-logits, llama-server, llama-quantize)}"
bin=$LLAMA_CPP/bin
data=$root/tests/data
refs=$data/references
cli=$build/app/kvchat-cli
slice=$build/tests/kvc_gguf_slice
tools=("$bin/llama-dump-logits" "$bin/llama-server" "$cli")
[ -n "${ONLY:-}" ] || tools+=("$bin/llama-quantize" "$bin/test-tokenizer-0" "$bin/llama-tokenize" "$slice")
for tool in "${tools[@]}"; do
  [ -x "$tool" ] || { echo "missing: $tool" >&2; exit 1; }
done

work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$refs"

synthetic_prompt="The quick brown fox jumps over the lazy dog. Memory tiers keep what matters."
# The architecture models (stories260K's vocabulary): 486 tokens, past the llama3 factors' original context.
long_prompt=$(head -c 900 "$root/assets/demo/corpus.txt" | tr '\n' ' ')
# The gemma models (window 64): 203 tokens.
gemma_prompt=$(head -c 380 "$root/assets/demo/corpus.txt" | tr '\n' ' ')
stories_prompt="Once upon a time"

# f32 logits file (n_rows x n_vocab) -> f16 file of every STRIDE-th row and the last one (IEEE
# half, round to nearest even: Python's struct 'e'); prints the rows kept as a "logit_rows:" line
# (none when STRIDE is 1).
# Positions between the kept ones test nothing different (each row is the same computation at
# another position), and the 32,000-wide rows are most of the folder's size.
to_f16() {
  python3 - "$1" "$2" "$3" "$4" <<'EOF'
import array, struct, sys
src, dst, n_rows, stride = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
v = array.array('f')
with open(src, 'rb') as f:
    v.frombytes(f.read())
n_vocab = len(v) // n_rows
assert n_vocab * n_rows == len(v), "logits file size is not n_rows x n_vocab"
rows = sorted(set(range(0, n_rows, stride)) | {n_rows - 1})
with open(dst, 'wb') as f:
    for r in rows:
        f.write(struct.pack('<%de' % n_vocab, *v[r * n_vocab:(r + 1) * n_vocab]))
if stride > 1:  # every row: no list (the tests take every prompt position then)
    print("logit_rows: " + " ".join(map(str, rows)))
EOF
}

# Greedy continuation of N tokens from llama-server (ids and text), as "greedy:" and "text:" lines.
greedy() {
  local model=$1 prompt=$2 n=$3 port=18734
  "$bin/llama-server" -m "$model" --port $port -t 2 -c 512 -np 1 >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do curl -sf "localhost:$port/health" >/dev/null 2>&1 && break; sleep 0.2; done
  # Random models sometimes emit text the server's output parser rejects (an HTTP 500):
  # their continuations are for information only, so that is noted, not fatal.
  curl -s "localhost:$port/completion" -d "$(python3 -c 'import json,sys; print(json.dumps({
      "prompt": sys.argv[1], "n_predict": int(sys.argv[2]), "temperature": 0, "top_k": 1,
      "return_tokens": True, "ignore_eos": True, "cache_prompt": False}))' "$prompt" "$n")" |
    python3 -c 'import json,sys; d=json.load(sys.stdin)
if "tokens" in d:
    print("greedy: " + " ".join(map(str, d["tokens"])))
    print("text: " + d["content"])
else:
    print("greedy: (llama-server gave none: " + d.get("error", {}).get("message", "?") + ")")'
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

# prompt ids, greedy ids and text, logits: one model.
reference() {
  local model=$1 name=$2 prompt=$3 n_greedy=$4 logits=$5
  "$bin/llama-dump-logits" -m "$model" -p "$prompt" -o "$work/$name.f32" --ids "$work/$name.ids" -t 2 2>"$work/dump.log" ||
    { cat "$work/dump.log" >&2; exit 1; }
  {
    echo "prompt: $(cat "$work/$name.ids")"
    greedy "$model" "$prompt" "$n_greedy"
  } >"$refs/$name.reference.txt"
  local n_rows; n_rows=$(wc -w <"$work/$name.ids")
  case $logits in
    f32) cp "$work/$name.f32" "$refs/$name.reference.logits.f32" ;;
    f16-every-*) to_f16 "$work/$name.f32" "$refs/$name.logits.f16" "$n_rows" "${logits#f16-every-}" >>"$refs/$name.reference.txt" ;;
  esac
  echo "$name: $n_rows prompt tokens, logits as $logits"
}

echo "== synthetic models (tests/data/synthetic-models.sh)"
# shellcheck disable=SC2086  # ONLY is a list of names
"$data/synthetic-models.sh" "$cli" "$work/models" ${ONLY:-}
if [ -n "${ONLY:-}" ]; then  # replace (or add) only these models' hash lines
  (cd "$work/models" && sha256sum -- *.gguf) >"$work/new.sums"
  { grep -v -F -f <(awk '{print $2}' "$work/new.sums") "$refs/SHA256SUMS" || true; cat "$work/new.sums"; } |
    sort -k2 >"$work/all.sums"
  mv "$work/all.sums" "$refs/SHA256SUMS"
else
  (cd "$work/models" && sha256sum -- *.gguf) >"$refs/SHA256SUMS"
fi
for m in "$work"/models/*.gguf; do
  name=$(basename "$m" .gguf)
  case $name in
    # 203 positions of 512 columns: every 4th row and the last.
    tiny-gemma* | tiny-gpt-oss-* | tiny-deepseek2-* | tiny-lfm2-*) reference "$m" "$name" "$gemma_prompt" 16 f16-every-4 ;;
    # 486 positions of 512 columns: every 4th row. 20 positions of 32,000: every 3rd.
    tiny-llama3-* | tiny-qwen3-* | tiny-phi3-* | tiny-smollm3-* | tiny-qwen2-f16) reference "$m" "$name" "$long_prompt" 16 f16-every-4 ;;
    tiny-q-* | tiny-w320-* | tiny-qwen3moe-*) reference "$m" "$name" "$synthetic_prompt" 16 f16-every-1 ;;
    *) reference "$m" "$name" "$synthetic_prompt" 16 f16-every-3 ;;
  esac
done

if [ -n "${ONLY:-}" ]; then du -ch "$refs"/* | tail -1; exit 0; fi

echo "== stories260K"
reference "$data/models/stories260K.gguf" stories260K "$stories_prompt" 100 f32

echo "== llama-quantize's bytes for tiny-gqa-f16 and tiny-w320-f16"
for type in q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl q2_k q3_k_m q4_k_m q5_k_m q6_k; do
  "$bin/llama-quantize" "$work/models/tiny-gqa-f16.gguf" "$work/llama-$type.gguf" "${type^^}" 2 >"$work/quantize.log" 2>&1 ||
    { cat "$work/quantize.log" >&2; exit 1; }
  "$slice" "$work/llama-$type.gguf" "$refs/llama-quantize-$type.slice.gguf" 16
done
# The 320-wide model: llama.cpp's fallbacks for rows K-quants cannot hold.
for type in iq4_nl q2_k q3_k_m q4_k_m q5_k_m q6_k; do
  "$bin/llama-quantize" "$work/models/tiny-w320-f16.gguf" "$work/llama-w320-$type.gguf" "${type^^}" 2 >"$work/quantize.log" 2>&1 ||
    { cat "$work/quantize.log" >&2; exit 1; }
  "$slice" "$work/llama-w320-$type.gguf" "$refs/llama-quantize-w320-$type.slice.gguf" 16
done

echo "== llama.cpp's MXFP4 (de)quantization (mxfp4-reference.c)"
cc -O2 -o "$work/mxfp4-reference" "$data/mxfp4-reference.c" -L"$bin" -lggml-base -Wl,-rpath,"$bin" -lm
"$work/mxfp4-reference" "$refs/mxfp4-llama.bin"

echo "== tokenizer cases (llama.cpp's test-tokenizer-0)"
"$data/test-vocabularies.sh" "$cli" "$work/vocab" || exit 1  # the xz ones unpacked, the npm ones converted
# llama.cpp ships no Gemma cases: their .out is what its llama-tokenize gives for each text of
# the .inp on the converted vocabularies: no BOS, control tokens as text (.special.out: parsed).
for g in gemma2 gemma3; do
  for kind in "" .special; do
    python3 - "$bin/llama-tokenize" "$work/vocab/ggml-vocab-$g.gguf" "$data/vocab/ggml-vocab-$g.gguf$kind.inp" \
      "$data/vocab/ggml-vocab-$g.gguf$kind.out" "$kind" <<'PY'
import subprocess, sys, tempfile
tokenize, vocab, inp, out, kind = sys.argv[1:]
special = [] if kind == ".special" else ["--no-parse-special"]
texts = open(inp, encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
lines = []
with tempfile.NamedTemporaryFile("w", encoding="utf-8") as f:
    for t in texts:
        f.seek(0); f.truncate(); f.write(t); f.flush()
        r = subprocess.run([tokenize, "-m", vocab, "-f", f.name, "--ids", "--no-bos", "--log-disable"] + special,
                           capture_output=True, text=True, check=True).stdout.split("\n")
        ids = [l for l in r if l.startswith("[")][-1].strip("[]").replace(",", " ").split()
        lines.append("".join(" " + i for i in ids))
open(out, "w").write("\n".join(lines) + "\n")
PY
  done
done
for v in "$data"/vocab/*.gguf "$work"/vocab/*.gguf; do
  [ -f "$data/vocab/$(basename "$v").inp" ] || continue  # gpt-neox has no cases
  cp "$data/vocab/$(basename "$v").inp" "$data/vocab/$(basename "$v").out" "$work/" 2>/dev/null || true
  case=$work/$(basename "$v")
  [ "$v" = "$case" ] || cp "$v" "$case"
  "$bin/test-tokenizer-0" "$case" >"$work/tok.log" 2>&1 || { tail -20 "$work/tok.log" >&2; exit 1; }
  echo "$(basename "$v"): $(wc -l <"$data/vocab/$(basename "$v").out") cases pass in llama.cpp"
done

du -ch "$refs"/* | tail -1
