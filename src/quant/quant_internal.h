/* src/quant/quant_internal.h - what the quant files share (prefix tg__q). */
#ifndef TAPEGRAD_QUANT_INTERNAL_H
#define TAPEGRAD_QUANT_INTERNAL_H

#include "core/core.h"
#include "ops/quant_params.h"
#include "tapegrad/quant.h"

/* The range of a quantized dtype: [0, 255] for u8, [-128, 127] for i8. */
static inline int32_t tg__q_min(tg_dtype dt) { return dt == TG_U8 ? 0 : -128; }
static inline int32_t tg__q_max(tg_dtype dt) { return dt == TG_U8 ? 255 : 127; }
static inline int32_t tg__q_clamp(int64_t v, int32_t lo, int32_t hi)
{
    return (int32_t)(v < lo ? lo : v > hi ? hi : v);
}

/* Checks a (scale, zero_point) pair for dtype qdt; `op` names the caller. */
int tg__q_check_affine(const char *op, tg_dtype qdt, double scale, int32_t zero_point);
/* ---- qgemm.c ---- */

/* Row sums of w (n, k) into sums[0..n). */
void tg__q_row_sums(const int8_t *w, int64_t n, int64_t k, int32_t *sums);

/* ---- qgemm_x86.c: one-row kernels, c[j] = sum_t a[t] * w[j*k + t] for j < n.
 * a is u8 (or i8 when a_signed), wsum holds the rows' sums (VNNI uses it for
 * i8 activations: a*w = (a+128)*w - 128*w). */
void tg__q_row_avx2(int32_t *c, const uint8_t *a, bool a_signed, const int8_t *w, int64_t n,
                    int64_t k);
/* Same for two rows of a at once (c0 from a0, c1 from a1). */
void tg__q_row2_avx2(int32_t *c0, int32_t *c1, const uint8_t *a0, const uint8_t *a1,
                     bool a_signed, const int8_t *w, int64_t n, int64_t k);
void tg__q_row_vnni(int32_t *c, const uint8_t *a, bool a_signed, const int8_t *w,
                    const int32_t *wsum, int64_t n, int64_t k);
bool tg__q_cpu_has_avx2(void);
bool tg__q_cpu_has_vnni(void);

/* ---- qpack.c: packed weights and the packed GEMM ----
 * Per group the GEMM's B is (n, kd): row j holds the kd weights that output
 * column j sums over.  Packed, columns come in blocks of 16 and each block is
 * kd2 = ceil(kd/2) slices of 16 columns x 2 consecutive k (i16, zero padded):
 * panel[blk][t2][j][e] = B[16*blk + j][2*t2 + e].  vpmaddwd / vpdpwssd of a
 * broadcast pair of activations against one slice yields 8 columns' partial
 * sums at once, exactly (i16 x i16 pairs summed in i32 never overflow here). */
#define TG__Q_NR 16
#define TG__Q_MR 6
/* The VNNI and AMX kernels' packing of the same B, as bytes: columns in
 * blocks of 32, each block kqp slices of 32 columns x 4 consecutive k (zero
 * padded): panels8[blk][t4][j][e] = B[32*blk + j][4*t4 + e].  One slice is
 * two 64-byte vectors: vpdpbusd of a broadcast group of four u8 activations
 * against one adds 16 columns' four products at once (VNNI reads the kq =
 * ceil(kd/4) slices that hold weights).  kqp rounds kq up to 16, so that 16
 * slices, read with a row stride of 128 bytes, are an AMX B tile of 64 k
 * for 16 columns. */
