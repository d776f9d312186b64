/* src/ops/cumsum.c - cumsum(x, dim): the running sums of x along dim
 * (torch.cumsum), y[.., k, ..] = sum_{j <= k} x[.., j, ..].
 *
 * With O the extent of the dims before dim, D dim's extent and I that of
 * the dims after it, x is (O, D, I) and its O I lines (o, i) run over k.
 * A line's running sum is a double for a float x and int64 bits for an
 * integer x (torch promotes integers to int64), x's elements added in k's
 * order as read in x's dtype; a float result is rounded once per element
 * from its double sum, and integer sums wrap as torch's.
 *
 * The lines are independent, so they are shared out among threads in
 * blocks read through x's strides (a view is summed where it lies, with
 * no copy of x): with I > 1 a block is one o and a run of columns i,
 * walked row by row (k) with one running sum per column, each row a run
 * of y; with I = 1 a block is a few whole lines, summed side by side.
 * The split never changes which terms are added in which order, so the
 * bits are the same for any thread count.
 *
 * cumsum is linear, and x[j] reaches every y[k] with k >= j, so
 *   dx[j] = sum_{k >= j} g[k] = flip(cumsum(flip(g))),
 * the reversed running sum, written with flip and cumsum itself:
 * differentiable to any order. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"
#include "ops/families.h"
#include "ops/shape_internal.h"
#include "tapegrad/ops.h"

typedef struct cumsum_params {
    int dim;   /* wrapped into [0, ndim); 0 for a 0-d x */
} cumsum_params;

/* A column block is at most CUMSUM_COLS wide, narrower (halving, down to
 * CUMSUM_MIN_COLS, which keeps two threads' runs of a row of y off one
 * cache line) until there are two blocks per thread to share out.  Lines
 * (I = 1) are summed CUMSUM_COLS elements at a time into rows of sums,
 * CUMSUM_LINES lines side by side where there are two such blocks per
 * thread (a line's sum is a chain of dependent additions: several chains
 * at once keep the adder busy), else one by one. */
enum { CUMSUM_COLS = 256, CUMSUM_MIN_COLS = 16, CUMSUM_LINES = 4 };

/* x as (O, D, I) = (outer, d, inner) and y, contiguous (O, D, I) of dtype
 * ydt.  With inner > 1, block t is (o, c) = (t / nblk, t % nblk), columns
 * [c cols, c cols + cols) (the last block shorter); with inner 1, block t
 * is lines [t lines, t lines + lines) (the last block shorter). */
typedef struct cumsum_job {
    const tg_tensor *x;
    void *y;
    tg_dtype ydt;
    int dim;
    int64_t outer, d, inner, cols, nblk;
    int64_t lines;     /* inner 1: lines per block, CUMSUM_LINES or 1 */
    int64_t dstride;   /* x's stride along dim */
    bool unit;         /* the dims after dim are contiguous: column i at offset i */
} cumsum_job;

/* Running sums of a float x (doubles) or of an integer x (int64 bits in
 * unsigned arithmetic, so that overflow wraps as torch's int64). */
typedef union cumsum_acc {
    double f[CUMSUM_COLS];
    uint64_t i[CUMSUM_COLS];
} cumsum_acc;

/* Each dtype the kernels read: its element type, what one element adds
 * (exact: a double for a float, the sign-extended value for an integer)
 * and the member of cumsum_acc it adds into.  f16 and bf16 elements come
 * as f32 (halves_to_f32). */
#define CUMSUM_DTYPES(X)                                         \
    X(TG_F32, float, (double), f)                                \
    X(TG_F64, double, (double), f)                               \
    X(TG_I8, int8_t, (uint64_t)(int64_t), i)                     \
    X(TG_U8, uint8_t, (uint64_t)(int64_t), i)                    \
    X(TG_I32, int32_t, (uint64_t)(int64_t), i)                   \
    X(TG_I64, int64_t, (uint64_t), i)

/* x's element e added to a running sum s: e + s in double, e's NaN
 * (quieted) when both are NaN, as x86's addition keeps its first
 * operand's, whatever order the compiler emits; wrapping for int64. */
static inline double add_f(double e, double s)
{
    return isnan(e) ? e + e : e + s;
}
#define ADD_f(e, s) add_f(e, s)
#define ADD_i(e, s) ((e) + (s))

/* The storage offset (from x's offset) of the row-major flat index f over
 * x's dims [lo, hi) (each extent >= 1). */
