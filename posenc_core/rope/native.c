/* The native CPU kernel of posenc_core's apply_rope: rope_rotate, called through ctypes by
   native.py, which compiles this file on first use (see its docstring for what each kind
   computes and how the library is built and cached). Kinds: 0 float32, 1 float64, 2 bfloat16
   with bfloat16 tables, 3 float16 with float16 tables, 4 bfloat16 with float64 tables,
   5 float16 with float64 tables.

   Builds with or without OpenMP (-fopenmp defines _OPENMP; without it, one thread) and with or
   without the AVX-512 intrinsics (POSENC_NO_INTRINSICS turns them off); every configuration
   compiles cleanly with -Wall -Wextra -Werror -Wvla (tested). No variable-length arrays: every
   buffer is allocated on the heap, so any row width works. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#define MAX_DIMS 16
#define NT_MIN_BYTES (16 << 20)  /* streamed stores from 16 MB of output: beyond most caches */
#define PARALLEL_MIN_ELEMENTS 32768  /* below this, one thread: a team costs more than it saves */
/* Table elements per tile (see rope_rotate). An x of NT_MIN_BYTES or more streams from memory:
   128K, so that float32 rows of 128 run over 512 KB of each head at a time while the tile's
   table rows (1 MB as float, 2 MB as double, per thread) stay in the L2/L3 caches. A smaller x
   is served by the caches, where the runs do not matter and converting the table rows once for
   all heads does: 2048. -DPOSENC_TILE_ELEMENTS=n and -DPOSENC_SMALL_TILE_ELEMENTS=n override
   them (the tests build tiny tiles to cover tile edges with small inputs). */
#ifndef POSENC_TILE_ELEMENTS
#define POSENC_TILE_ELEMENTS 131072
#endif
#ifndef POSENC_SMALL_TILE_ELEMENTS
#define POSENC_SMALL_TILE_ELEMENTS 2048
#endif
#define INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- bit casts */

INLINE uint32_t bits32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
INLINE float float32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* bfloat16 -> float32: exact (the 16 high bits). */
INLINE float from_bf16(uint16_t h) { return float32((uint32_t)h << 16); }

/* float16 -> float32, exact: the 15 magnitude bits moved to float32's fields and scaled by
   2**112 (the exponent bias difference; also makes float16 subnormals normal), inf/NaN
   (exponent 31) mapped to float32's exponent 255, then the sign. (GCC 12 does not vectorise
   its own _Float16 conversions, so the integer versions are faster here.) */
INLINE float from_f16(uint16_t h) {
  uint32_t mag = (uint32_t)(h & 0x7fffu) << 13;
  uint32_t u = bits32(float32(mag) * 0x1p112f);
  u = ((h & 0x7c00u) == 0x7c00u) ? (mag | 0x7f800000u) : u;
  return float32(u | ((uint32_t)(h & 0x8000u) << 16));
}

/* float32 -> bfloat16, to nearest with ties to even: add 0x7FFF plus the kept last bit, keep
   the high 16 bits (inf stays inf, large finite values carry into inf); NaN -> 0x7FC0 as
   torch. */
INLINE uint16_t to_bf16(uint32_t u) {
  uint16_t r = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  return ((u & 0x7fffffffu) > 0x7f800000u) ? (uint16_t)0x7fc0u : r;
}

/* float32 -> float16, to nearest with ties to even. Normal results (|v| >= 2**-14): rebias
   the exponent and round away 13 bits as for bfloat16 (a carry moves into the exponent).
   Subnormal results: |v| + 0.5 rounds |v| to a multiple of 2**-24 (the ulp of 0.5), float16's
   subnormal grid, and its bits minus those of 0.5 count the steps (1024 steps is the smallest
   normal, encoded correctly). |v| >= 65520 (the midpoint above 65504, even side inf) -> inf;
   NaN -> 0x7E00 with the sign, as torch. */