#define TG__Q_NR8 32
#define TG__Q_MR8 8
struct tg_qweight {
    bool transpose;
    int ndim;
    int64_t shape[TG_MAX_DIMS];   /* the float layout's shape */
    int64_t groups;
    int64_t n, kd, kd2, nblk;     /* per group */
    int16_t *panels;              /* groups * nblk * kd2 * 32, owned */
    int64_t kq, kqp, nblk8;       /* per group, for panels8 */
    int8_t *panels8;              /* groups * nblk8 * kqp * 128, owned; NULL without VNNI */
    int32_t *colsum;              /* groups * n: sum over t of B_gi[j][t], owned; ditto */
    /* Transposed weights on a VNNI or AMX CPU, per group, tap k, block of 16 output
     * channels (ncob) and 64 input channels (ncc): 16 x 64 bytes,
     * taps8[...][r][e] = w[gi*cig + 64*cc + e][16*cob + r][k] (0 past the
     * ends): one AMX A tile (qconvt_phase.c).  tapsum[(gi*K + k)*cog + co] sums
     * w over the input channels.  NULL elsewhere. */
    int64_t ncob, ncc;
    int8_t *taps8;
    int32_t *tapsum;
    /* The same weights for the AVX2 kernel's column-free path, as i16 pairs
     * of input channels: taps16[((gi*K + k)*cog + co)*ncp + cp] holds
     * w[gi*cig + 2cp][co][k] in its low half and w[gi*cig + 2cp + 1][co][k]
     * (0 past cig) in its high half; ncp = ceil(cig / 2).  NULL without
     * AVX2. */
    int64_t ncp;
    int32_t *taps16;
};
static inline const int16_t *tg__q_group_panels(const tg_qweight *w, int64_t gi)
{
    return w->panels + gi * w->nblk * w->kd2 * 2 * TG__Q_NR;
}
static inline const int8_t *tg__q_group_panels8(const tg_qweight *w, int64_t gi)
{
    return w->panels8 + gi * w->nblk8 * w->kqp * 4 * TG__Q_NR8;
}
/* c (m, w->n) = a (m, 2*kd2 i16, row stride lda) * B_gi^T on the portable
 * or AVX2 tile (kern), stored row-major
 * with row stride ldc (kgrp 0), or grouped by column (kgrp > 0): element
 * (row, col) at (col / kgrp) * ldc + row * kgrp + col % kgrp.
 * Single-threaded; callers parallelise over row blocks. */
void tg__q_gemm_packed(int32_t *c, int64_t ldc, int64_t kgrp, const int16_t *a, int64_t lda,
                       int64_t m, const tg_qweight *w, int64_t gi, tg_int8_kernel kern);
/* One TG__Q_MR x TG__Q_NR tile: c[r*ldc + j] = sum_t a_r[t] * B[j][t] with
 * a_r = a + min(r, mr-1) * lda (rows past mr repeat the last one). */
typedef void tg__q_tile_fn(int32_t *c, int64_t ldc, const int16_t *a, int64_t lda, int mr,
                           const int16_t *panel, int64_t kd2);
tg__q_tile_fn tg__q_tile_avx2;
/* The same product for the VNNI kernel from u8 activations: a (m, 4*kqp
 * bytes, row stride lda = 4*kqp; bytes past kd are never weighted, and for
 * AMX m is rounded up to 32 rows, read but not stored) holds x + off,
 * where off is zx for u8 x and zx + 128 for i8 x (top bit flipped), so
 * c = a * B_gi^T - zoff * colsum_gi with zoff = off is sum (x - zx) * w
 * exactly (i32 arithmetic wraps, so the identity holds wherever the result
 * fits).  Layout of c as for tg__q_gemm_packed.  Single-threaded. */
void tg__q_gemm_vnni(int32_t *c, int64_t ldc, int64_t kgrp, const uint8_t *a, int64_t lda,
                     int64_t m, const tg_qweight *w, int64_t gi, int32_t zoff);
/* The 16 x 64 A tiles of tap k, output-channel block cob (and cob + 1
 * after them), as ncc tiles of 1 KiB. */
static inline const int8_t *tg__q_tap_panel(const tg_qweight *w, int64_t gi, int64_t k,
                                            int64_t cob)
{
    const int64_t K = w->n / w->shape[1];
    return w->taps8 + (((gi * K + k) * w->ncob + cob) * w->ncc) * 16 * 64;
}
/* Rows i..i+mr (any count), columns j0..j0+nr (nr <= 32) of c, in the
 * layout of tg__q_gemm_packed, from tmp (rows of 32 i32) less zoff times
 * the column sums; the AMX GEMM's partial tiles go through it. */
void tg__q_store_tile(int32_t *c, int64_t ldc, int64_t kgrp, const int32_t *tmp, int64_t i,
                      int mr, int64_t j0, int nr, const int32_t *colsum, int32_t zoff);
/* The same on AMX tiles (32 x 32 per step, 64 k per tdpbusd). */
void tg__q_gemm_amx(int32_t *c, int64_t ldc, int64_t kgrp, const uint8_t *a, int64_t lda,
                    int64_t m, const tg_qweight *w, int64_t gi, int32_t zoff);
#define TG__Q_AMX_ROWS 32
/* AMX-TILE and AMX-INT8 in the CPU, enabled by the OS, and granted to this
 * process (Linux arch_prctl ARCH_REQ_XCOMP_PERM); with AVX-512 VNNI. */
bool tg__q_cpu_has_amx(void);

/* ---- qconv_kernels.c ---- */

/* Requantization of one output channel: the bias at accumulator scale, the
 * fixed-point multiplier and the output's zero point and range. */
