/* Tests of the collectives on tensors (tapegrad/dist.h): every op and dtype
 * against the values each rank computes on its own from every rank's
 * inputs (a fixed function of rank and index), contiguous and strided
 * tensors, and the errors every rank agrees on. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist_test.h"

static const tg_dtype k_dtypes[] = {TG_F32, TG_F64, TG_F16, TG_BF16,
                                    TG_I8,  TG_U8,  TG_I32, TG_I64};
enum { N_DTYPES = sizeof k_dtypes / sizeof k_dtypes[0] };

/* Rank r's element i: small values, so that sums and products of two stay
 * exact in every integer dtype; fractions (rounded to dt) for the floats. */
static double value(tg_dtype dt, int r, int64_t i)
{
    const int k = (int)((r * 7 + i * 3) % 11);
    if (!tg_dtype_is_float(dt)) return dt == TG_U8 ? k : k - 5;
    double v = (k - 5) * 0.3125 + 0.0123 * (r + 1) + 0.001 * (double)i;
    unsigned char b[8];
    tg_dtype_store(dt, b, 0, v);
    return tg_dtype_load(dt, b, 0);
}

/* a op b in dt's arithmetic: f32 in float, halves in f32 rounded back, f64
 * in double, integers in int64 (no overflow for value's range). */
static double combine(tg_dtype dt, tg_reduce_op op, double a, double b)
{
    double r;
    if (dt == TG_F64) {
        r = op == TG_REDUCE_PRODUCT ? a * b : op == TG_REDUCE_MIN ? fmin(a, b)
            : op == TG_REDUCE_MAX ? fmax(a, b) : a + b;
    } else if (tg_dtype_is_float(dt)) {
        const float x = (float)a, y = (float)b;
        r = op == TG_REDUCE_PRODUCT ? x * y : op == TG_REDUCE_MIN ? fminf(x, y)
            : op == TG_REDUCE_MAX ? fmaxf(x, y) : x + y;
    } else {
        const int64_t x = (int64_t)a, y = (int64_t)b;
        r = (double)(op == TG_REDUCE_PRODUCT ? x * y : op == TG_REDUCE_MIN ? (x < y ? x : y)
                     : op == TG_REDUCE_MAX ? (x > y ? x : y) : x + y);
    }
    unsigned char buf[8];
    tg_dtype_store(dt, buf, 0, r);
    return tg_dtype_load(dt, buf, 0);
}

/* The expected op over the ranks of value(dt, r, i). */
static double expected(tg_dtype dt, tg_reduce_op op, int world, int64_t i)
{
    const bool fl = tg_dtype_is_float(dt), avg = op == TG_REDUCE_AVG;
    /* AVG of floats: each value times 1 / world (rounded to dt), summed */
    const double f = combine(dt, TG_REDUCE_SUM, 1.0 / world, 0.0);
    double acc = 0;
    for (int r = 0; r < world; r++) {
        double v = value(dt, r, i);
        if (avg && fl) v = combine(dt, TG_REDUCE_PRODUCT, v, f);
        acc = r == 0 ? v : combine(dt, avg ? TG_REDUCE_SUM : op, acc, v);
    }
    if (avg && !fl) acc = (double)((int64_t)acc / world);
    return acc;
}

/* A (rows, cols) tensor of dt holding value(dt, rank, i) at flat index i;
 * strided: the transpose of a contiguous (cols, rows) one (*base, new,
 * holds its storage). */
static tg_tensor *make(tg_dtype dt, int rank, int64_t rows, int64_t cols, bool strided,
                       tg_tensor **base)
{
    tg_tensor *t = NULL;
    *base = NULL;
    const int64_t shape[2] = {rows, cols}, tshape[2] = {cols, rows};
    if (strided) {
        if (tg_tensor_zeros(base, dt, 2, tshape) < 0 || tg_transpose(&t, *base, 0, 1) < 0)
            return NULL;
    } else if (tg_tensor_zeros(&t, dt, 2, shape) < 0) {
        return NULL;
    }
    for (int64_t i = 0; i < rows * cols; i++)
        tg_tensor_set(t, (int64_t[]){i / cols, i % cols}, value(dt, rank, i));
    return t;
}

/* Whether t's element i (row-major) equals want(i) for every i; reports
 * the first that does not. */
