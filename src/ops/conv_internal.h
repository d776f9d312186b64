/* src/ops/conv_internal.h - what the conv files share (prefix tg__conv).
 *
 * Every kernel here is written for 3 spatial axes; 1-D and 2-D convolutions
 * are 3-D ones whose leading axes have extent 1 (kernel 1, stride 1,
 * dilation 1, padding 0), which changes no index.
 *
 * One geometry describes Conv, ConvTranspose and the weight gradient: a Conv
 * reads an "image" (c_img channels, extents img[]) and produces "columns"
 * positions (c_col channels, extents col[]); output position o reads image
 * position  i = o*stride - pad_lo + k*dilation  for kernel tap k.
 *   conv:           image = x,  col side = y,  weight (c_col, c_img/groups, K...)
 *   conv_transpose: image = y,  col side = x,  weight (c_col, c_img/groups, K...)
 * (ConvTranspose's weight (C_in, C_out/groups, K...) is exactly that with
 * c_col = C_in and c_img = C_out.)
 */
#ifndef TAPEGRAD_CONV_INTERNAL_H
#define TAPEGRAD_CONV_INTERNAL_H

#include "ops/dispatch.h"
#include "ops/scratch.h"
#include "tapegrad/conv.h"

/* The kernel of col2im's phased sums (conv_kernels_tmpl.h): the
 * compiler's baseline (portable) or the same loops compiled for AVX-512
 * (the same bits).  The tests' choice (tg__conv_set_col2im_kernel), else
 * TG_COL2IM_KERNEL=portable|avx512 from the environment when the CPU runs
 * it, else avx512 on CPUs with AVX-512 F and BW. */
typedef enum {
    TG__CONV_COL2IM_AUTO = 0,
    TG__CONV_COL2IM_PORTABLE,
    TG__CONV_COL2IM_AVX512,
} tg__conv_col2im;
tg__conv_col2im tg__conv_col2im_kernel(void);

typedef struct tg__conv_geom {
    int nsp;                 /* spatial axes of the caller, 1..3 */
    int64_t batch, groups;
    int64_t c_img, c_col;
    int64_t img[3], col[3], k[3];
    int64_t stride[3], dil[3], pad[3];   /* pad is the low padding */
    /* TG_F16 or TG_BF16: the activation inputs (x of conv and conv_transpose,
     * z and u of the weight gradient, all of this dtype) are half tensors that
     * the f32 kernels convert chunk by chunk as they read them.  Any other
     * value (a zero-initialised geometry has TG_F32): they are buffers of the
     * compute dtype. */
    tg_dtype half_in;
    /* TG_F16 or TG_BF16: the output y of conv or conv_transpose is a half
     * tensor; the f32 kernels compute it chunk by chunk, add out_bias (f32,
     * c_col or c_img entries, may be NULL) and round each chunk in once.  Any
     * other value: y is a buffer of the compute dtype and out_bias is unused
     * (the caller adds the bias). */
    tg_dtype half_out;
    const float *out_bias;
    /* AVX512 or AMX: the operands are bf16 values (in f32 buffers) and the
     * f32 GEMMs run on that bf16 kernel (tg__conv_acts sets it).  AUTO (a
     * zeroed geometry) or PORTABLE: OpenBLAS's GEMM of the compute dtype. */
    tg_bf16_kernel bf16;
    /* With bf16 set and one group: the weight's panels as the A operand of
     * the weight's GEMMs (conv: W (c_col, kk); the column path of
     * conv_transpose: W^T (kk, c_col)), packed once per weight version
     * (tg__bf16_panels_get, borrowed); NULL: packed per call. */
    const tg__bf16_panels *wp;
    /* The calling thread's tg__conv_set_bits, taken by tg__conv_acts with
     * half_in (the workers read it here); tg__conv_bits says when it applies. */
    bool bits;
    /* The kernels of the half conversions and of col2im, asked once per op
     * call by tg__conv_acts (asking reads the environment), so that rows and
     * chunks do not ask each; AUTO (a zeroed geometry): asked where used
     * (tg__conv_cast, tg__conv_col2im_of). */
    tg__cast cast;
    tg__conv_col2im col2im;
} tg__conv_geom;

