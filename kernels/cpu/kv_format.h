// Element formats of the KV cache rows (F16, INT8, INT4 with one scale per group of 32, 16 or 8
// elements, their Hadamard-rotated variants, and INT4 K with per-channel scales over a block)
// and the conversion of one row between float and its stored bytes.
#pragma once

#include <cstdint>

namespace kvc::kernels {

// One enum for the KV element format everywhere: the kernels say q8 / q4, the cache and the
// user-facing code int8 / int4 (kv::KvFormat is this type), for the same values. q8h / q4h
// (int8h / int4h) store each group rotated by a Walsh-Hadamard transform (below) in the bytes
// of q8 / q4. q4c (int4c) is a K format with one scale and minimum per channel over a block's
// B positions (below); as a V format it stores q4h rows. The values are part of the KV
// fingerprint: never renumber them.
enum class KvType : uint8_t {
  f16 = 0,
  q8 = 1,
  q4 = 2,
  q8h = 3,
  q4h = 4,
  q4c = 5,
  int8 = q8,
  int4 = q4,
  int8h = q8h,
  int4h = q4h,
  int4c = q4c,
};

// Rotated formats: a group x of g elements is stored as Q(H_g x), H_g the normalized
// Walsh-Hadamard matrix of order g (entries +-1/sqrt(g); symmetric, orthogonal, its own
// inverse). An outlier channel (a key channel 10-30x the others, as trained models have) then
// spreads over the g values of its group instead of taking the group's whole scale, so the
// small values keep their precision. Attention reads the rotated bytes directly: scores use
// q . k = (H q) . (H k), so q is rotated once per head instead of every k un-rotated, and the
// weighted sum of rotated V rows is rotated back once at the end (H sum w v = sum w H v).
//
// q4h K is also anchored: a block keeps the first K row it holds of each layer in F16, its
// anchor a, and every K row of the block stores x - a (kv_block.h). Trained models' key
// channels carry large offsets that change slowly with position (stories260K: channel means
// of 10-18 against a spread of 2-5); the difference to the anchor leaves the spread. Attention
// adds q . a to the block's scores. q4h K groups take the scale that minimises their squared
// error, not the plain Q4 rule (kv_store; encode_row uses the plain rule, as V does: the
// fitted scale shrinks values a little on average, and V's weighted sums keep that bias
// where its random errors average out; measured on a synthetic model, V KL 0.00063 fitted
// against 0.00039 plain).
//
// q4c K is quantized per channel (as KIVI does) instead of per position: the B K rows a block
// holds of one layer share, for each channel c (one element of the row), an F16 minimum m_c and
// scale d_c = (max_c - m_c) / 15 over those B rows, and row t stores n_tc in [0, 15] with
// x_tc = m_c + d_c n_tc. Trained models' key outliers sit in fixed channels, so a channel's
// grid fits its own range and no outlier widens another channel's. The grid needs all B rows:
// a block's K is encoded (sealed, kv_block.h) when its last row is written; until then the
// rows live in F16 in a holding area of the sequence (the partly filled tail block, which is
// private and never leaves T0). Attention reads sealed K as q . x_t = q . m + (q * d) . n_t:
// q is scaled by d once per block, and the nibbles need no per-position scale. q4c V rows are
// q4h rows (rotated, plain scale), so `--kv-type int4c` is int4c K with int4h V.
// True when K rows of type t are anchored (V rows never are).
constexpr bool kv_type_anchored(KvType t) { return t == KvType::q4h; }
// True when K of type t is quantized per channel over a block (sealed; V never is).
constexpr bool kv_k_per_channel(KvType t) { return t == KvType::q4c; }
// Rows encoded by encode_row are rotated (every row of q8h / q4h, the V rows of q4c).
constexpr bool kv_type_rotated(KvType t) { return t == KvType::q8h || t == KvType::q4h || t == KvType::q4c; }
// The type whose row bytes a format uses: q8 for q8h, q4 for q4h and q4c (its V rows), the type
// itself otherwise.
constexpr KvType kv_storage_type(KvType t) {
  return t == KvType::q8h ? KvType::q8 : t == KvType::q4h || t == KvType::q4c ? KvType::q4 : t;
}
constexpr bool kv_type_quantized(KvType t) { return t != KvType::f16; }
constexpr bool kv_type_valid(KvType t) { return static_cast<uint8_t>(t) <= static_cast<uint8_t>(KvType::q4c); }

// x := H_g x for each of the n / g groups of x (g a valid group dividing n): the normalized
// fast Walsh-Hadamard transform, log2(g) butterfly stages. Applying it twice gives x back (up
// to float rounding). The same scalar code on every ISA, so encoded bytes do not depend on it.
void kv_rotate_groups(float* x, int64_t n, int group);

// Elements of one head at one position that share a scale (g below): the largest of 32, 16,
// 8 that divides the head size, so a group never straddles two heads. The fast SIMD kernels
// are written for g = 32; smaller groups (head sizes such as 8, 48, 80) are encoded by the
// scalar loops and attended by simpler AVX2 loops.
constexpr int k_kv_group_max = 32;

constexpr bool kv_group_valid(int group) { return group == 32 || group == 16 || group == 8; }

// The group for a head size, or 0 when no group fits (only F16 can store such heads).
constexpr int kv_group_for_head_dim(int64_t head_dim) {
  if (head_dim <= 0) return 0;
  if (head_dim % 32 == 0) return 32;
  if (head_dim % 16 == 0) return 16;
  if (head_dim % 8 == 0) return 8;
  return 0;
}

// A row is the K (or V) of one layer at one position: n_kv_head * head_dim elements, head h
// in elements [h * head_dim, (h + 1) * head_dim). Quantized rows are a sequence of groups of
// g consecutive elements, so head h's groups are contiguous and heads follow in order:
//
//   F16 row:  | e0 e1 ... e(n-1) |                      2 bytes each, IEEE half (no group)
//   Q8 group: | d:f16 | q0 q1 ... q(g-1) |              2 + g bytes, q int8 in [-127, 127]
//             x_i = d * q_i, d = amax / 127 (amax = max |x_i| of the group)
//   Q4 group: | d:f16 | b0 b1 ... b(g/2-1) |            2 + g / 2 bytes
//             b_j = n_j | n_(j+g/2) << 4  (element j in the low nibble, j + g/2 in the high)
//             x_i = d * (n_i - 8), n_i in [0, 15], d = -m / 8 with m the group's value of
//             largest magnitude (the positive one on a tie), so m itself is exact (n = 0)
//
//   row (Q8, g 32, head_dim 64, 2 heads) = | h0 g0 | h0 g1 | h1 g0 | h1 g1 |   4 x 34 bytes
//   row (Q4, g 8, head_dim 8, 4 heads)   = | h0 | h1 | h2 | h3 |                4 x 6 bytes
//
// Scale overhead per element is 2 / g bytes: 0.0625 (g 32), 0.125 (g 16), 0.25 (g 8).
// The Q4 rule (like GGUF's Q4_0) spends all 16 levels; over Gaussian groups of 32 its RMS
// error is 11 % lower than the symmetric d = amax / 7 rule (measured: 0.086 vs 0.097 of the
// RMS value), at the price of a worst case of d instead of d / 2 for values of the sign
// opposite to m with |x| > 7.5 |d|.
// Scales are rounded to F16 before quantizing, and q = round-to-nearest-even(x / d_f16),
// clamped: for Q8 |x - x'| <= |d| / 2 always; for Q4 |x - x'| <= |d| / 2 except the case above.

// Bytes of one group of `group` elements (F16: 2 per element, any group).
constexpr int64_t kv_group_bytes(KvType type, int group) {
  switch (type) {
    case KvType::f16: return 2 * group;
    case KvType::q8:
    case KvType::q8h: return 2 + group;
    case KvType::q4:
    case KvType::q4h:
    case KvType::q4c: return 2 + group / 2;  // q4c: its V rows (q4h)
  }
  return 0;
}

// Bytes of n_elems elements; for q8 and q4 group is valid and divides n_elems (F16 ignores it).
constexpr int64_t row_bytes(KvType type, int group, int64_t n_elems) {
  return type == KvType::f16 ? 2 * n_elems : n_elems / group * kv_group_bytes(type, group);
}

const char* kv_type_name(KvType type);

// q4c K: a row of a sealed block is n / 2 bytes of nibbles, head after head, each head in chunks
// of `group` elements packed like a Q4 group without its scale (element j in the low nibble of
// byte j, j + group / 2 in the high one); the block's per-channel minima and scales are F16
// rows before its K rows (kv_block.h).
constexpr int64_t kv_k_per_channel_row_bytes(int64_t n_elems) { return n_elems / 2; }

// out: row_bytes(type, group, n) bytes.  For q8h / q4h the groups are rotated first (and
// decode_row rotates them back).  For quantized types, group must be valid and divide n (a bug
// otherwise); F16 ignores group. Non-finite inputs produce unspecified (but in-bounds) bytes.
void encode_row(KvType type, int group, const float* x, int64_t n, uint8_t* out);
// out: n floats.
void decode_row(KvType type, int group, const uint8_t* in, int64_t n, float* out);

// The scalar references; encode_row produces the same bytes on every ISA.
void encode_row_reference(KvType type, int group, const float* x, int64_t n, uint8_t* out);
void decode_row_reference(KvType type, int group, const uint8_t* in, int64_t n, float* out);

}  // namespace kvc::kernels