static bool all_equal(const tg_tensor *t, double (*want)(const void *, int64_t),
                      const void *ctx, const char *what)
{
    const int64_t n = tg_tensor_numel(t), cols = tg_tensor_ndim(t) == 2 ? tg_tensor_dim(t, 1) : n;
    for (int64_t i = 0; i < n; i++) {
        double got = NAN;
        if (tg_tensor_ndim(t) == 2) tg_tensor_get(t, (int64_t[]){i / cols, i % cols}, &got);
        else tg_tensor_get_flat(t, i, &got);
        if (got != want(ctx, i)) {
            CHECK(false, "%s: element %lld is %.17g, want %.17g", what, (long long)i, got,
                  want(ctx, i));
            return false;
        }
    }
    return true;
}

typedef struct ctx {
    tg_dtype dt;
    tg_reduce_op op;
    int world, rank;
    int64_t offset;
} ctx;

static double want_reduced(const void *p, int64_t i)
{
    const ctx *c = p;
    return expected(c->dt, c->op, c->world, i + c->offset);
}

static double want_of_rank(const void *p, int64_t i)
{
    const ctx *c = p;
    return value(c->dt, c->rank, i + c->offset);
}

static const char *op_name(tg_reduce_op op)
{
    static const char *const names[] = {"sum", "avg", "product", "min", "max"};
    return names[op];
}

void allreduce_gives_every_op_of_every_dtype_as_computed_locally(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    char what[96];
    for (int k = 0; k < N_DTYPES; k++)
        for (int op = 0; op < TG_REDUCE_OP_COUNT; op++)
            for (int strided = 0; strided < 2; strided++) {
                tg_tensor *base = NULL, *t = make(k_dtypes[k], rank, 3, 4, strided, &base);
                CHECK(t != NULL, "make");
                if (!t) return;
                const uint64_t v0 = tg_tensor_version(t);
                OK(tg_dist_allreduce(g_dist, t, (tg_reduce_op)op));
                snprintf(what, sizeof what, "allreduce %s %s%s", tg_dtype_name(k_dtypes[k]),
                         op_name(op), strided ? " strided" : "");
                ctx c = {k_dtypes[k], (tg_reduce_op)op, world, rank, 0};
                all_equal(t, want_reduced, &c, what);
                CHECK(tg_tensor_version(t) > v0, "%s: version not bumped", what);
                tg_tensor_release(t);
                tg_tensor_release(base);
            }
}

void all_gather_gives_every_rank_s_tensor_in_a_list_or_one_tensor(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    char what[96];
    for (int k = 0; k < N_DTYPES; k++) {
        const tg_dtype dt = k_dtypes[k];
        tg_tensor *base = NULL, *t = make(dt, rank, 2, 3, true, &base);
        tg_tensor *outs[8] = {NULL}, *obase[8] = {NULL}, *cat = NULL, *stack = NULL;
        for (int r = 0; r < world && r < 8; r++) outs[r] = make(dt, 99, 2, 3, r % 2, &obase[r]);
        OK(tg_dist_all_gather(g_dist, outs, t));
        for (int r = 0; r < world; r++) {
            ctx c = {dt, TG_REDUCE_SUM, world, r, 0};
            snprintf(what, sizeof what, "all_gather %s outs[%d]", tg_dtype_name(dt), r);
            all_equal(outs[r], want_of_rank, &c, what);
        }
        OK(tg_tensor_zeros(&cat, dt, 2, (int64_t[]){2 * world, 3}));
        OK(tg_tensor_zeros(&stack, dt, 3, (int64_t[]){world, 2, 3}));
        OK(tg_dist_all_gather_into_tensor(g_dist, cat, t));
        OK(tg_dist_all_gather_into_tensor(g_dist, stack, t));
        for (int r = 0; r < world; r++)
            for (int64_t i = 0; i < 6; i++) {
                double a = NAN, b = NAN;
                tg_tensor_get_flat(cat, r * 6 + i, &a);
                tg_tensor_get_flat(stack, r * 6 + i, &b);
                CHECK(a == value(dt, r, i) && b == a, "%s into_tensor rank %d element %lld: "
                      "%g %g", tg_dtype_name(dt), r, (long long)i, a, b);
            }
        for (int r = 0; r < world; r++) tg_tensor_release(outs[r]), tg_tensor_release(obase[r]);
        tg_tensor_release(cat);
        tg_tensor_release(stack);
        tg_tensor_release(t);
        tg_tensor_release(base);
    }
}

