#!/usr/bin/env bash
# The synthetic test models, written by kvchat-cli mkmodel: run by CTest's test_models fixture
# before the tests that load them, and by make-references.sh before it runs llama.cpp on them.
# Every file depends only on these options (not on threads or the CPU): references/SHA256SUMS
# records their hashes, and the test_models_hashes test checks them.
#   usage: tests/data/synthetic-models.sh KVCHAT_CLI OUT_DIR [NAME...]   (no NAME: all of them)
set -euo pipefail

if [ $# -lt 2 ]; then echo "usage: $0 KVCHAT_CLI OUT_DIR [NAME...]" >&2; exit 2; fi
cli=$1 out=$2
shift 2
data=$(cd "$(dirname "$0")" && pwd)
spm=$data/vocab/ggml-vocab-llama-spm.gguf  # the Llama 2 SentencePiece vocabulary, 32,000 pieces
stories=$data/models/stories260K.gguf      # stories260K's 512 pieces: small references for long prompts

# name, then mkmodel options. Matrices are near-normal with std 0.02, norms near 1; attn_q and
# attn_k are drawn with std 0.08 (0.1 for the F16 architecture models), so attention is sharp
# and a position error shows in the logits; the quantized architecture models keep it soft
# (0.02), where two quantized runs are not chaotic. The llama3 / qwen3 models take stories260K's
# vocabulary and a 486-token prompt (past the llama3 factors' original context of 64).
models=(
  "tiny-gqa-f16     --type f16    --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-gqa-q8_0    --type q8_0   --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-gqa-q4_0    --type q4_0   --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-gqa-q4_k_m  --type q4_k_m --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-mqa-q8_0    --type q8_0   --dim 256 --layers 2 --heads 4 --kv-heads 1 --ffn 512 --tied --rope-base 500000"
  "tiny-qwen2-q8_0  --type q8_0   --dim 256 --layers 2 --heads 8 --kv-heads 2 --ffn 512 --arch qwen2 --tied --rope-base 1000000"
  "tiny-qwen2-f16   --type f16  --qk-std 0.1  --vocab-from=$stories --dim 256 --layers 2 --heads 8 --kv-heads 2 --ffn 512 --arch qwen2 --rope-base 1000000 --bias-std 0.5"
  "tiny-llama3-f16  --type f16  --qk-std 0.1  --vocab-from=$stories --dim 256 --layers 2 --heads 8 --kv-heads 2 --ffn 512 --arch llama3 --rope-scale-factor 8 --rope-orig-ctx 64"
  "tiny-llama3-q8_0 --type q8_0 --qk-std 0.02 --vocab-from=$stories --dim 256 --layers 2 --heads 8 --kv-heads 2 --ffn 512 --arch llama3 --rope-scale-factor 8 --rope-orig-ctx 64"
  "tiny-qwen3-f16   --type f16  --qk-std 0.1  --vocab-from=$stories --dim 256 --layers 2 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch qwen3 --rope-base 1000000"
  "tiny-qwen3-q8_0  --type q8_0 --qk-std 0.02 --vocab-from=$stories --dim 256 --layers 2 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch qwen3 --rope-base 1000000"
  # phi3: fused tensors and LongRoPE. "long": the 512-token context passes the original 64, so
  # the long factors and attn_factor 1.354 apply; its window of 32 is ignored, as llama.cpp does.
  # "short": an original context of 1024, the short factors.
  "tiny-phi3-long-f16   --type f16  --qk-std 0.1  --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 512 --arch phi3 --rope-scale-factor 8 --rope-orig-ctx 64 --window 32"
  "tiny-phi3-long-q8_0  --type q8_0 --qk-std 0.02 --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 512 --arch phi3 --rope-scale-factor 8 --rope-orig-ctx 64 --window 32"
  "tiny-phi3-short-f16  --type f16  --qk-std 0.1  --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 512 --arch phi3 --rope-orig-ctx 1024"
  # Every other weight type, on stories260K's vocabulary (references of 512 logits a row):
  # tiny-q has tiny-gqa's shape, so each mix holds its own type (Q2_K with Q3_K / Q4_K /
  # Q6_K, Q3_K_M with Q4_K / Q5_K, ...); tiny-w320 is 320 wide (MHA, 5 heads of 64, tied
  # output), rows that K-quants cannot hold: the mixes fall back to Q4_0 / Q5_0 / Q5_1 / Q8_0
  # there and keep their K-quants in ffn_down (768 columns).
  "tiny-q-f16      --type f16    --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-q-q4_1     --type q4_1   --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-q-q5_0     --type q5_0   --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-q-q5_1     --type q5_1   --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-q-iq4_nl   --type iq4_nl --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-q-q2_k     --type q2_k   --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-q-q3_k_m   --type q3_k_m --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-q-q5_k_m   --type q5_k_m --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-q-q6_k     --type q6_k   --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 768"
  "tiny-w320-f16    --type f16    --vocab-from=$stories --dim 320 --layers 4 --heads 5 --kv-heads 5 --ffn 768 --tied"
  "tiny-w320-q2_k   --type q2_k   --vocab-from=$stories --dim 320 --layers 4 --heads 5 --kv-heads 5 --ffn 768 --tied"
  "tiny-w320-q3_k_m --type q3_k_m --vocab-from=$stories --dim 320 --layers 4 --heads 5 --kv-heads 5 --ffn 768 --tied"
  "tiny-w320-q4_k_m --type q4_k_m --vocab-from=$stories --dim 320 --layers 4 --heads 5 --kv-heads 5 --ffn 768 --tied"
  "tiny-w320-q5_k_m --type q5_k_m --vocab-from=$stories --dim 320 --layers 4 --heads 5 --kv-heads 5 --ffn 768 --tied"
  # smollm3: 4 layers, the fourth without rope.
  "tiny-smollm3-f16     --type f16  --qk-std 0.1  --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 512 --arch smollm3"
  "tiny-smollm3-q8_0    --type q8_0 --qk-std 0.02 --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --ffn 512 --arch smollm3"
  # gemma2 / gemma3: local layers with a window of 64 (a 200-token prompt crosses it), heads of
  # 64 (4 x 64 > 256 wide, like the real ones). gemma2: 4 layers, local and global alternating,
  # caps of 10 (scores) and 1 (logits) so both bend what they cap. gemma3: 6 layers, five
  # local (rope base 10000) then one global (base 1e6, linear scaling 8); its Q/K norms fix the
  # scores' size, so the F16 one's norm weights near 1.8 make attention sharp (near 1: soft).
  "tiny-gemma2-f16      --type f16  --qk-std 0.1  --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch gemma2 --window 64 --attn-softcap 10 --final-softcap 1"
  "tiny-gemma2-q8_0     --type q8_0 --qk-std 0.02 --vocab-from=$stories --dim 256 --layers 4 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch gemma2 --window 64 --attn-softcap 10 --final-softcap 1"
  "tiny-gemma3-f16      --type f16  --qk-norm-mean 1.8 --vocab-from=$stories --dim 256 --layers 6 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch gemma3 --window 64 --rope-base 1000000 --rope-scale-factor 8"
  "tiny-gemma3-q8_0     --type q8_0 --qk-std 0.02 --vocab-from=$stories --dim 256 --layers 6 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch gemma3 --window 64 --rope-base 1000000 --rope-scale-factor 8"
  # qwen3moe: qwen3's attention (heads of 64, Q/K norms), every FFN 8 experts of 128, 2 per
  # token, an F32 router of std 0.2 (logits of std ~3: a token's experts and their weights differ
  # clearly). F16: experts of std 0.05, so they carry most of each layer's output and a wrong
  # choice or weight moves the logits far; Q8_0 / Q4_0 keep 0.02, where a quantized run is not
  # chaotic. e128: Qwen3-30B-A3B's routing, 128 experts of 64, 8 per token.
  "tiny-qwen3moe-f16    --type f16  --vocab-from=$stories --dim 256 --layers 2 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch qwen3moe --experts 8 --experts-used 2 --expert-ffn 128 --router-std 0.2 --expert-std 0.05"
  "tiny-qwen3moe-q8_0   --type q8_0 --vocab-from=$stories --dim 256 --layers 2 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch qwen3moe --experts 8 --experts-used 2 --expert-ffn 128 --router-std 0.2"
  "tiny-qwen3moe-q4_0   --type q4_0 --vocab-from=$stories --dim 256 --layers 2 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch qwen3moe --experts 8 --experts-used 2 --expert-ffn 128 --router-std 0.2"
  # gpt-oss: Q/K/V/output biases, per-head sinks (std 1), 2 layers, local (window 32) and global,
  # YaRN 32x over 4096 (gpt-oss's), heads of 64 (8 x 64 > 256 wide, as the real one), every FFN
  # 8 biased experts of 128, 2 per token, behind a biased router (std 0.2). F16: experts of std
  # 0.3, so gates and ups often pass gpt-oss's clamp at 7; mxfp4: llama.cpp's MXFP4_MOE mix
  # (experts MXFP4, the rest Q8_0), soft attention as the other quantized files. Seed 3: a token
  # whose 2nd and 3rd experts nearly tie may pick another expert here than in llama.cpp (seed 1
  # has such a row in each file, a miss of 0.3); seed 3 has none on either side.
  "tiny-gpt-oss-f16   --seed 3 --type f16       --vocab-from=$stories --dim 256 --layers 2 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch gpt-oss --experts 8 --experts-used 2 --expert-ffn 128 --router-std 0.2 --expert-std 0.3 --window 32 --rope-base 150000 --rope-scale-factor 32 --rope-orig-ctx 4096"
  "tiny-gpt-oss-mxfp4 --seed 3 --type mxfp4_moe --qk-std 0.02 --vocab-from=$stories --dim 256 --layers 2 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch gpt-oss --experts 8 --experts-used 2 --expert-ffn 128 --router-std 0.2 --window 32 --rope-base 150000 --rope-scale-factor 32 --rope-orig-ctx 4096"
  # deepseek2 (multi-head latent attention): 3 layers, the first dense, then 8 experts of 128, 2
  # per token, 1 shared; 4 heads whose queries are 64 + 32 rope values, a latent of 128 + 32 a
  # token, values of 64. "f16": no Q latent, softmax routing, DeepSeek's YaRN 8x over 128 with
  # yarn_log_multiplier 0.0707 (its mscale moves every score). "qlora": a Q latent of 96,
  # sigmoid gating with a selection bias (std 0.5), 4 groups of which 2 are used, normalised
  # weights scaled 2.5, rope base 1e6 without scaling. Seeds 5 and 3: no row whose experts nearly
  # tie (seeds 1, 2 and 6 have one such row, a miss of 0.1-1.2 on that row alone).
  "tiny-deepseek2-f16       --seed 5 --type f16 --qk-std 0.1 --vocab-from=$stories --arch deepseek2 --dim 256 --layers 3 --heads 4 --kv-heads 1 --ffn 512 --kv-lora-rank 128 --rope-dim 32 --mla-nope 64 --mla-value 64 --dense-layers 1 --experts 8 --experts-used 2 --expert-ffn 128 --shared-experts 1 --router-std 0.2 --expert-std 0.05 --rope-scale-factor 8 --rope-orig-ctx 128 --yarn-log-mul 0.0707"
  "tiny-deepseek2-qlora-f16 --seed 3 --type f16 --qk-std 0.1 --vocab-from=$stories --arch deepseek2 --dim 256 --layers 3 --heads 4 --kv-heads 1 --ffn 512 --kv-lora-rank 128 --q-lora-rank 96 --rope-dim 32 --mla-nope 64 --mla-value 64 --dense-layers 1 --experts 8 --experts-used 2 --expert-ffn 128 --shared-experts 1 --router-std 0.2 --expert-std 0.05 --gating 2 --selection-bias-std 0.5 --expert-weights-norm --expert-weights-scale 2.5 --expert-groups 4 --expert-groups-used 2 --rope-base 1000000 --rope-scale-factor 1"
  # GLM-4.7-Flash's file layout: the qlora model with one MTP block after its 3 layers (block_count 4,
  # nextn_predict_layers 1), which llama.cpp and kvchat load and do not run.
  "tiny-deepseek2-mtp-f16   --seed 3 --type f16 --qk-std 0.1 --vocab-from=$stories --arch deepseek2 --dim 256 --layers 3 --heads 4 --kv-heads 1 --ffn 512 --kv-lora-rank 128 --q-lora-rank 96 --rope-dim 32 --mla-nope 64 --mla-value 64 --dense-layers 1 --experts 8 --experts-used 2 --expert-ffn 128 --shared-experts 1 --router-std 0.2 --expert-std 0.05 --gating 2 --selection-bias-std 0.5 --expert-weights-norm --expert-weights-scale 2.5 --expert-groups 4 --expert-groups-used 2 --rope-base 1000000 --rope-scale-factor 1 --nextn-layers 1"
  # lfm2: 6 layers, short convolutions of 3 taps (F32, std 0.3) at 0, 1, 3, 4 and GQA attention
  # with Q/K norms at 2 and 5 (LFM2-1.2B's pattern cut short); 4 heads of 64, 2 KV heads.
  "tiny-lfm2-f16 --type f16 --qk-std 0.1 --vocab-from=$stories --arch lfm2 --dim 256 --layers 6 --heads 4 --kv-heads 2 --ffn 512 --rope-base 1000000"
  # gemma4 (E2B-like): 9 layers, two local (heads of 64, window 64, rope base 10000) to one global
  # (heads of 128, a quarter of their pairs rotating through rope_freqs, base 1e6); the last 3
  # layers (local, local, global) store no K/V and read layers 4 (local) and 5 (global); their FFN
  # is double-wide; per-layer embeddings of 64; the global layers have no attn_v (V is K's
  # projection); MQA. The Q/K norms fix the scores' size and gemma4 does not scale them: sharp.
  "tiny-gemma4-f16      --type f16  --vocab-from=$stories --dim 256 --layers 9 --heads 4 --kv-heads 1 --head-dim 128 --head-dim-swa 64 --ffn 512 --arch gemma4 --window 64 --swa-period 3 --shared-kv-layers 3 --per-layer-embd 64 --double-wide-ffn --k-eq-v --rope-base 1000000 --qk-norm-mean 0.5"
  "tiny-qwen3moe-e128-q4_0 --type q4_0 --vocab-from=$stories --dim 256 --layers 2 --heads 8 --kv-heads 2 --head-dim 64 --ffn 512 --arch qwen3moe --experts 128 --experts-used 8 --expert-ffn 64 --router-std 0.2"
)

mkdir -p "$out"
for m in "${models[@]}"; do
  read -r name opts <<<"$m"
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  # shellcheck disable=SC2086  # opts is a list of options
  defaults=()  # unless the entry says otherwise: seed 1, sharp attention, the Llama 2 vocabulary
  [[ " $opts " == *" --seed "* ]] || defaults+=(--seed 1)
  [[ " $opts " == *" --qk-std "* ]] || defaults+=(--qk-std 0.08)
  [[ " $opts " == *" --vocab-from="* ]] || defaults+=(--vocab-from="$spm")
  "$cli" mkmodel -q "${defaults[@]}" $opts -o "$out/$name.gguf"
done