typedef struct tg__q_requant {
    int32_t bias;      /* rint(bias / (x_scale * w_scale)), saturated */
    int32_t m0;
    int shift;
    int32_t zp, lo, hi;   /* lo is zp when relu is fused */
} tg__q_requant;

/* tg_quant_requantize, inlined for the kernels' inner loops, whose operands
 * are in its domain (same formula: floor division of v = acc*m0 by 2^shift,
 * then half to even on the remainder; shift <= 62). */
static inline int64_t tg__q_round_shift(int64_t v, int shift)
{
    if (shift <= 0) return v;
    const int64_t q = v >> shift;   /* arithmetic shift (gcc, clang): floor */
    const int64_t r = v - q * (INT64_C(1) << shift);
    const int64_t half = INT64_C(1) << (shift - 1);
    return q + ((r > half || (r == half && (q & 1))) ? 1 : 0);
}

static inline int64_t tg__q_requantize(int64_t acc, int32_t m0, int shift)
{
    return tg__q_round_shift(acc * (int64_t)m0, shift);
}

/* q = clamp(zp + round_half_even((acc + bias) * m0 / 2^shift), lo, hi).
 * The same integers as tg__q_requantize, without its branch: with
 * q = floor(v / 2^shift) and rem = v - q * 2^shift in [0, 2^shift), rounding
 * up happens when rem > half, or rem == half and q is odd, which for
 * integers is exactly rem + (q & 1) > half. */
static inline int32_t tg__q_requant_one(int32_t acc, const tg__q_requant *r)
{
    int64_t s = (int64_t)acc + r->bias;   /* kept in i32 so s * m0 fits in i64 */
    s = s < INT32_MIN ? INT32_MIN : s > INT32_MAX ? INT32_MAX : s;
    const int64_t v = s * (int64_t)r->m0;
    if (r->shift <= 0) return tg__q_clamp(r->zp + v, r->lo, r->hi);
    const int64_t q = v >> r->shift;   /* arithmetic shift (gcc, clang): floor */
    const int64_t rem = v & ((INT64_C(1) << r->shift) - 1);
    const int64_t half = INT64_C(1) << (r->shift - 1);
    return tg__q_clamp(r->zp + q + (rem + (q & 1) > half), r->lo, r->hi);
}
/* dst[base + i*ds + e] = tg__q_requant_one(src[i*ss + e], r) for i < rows,
 * e < cols; dst u8 or i8 (dt).  kern: the caller's int8 kernel; when
 * r->shift is in [1, TG__Q_F64_MAX_SHIFT] the VNNI and AMX kernels' CPUs
 * (AVX-512) run tg__q_requant_avx512, the AVX2 kernel's tg__q_requant_avx2;
 * else, and on the portable kernel, the scalar formula: the same bytes in
 * every case. */
void tg__q_requant_rows(void *dst, tg_dtype dt, int64_t base, int64_t ds, const int32_t *src,
                        int64_t rows, int64_t cols, int64_t ss, const tg__q_requant *r,
                        tg_int8_kernel kern);
/* The same with row i requantized by r[i] (a block of output channels, one
 * a row): one call for the block, not one a row. */
void tg__q_requant_channel_rows(void *dst, tg_dtype dt, int64_t base, int64_t ds,
                                const int32_t *src, int64_t rows, int64_t cols, int64_t ss,
                                const tg__q_requant *r, tg_int8_kernel kern);
/* The largest shift for which the formula in f64 gives its exact integers
 * (qsimd_x86.c says why); the SIMD requantizations compute in f64. */
#define TG__Q_F64_MAX_SHIFT 43
/* Row i by r[i * rs] (rs 0: r for every row), eight lanes of f64 at a time
 * (qsimd_x86.c; AVX-512 F only), a row whose shift is outside [1,
 * TG__Q_F64_MAX_SHIFT] by the scalar formula: y is the first byte, rows ds
 * apart. */
void tg__q_requant_avx512(uint8_t *y, int64_t ds, const int32_t *src, int64_t rows, int64_t n,
                          int64_t ss, const tg__q_requant *r, int64_t rs);
/* The same on four lanes of f64 with AVX2 (qsimd_x86.c); is_signed: y is
 * i8, else u8. */
void tg__q_requant_avx2(uint8_t *y, bool is_signed, int64_t ds, const int32_t *src,
                        int64_t rows, int64_t n, int64_t ss, const tg__q_requant *r, int64_t rs);
/* y[row*ys + c] = tg__q_requant_one(acc[row*as + c], &r[c]) for row < rows,
 * c < n: one output channel per lane, its parameters gathered once for all
 * rows (AVX-512 F; qsimd_x86.c); eight lanes where one has a shift outside
 * [1, TG__Q_F64_MAX_SHIFT] run the scalar formula. */