static int64_t dims_offset(const tg_tensor *x, int lo, int hi, int64_t f)
{
    int64_t off = 0;
    for (int d = hi - 1; d >= lo; d--) {
        off += f % x->shape[d] * x->strides[d];
        f /= x->shape[d];
    }
    return off;
}

/* n halves of dtype dt at s[off[c]] (off given) or s[c stride] as f32
 * values in fb, through hb (the bulk conversion: tg_f16_to_f32's and
 * tg_bf16_to_f32's bits). */
static const float *halves_to_f32(tg_dtype dt, const uint16_t *s, const int64_t *off,
                                  int64_t stride, int64_t n, uint16_t *hb, float *fb)
{
    if (off)
        for (int64_t c = 0; c < n; c++) hb[c] = s[off[c]];
    else if (stride != 1)
        for (int64_t c = 0; c < n; c++) hb[c] = s[c * stride];
    tg__half_to_f32_rows(dt, off || stride != 1 ? hb : s, 0, fb, 0, 1, n);
    return fb;
}

/* n sums written to y (dtype dt) at y: a float sum rounded once (as
 * tg_dtype_store: f16/bf16 in one rounding from the double), int64 bits
 * as they are. */
static void put_sums(tg_dtype dt, const cumsum_acc *a, void *y, int64_t n)
{
    if (dt == TG_I64 || dt == TG_F64) memcpy(y, a, (size_t)n * 8);
    else if (dt == TG_F32)
        for (int64_t c = 0; c < n; c++) ((float *)y)[c] = (float)a->f[c];
    else tg__f64_to_half_n(dt, a->f, y, n);
}

/* Row k of a column block, column c at s[c] (unit) or s[off[c]]: each
 * column's element added to its sum (row 0: the sum is the element, so
 * that y[0] has x[0]'s bits, -0.0 and NaN payloads too). */
#define ADD_ROW(DT, T, LOAD, M)                                                     \
    case DT:                                                                        \
        if (k == 0)                                                                 \
            for (int64_t c = 0; c < b; c++)                                         \
                acc.M[c] = LOAD(((const T *)s)[unit ? c : off[c]]);                 \
        else if (unit)                                                              \
            for (int64_t c = 0; c < b; c++)                                         \
                acc.M[c] = ADD_##M(LOAD(((const T *)s)[c]), acc.M[c]);              \
        else                                                                        \
            for (int64_t c = 0; c < b; c++)                                         \
                acc.M[c] = ADD_##M(LOAD(((const T *)s)[off[c]]), acc.M[c]);         \
        break;

/* Columns [i0, i0 + b) of block o (inner > 1): the rows k in order, each
 * row's sums written to y's row. */
static void cumsum_cols(const cumsum_job *j, int64_t o, int64_t i0, int64_t b)
{
    const tg_tensor *x = j->x;
    const int64_t xsz = (int64_t)tg_dtype_size(x->dtype), ysz = (int64_t)tg_dtype_size(j->ydt);
    int64_t base = x->offset + dims_offset(x, 0, j->dim, o), off[CUMSUM_COLS];
    if (j->unit) base += i0;
    else
        for (int64_t c = 0; c < b; c++) off[c] = dims_offset(x, j->dim + 1, x->ndim, i0 + c);
    char *y = (char *)j->y + (o * j->d * j->inner + i0) * ysz;
    cumsum_acc acc;
    uint16_t hb[CUMSUM_COLS];
    float fb[CUMSUM_COLS];
    const bool half = tg__dtype_is_half(x->dtype);
    for (int64_t k = 0; k < j->d; k++) {
        const char *s = (const char *)x->storage->data + (base + k * j->dstride) * xsz;
        bool unit = j->unit;
        if (half) {   /* the row as f32 values, in order */
            s = (const char *)halves_to_f32(x->dtype, (const uint16_t *)s, unit ? NULL : off, 1,
                                            b, hb, fb);
            unit = true;
        }
        switch (half ? TG_F32 : x->dtype) {
        CUMSUM_DTYPES(ADD_ROW)
        case TG_F16: case TG_BF16: case TG_DTYPE_COUNT: break;
        }
        put_sums(j->ydt, &acc, y + k * j->inner * ysz, b);
    }
}