static inline tg__cast tg__conv_cast(const tg__conv_geom *g)
{
    return g->cast != TG__CAST_AUTO ? g->cast : tg__cast_kernel();
}

static inline tg__conv_col2im tg__conv_col2im_of(const tg__conv_geom *g)
{
    return g->col2im != TG__CONV_COL2IM_AUTO ? g->col2im : tg__conv_col2im_kernel();
}

static inline bool tg__conv_half_in(const tg__conv_geom *g)
{
    return tg__dtype_is_half(g->half_in);
}

/* Tests: false makes the convs this thread calls widen bf16 activations to
 * f32 columns as f16 ones are (tg__conv_bits false); true restores. */
void tg__conv_set_bits(bool on);
bool tg__conv_bits_enabled(void);

/* The columns and packed copies of the activation inputs are bf16 bits
 * (uint16_t), copied from the bf16 activations as they are and packed by
 * the bf16 GEMM kernel from bits: bf16 activations on a bf16 kernel above
 * PORTABLE (so the f32 instance only).  Otherwise they are of the compute
 * dtype, half inputs widened. */
static inline bool tg__conv_bits(const tg__conv_geom *g)
{
    return g->bits && g->half_in == TG_BF16 && g->bf16 > TG_BF16_KERNEL_PORTABLE;
}

static inline bool tg__conv_half_out(const tg__conv_geom *g)
{
    return tg__dtype_is_half(g->half_out);
}

static inline int64_t tg__conv_prod3(const int64_t *v) { return v[0] * v[1] * v[2]; }

/* ---- conv_params.c ---- */

/* "conv2d" / "conv_transpose3d" ... for messages (static storage). */
const char *tg__conv_opname(bool transpose, int nsp);
/* Fills p with the defaults (TG_CONV_PARAMS_INIT). */
void tg__conv_params_default(tg_conv_params *p);
/* Checks stride/dilation/padding (and output_padding when transpose) of the
 * first n axes and the activation/algo enums. */
int tg__conv_check_params(const char *op, int n, const tg_conv_params *p, bool transpose);
/* A padding_mode other than zeros runs as tg_pad of x then the conv without
 * padding: pads (2*nsp entries) gets tg_pad's pairs for p's padding, the
 * last spatial axis first as PyTorch's, and *conv is p with zero padding in
 * zeros mode; *any is false when p pads nothing.  TG_EINVAL naming op for a
 * negative padding. */
int tg__conv_pad_pairs(const char *op, const tg_conv_params *p, int nsp, int64_t *pads,
                       tg_conv_params *conv, bool *any);
/* Validates the inputs of conv (transpose = false) or conv_transpose and fills
 * the geometry and the output shape (ndim = x's).  bias may be NULL. */
int tg__conv_validate(bool transpose, const tg_tensor *x, const tg_tensor *w,
                      const tg_tensor *b, const tg_conv_params *p, tg__conv_geom *g,
                      int64_t *out_shape);

/* ---- conv_kernels.c: raw contiguous buffers of float (f32) or double (f64) ---- */

/* ceil(a / b) for b > 0 and any sign of a. */
static inline int64_t tg__conv_ceil_div(int64_t a, int64_t b)
{
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}
static inline int64_t tg__conv_clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}
/* All K = 1, stride 1, no padding: im2col is the identity (O == I). */
static inline bool tg__conv_is_pointwise(const tg__conv_geom *g)
{
    for (int a = 0; a < 3; a++)
        if (g->k[a] != 1 || g->stride[a] != 1 || g->pad[a] != 0 || g->col[a] != g->img[a])
            return false;
    return true;
}

/* Tests: samples per GEMM chunk on this thread (0 = automatic, by size). */
void tg__conv_set_chunk(int64_t samples);
/* Tests: false makes im2col/col2im of this thread take the row-by-row path
 * instead of the tap table of small planes (true, the default, restores;
 * conv_im2col.c). */
void tg__conv_set_tap_tables(bool on);

/* Tests: false makes col2im of this thread add each tap's runs sample by
 * sample instead of across a block's samples (true, the default, restores;
 * conv_im2col.c); how many col2im calls went across samples so far. */
void tg__conv_set_col2im_runs(bool on);
int64_t tg__conv_col2im_runs_calls(void);

