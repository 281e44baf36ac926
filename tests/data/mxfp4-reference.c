/* Writes llama.cpp's MXFP4 dequantization and reference quantization of pseudo-random blocks:
 * run by make-references.sh, linked against a llama.cpp build's libggml-base (its exported
 * dequantize_row_mxfp4 and quantize_row_mxfp4_ref), never by the tests.
 *   usage: mxfp4-reference OUT.bin
 * OUT.bin, little-endian:
 *   "KVMXFP4\0"
 *   u32 n_deq;  n_deq blocks of 17 bytes; their n_deq * 32 float32 values (llama.cpp's)
 *   u32 n_q;    n_q * 32 float32 inputs; llama.cpp's n_q blocks of 17 bytes for them
 * The dequantized blocks take every scale byte 0..255 once, with random nibbles. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void dequantize_row_mxfp4(const void* x, float* y, int64_t k);
void quantize_row_mxfp4_ref(const float* x, void* y, int64_t k);

enum { k_block_bytes = 17, k_deq = 256, k_q = 48 };

static uint64_t state = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void) { /* xorshift64* */
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return (uint32_t)((state * 0x2545F4914F6CDD1Dull) >> 32);
}
static float uniform(void) { return (float)(next_u32() >> 8) / 16777216.0f; } /* [0, 1) */

int main(int argc, char** argv) {
  static uint8_t blocks[k_deq * k_block_bytes], qblocks[k_q * k_block_bytes];
  static float values[k_deq * 32], inputs[k_q * 32];
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.bin\n", argv[0]);
    return 2;
  }
  for (int b = 0; b < k_deq; ++b) {
    uint8_t* blk = blocks + b * k_block_bytes;
    blk[0] = (uint8_t)b;
    for (int j = 1; j < k_block_bytes; ++j) blk[j] = (uint8_t)next_u32();
  }
  dequantize_row_mxfp4(blocks, values, (int64_t)k_deq * 32);
  /* Blocks of values at many magnitudes (2^-20 .. 2^20), some with exact ties between levels,
   * one all zero. */
  for (int b = 0; b < k_q; ++b) {
    const float mag = ldexpf(1.0f, (int)(next_u32() % 41) - 20);
    for (int j = 0; j < 32; ++j) {
      float v = (uniform() * 2.0f - 1.0f) * mag;
      if (b % 4 == 1 && j % 3 == 0) v = ((float)(next_u32() % 25) * 0.25f - 3.0f) * mag / 4.0f;
      inputs[b * 32 + j] = b == 7 ? 0.0f : v;
    }
  }
  quantize_row_mxfp4_ref(inputs, qblocks, (int64_t)k_q * 32);
  FILE* f = fopen(argv[1], "wb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  const uint32_t n_deq = k_deq, n_q = k_q;
  fwrite("KVMXFP4", 1, 8, f);
  fwrite(&n_deq, 4, 1, f);
  fwrite(blocks, 1, sizeof blocks, f);
  fwrite(values, 4, k_deq * 32, f);
  fwrite(&n_q, 4, 1, f);
  fwrite(inputs, 4, k_q * 32, f);
  fwrite(qblocks, 1, sizeof qblocks, f);
  return fclose(f) == 0 ? 0 : 1;
}