INLINE uint16_t to_f16(uint32_t u) {
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  uint32_t n = a - (112u << 23);
  uint32_t normal = (n + 0xfffu + ((n >> 13) & 1u)) >> 13;
  uint32_t sub = bits32(float32(a) + 0.5f) - 0x3f000000u;
  uint32_t m = (a < 0x38800000u) ? sub : normal;
  m = (a >= 0x477ff000u) ? 0x7c00u : m;
  m = (a > 0x7f800000u) ? 0x7e00u : m;
  return (uint16_t)(sign | m);
}

/* p + b, exact products p and b, rounded to odd at float32 precision: s = fl(p + b) and its
   exact error e by TwoSum (Knuth; six operations, exact in round-to-nearest without
   reassociation); if e != 0 and s's last bit is 0, s moves one ulp toward e (away from zero
   when e has s's sign), which is the odd one of the two floats around p + b. s = 0 implies
   e = 0; inf/NaN sums are left alone (e is NaN there). */
INLINE uint32_t odd_sum32(float p, float b) {
  float s = p + b;
  float bb = s - p;
  float e = (p - (s - bb)) + (b - bb);
  uint32_t u = bits32(s), eu = bits32(e);
  /* 0/1 flags in integer arithmetic (comparisons of _Bool type would stop the vectoriser) */
  uint32_t inexact = ((eu & 0x7fffffffu) + 0x7fffffffu) >> 31;    /* e != 0 */
  uint32_t special = ((u & 0x7f800000u) + 0x00800000u) >> 31;     /* s is inf or NaN */
  uint32_t fix = inexact & ~special & ~u & 1u;                    /* ... and s's last bit 0 */
  uint32_t step = 1u - (((eu ^ u) >> 31) << 1);                   /* +1, or -1 toward zero */
  return u + (step & (0u - fix));
}

/* A float64 value S rounded to odd at float32 precision on float32's grid (subnormals
   included): to nearest, one step toward zero if that went past S, then the last bit set if
   inexact (as _numerics._round_once; inf past a finite S becomes FLT_MAX, then the conversion
   gives inf; NaN stays NaN). */
INLINE uint32_t odd64(double S) {
  float f = (float)S;
  double fd = (double)f;
  uint32_t u = bits32(f);
  u = (__builtin_fabs(fd) > __builtin_fabs(S)) ? u - 1u : u;
  return (fd != S) ? (u | 1u) : u;
}

/* The exact S + e (TwoSum in float64) rounded to odd at float32 precision (as
   _numerics.round_sum_once): d = f - S is exact; f is S + e if d == e; else step toward zero if
   f is past S + e, and set the last bit. */
INLINE uint32_t odd_pair64(double S, double e) {
  float f = (float)S;
  uint32_t u = bits32(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return u;  /* inf or NaN: a correct result already */
  double d = (double)f - S;
  if (d == e) return u;
  int past = (S > 0) ? (d > e) : (d < e);
  return (past ? u - 1u : u) | 1u;
}

/* One element of the exact float64 path: p + b with p, b exact float64 products. */
INLINE uint32_t odd_exact64(double p, double b) {
  double S = p + b;
  double bb = S - p;
  double e = (p - (S - bb)) + (b - bb);
  return odd_pair64(S, e);
}

/* ---------------------------------------------------------------- rows
   Each row function rotates the h = r/2 pairs of one row. x1/x2 (o1/o2, c1/c2, w1/w2) point at
   the first and second element of pair 0; step is 1 ("half": the second elements start r/2
   later) or 2 ("interleaved"). The tables c (cos) and w (the signed sine: -sin on the first
   element of every pair, sin on the second) are already in the working type, float or double
   (see fill_tables). The in-place versions read and write through x1, x2 only (a pair is read
   before it is written, and pairs are disjoint). */

#define ROW_FUNCTIONS(NAME, T, TT, LOAD, STORE, OP)                                            \
  INLINE void NAME##_out(const T *restrict x1, const T *restrict x2, T *restrict o1,           \
                         T *restrict o2, const TT *restrict c1, const TT *restrict c2,         \
                         const TT *restrict w1, const TT *restrict w2, int64_t h,              \
                         const int64_t step) {                                                 \
    for (int64_t i = 0; i < h; i++) {                                                          \
      int64_t k = i * step;                                                                    \
      TT a = LOAD(x1[k]), b = LOAD(x2[k]);                                                     \
      o1[k] = STORE(OP(a, b, c1[k], w1[k]));                                                   \
      o2[k] = STORE(OP(b, a, c2[k], w2[k]));                                                   \
    }                                                                                          \
  }                                                                                            \
  INLINE void NAME##_in(T *restrict x1, T *restrict x2, const TT *restrict c1,                 \
                        const TT *restrict c2, const TT *restrict w1, const TT *restrict w2,   \
                        int64_t h, const int64_t step) {                                       \
    for (int64_t i = 0; i < h; i++) {                                                          \
      int64_t k = i * step;                                                                    \
      TT a = LOAD(x1[k]), b = LOAD(x2[k]);                                                     \
      x1[k] = STORE(OP(a, b, c1[k], w1[k]));                                                   \
      x2[k] = STORE(OP(b, a, c2[k], w2[k]));                                                   \
    }                                                                                          \
  }