void reduce_scatter_gives_each_rank_its_reduced_block(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    char what[96];
    for (int k = 0; k < N_DTYPES; k++)
        for (int op = 0; op < TG_REDUCE_OP_COUNT; op++) {
            const tg_dtype dt = k_dtypes[k];
            /* in (world * 2, 3), strided; out (2, 3), block `rank` of it */
            tg_tensor *base = NULL, *in = make(dt, rank, 2 * world, 3, true, &base), *out = NULL;
            OK(tg_tensor_zeros(&out, dt, 2, (int64_t[]){2, 3}));
            OK(tg_dist_reduce_scatter_tensor(g_dist, out, in, (tg_reduce_op)op));
            snprintf(what, sizeof what, "reduce_scatter %s %s", tg_dtype_name(dt), op_name(op));
            ctx c = {dt, (tg_reduce_op)op, world, rank, (int64_t)rank * 6};
            all_equal(out, want_reduced, &c, what);
            /* in is left as it was (AVG works on a copy) */
            ctx mine = {dt, TG_REDUCE_SUM, world, rank, 0};
            all_equal(in, want_of_rank, &mine, "reduce_scatter's input");
            tg_tensor_release(out);
            tg_tensor_release(in);
            tg_tensor_release(base);
        }
}

void all_to_all_single_swaps_blocks(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    for (int k = 0; k < N_DTYPES; k++) {
        const tg_dtype dt = k_dtypes[k];
        tg_tensor *base = NULL, *in = make(dt, rank, 2 * world, 3, true, &base), *out = NULL;
        OK(tg_tensor_zeros(&out, dt, 2, (int64_t[]){2 * world, 3}));
        OK(tg_dist_all_to_all_single(g_dist, out, in));
        /* block i of out is block `rank` of rank i's in */
        for (int i = 0; i < world; i++)
            for (int64_t e = 0; e < 6; e++) {
                double got = NAN;
                tg_tensor_get_flat(out, i * 6 + e, &got);
                CHECK(got == value(dt, i, rank * 6 + e), "all_to_all %s block %d element %lld",
                      tg_dtype_name(dt), i, (long long)e);
            }
        tg_tensor_release(out);
        tg_tensor_release(in);
        tg_tensor_release(base);
    }
}

void gather_and_scatter_go_through_the_root(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    for (int k = 0; k < N_DTYPES; k++)
        for (int root = 0; root < world; root++) {
            const tg_dtype dt = k_dtypes[k];
            tg_tensor *base = NULL, *t = make(dt, rank, 2, 3, true, &base);
            tg_tensor *list[8] = {NULL}, *lbase[8] = {NULL};
            for (int r = 0; rank == root && r < world; r++)
                list[r] = make(dt, 50 + r, 2, 3, r % 2, &lbase[r]);
            OK(tg_dist_gather(g_dist, t, rank == root ? list : NULL, root));
            for (int r = 0; rank == root && r < world; r++) {
                ctx c = {dt, TG_REDUCE_SUM, world, r, 0};
                all_equal(list[r], want_of_rank, &c, "gather_list");
            }
            /* scatter: the root's list[r] (rank r's t, now) back to rank r,
             * into a strided t that held something else */
            tg_tensor *sbase = NULL, *s = make(dt, 77, 2, 3, true, &sbase);
            OK(tg_dist_scatter(g_dist, s, rank == root ? list : NULL, root));
            ctx mine = {dt, TG_REDUCE_SUM, world, rank, 0};
            all_equal(s, want_of_rank, &mine, "scatter");
            for (int r = 0; r < world; r++) tg_tensor_release(list[r]), tg_tensor_release(lbase[r]);
            tg_tensor_release(s);
            tg_tensor_release(sbase);
            tg_tensor_release(t);
            tg_tensor_release(base);
        }
}