/* Elements [k0, k0 + n) of NL lines, line l's at s[l] (then step apart):
 * each line's running sum carried on from sum_f[l] or sum_i[l], each
 * step's value into rows[l] (element 0: the sum is the element, as in
 * ADD_ROW).  The lines' sums are independent, so their additions overlap.
 * A run is first summed with the plain addition, a chain of additions
 * alone: that is add_f unless an element is NaN, and then the sum ends
 * NaN (a NaN stays one), so a run whose sum ends NaN is summed again from
 * its start with add_f. */
#define RUN_LOOP(T, LOAD, M, ADD)                                                   \
    for (int l = 0; l < NL; l++) {                                                  \
        const T e0 = ((const T *)s[l])[0];                                          \
        sum_##M[l] = k0 == 0 ? LOAD(e0) : ADD(LOAD(e0), from_##M[l]);               \
        rows[l].M[0] = sum_##M[l];                                                  \
    }                                                                               \
    for (int64_t t = 1; t < n; t++)                                                 \
        for (int l = 0; l < NL; l++) {                                              \
            sum_##M[l] = ADD(LOAD(((const T *)s[l])[t * step]), sum_##M[l]);        \
            rows[l].M[t] = sum_##M[l];                                              \
        }
#define ADD_PLAIN(e, s) ((e) + (s))
#define ADD_RUN(DT, T, LOAD, M)                                                     \
    case DT: {                                                                      \
        bool nan = false;                                                           \
        for (int l = 0; l < NL; l++) from_##M[l] = sum_##M[l];                      \
        RUN_LOOP(T, LOAD, M, ADD_PLAIN)                                             \
        for (int l = 0; l < NL; l++) nan |= sum_##M[l] != sum_##M[l];               \
        if (nan) {                                                                  \
            RUN_LOOP(T, LOAD, M, ADD_##M)                                           \
        }                                                                           \
        break;                                                                      \
    }

/* Lines [o, o + NL) (inner 1), CUMSUM_COLS elements at a time. */
static inline __attribute__((always_inline)) void cumsum_lines(const cumsum_job *j, int64_t o,
                                                               const int NL)
{
    const tg_tensor *x = j->x;
    const int64_t xsz = (int64_t)tg_dtype_size(x->dtype), ysz = (int64_t)tg_dtype_size(j->ydt);
    int64_t at[CUMSUM_LINES];
    for (int l = 0; l < NL; l++) at[l] = x->offset + dims_offset(x, 0, j->dim, o + l);
    cumsum_acc rows[CUMSUM_LINES];
    double sum_f[CUMSUM_LINES] = {0}, from_f[CUMSUM_LINES];       /* a float x's sums */
    uint64_t sum_i[CUMSUM_LINES] = {0}, from_i[CUMSUM_LINES];     /* an integer x's */
    uint16_t hb[CUMSUM_COLS];
    float fb[CUMSUM_LINES][CUMSUM_COLS];
    const bool half = tg__dtype_is_half(x->dtype);
    for (int64_t k0 = 0; k0 < j->d; k0 += CUMSUM_COLS) {
        const int64_t n = j->d - k0 < CUMSUM_COLS ? j->d - k0 : CUMSUM_COLS;
        const char *s[CUMSUM_LINES];
        int64_t step = j->dstride;
        for (int l = 0; l < NL; l++) {
            s[l] = (const char *)x->storage->data + (at[l] + k0 * j->dstride) * xsz;
            if (half)   /* the run as f32 values, in order */
                s[l] = (const char *)halves_to_f32(x->dtype, (const uint16_t *)s[l], NULL, step,
                                                   n, hb, fb[l]);
        }
        if (half) step = 1;
        switch (half ? TG_F32 : x->dtype) {
        CUMSUM_DTYPES(ADD_RUN)
        case TG_F16: case TG_BF16: case TG_DTYPE_COUNT: break;
        }
        for (int l = 0; l < NL; l++)
            put_sums(j->ydt, &rows[l], (char *)j->y + ((o + l) * j->d + k0) * ysz, n);
    }
}

static void cumsum_range(void *p, int64_t lo, int64_t hi)
{
    const cumsum_job *j = p;
    for (int64_t t = lo; t < hi; t++) {
        if (j->inner == 1) {
            /* block t: lines [t lines, t lines + lines), the last one shorter */
            const int64_t o = t * j->lines, o1 = o + j->lines < j->outer ? o + j->lines : j->outer;
            if (o1 - o == CUMSUM_LINES) cumsum_lines(j, o, CUMSUM_LINES);
            else
                for (int64_t l = o; l < o1; l++) cumsum_lines(j, l, 1);
            continue;
        }
        const int64_t i0 = t % j->nblk * j->cols;
        cumsum_cols(j, t / j->nblk, i0, j->inner - i0 < j->cols ? j->inner - i0 : j->cols);
    }
}

/* x's (O, D, I) geometry and the blocks of a non-empty x. */
static void cumsum_plan(const tg_tensor *x, int dim, cumsum_job *j)
{
    j->outer = j->d = j->inner = 1;
    j->unit = true;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (d < dim) j->outer *= x->shape[d];
        else if (d == dim) j->d = x->shape[d];
        else {
            j->unit = j->unit && (x->shape[d] == 1 || x->strides[d] == j->inner);
            j->inner *= x->shape[d];
        }
    }
    j->dstride = x->ndim > 0 ? x->strides[dim] : 0;
    const int64_t tasks = 2 * (int64_t)tg_get_num_threads();
    j->cols = CUMSUM_COLS;
    while (j->cols > CUMSUM_MIN_COLS && j->outer * ((j->inner + j->cols - 1) / j->cols) < tasks)
        j->cols /= 2;
    j->nblk = (j->inner + j->cols - 1) / j->cols;
    j->lines = j->outer >= CUMSUM_LINES * tasks ? CUMSUM_LINES : 1;
}