#define ID(v) (v)
#define BF16_TO_DOUBLE(v) ((double)from_bf16(v))
#define F16_TO_DOUBLE(v) ((double)from_f16(v))
/* One output u * c + v * w of a pair: with w = -s1, u c1 + v w1 is the formula's x1 c1 - x2 s1
   bit for bit, since v * (-s) == -(v * s) and p + (-q) == p - q exactly in IEEE arithmetic
   (signed zeros included). Written with additions only: GCC 12 turns the alternating
   a*c - b*s, b*c + a*s of the interleaved layout into vfmaddsub instructions even with
   -ffp-contract=off, which would round once where the formula rounds twice. */
#define PLAIN(u, v, c, w) ((u) * (c) + (v) * (w))   /* each product and the sum rounded */
#define ODD32(u, v, c, w) odd_sum32((u) * (c), (v) * (w))     /* exact products */
#define ODD64(u, v, c, w) odd64((u) * (c) + (v) * (w))        /* the float64 formula */
#define EXACT64(u, v, c, w) odd_exact64((u) * (c), (v) * (w)) /* exact float64 products */

ROW_FUNCTIONS(f32, float, float, ID, ID, PLAIN)
ROW_FUNCTIONS(f64, double, double, ID, ID, PLAIN)
ROW_FUNCTIONS(bf16, uint16_t, float, from_bf16, to_bf16, ODD32)
ROW_FUNCTIONS(f16, uint16_t, float, from_f16, to_f16, ODD32)
ROW_FUNCTIONS(bf16x, uint16_t, double, BF16_TO_DOUBLE, to_bf16, EXACT64)
ROW_FUNCTIONS(bf16w, uint16_t, double, BF16_TO_DOUBLE, to_bf16, ODD64)
ROW_FUNCTIONS(f16w, uint16_t, double, F16_TO_DOUBLE, to_f16, ODD64)

/* With AVX-512, the half layout of bfloat16/float16 with float32 tables runs 16 pairs per step
   in explicit vector code (the same arithmetic as odd_sum32, to_bf16 and to_f16, lane by lane;
   float16 through the hardware conversions vcvtph2ps, exact, and vcvtps2ph with rounding to
   nearest even given in the instruction, IEEE's rounding including subnormal results and
   overflow to inf). The compiler's own vectorisation of the portable code above is about 1.3x
   slower there. The tail (and the interleaved layout) uses the portable code.
   POSENC_NO_INTRINSICS turns this off (the tests build both). */
#if defined(__AVX512F__) && !defined(POSENC_NO_INTRINSICS)
#include <immintrin.h>