/* The kernel of col2im's phased sums: tg__conv_col2im above. */
/* Tests: forces kernel k in every thread (AUTO restores); a kernel this
 * CPU cannot run is not taken. */
void tg__conv_set_col2im_kernel(tg__conv_col2im k);

/* im2col of small planes of bf16 bits by AVX-512 permutes
 * (conv_im2col_avx512.c), for planes of fewer than TG__CONV_PERM_PLANE
 * elements read through a tap table.  tg__conv_perm_usable: the CPU has
 * AVX-512 BW, the path is on (tg__conv_set_perm, for tests: process-wide,
 * on by default; off, the table-driven copy) and
 * the plane is small enough.  tg__conv_perm_table: the table tab (K taps x
 * O positions, every entry in [0, isz], isz the plane's zero) as 16-bit
 * vectors of 32 per tap, for free(); NULL: no memory.  tg__conv_perm_plane:
 * dst + k*tap_ld = the O column entries of tap k of the plane. */
#define TG__CONV_PERM_PLANE 256
void tg__conv_set_perm(bool on);
bool tg__conv_perm_usable(int64_t isz);
uint16_t *tg__conv_perm_table(const int32_t *tab, int64_t ksz, int64_t osz);
void tg__conv_perm_plane(const uint16_t *plane, int64_t isz, const uint16_t *idx, int64_t ksz,
                         int64_t osz, uint16_t *dst, int64_t tap_ld);
/* im2col of larger planes of bf16 bits whose rows are at most 32 elements
 * on both sides (img[2] and col[2]), a column row at a time by one AVX-512
 * permute of an image row (conv_im2col_avx512.c).  tg__conv_rowperm_usable:
 * the CPU has AVX-512 BW, the permutes are on (tg__conv_set_perm) and g's
 * last axis qualifies.  tg__conv_rowperm_plane: dst + k*tap_ld = the O
 * column entries of tap k of the plane, as tg__conv_perm_plane. */
bool tg__conv_rowperm_usable(const tg__conv_geom *g);
void tg__conv_rowperm_plane(const uint16_t *plane, const tg__conv_geom *g, uint16_t *dst,
                            int64_t tap_ld);
/* Tests: the memory budget of the weight-gradient partials of one wave of
 * chunks (conv_passes); 0 restores the default (this thread only;
 * conv_gemm.c). */
void tg__conv_set_part_bytes(int64_t bytes);

/* Samples per GEMM chunk of a batch whose samples take bytes_per_sample of
 * column buffer each: the same for any thread count (tg__conv_set_chunk
 * overrides). */
int64_t tg__conv_chunk(int64_t batch, int64_t bytes_per_sample);
/* tg__conv_chunk, but a batch of two samples or more whose columns fit one
 * chunk and reach 512 KiB in all is cut in two (conv_kernels.c). */
int64_t tg__conv_chunk_split(int64_t batch, int64_t bytes_per_sample);

/* A chunk's f32 output yf into the half output y from element at, in one
 * pass: g->out_bias added (as tg__conv_epilogue adds it), then rounded once.
 * yf is (n, c, s), or with cbs (c, n*s) (the GEMM's layout, unpacked on
 * the way); with rezero (= yf) each row is zeroed once read
 * (tg__conv_zeroed_take).  The f64 one asserts (no half output is computed
 * in f64); it exists for the templates. */
void tg__conv_store_f32(const tg__conv_geom *g, const float *yf, int64_t n, int64_t c, int64_t s,
                        bool cbs, void *y, int64_t at, float *rezero);
void tg__conv_store_f64(const tg__conv_geom *g, const double *yf, int64_t n, int64_t c,
                        int64_t s, bool cbs, void *y, int64_t at, double *rezero);

/* In the functions below `dt` is TG_F32 or TG_F64 and every buffer holds that
 * type, except the activation inputs and the output y of a geometry with
 * half_in / half_out set (dt is then TG_F32).  They return TG_ENOMEM
 * (message set) if scratch cannot be allocated. */

/* y (B, c_col, col) = conv(x (B, c_img, img), w (c_col, c_img/G, K)). */
int tg__conv_forward_raw(tg_dtype dt, const tg__conv_geom *g, const void *x, const void *w,
                         void *y);