static int cumsum_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                          const void *params)
{
    (void)ctx;
    (void)n;
    const tg_tensor *x = in[0];
    const int dim = ((const cumsum_params *)params)->dim;
    const bool ints = !tg_dtype_is_float(x->dtype);
    tg_tensor *y = tg__tensor_uninit(ints ? TG_I64 : x->dtype, x->ndim, x->shape);
    if (!y) return TG_ENOMEM;
    const int64_t numel = tg__numel(x->ndim, x->shape);
    if (numel > 0) {
        cumsum_job j = {.x = x, .y = tg_tensor_data(y), .ydt = y->dtype,
                        .dim = dim};
        cumsum_plan(x, dim, &j);
        const int64_t blocks = j.inner == 1 ? (j.outer + j.lines - 1) / j.lines
                                            : j.outer * j.nblk;
        tg__parallel_range(blocks, numel > 32768, cumsum_range, &j);
    }
    *out = y;
    return TG_OK;
}

/* dx = flip(cumsum(flip(g, dim), dim), dim): the sums of g from each index on. */
static int cumsum_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **gi)
{
    const int dim = ((const cumsum_params *)tg_op_ctx_params(ctx))->dim;
    tg_tensor *f = NULL, *c = NULL;
    int rc;
    TG_TRY(tg_flip(&f, g, 1, &dim));
    TG_TRY_GOTO(tg_cumsum(&c, f, dim));
    rc = tg_flip(&gi[0], c, 1, &dim);
done:
    tg_tensor_release(f);
    tg_tensor_release(c);
    return rc;
}

/* FP32, as sum: a running sum accumulates rounding, so a half x inside an
 * autocast scope gives an f32 result (torch's CUDA autocast lists cumsum
 * as fp32). */
static const tg_op_schema cumsum_op = {
    .name = "cumsum", .arity = 1, .amp = TG_AMP_FP32, .forward = cumsum_forward,
    .backward = cumsum_backward, .double_backward = true,
    .vjp = "da = flip(cumsum(flip(g))) along dim"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__cumsum_ops[] = {&cumsum_op};
static_assert(sizeof tg__cumsum_ops / sizeof tg__cumsum_ops[0] == TG__cumsum_N,
              "src/ops/families.h must count the cumsum ops");

int tg_cumsum(tg_tensor **out, tg_tensor *x, int dim)
{
    TG_CHECK(out != NULL, TG_EINVAL, "cumsum: out must not be NULL");
    TG_CHECK(x != NULL, TG_EINVAL, "cumsum: x must not be NULL");
    cumsum_params p = {0};
    /* as torch, a 0-d x takes dim 0 or -1 (and its running sum is itself) */
    TG_TRY(tg__shape_wrap_dim("cumsum", "dim", dim, x->ndim > 0 ? x->ndim : 1, &p.dim));
    return tg_op_call(&cumsum_op, out, 1, (tg_tensor *[]){x}, &p, sizeof p);
}
