#!/usr/bin/env bash
# kvchat against llama.cpp on the CPU, side by side, every table of BENCHMARKS.md's
# "kvchat and llama.cpp side by side" section: prefill and decode (TinyLlama shape in Q4_0,
# Q8_0 and Q4_K_M; Llama 3.2 1B, Qwen3 1.7B and Gemma 3 1B shapes; Llama 3.2 3B and Mistral
# 7B shapes), decode at 4K and 16K tokens of context with F16 / 8-bit / 4-bit KV, and 1-8
# conversations at once. Makes the model files it needs with kvchat-cli mkmodel (kept in
# COMPARE_WORK, about 27 GB for every section), runs both engines alternated in ROUNDS rounds
# (contexts deeper than 8K in one round) and prints the tables in Markdown on stdout (progress
# on stderr). Run it with the machine otherwise idle. On 2 cores: about an hour with
# DEPTHS=4096, model files included; the 16K depth adds about two hours (llama.cpp refills a
# 16K context for each of its three KV formats).
#   usage: bench/compare.sh LLAMA_CPP_BIN_DIR [--sections decode,archs,gemma,long,parallel,big]
#                                              [--rounds N] [--depths 4096,16384] [--widths 1,2,4,8]
#                                              [--kv f16,int8,int4]
#   environment: COMPARE_WORK (/tmp/kvchat-compare), ROUNDS (3), SECTIONS, DEPTHS, WIDTHS, KV
# Needs the release build (cmake --preset release && cmake --build --preset release) and python3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
exec python3 "$root/bench/compare.py" "$@"