INLINE __m512 v_odd_sum(__m512 p, __m512 b) {
  __m512 s = _mm512_add_ps(p, b);
  __m512 bb = _mm512_sub_ps(s, p);
  __m512 e = _mm512_add_ps(_mm512_sub_ps(p, _mm512_sub_ps(s, bb)), _mm512_sub_ps(b, bb));
  __m512i u = _mm512_castps_si512(s), eu = _mm512_castps_si512(e);
  __m512i expo = _mm512_set1_epi32(0x7f800000);
  __mmask16 inexact = _mm512_test_epi32_mask(eu, _mm512_set1_epi32(0x7fffffff));
  __mmask16 special = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, expo), expo);
  __mmask16 odd = _mm512_test_epi32_mask(u, _mm512_set1_epi32(1));
  __mmask16 fix = _kandn_mask16(special, _kandn_mask16(odd, inexact));
  /* +1 where e has s's sign, -1 (toward zero) where not */
  __m512i step = _mm512_or_si512(_mm512_srai_epi32(_mm512_xor_si512(eu, u), 31),
                                 _mm512_set1_epi32(1));
  return _mm512_castsi512_ps(_mm512_mask_add_epi32(u, fix, u, step));
}

INLINE __m512 v_load_bf16(const uint16_t *p) {
  __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
INLINE void v_store_bf16(uint16_t *p, __m512 v) {
#ifdef __AVX512BF16__
  /* vcvtneps2bf16 rounds to nearest even but flushes subnormal inputs to zero: used unless a
     lane holds a nonzero |v| below 2**-126 (rare: a sum that cancels that far) */
  __m512i a = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
  __mmask16 tiny = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(a, _mm512_set1_epi32(1)),
                                           _mm512_set1_epi32(0x007fffff));
  if (!tiny) {
    _mm256_storeu_si256((__m256i *)p, (__m256i)_mm512_cvtneps_pbh(v));
    return;
  }
#endif
  __m512i u = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
                                                  lsb), 16);
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
  _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(r));
}
INLINE __m512 v_load_f16(const uint16_t *p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
INLINE void v_store_f16(uint16_t *p, __m512 v) {
  _mm256_storeu_si256((__m256i *)p,
                      _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* x1/o1 may equal x2's partner arrays of the same row (in place): every step loads before
   it stores, and the pairs of different steps are disjoint. */
#define VECTOR_ROW(NAME, GENERIC, LOADV, STOREV)                                               \
  INLINE void NAME##_pairs(const uint16_t *x1, const uint16_t *x2, uint16_t *o1, uint16_t *o2,  \
                           const float *c1, const float *c2, const float *w1, const float *w2, \
                           int64_t h, int64_t step, int in_place) {                            \
    int64_t i = 0;                                                                             \
    if (step == 1) {                                                                           \
      for (; i + 16 <= h; i += 16) {                                                           \
        __m512 a = LOADV(x1 + i), b = LOADV(x2 + i);                                           \
        __m512 first = v_odd_sum(_mm512_mul_ps(a, _mm512_loadu_ps(c1 + i)),                    \
                                 _mm512_mul_ps(b, _mm512_loadu_ps(w1 + i)));                   \
        __m512 second = v_odd_sum(_mm512_mul_ps(b, _mm512_loadu_ps(c2 + i)),                   \
                                  _mm512_mul_ps(a, _mm512_loadu_ps(w2 + i)));                  \
        STOREV(o1 + i, first);                                                                 \
        STOREV(o2 + i, second);                                                                \
      }                                                                                        \
    }                                                                                          \
    int64_t k = i * step;                                                                      \
    if (in_place)                                                                              \
      GENERIC##_in(o1 + k, o2 + k, c1 + k, c2 + k, w1 + k, w2 + k, h - i, step);               \
    else                                                                                       \
      GENERIC##_out(x1 + k, x2 + k, o1 + k, o2 + k, c1 + k, c2 + k, w1 + k, w2 + k, h - i,     \
                    step);                                                                     \
  }                                                                                            \
  INLINE void NAME##_out(const uint16_t *x1, const uint16_t *x2, uint16_t *o1, uint16_t *o2,    \
                         const float *c1, const float *c2, const float *w1, const float *w2,   \
                         int64_t h, const int64_t step) {                                      \
    NAME##_pairs(x1, x2, o1, o2, c1, c2, w1, w2, h, step, 0);                                  \
  }                                                                                            \
  INLINE void NAME##_in(uint16_t *x1, uint16_t *x2, const float *c1, const float *c2,           \
                        const float *w1, const float *w2, int64_t h, const int64_t step) {     \
    NAME##_pairs(x1, x2, x1, x2, c1, c2, w1, w2, h, step, 1);                                  \
  }