/* y (B, c_img, img) = conv_transpose(x (B, c_col, col), w (c_col, c_img/G, K)) by
 * GEMM on the un-dilated input and col2im. */
int tg__conv_transpose_fast_raw(tg_dtype dt, const tg__conv_geom *g, const void *x,
                                const void *w, void *y);
/* The same by the column path only (tests; fast_raw may take the phases). */
int tg__conv_transpose_cols_raw(tg_dtype dt, const tg__conv_geom *g, const void *x,
                                const void *w, void *y);
/* The same by stride phases (conv_phase.c); requires tg__conv_phase_applies.
 * tg__conv_transpose_fast_raw takes it where tg__conv_phase_pays. */
int tg__conv_transpose_phase_raw(tg_dtype dt, const tg__conv_geom *g, const void *x,
                                 const void *w, void *y);
/* dw (c_col, c_img/G, K) = d<u, conv(z, W)>/dW for z (B, c_img, img), u (B, c_col, col). */
int tg__conv_weight_grad_raw(tg_dtype dt, const tg__conv_geom *g, const void *z,
                             const void *u, void *dw);
/* tg__conv_forward_raw(z, w) into y and tg__conv_weight_grad_raw(z, u) into dw
 * (same geometry, so u has y's extents), sharing each chunk's im2col(z):
 * ConvTranspose's backward (z = dy, u = x) when no graph is recorded.  The
 * same bits as the two separate calls. */
int tg__conv_and_weight_grad_raw(tg_dtype dt, const tg__conv_geom *g, const void *z,
                                 const void *w, const void *u, void *y, void *dw);
/* y (B, C, S) += bias[c] (bias may be NULL), then the activation, in place. */
void tg__conv_epilogue(tg_dtype dt, void *y, int64_t batch, int64_t c, int64_t s,
                       const void *bias, tg_activation act, double slope);

/* ---- conv_im2col.c, conv_gemm.c, conv_phase_kernels.c: the kernels ----
 *
 * Each file instantiates one template (conv_kernels_tmpl.h, conv_gemm_tmpl.h,
 * conv_phase_tmpl.h) for float and double; the template macro FN(x)
 * pastes x_f32 and x_f64, so the names declared below are not spelled out in
 * the templates.  Buffers are as in the _raw functions above, of float (f32)
 * or double (f64); the "void *" ones are activation inputs or outputs that
 * may be half (g->half_in, g->half_out).  The generated names:
 *   conv_im2col.c:         tg__conv_im2col_batch_f32   tg__conv_im2col_batch_f64
 *                          (and tg__conv_im2col_batch_bf16: bf16 bits)
 *                          tg__conv_col2im_batch_f32   tg__conv_col2im_batch_f64
 *                          tg__conv_pack_cbs_f32       tg__conv_pack_cbs_f64
 *                          (and tg__conv_pack_cbs_bf16)
 *                          tg__conv_unpack_cbs_f32     tg__conv_unpack_cbs_f64
 *                          tg__conv_epilogue_f32       tg__conv_epilogue_f64
 *   conv_gemm.c:           tg__conv_gemm_par_f32       tg__conv_gemm_par_f64
 *                          tg__conv_forward_f32        tg__conv_forward_f64
 *                          tg__conv_transpose_cols_f32 tg__conv_transpose_cols_f64
 *                          tg__conv_weight_grad_f32    tg__conv_weight_grad_f64
 *                          tg__conv_and_weight_grad_f32 tg__conv_and_weight_grad_f64
 *   conv_phase_kernels.c:  tg__conv_transpose_phase_f32 tg__conv_transpose_phase_f64
 * The int ones return TG_OK or TG_ENOMEM (message set). */

/* cols (c*K, nb*O) = im2col of nb images img (nb, c, I). */
int tg__conv_im2col_batch_f32(const void *img, int64_t nb, int64_t c, const tg__conv_geom *g,
                              float *cols);
int tg__conv_im2col_batch_f64(const void *img, int64_t nb, int64_t c, const tg__conv_geom *g,
                              double *cols);
int tg__conv_im2col_batch_bf16(const void *img, int64_t nb, int64_t c, const tg__conv_geom *g,
                               uint16_t *cols);