void tg__q_requant_channels_avx512(uint8_t *y, int64_t ys, const int32_t *acc, int64_t as,
                                   int64_t rows, int64_t n, const tg__q_requant *r);
/* The same four lanes at a time with AVX2 (qsimd_x86.c). */
void tg__q_requant_channels_avx2(uint8_t *y, int64_t ys, const int32_t *acc, int64_t as,
                                 int64_t rows, int64_t n, const tg__q_requant *r);
/* tg_quantize of n contiguous f32 into bytes y (u8 or i8 by lo, hi): the
 * scalar formula's integers, eight at a time (AVX-512 F; qsimd_x86.c). */
void tg__q_quantize_avx512(uint8_t *y, const float *x, int64_t n, double scale, int32_t zp,
                           int32_t lo, int32_t hi);
/* The same four at a time with AVX2 (qsimd_x86.c). */
void tg__q_quantize_avx2(uint8_t *y, const float *x, int64_t n, double scale, int32_t zp,
                         int32_t lo, int32_t hi);
/* tg_dequantize of n contiguous u8 or i8 (is_signed) into f32 y: the scalar
 * formula's floats, eight at a time (AVX2; qsimd_x86.c). */
void tg__q_dequantize_avx2(float *y, const uint8_t *x, int64_t n, bool is_signed, double scale,
                           int32_t zp);
/* Stores q (already in range) as element i of a u8 or i8 buffer. */
static inline void tg__q_store(void *dst, tg_dtype dt, int64_t i, int32_t q)
{
    if (dt == TG_U8) ((uint8_t *)dst)[i] = (uint8_t)q;
    else ((int8_t *)dst)[i] = (int8_t)q;
}
/* Fills r[0..c_out) from the scales and the f32 bias (may be NULL).
 * TG_EINVAL naming op when a multiplier is out of range. */
int tg__q_requant_setup(const char *op, tg__q_requant *r, int64_t c_out, const tg_qscales *q,
                        tg_dtype ydt, const float *bias, bool relu);

/* The integer cores on contiguous buffers, for one whole batch; g comes from
 * tg__conv_validate (image/col sides as in ops/conv_internal.h).
 *   conv:           x (B, c_img, img) u8/i8, w (c_col, c_img/G, K) i8, y (B, c_col, col)
 *   conv_transpose: x (B, c_col, col),       w (c_col, c_img/G, K),    y (B, c_img, img)
 * with w packed by tg_qweight_new.
 * r holds one entry per output channel.  TG_ENOMEM when scratch fails. */
struct tg__conv_geom;
int tg__q_conv_raw(const struct tg__conv_geom *g, tg_dtype dt, const void *x, int32_t zx,
                   const tg_qweight *w, const tg__q_requant *r, void *y);
int tg__q_conv_transpose_raw(const struct tg__conv_geom *g, tg_dtype dt, const void *x,
                             int32_t zx, const tg_qweight *w, const tg__q_requant *r, void *y);
/* What every integer conv core works on: the geometry, x (dt, zero point
 * zx), the packed weight, one requantization per output channel, y. */
typedef struct tg__q_operands {
    const struct tg__conv_geom *g;
    tg_dtype dt;
    const uint8_t *x;
    int32_t zx;
    const tg_qweight *w;
    const tg__q_requant *r;
    uint8_t *y;
} tg__q_operands;
/* Linear: y (m, w->n) = requant((x - zx) (m, kd) * B^T). */
int tg__q_linear_raw(tg_dtype dt, const void *x, int32_t zx, int64_t m, const tg_qweight *w,
                     const tg__q_requant *r, void *y);
/* ConvTranspose without columns on AMX tiles, VNNI or AVX2 registers
 * (qconvt_phase.c): for 1-D and 2-D layers without dilation whose weight
 * has the kernel's tap-major form (taps8, or taps16 for AVX2); same
 * contract as tg__q_conv_transpose_raw. */
bool tg__q_convt_phase_fits(const struct tg__conv_geom *g, const tg_qweight *w,
                            tg_int8_kernel kern);
/* The input positions (product of the spatial sizes) from which it is used;
 * the tests lower it to run every case through it. */
extern int64_t tg__q_phase_min_positions;
int tg__q_convt_phase(const struct tg__conv_geom *g, tg_dtype dt, const void *x, int32_t zx,
                      const tg_qweight *w, const tg__q_requant *r, void *y,
                      tg_int8_kernel kern);
#endif