VECTOR_ROW(bf16v, bf16, v_load_bf16, v_store_bf16)
VECTOR_ROW(f16v, f16, v_load_f16, v_store_f16)
#define ROW_BF16 bf16v
#define ROW_F16 f16v

#else
#define ROW_BF16 bf16
#define ROW_F16 f16
#endif

/* float32 out of place, half layout, into a large output (at least NT_MIN_BYTES): the formula's
   roundings as f32_out (explicit multiplies and adds, no fused multiply-add), written with
   non-temporal stores (vmovntps), which go to memory without first reading the output's
   lines into the cache. With ordinary stores every line of `out` is read before it is written
   (read-for-ownership): three memory streams (x, out read, out written) where copy_, whose
   memcpy streams its stores, has two; measured 1.45-1.5x copy_ on an AMD EPYC with AVX-512,
   1.2x with these stores. Rows whose outputs are not aligned to the vector width (a slice of a
   larger buffer) take f32_out; so does the tail of every row. */
#if !defined(POSENC_NO_INTRINSICS) && (defined(__AVX512F__) || defined(__AVX__))
#include <immintrin.h>
#if defined(__AVX512F__)
#define NT_LANES 16
#define NT_VEC __m512
#define NT_LOAD _mm512_loadu_ps
#define NT_MUL _mm512_mul_ps
#define NT_ADD _mm512_add_ps
#define NT_STREAM _mm512_stream_ps
#else
#define NT_LANES 8
#define NT_VEC __m256
#define NT_LOAD _mm256_loadu_ps
#define NT_MUL _mm256_mul_ps
#define NT_ADD _mm256_add_ps
#define NT_STREAM _mm256_stream_ps
#endif
#define HAVE_NT 1
INLINE void f32nt_out(const float *x1, const float *x2, float *o1, float *o2, const float *c1,
                      const float *c2, const float *w1, const float *w2, int64_t h) {
  int64_t i = 0;
  if ((((uintptr_t)o1 | (uintptr_t)o2) & (NT_LANES * sizeof(float) - 1)) == 0) {
    for (; i + NT_LANES <= h; i += NT_LANES) {
      NT_VEC a = NT_LOAD(x1 + i), b = NT_LOAD(x2 + i);
      NT_VEC first = NT_ADD(NT_MUL(a, NT_LOAD(c1 + i)), NT_MUL(b, NT_LOAD(w1 + i)));
      NT_VEC second = NT_ADD(NT_MUL(b, NT_LOAD(c2 + i)), NT_MUL(a, NT_LOAD(w2 + i)));
      NT_STREAM(o1 + i, first);
      NT_STREAM(o2 + i, second);
    }
  }
  f32_out(x1 + i, x2 + i, o1 + i, o2 + i, c1 + i, c2 + i, w1 + i, w2 + i, h - i, 1);
}
#endif

/* Whether a bfloat16 row holds a nonzero finite |x| below 2**-63 (bits 0x2000) or at least
   2**100 (bits 0x7180), where a float32 product could underflow or a sum come near overflow
   (16-bit lanes: a - 1 < 0x1fff is 0 < a < 0x2000, a - 0x7180 < 0xe00 is 2**100 <= a < inf). */
static int bf16_row_unsafe(const uint16_t *x, int64_t r) {
  uint16_t bad = 0;
  for (int64_t i = 0; i < r; i++) {
    uint16_t a = x[i] & 0x7fffu;
    bad |= (uint16_t)((uint16_t)(a - 1u) < 0x1fffu) |
           (uint16_t)((uint16_t)(a - 0x7180u) < 0x0e00u);
  }
  return bad != 0;
}