/* img (nb, c, I) = col2im(cols (c*K, nb*O), row stride ld); with rezero
 * (= cols), cols is left all zero. */
int tg__conv_col2im_batch_f32(const float *cols, int64_t ld, int64_t nb, int64_t c,
                              const tg__conv_geom *g, float *img, float *rezero);
int tg__conv_col2im_batch_f64(const double *cols, int64_t ld, int64_t nb, int64_t c,
                              const tg__conv_geom *g, double *img, double *rezero);
/* xp (c, nb*S) = x (nb, c, S). */
void tg__conv_pack_cbs_f32(const tg__conv_geom *g, const void *x, int64_t nb, int64_t c,
                           int64_t s, float *xp);
void tg__conv_pack_cbs_f64(const tg__conv_geom *g, const void *x, int64_t nb, int64_t c,
                           int64_t s, double *xp);
void tg__conv_pack_cbs_bf16(const tg__conv_geom *g, const void *x, int64_t nb, int64_t c,
                            int64_t s, uint16_t *xp);
/* y (nb, c, S) = yp (c, nb*S); with rezero (= yp), yp is left all zero. */
void tg__conv_unpack_cbs_f32(const float *yp, int64_t nb, int64_t c, int64_t s, float *y,
                             float *rezero);
void tg__conv_unpack_cbs_f64(const double *yp, int64_t nb, int64_t c, int64_t s, double *y,
                             double *rezero);
/* y (B, c, s) += bias[ch] (bias may be NULL), then the activation, in place. */
void tg__conv_epilogue_f32(float *y, int64_t batch, int64_t c, int64_t s, const float *bias,
                           tg_activation act, double slope);
void tg__conv_epilogue_f64(double *y, int64_t batch, int64_t c, int64_t s, const double *bias,
                           tg_activation act, double slope);

/* C (m, n) = op(A) @ op(B) + beta*C, one slice per thread (tg__gemm_par). */
void tg__conv_gemm_par_f32(tg_bf16_kernel bf16, bool ta, bool tb, int64_t m, int64_t n,
                           int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                           float beta, float *c, int64_t ldc);
void tg__conv_gemm_par_f64(tg_bf16_kernel bf16, bool ta, bool tb, int64_t m, int64_t n,
                           int64_t k, const double *a, int64_t lda, const double *b,
                           int64_t ldb, double beta, double *c, int64_t ldc);
/* The kernels of tg__conv_forward_raw, tg__conv_transpose_cols_raw,
 * tg__conv_weight_grad_raw and tg__conv_and_weight_grad_raw. */
int tg__conv_forward_f32(const tg__conv_geom *g, const void *x, const float *w, void *y);
int tg__conv_forward_f64(const tg__conv_geom *g, const void *x, const double *w, void *y);
int tg__conv_transpose_cols_f32(const tg__conv_geom *g, const void *x, const float *w, void *y);
int tg__conv_transpose_cols_f64(const tg__conv_geom *g, const void *x, const double *w,
                                void *y);
int tg__conv_weight_grad_f32(const tg__conv_geom *g, const void *z, const void *u, float *dw);
int tg__conv_weight_grad_f64(const tg__conv_geom *g, const void *z, const void *u, double *dw);
int tg__conv_and_weight_grad_f32(const tg__conv_geom *g, const void *z, const float *w,
                                 const void *u, void *y, float *dw);
int tg__conv_and_weight_grad_f64(const tg__conv_geom *g, const void *z, const double *w,
                                 const void *u, void *y, double *dw);

/* The kernel of tg__conv_transpose_phase_raw (no half buffers). */
int tg__conv_transpose_phase_f32(const tg__conv_geom *g, const float *x, const float *w,
                                 float *y);
int tg__conv_transpose_phase_f64(const tg__conv_geom *g, const double *x, const double *w,
                                 double *y);

/* ---- conv_phase.c: ConvTranspose as stride^N stride-1 correlations ---- */

/* Phase ph (= (r0*s1 + r1)*s2 + r2) of a ConvTranspose geometry with
 * dilation 1: on axis a its outputs are o = q*s + r - p for q in
 * [qlo, qlo + q), and its taps k = r + s*t for t < t[a] read x[q - t]. */