void broadcast_tensor_takes_every_dtype_and_strided_tensors(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    for (int k = 0; k < N_DTYPES; k++)
        for (int root = 0; root < world; root++)
            for (int strided = 0; strided < 2; strided++) {
                const tg_dtype dt = k_dtypes[k];
                tg_tensor *base = NULL, *t = make(dt, rank + 30, 3, 4, strided, &base);
                OK(tg_dist_broadcast_tensor(g_dist, t, root));
                ctx c = {dt, TG_REDUCE_SUM, world, root + 30, 0};
                all_equal(t, want_of_rank, &c, "broadcast_tensor");
                tg_tensor_release(t);
                tg_tensor_release(base);
            }
}

void send_and_recv_match_by_tag_and_check_the_layout(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    if (world < 2) return;
    for (int k = 0; k < N_DTYPES; k++) {
        const tg_dtype dt = k_dtypes[k];
        tg_tensor *b1 = NULL, *b2 = NULL, *a = make(dt, 10, 2, 3, true, &b1);
        tg_tensor *b = make(dt, 20, 3, 2, false, &b2);
        if (rank == 0) {
            OK(tg_dist_send(g_dist, a, 1, 5));
            OK(tg_dist_send(g_dist, b, 1, 7));
        } else if (rank == 1) {
            /* tag 7 first: MPI matches by tag */
            tg_tensor *x = NULL, *y = NULL, *xb = NULL, *yb = NULL;
            y = make(dt, 0, 3, 2, true, &yb);
            x = make(dt, 0, 2, 3, false, &xb);
            OK(tg_dist_recv(g_dist, y, 0, 7));
            OK(tg_dist_recv(g_dist, x, 0, 5));
            ctx ca = {dt, TG_REDUCE_SUM, world, 10, 0}, cb = {dt, TG_REDUCE_SUM, world, 20, 0};
            all_equal(x, want_of_rank, &ca, "recv tag 5");
            all_equal(y, want_of_rank, &cb, "recv tag 7");
            tg_tensor_release(x), tg_tensor_release(y), tg_tensor_release(xb);
            tg_tensor_release(yb);
        }
        tg_tensor_release(a), tg_tensor_release(b), tg_tensor_release(b1), tg_tensor_release(b2);
    }
    /* a tensor of another shape, then of another dtype: refused by recv,
     * whose t is unchanged, and the next message still arrives */
    tg_tensor *t = NULL, *base = NULL;
    if (rank == 0) {
        t = make(TG_F32, 3, 2, 3, false, &base);
        OK(tg_dist_send(g_dist, t, 1, 1));
        OK(tg_dist_send(g_dist, t, 1, 1));
        OK(tg_dist_send(g_dist, t, 1, 1));
    } else if (rank == 1) {
        tg_tensor *wrong = make(TG_F32, 9, 3, 2, false, &base), *wdt = NULL, *wb = NULL;
        int rc = tg_dist_recv(g_dist, wrong, 0, 1);
        CHECK(rc == TG_ESHAPE, "recv of another shape gave %s", tg_status_name(rc));
        ctx c9 = {TG_F32, TG_REDUCE_SUM, world, 9, 0};
        all_equal(wrong, want_of_rank, &c9, "refused recv's t");
        wdt = make(TG_F64, 9, 2, 3, false, &wb);
        rc = tg_dist_recv(g_dist, wdt, 0, 1);
        CHECK(rc == TG_EDTYPE, "recv of another dtype gave %s", tg_status_name(rc));
        t = make(TG_F32, 0, 2, 3, false, &wb);
        OK(tg_dist_recv(g_dist, t, 0, 1));
        ctx c3 = {TG_F32, TG_REDUCE_SUM, world, 3, 0};
        all_equal(t, want_of_rank, &c3, "recv after refusals");
        tg_tensor_release(wrong), tg_tensor_release(wdt);
    }
    /* the caller's mistakes, on its rank alone */
    CHECK(tg_dist_send(g_dist, t ? t : NULL, rank, 0) == TG_EINVAL, "send to itself");
    CHECK(tg_dist_recv(g_dist, t, world, 0) == TG_EINVAL, "recv from a rank out of range");
    CHECK(tg_dist_send(g_dist, t, (rank + 1) % world, -1) == TG_EINVAL, "tag -1");
    CHECK(tg_dist_send(g_dist, NULL, (rank + 1) % world, 0) == TG_EINVAL, "NULL t");
    tg_tensor_release(t);
    tg_tensor_release(base);
}