/* Table rows in the working type: c = cos, w = the signed sine. For bfloat16 tables, returns
   whether a nonzero finite entry lies outside [2**-63, 2**8] (float32 bits 0x20000000 and
   0x43800000), where a product with an x could underflow float32 or the exact path's bounds
   fail. */
#define FILL(NAME, TIN, TW, CONV)                                                              \
  static int NAME(const TIN *c, const TIN *s, TW *cw, TW *ww, int64_t r, int interleaved,      \
                  int check) {                                                                 \
    uint32_t bad = 0;                                                                          \
    for (int64_t i = 0; i < r; i++) {                                                          \
      int first = interleaved ? (i % 2 == 0) : (i < r / 2);                                    \
      TW cv = CONV(c[i]), sv = CONV(s[i]);                                                     \
      cw[i] = cv;                                                                              \
      ww[i] = first ? -sv : sv;                                                                \
      if (check) {                                                                             \
        uint32_t ac = bits32((float)cv) & 0x7fffffffu, as = bits32((float)sv) & 0x7fffffffu;  \
        bad |= ((ac != 0) & (ac < 0x20000000u)) | ((ac > 0x43800000u) & (ac < 0x7f800000u));   \
        bad |= ((as != 0) & (as < 0x20000000u)) | ((as > 0x43800000u) & (as < 0x7f800000u));   \
      }                                                                                        \
    }                                                                                          \
    return bad != 0;                                                                           \
  }
FILL(fill_f32, float, float, ID)
FILL(fill_f64, double, double, ID)
FILL(fill_bf16, uint16_t, float, from_bf16)
FILL(fill_f16, uint16_t, float, from_f16)

/* (two levels, so that NAME may itself be a macro such as ROW_BF16) */
#define DISPATCH(NAME, T, TT, CB, WB) DISPATCH_(NAME, T, TT, CB, WB)
#define DISPATCH_(NAME, T, TT, CB, WB)                                                         \
  do {                                                                                         \
    T *xr = (T *)x + xo;                                                                       \
    T *orow = (T *)out + oo;                                                                   \
    const TT *cr = (const TT *)(CB), *wr = (const TT *)(WB);                                   \
    if (in_place) {                                                                            \
      if (interleaved) NAME##_in(xr, xr + 1, cr, cr + 1, wr, wr + 1, h, 2);                   \
      else NAME##_in(xr, xr + h, cr, cr + h, wr, wr + h, h, 1);                                \
    } else {                                                                                   \
      if (interleaved)                                                                         \
        NAME##_out(xr, xr + 1, orow, orow + 1, cr, cr + 1, wr, wr + 1, h, 2);                  \
      else NAME##_out(xr, xr + h, orow, orow + h, cr, cr + h, wr, wr + h, h, 1);               \
      if (r < d) memcpy(orow + r, xr + r, (size_t)(d - r) * sizeof(T));                        \
    }                                                                                          \
  } while (0)

/* Rotate every row of x into out. The rows are indexed by shape[0..nd): leading dimensions,
   then the sequence (shape[nd - 1]); each row has d elements, the first r rotated. Strides are
   in elements of each tensor (0 for broadcast table dimensions); the last dimension of every
   tensor is contiguous. Returns the number of rows that took the exact float64 path (kind 2
   only), or -1 if out of memory.

   Order: the work is cut into tiles of `block` positions (POSENC_TILE_ELEMENTS / r for an x
   of NT_MIN_BYTES or more, else POSENC_SMALL_TILE_ELEMENTS / r) times a range of leading
   indices. A tile converts its table rows once (to float or double, the sine signed) when the
   tables are shared by every leading index, and then runs over every leading index, so those
   table rows stay in cache while every head that uses them is rotated (in plain row order the
   (s, r) tables, as large as one head of x, would be converted again for every head). Each
   head is read (and written) in runs of `block` contiguous rows: long runs keep the hardware
   prefetchers and memory pages streaming (float32, r = 128 on an AMD EPYC Zen 4: runs of 8 KB,
   2048 elements per tile, measured 1.47x copy_ out of place and 1.23x in place; runs of
   512 KB 0.87-1.03x and 0.76-0.88x; benchmarks/README.md). A smaller x keeps short runs:
   there a tile per 4 heads would convert the table rows many times over (x of
   (1, 32, 128, 128) took 1.2x as long with the long tiles). Per-batch tables are converted row
   by row. Tiles are split evenly over the threads, a whole number each where the leading
   indices allow. */