typedef struct tg__conv_phase {
    int64_t r[3], t[3], qlo[3], q[3];
    int64_t taps, pos;   /* products of t[] and q[] */
} tg__conv_phase;

void tg__conv_phase_at(const tg__conv_geom *g, int64_t ph, tg__conv_phase *f);
/* Dilation 1 and stride <= kernel on every axis (every phase has a tap). */
bool tg__conv_phase_applies(const tg__conv_geom *g);
/* Multiply-adds of the phase path / those of the column path (>= 1). */
double tg__conv_phase_work_ratio(const tg__conv_geom *g);
/* Whether the phase kernel folds the last axis's taps into shifted GEMMs
 * (conv_phase_tmpl.h) instead of copying them into its columns. */
bool tg__conv_phase_shift(const tg__conv_geom *g);
/* Tests: 0 = automatic, 1 = never shift, 2 = always (this thread). */
void tg__conv_phase_set_shift(int mode);
/* Whether tg__conv_transpose_fast_raw takes the phase path (measured rule). */
bool tg__conv_phase_pays(const tg__conv_geom *g);

/* ---- conv_reference.c ---- */

/* The textbook ConvTranspose (zero interleaving, padding, flipped kernel, then
 * a stride-1 Conv); same contract as tg__conv_transpose_fast_raw.  pad_hi and
 * op hold the high padding and output_padding of each of the 3 axes. */
int tg__conv_transpose_reference_raw(tg_dtype dt, const tg__conv_geom *g,
                                     const int64_t *pad_hi, const int64_t *op,
                                     const void *x, const void *w, void *y);

/* ---- conv.c / conv_wgrad.c ---- */

/* Sets g->wp (a new reference, for the caller to release) to w's panels
 * when g's GEMMs run on a bf16 kernel, g has one group, and the weight's
 * GEMMs are conv's (transposed false) or the column path of
 * conv_transpose's; otherwise leaves it NULL. */
tg__bf16_panels *tg__conv_weight_panels(tg__conv_geom *g, const tg_tensor *w, bool transposed);

/* A new contiguous work buffer (tg__work_alloc; freed with tg__work_free)
 * with t's elements as cdt (NULL for t == NULL, or NULL with TG_ENOMEM set). */
void *tg__conv_gather(const tg_tensor *t, tg_dtype cdt);
/* t's elements as a contiguous cdt buffer: t's own data (borrowed, *owned =
 * NULL) when t is contiguous of dtype cdt, else a copy that the caller frees
 * with tg__work_free(*owned).  NULL for t == NULL, or NULL with TG_ENOMEM set. */
const void *tg__conv_input(const tg_tensor *t, tg_dtype cdt, void **owned);
/* Buffers for the activation inputs a and b (b may be NULL, and then bb and
 * bo too) of the GEMM kernels: when the compute dtype is f32 and both are contiguous half tensors
 * of one dtype, their own data, read in place with g->half_in set (*ao = *bo
 * = NULL); otherwise tg__conv_input's buffers (*ab / *bb NULL, with TG_ENOMEM
 * set, when out of memory). */
void tg__conv_acts(tg__conv_geom *g, tg_dtype cdt, const tg_tensor *a, const tg_tensor *b,
                   const void **ab, const void **bb, void **ao, void **bo);
/* The compute-dtype buffer an output t (may be NULL) is computed in: t's own
 * data when t has dtype cdt, else a new work buffer, also stored in *owned,
 * that the caller scatters into t (rounding once) and frees with
 * tg__work_free(*owned).  NULL for t == NULL, or NULL with TG_ENOMEM set. */
void *tg__conv_output(tg_tensor *t, tg_dtype cdt, void **owned);
/* *out (new reference) = t sliced to the first want[a] positions of each of
 * its nsp spatial axes (t itself, retained, when nothing is cut). */
int tg__conv_crop(tg_tensor **out, tg_tensor *t, int nsp, const int64_t *want);
/* DEFAULT becomes the TG_CONV_ALGO environment choice (fast unless "reference"). */
tg_conv_algo tg__conv_resolve_algo(tg_conv_algo a);
extern const tg_op_schema tg__conv_weight_grad_schema;

#endif