/* rc on every rank, with a message that names what. */
static void refused(int rc, int want, const char *what)
{
    CHECK(rc == want, "%s gave %s (%s), want %s", what, tg_status_name(rc), tg_error_message(),
          tg_status_name(want));
}

void collectives_refused_on_one_rank_are_refused_on_every_rank(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    if (world < 2) return;
    const bool last = rank == world - 1;
    tg_tensor *a = NULL, *b = NULL, *e = NULL, *ex = NULL, *one = NULL;
    OK(tg_tensor_full(&a, TG_F32, 2, (int64_t[]){2, 3}, 1.5));
    OK(tg_tensor_full(&b, TG_F32, 2, (int64_t[]){last ? 3 : 2, last ? 2 : 3}, 1.5));
    OK(tg_tensor_zeros(&e, last ? TG_F64 : TG_F32, 2, (int64_t[]){2, 3}));
    refused(tg_dist_allreduce(g_dist, b, TG_REDUCE_SUM), TG_ESHAPE, "allreduce shapes");
    refused(tg_dist_allreduce(g_dist, e, TG_REDUCE_SUM), TG_EDTYPE, "allreduce dtypes");
    refused(tg_dist_allreduce(g_dist, a, last ? TG_REDUCE_MAX : TG_REDUCE_SUM), TG_EINVAL,
            "allreduce ops");
    refused(tg_dist_allreduce(g_dist, a, last ? (tg_reduce_op)9 : TG_REDUCE_SUM), TG_EINVAL,
            "allreduce op 9");
    refused(tg_dist_allreduce(g_dist, last ? NULL : a, TG_REDUCE_SUM), TG_EINVAL,
            "allreduce NULL");
    char want[64];
    snprintf(want, sizeof want, "rank %d: dist_allreduce: t must not be NULL", world - 1);
    CHECK(strcmp(tg_error_message(), want) == 0, "message '%s'", tg_error_message());
    /* nothing changed by the refusals */
    double v = 0;
    tg_tensor_get_flat(a, 0, &v);
    CHECK(v == 1.5, "a refused allreduce changed t: %g", v);
    /* an expanded tensor cannot be written */
    OK(tg_tensor_scalar(&one, TG_F32, 1));
    OK(tg_expand(&ex, one, 2, (int64_t[]){2, 3}));
    refused(tg_dist_allreduce(g_dist, last ? ex : a, TG_REDUCE_SUM), TG_EINVAL,
            "allreduce expanded");
    /* out of the wrong shape, roots */
    tg_tensor *cat = NULL;
    OK(tg_tensor_zeros(&cat, TG_F32, 2, (int64_t[]){last ? 2 * world + 1 : 2 * world, 3}));
    refused(tg_dist_all_gather_into_tensor(g_dist, cat, a), TG_ESHAPE, "all_gather out shape");
    refused(tg_dist_reduce_scatter_tensor(g_dist, a, cat, TG_REDUCE_SUM), TG_ESHAPE,
            "reduce_scatter in shape");
    refused(tg_dist_gather(g_dist, a, NULL, last ? world : 0), TG_EINVAL, "gather root range");
    refused(tg_dist_gather(g_dist, a, NULL, last ? 1 : 0), TG_EINVAL, "gather roots differ");
    refused(tg_dist_gather(g_dist, a, NULL, 0), TG_EINVAL, "gather without a list on root");
    refused(tg_dist_scatter(g_dist, a, NULL, 0), TG_EINVAL, "scatter without a list on root");
    tg_tensor *outs[8] = {a, a, a, a, a, a, a, a};
    if (last) outs[0] = e;
    refused(tg_dist_all_gather(g_dist, outs, a), TG_EDTYPE, "all_gather outs dtype");
    refused(tg_dist_all_to_all_single(g_dist, b, a), TG_ESHAPE, "all_to_all shapes");
    refused(tg_dist_allreduce(NULL, a, TG_REDUCE_SUM), TG_EINVAL, "NULL d");
    tg_tensor_release(cat);
    tg_tensor_release(ex);
    tg_tensor_release(one);
    tg_tensor_release(a);
    tg_tensor_release(b);
    tg_tensor_release(e);
}