int64_t rope_rotate(int kind, int interleaved, int in_place, int nthreads, void *x, void *out,
                    const void *cosp, const void *sinp, int nd, const int64_t *shape,
                    const int64_t *xst, const int64_t *ost, const int64_t *cst,
                    const int64_t *sst, int64_t d, int64_t r) {
  int64_t seq = shape[nd - 1], outer = 1, exact_rows = 0, failed = 0;
  for (int k = 0; k < nd - 1; k++) outer *= shape[k];
  if (outer * seq * r < PARALLEL_MIN_ELEMENTS || nthreads < 1) nthreads = 1;
#ifndef _OPENMP
  nthreads = 1;  /* built without OpenMP: one thread */
#endif
  int shared = 1;  /* one table for every leading index */
  for (int k = 0; k < nd - 1; k++) shared &= (cst[k] == 0) & (sst[k] == 0);
  /* positions per tile: ~tile table elements, by the size of x */
  int64_t x_bytes = outer * seq * d * (kind == 0 ? 4 : kind == 1 ? 8 : 2);
  int64_t tile = x_bytes >= NT_MIN_BYTES ? POSENC_TILE_ELEMENTS : POSENC_SMALL_TILE_ELEMENTS;
  int64_t block = r >= tile ? 1 : tile / r;
  if (block > seq) block = seq;
  int64_t n_blocks = (seq + block - 1) / block;
  int64_t chunks = (4 * (int64_t)nthreads + n_blocks - 1) / n_blocks;  /* >= 4 tiles a thread */
  if (chunks > outer) chunks = outer;
  /* a whole number of tiles per thread where the leading indices allow (at most nthreads
     steps: n_blocks * chunks is a multiple of nthreads every nthreads values of chunks) */
  for (int k = 0; k < nthreads && chunks < outer && (n_blocks * chunks) % nthreads; k++) chunks++;
  int64_t tiles = n_blocks * chunks;
  size_t wsize = (kind == 1 || kind >= 4) ? sizeof(double) : sizeof(float);
  /* non-temporal stores for a large float32 output written out of place (see f32nt_out) */
  int stream = kind == 0 && !in_place && x_bytes >= NT_MIN_BYTES;
  (void)stream;  /* unused where there are no streamed stores */
  /* the exact path's float64 table rows (kind 2: a cos and a sine row per thread) */
  size_t exact_bytes = kind == 2 ? 2 * (size_t)r * sizeof(double) : 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(nthreads) reduction(+ : exact_rows, failed)
#endif
  {
#if defined(__x86_64__) || defined(__i386__)
    unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr & ~(0x8000u | 0x0040u | 0x6000u));  /* no FTZ, no DAZ, round to nearest */
#endif
#ifdef _OPENMP
    int tid = omp_get_thread_num(), nth = omp_get_num_threads();
#else
    int tid = 0, nth = 1;
#endif
    int64_t h = r / 2, rows_buffered = shared ? block : 1;
    int64_t t0 = tiles * tid / nth, t1 = tiles * (tid + 1) / nth;
    /* every buffer of this thread in one allocation, once per call (never per row): the exact
       path's float64 rows first (cd: r cosines, wd: r signed sines; kind 2 only), so that the
       float/double table rows after them stay aligned, then the table rows (cbuf, wbuf) and
       one flag per buffered row */
    size_t table_bytes = (size_t)(rows_buffered * r) * wsize;
    char *mem = malloc(exact_bytes + 2 * table_bytes + (size_t)rows_buffered);
    if (!mem) {
      failed += 1;
    } else {
      double *cd = (double *)mem, *wd = cd + exact_bytes / (2 * sizeof(double));
      char *cbuf = mem + exact_bytes, *wbuf = cbuf + table_bytes;
      char *unsafe_rows = wbuf + table_bytes;  /* per buffered row */
      for (int64_t tile = t0; tile < t1; tile++) {
        int64_t b = tile % n_blocks, chunk = tile / n_blocks;
        int64_t p0 = b * block, p1 = p0 + block < seq ? p0 + block : seq;
        for (int64_t o = outer * chunk / chunks; o < outer * (chunk + 1) / chunks; o++) {
          int64_t xb = 0, ob = 0, cb = 0, sb = 0, rest = o;
          for (int k = nd - 2; k >= 0; k--) {  /* the leading multi-index of o */
            int64_t i = rest % shape[k];
            rest /= shape[k];
            xb += i * xst[k]; ob += i * ost[k]; cb += i * cst[k]; sb += i * sst[k];
          }
          for (int64_t p = p0; p < p1; p++) {
            int64_t xo = xb + p * xst[nd - 1], oo = ob + p * ost[nd - 1];
            int64_t slot = shared ? p - p0 : 0;
            char *cw = cbuf + (size_t)(slot * r) * wsize, *ww = wbuf + (size_t)(slot * r) * wsize;
            if (!shared || o == outer * chunk / chunks) {  /* table row p into the buffer */
              int64_t co = cb + p * cst[nd - 1], so = sb + p * sst[nd - 1];
              int unsafe = 0;
              switch (kind) {
                case 0: fill_f32((const float *)cosp + co, (const float *)sinp + so,
                                 (float *)cw, (float *)ww, r, interleaved, 0); break;
                case 2: unsafe = fill_bf16((const uint16_t *)cosp + co, (const uint16_t *)sinp + so,
                                           (float *)cw, (float *)ww, r, interleaved, 1); break;
                case 3: fill_f16((const uint16_t *)cosp + co, (const uint16_t *)sinp + so,
                                 (float *)cw, (float *)ww, r, interleaved, 0); break;
                default: fill_f64((const double *)cosp + co, (const double *)sinp + so,
                                  (double *)cw, (double *)ww, r, interleaved, 0); break;
              }
              unsafe_rows[slot] = (char)unsafe;
            }
            switch (kind) {
              case 0:
#ifdef HAVE_NT
                if (stream && !interleaved) {
                  float *xr = (float *)x + xo, *orow = (float *)out + oo;
                  const float *cr = (const float *)cw, *wr = (const float *)ww;
                  f32nt_out(xr, xr + h, orow, orow + h, cr, cr + h, wr, wr + h, h);
                  if (r < d) memcpy(orow + r, xr + r, (size_t)(d - r) * sizeof(float));
                  break;
                }
#endif
                DISPATCH(f32, float, float, cw, ww); break;
              case 1: DISPATCH(f64, double, double, cw, ww); break;
              case 2:
                if (!unsafe_rows[slot] && !bf16_row_unsafe((const uint16_t *)x + xo, r)) {
                  DISPATCH(ROW_BF16, uint16_t, float, cw, ww);
                } else {  /* the exact float64 path (the float tables convert exactly) */
                  for (int64_t i = 0; i < r; i++) {
                    cd[i] = ((const float *)cw)[i];
                    wd[i] = ((const float *)ww)[i];
                  }
                  DISPATCH(bf16x, uint16_t, double, cd, wd);
                  exact_rows += 1;
                }
                break;
              case 3: DISPATCH(ROW_F16, uint16_t, float, cw, ww); break;
              case 4: DISPATCH(bf16w, uint16_t, double, cw, ww); break;
              case 5: DISPATCH(f16w, uint16_t, double, cw, ww); break;
            }
          }
        }
      }
      free(mem);
    }
#ifdef HAVE_NT
    if (stream) _mm_sfence();  /* streamed stores are weakly ordered: complete them first */
#endif
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(csr);
#endif
  }
  return failed ? -1 : exact_rows;
}
