/* tests/test_linalg2.c - torch.matmul's shape rules in tg_matmul, the
 * fixed-rank products (mm, bmm, mv, dot, outer, addmm, baddbmm), tril /
 * triu and einsum against PyTorch (values and gradients, f32 and f64, and
 * bf16 for matmul), gradcheck and gradgradcheck in f64, strided and
 * broadcast views, and the refusals.  Goldens:
 * scripts/make_linalg_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Runs golden op `op` (arg as the script writes it) on in[0..n). */
static int run_op(const char *op, const char *arg, tg_tensor **y, int n, tg_tensor *const *in)
{
    if (!strcmp(op, "matmul")) return tg_matmul(y, in[0], in[1]);
    if (!strcmp(op, "mm")) return tg_mm(y, in[0], in[1]);
    if (!strcmp(op, "bmm")) return tg_bmm(y, in[0], in[1]);
    if (!strcmp(op, "mv")) return tg_mv(y, in[0], in[1]);
    if (!strcmp(op, "dot")) return tg_dot(y, in[0], in[1]);
    if (!strcmp(op, "outer")) return tg_outer(y, in[0], in[1]);
    if (!strcmp(op, "addmm") || !strcmp(op, "baddbmm")) {
        const double beta = strtod(arg, NULL), alpha = strtod(strchr(arg, ',') + 1, NULL);
        return !strcmp(op, "addmm") ? tg_addmm(y, in[0], in[1], in[2], beta, alpha)
                                    : tg_baddbmm(y, in[0], in[1], in[2], beta, alpha);
    }
    if (!strcmp(op, "tril")) return tg_tril(y, in[0], strtoll(arg, NULL, 10));
    if (!strcmp(op, "triu")) return tg_triu(y, in[0], strtoll(arg, NULL, 10));
    cr_assert(strcmp(op, "einsum") == 0, "unknown op %s", op);
    return tg_einsum(y, arg, n, in);
}

static double tol_of(const char *dt)
{
    return !strcmp(dt, "f64") ? 1e-12 : !strcmp(dt, "f32") ? 2e-6 : 2e-2;
}

/* Every case: the value and each input's gradient, scaled to the largest
 * element (sums of products cancel); every input gets one (addmm's input
 * at beta = 0 torch's zeros). */
Test(linalg2, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("linalg.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int per_op[11] = {0}, per_dtype[3] = {0};
    static const char *const ops[11] = {"matmul", "mm", "bmm", "mv", "dot", "outer",
                                        "addmm", "baddbmm", "tril", "triu", "einsum"};
    for (int i = 0; i < n; i++) {
        char c[16], what[128], key[16];
        snprintf(c, sizeof c, "case%d", i);
        const char *op = th_golden_meta(f, c, "op"), *dt = th_golden_meta(f, c, "dtype");
        const char *arg = th_golden_meta(f, c, "arg");
        const int k = atoi(th_golden_meta(f, c, "n"));
        tg_tensor *in[3] = {NULL}, *y = NULL, *d[3] = {NULL};
        for (int j = 0; j < k; j++) {
            snprintf(key, sizeof key, "in%d", j);
            in[j] = th_leaf_clone(th_golden_get(f, c, key));
        }
        snprintf(what, sizeof what, "%s (%s %s '%s')", c, op, dt, arg);
        cr_assert(eq(int, run_op(op, arg, &y, k, in), TG_OK), "%s: %s", what,
                  tg_error_message());
        const double tol = tol_of(dt);
        th_expect_close_scaled(what, y, th_golden_get(f, c, "y"), tol);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        cr_assert(eq(int, tg_grad(d, 1, &y, &g, k, in, NULL), TG_OK), "%s: %s", what,
                  tg_error_message());
        for (int j = 0; j < k; j++) {
            snprintf(key, sizeof key, "d%d", j);
            const tg_tensor *want = th_golden_get(f, c, key);
            cr_assert(d[j] != NULL, "%s: input %d has no gradient", what, j);
            th_expect_close_scaled(what, d[j], want, tol);
        }
        for (int o = 0; o < 11; o++) per_op[o] += !strcmp(op, ops[o]);
        per_dtype[!strcmp(dt, "f64") ? 0 : !strcmp(dt, "f32") ? 1 : 2]++;
        th_release_all(3, in);
        th_release_all(3, d);
        tg_tensor_release(y);
    }
    for (int o = 0; o < 11; o++) cr_assert(per_op[o] > 0, "no %s case", ops[o]);
    cr_assert(per_op[0] >= 54 && per_op[10] >= 58, "%d matmul, %d einsum", per_op[0],
              per_op[10]);
    cr_assert(per_dtype[2] >= 18, "%d bf16 cases", per_dtype[2]);
    tg_st_free(f);
}

/* ---- gradcheck and gradgradcheck in f64 ---- */

static int call_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const th_call *c = user;
    return run_op(c->op, c->arg, out, n, in);
}

static const th_call CHECKED[] = {
    {"matmul", "", 2, {1, 1}, {{3}, {3}}},
    {"matmul", "", 2, {1, 3}, {{3}, {2, 3, 2}}},
    {"matmul", "", 2, {3, 1}, {{2, 2, 3}, {3}}},
    {"matmul", "", 2, {4, 3}, {{2, 1, 2, 3}, {3, 3, 2}}},
    {"matmul", "", 2, {3, 2}, {{2, 2, 3}, {3, 2}}},
    {"matmul", "", 2, {2, 3}, {{2, 3}, {2, 3, 2}}},
    {"mm", "", 2, {2, 2}, {{2, 3}, {3, 2}}},
    {"bmm", "", 2, {3, 3}, {{2, 2, 3}, {2, 3, 2}}},
    {"mv", "", 2, {2, 1}, {{2, 3}, {3}}},
    {"dot", "", 2, {1, 1}, {{4}, {4}}},
    {"outer", "", 2, {1, 1}, {{3}, {2}}},
    {"addmm", "0.5,-2", 3, {1, 2, 2}, {{2}, {3, 2}, {2, 2}}},
    {"baddbmm", "1.5,0.5", 3, {2, 3, 3}, {{3, 1}, {2, 3, 2}, {2, 2, 1}}},
    {"addmm", "0,1.5", 3, {2, 2, 2}, {{3, 1}, {3, 2}, {2, 1}}},
    {"baddbmm", "0,-1", 3, {1, 3, 3}, {{2}, {2, 3, 2}, {2, 2, 2}}},
    {"tril", "0", 1, {3}, {{2, 3, 4}}},
    {"triu", "-1", 1, {2}, {{4, 3}}},
    {"einsum", "ij,jk->ik", 2, {2, 2}, {{2, 3}, {3, 2}}},
    {"einsum", "bij,bjk", 2, {3, 3}, {{2, 2, 3}, {2, 3, 2}}},
    {"einsum", "ii->i", 1, {2}, {{3, 3}}},
    {"einsum", "...ij,...jk->...ik", 2, {4, 3}, {{2, 1, 2, 3}, {2, 3, 2}}},
    {"einsum", "ij,jk,k->i", 3, {2, 2, 1}, {{2, 3}, {3, 2}, {2}}},
    {"einsum", "ij,jk->ik", 2, {2, 2}, {{3, 1}, {2, 2}}},
};

Test(linalg2, gradcheck_and_gradgradcheck_f64)
{
    th_gradcheck_calls(CHECKED, sizeof CHECKED / sizeof *CHECKED, call_fn, 100, -2, 2);
}

/* tril and triu are linear masks: the backward's backward is the forward. */
Test(linalg2, tril_double_backward_is_the_forward)
{
    uint64_t s = 5;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 4, 5}, -2, 2), *y = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tril(&y, x, 1));
    th_expect_double_backward_is_forward(x, y, 17);
    tg_tensor_release(y);
    y = NULL;
    OK(tg_triu(&y, x, -1));
    th_expect_double_backward_is_forward(x, y, 18);
    th_release_all(2, (tg_tensor *[]){x, y});
}

/* At beta = 0 addmm and baddbmm ignore input's values (NaN and infinities
 * too) but, as torch, still give an input that requires grad a gradient of
 * zeros of its shape, at first and second order; an input that does not
 * require grad stays off the graph. */
Test(linalg2, beta_zero_gives_input_a_zero_gradient)
{
    uint64_t s = 91;
    tg_tensor *m1 = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){3, 2}, -2, 2);
    tg_tensor *m2 = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){2, 4}, -2, 2);
    tg_tensor *b1 = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 3, 2}, -2, 2);
    tg_tensor *b2 = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){2, 2, 4}, -2, 2);
    tg_tensor *c = th_tensor_from(TG_F64, 2, (int64_t[]){3, 1}, (double[]){NAN, INFINITY, -0.0});
    tg_tensor *want = NULL, *wantb = NULL;
    OK(tg_matmul(&want, m1, m2));
    OK(tg_matmul(&wantb, b1, b2));
    OK(tg_tensor_set_requires_grad(m1, true));
    OK(tg_tensor_set_requires_grad(b1, true));
    for (int batched = 0; batched < 2; batched++) {
        tg_tensor *y = NULL, *l = NULL, *gc = NULL, *gm = NULL;
        const char *what = batched ? "baddbmm" : "addmm";
        OK(tg_tensor_set_requires_grad(c, false));
        OK(batched ? tg_baddbmm(&y, c, b1, b2, 0, 1) : tg_addmm(&y, c, m1, m2, 0, 1));
        th_expect_same_bits(what, NULL, y, batched ? wantb : want);
        tg_tensor_release(y);
        OK(tg_tensor_set_requires_grad(c, true));
        OK(batched ? tg_baddbmm(&y, c, b1, b2, 0, 1) : tg_addmm(&y, c, m1, m2, 0, 1));
        th_expect_same_bits(what, NULL, y, batched ? wantb : want);
        OK(tg_sum(&l, y));
        /* with create_graph (gradgradcheck below takes the second order) */
        tg_tensor *x2[2] = {c, batched ? b1 : m1}, *d2[2] = {NULL, NULL};
        tg_backward_opts go = TG_BACKWARD_OPTS_INIT;
        go.create_graph = true;
        OK(tg_grad(d2, 1, &l, NULL, 2, x2, &go));
        gc = d2[0];
        gm = d2[1];
        cr_assert(gc != NULL, "%s: input has no gradient", what);
        th_expect_shape(gc, 2, (int64_t[]){3, 1});
        for (int k = 0; k < 3; k++)
            cr_assert(th_at(gc, k) == 0.0 && !signbit(th_at(gc, k)), "%s: c.grad[%d]", what, k);
        /* .grad through backward, too */
        OK(tg_backward(l, NULL, NULL));
        const tg_tensor *cg = tg_tensor_grad(c);
        cr_assert(cg != NULL, "%s: c.grad is NULL", what);
        th_expect_shape(cg, 2, (int64_t[]){3, 1});
        for (int k = 0; k < 3; k++) cr_assert(th_at(cg, k) == 0.0, "%s: c.grad[%d]", what, k);
        tg_tensor_zero_grad(c);
        th_release_all(4, (tg_tensor *[]){y, l, gc, gm});
    }
    th_release_all(7, (tg_tensor *[]){m1, m2, b1, b2, c, want, wantb});
}

/* ---- strided and broadcast operands ---- */

/* matmul of views gives what it gives for their contiguous copies: batch
 * dims that cannot be walked with one stride (a permuted operand, on the
 * batched and on the folded path), transposed matrices, stride-0 rows of
 * an expanded operand, strided vectors. */
Test(linalg2, views_match_their_contiguous_copies)
{
    uint64_t s = 41;
    tg_tensor *a0 = th_rand_tensor(&s, TG_F64, 4, (int64_t[]){4, 3, 2, 5}, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){4, 5, 3}, -1, 1);
    tg_tensor *w = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){5, 3}, -1, 1);
    tg_tensor *r0 = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){1, 2}, -1, 1);
    tg_tensor *v10 = th_rand_tensor(&s, TG_F64, 1, (int64_t[]){10}, -1, 1);
    tg_tensor *a = NULL, *at = NULL, *r = NULL, *rt = NULL, *v = NULL;
    OK(tg_permute(&a, a0, (int[]){1, 0, 2, 3}));   /* (3, 4, 2, 5), batch strides 10, 30 */
    OK(tg_transpose(&at, a, -2, -1));              /* (3, 4, 5, 2) */
    OK(tg_expand(&r, r0, 2, (int64_t[]){3, 2}));   /* (3, 2), rows of stride 0 */
    OK(tg_transpose(&rt, r, 0, 1));                /* (2, 3) */
    OK(tg_slice(&v, v10, 0, 0, 10, 2));            /* (5), stride 2 */
    tg_tensor *pairs[][2] = {{a, b}, {a, w}, {at, rt}, {r, a}, {a, v}, {v, at}, {rt, r}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        tg_tensor *xc = NULL, *yc = NULL, *got = NULL, *want = NULL;
        char what[32];
        snprintf(what, sizeof what, "pair %zu", i);
        OK(tg_contiguous(&xc, pairs[i][0]));
        OK(tg_contiguous(&yc, pairs[i][1]));
        OK(tg_matmul(&got, pairs[i][0], pairs[i][1]));
        OK(tg_matmul(&want, xc, yc));
        th_expect_close(what, got, want, 1e-12);
        th_release_all(4, (tg_tensor *[]){xc, yc, got, want});
    }
    th_release_all(10, (tg_tensor *[]){a0, b, w, r0, v10, a, at, r, rt, v});
}

/* ---- refusals ---- */

static tg_tensor *t_of(tg_dtype dt, int nd, const int64_t *shape)
{
    uint64_t s = 3;
    return th_rand_tensor(&s, dt, nd, shape, -1, 1);
}

#define T(...) t_of(TG_F64, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                    (int64_t[]){__VA_ARGS__})

/* Each refusal: the status, words of the message, *out left NULL and no
 * tensor memory left behind. */
#define REFUSED(call, status, words) th_expect_refused_clean(call, status, words)

Test(linalg2, matmul_and_product_refusals)
{
    tg_tensor *s0 = NULL, *i32 = NULL, *f32 = t_of(TG_F32, 2, (int64_t[]){3, 2});
    OK(tg_tensor_scalar(&s0, TG_F64, 1.0));
    OK(tg_tensor_zeros(&i32, TG_I32, 2, (int64_t[]){2, 3}));
    tg_tensor *m23 = T(2, 3), *m32 = T(3, 2), *m42 = T(4, 2), *v3 = T(3), *v4 = T(4);
    tg_tensor *b223 = T(2, 2, 3), *b332 = T(3, 3, 2), *b145 = T(1, 4, 5), *b234 = T(2, 3, 4);
    tg_tensor *m33 = T(3, 3), *b2342 = T(2, 3, 4, 2), *m31 = T(3, 1), *i32b = NULL;
    OK(tg_tensor_zeros(&i32b, TG_I32, 2, (int64_t[]){3, 2}));
    REFUSED(tg_matmul(out_, s0, m23), TG_EINVAL, "at least 1 dim");
    REFUSED(tg_matmul(out_, m23, v4), TG_ESHAPE, "inner dims 3 and 4 differ");
    REFUSED(tg_matmul(out_, b223, b332), TG_ESHAPE, "batch dims 2 and 3");
    REFUSED(tg_matmul(out_, i32, i32b), TG_EDTYPE, "float");
    REFUSED(tg_mm(out_, m23, f32), TG_EDTYPE, "dtypes must match");
    REFUSED(tg_matmul(out_, m23, NULL), TG_EINVAL, "must not be NULL");
    REFUSED(tg_mm(out_, b234, m42), TG_EINVAL, "must be 2-d");
    REFUSED(tg_mm(out_, m23, m42), TG_ESHAPE, "cannot be multiplied");
    REFUSED(tg_bmm(out_, b234, b145), TG_ESHAPE, "does not broadcast");
    REFUSED(tg_bmm(out_, m23, m32), TG_EINVAL, "must be 3-d");
    REFUSED(tg_mv(out_, m23, v4), TG_ESHAPE, "cannot be multiplied");
    REFUSED(tg_mv(out_, m23, m32), TG_EINVAL, "must be 1-d");
    REFUSED(tg_dot(out_, v3, v4), TG_ESHAPE, "cannot be multiplied");
    REFUSED(tg_dot(out_, v3, m31), TG_EINVAL, "must be 1-d");
    REFUSED(tg_outer(out_, m31, v3), TG_EINVAL, "must be 1-d");
    REFUSED(tg_addmm(out_, m33, m23, m32, 1, 1), TG_ESHAPE, "does not broadcast");
    REFUSED(tg_addmm(out_, b223, m23, m32, 1, 1), TG_ESHAPE, "does not broadcast");
    REFUSED(tg_addmm(out_, NULL, m23, m32, 1, 1), TG_EINVAL, "input must not be NULL");
    REFUSED(tg_baddbmm(out_, b2342, b234, b145, 1, 1), TG_ESHAPE, "batch sizes");
    REFUSED(tg_baddbmm(out_, b2342, b223, b234, 1, 1), TG_ESHAPE, "does not broadcast");
    REFUSED(tg_tril(out_, v3, 0), TG_ESHAPE, "at least 2 dims");
    REFUSED(tg_triu(out_, NULL, 0), TG_EINVAL, "x must not be NULL");
    th_release_all(17, (tg_tensor *[]){s0, i32, f32, m23, m32, m42, v3, v4, b223, b332, b145,
                                       b234, m33, b2342, m31, i32b, NULL});
}

Test(linalg2, einsum_refusals)
{
    tg_tensor *m23 = T(2, 3), *m42 = T(4, 2), *m34 = T(3, 4);
    tg_tensor *f32 = t_of(TG_F32, 1, (int64_t[]){3});
    tg_tensor *one[1] = {m23}, *two[2] = {m23, m42}, *mixed[2] = {m23, f32}, *nul[2] = {m23, NULL};
    REFUSED(tg_einsum(out_, "ij,jk", 1, one), TG_EINVAL, "more terms than the 1 operands");
    REFUSED(tg_einsum(out_, "ij", 2, two), TG_EINVAL, "1 terms but 2 operands");
    REFUSED(tg_einsum(out_, "ij->k", 1, one), TG_EINVAL, "output letter 'k' is in no input");
    REFUSED(tg_einsum(out_, "ij->ii", 1, one), TG_EINVAL, "'i' appears more than once");
    REFUSED(tg_einsum(out_, "i.j", 1, one), TG_EINVAL, "must be part of a '...'");
    REFUSED(tg_einsum(out_, "ij-k", 1, one), TG_EINVAL, "must begin '->'");
    REFUSED(tg_einsum(out_, "ij->i->j", 1, one), TG_EINVAL, "goes on after the output");
    REFUSED(tg_einsum(out_, "i$j", 1, one), TG_EINVAL, "is not a letter");
    REFUSED(tg_einsum(out_, "ijk", 1, one), TG_EINVAL, "term 0 has 3 letters");
    REFUSED(tg_einsum(out_, "...i...", 1, one), TG_EINVAL, "more than one '...'");
    REFUSED(tg_einsum(out_, "ij,jk->ik", 2, two), TG_ESHAPE, "letter 'j' has extent");
    REFUSED(tg_einsum(out_, "ii", 1, one), TG_ESHAPE, "a diagonal needs them equal");
    REFUSED(tg_einsum(out_, NULL, 1, one), TG_EINVAL, "equation must not be NULL");
    REFUSED(tg_einsum(out_, "i,i", 2, mixed), TG_EDTYPE, "dtypes must match");
    REFUSED(tg_einsum(out_, "ij,jk", 2, nul), TG_EINVAL, "operands[1] must not be NULL");
    REFUSED(tg_einsum(out_, "ij", 0, one), TG_EINVAL, "n=0");
    tg_tensor *five[2] = {T(1, 1, 1, 1, 1), T(1, 1, 1, 1, 1)};
    REFUSED(tg_einsum(out_, "abcde,fghij->abcdefghij", 2, five), TG_EINVAL,
            "has more than 8 letters");
    th_release_all(6, (tg_tensor *[]){m23, m42, m34, f32, five[0], five[1]});
}

/* Under bf16 autocast a broadcast matmul runs in bf16 (the result rounded
 * once from the f32 product) and each gradient keeps its input's dtype and
 * shape, summed over the broadcast dims. */
Test(linalg2, autocast_broadcast_matmul)
{
    uint64_t s = 77;
    tg_tensor *a = th_rand_tensor(&s, TG_F32, 4, (int64_t[]){2, 1, 3, 4}, -1, 1);
    tg_tensor *b = th_rand_tensor(&s, TG_F32, 3, (int64_t[]){5, 4, 6}, -1, 1);
    tg_tensor *ref = NULL, *y = NULL, *yf = NULL, *l = NULL;
    OK(tg_tensor_set_requires_grad(a, true));
    OK(tg_tensor_set_requires_grad(b, true));
    OK(tg_matmul(&ref, a, b));
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_matmul(&y, a, b));
    OK(tg_autocast_end());
    cr_assert(eq(int, tg_tensor_dtype(y), TG_BF16));
    th_expect_shape(y, 4, (int64_t[]){2, 5, 3, 6});
    OK(tg_to_dtype(&yf, y, TG_F32));
    th_expect_close_scaled("bf16 product", yf, ref, 2e-2);
    OK(tg_sum(&l, y));
    OK(tg_backward(l, NULL, NULL));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(a)), TG_F32));
    th_expect_shape(tg_tensor_grad(a), 4, (int64_t[]){2, 1, 3, 4});
    th_expect_shape(tg_tensor_grad(b), 3, (int64_t[]){5, 4, 6});
    th_release_all(6, (tg_tensor *[]){a, b, ref, y, yf, l});
}

/* Outside autocast the products take one float dtype, as torch 1.13's:
 * matmul, mm, bmm, mv, linear and conv2d of f32 with f64 raise "expected
 * scalar type Float but found Double" (conv: tests/test_amp_parity.c),
 * matmul of 1-d operands and dot
 * "dot : expected both vectors to have same dtype", addmm and linear with
 * an f64 bias "self and mat2 must have the same dtype".  torch's baddbmm
 * alone casts input to the product's dtype (an f64 input with f32 batches
 * gives f32); so does tg_baddbmm, its gradient arriving in f64. */
Test(linalg2, mixed_float_dtypes_refused_outside_autocast_as_torch)
{
    tg_tensor *a32 = t_of(TG_F32, 2, (int64_t[]){2, 3}), *b64 = T(3, 4);
    tg_tensor *bbf = t_of(TG_BF16, 2, (int64_t[]){3, 4}), *v16 = t_of(TG_F16, 1, (int64_t[]){3});
    tg_tensor *v32 = t_of(TG_F32, 1, (int64_t[]){3}), *v64 = T(3);
    tg_tensor *a3 = t_of(TG_F32, 3, (int64_t[]){2, 2, 3}), *b3 = T(2, 3, 4);
    tg_tensor *b32 = t_of(TG_F32, 2, (int64_t[]){3, 4}), *c64 = T(2, 4);
    tg_tensor *w64 = T(4, 3), *w32 = t_of(TG_F32, 2, (int64_t[]){4, 3}), *bias64 = T(4);
    tg_tensor *x4 = t_of(TG_F32, 4, (int64_t[]){1, 1, 4, 4}), *k64 = T(1, 1, 3, 3);
    tg_tensor *c3 = T(2, 2, 4), *b3f = t_of(TG_F32, 3, (int64_t[]){2, 3, 4});
    REFUSED(tg_matmul(out_, a32, b64), TG_EDTYPE, "matmul: b is f64 but a is f32");
    REFUSED(tg_matmul(out_, b64, a32), TG_EDTYPE, "matmul: b is f32 but a is f64");
    REFUSED(tg_matmul(out_, a32, bbf), TG_EDTYPE, "b is bf16 but a is f32");
    REFUSED(tg_matmul(out_, v32, v16), TG_EDTYPE, "b is f16 but a is f32");
    REFUSED(tg_matmul(out_, a3, b64), TG_EDTYPE, "outside autocast");
    REFUSED(tg_matmul(out_, a3, b3), TG_EDTYPE, "outside autocast");
    REFUSED(tg_mm(out_, a32, b64), TG_EDTYPE, "the second is f64 but the first operand is f32");
    REFUSED(tg_mm(out_, a32, bbf), TG_EDTYPE, "the second is bf16");
    REFUSED(tg_bmm(out_, a3, b3), TG_EDTYPE, "dtypes must match");
    REFUSED(tg_mv(out_, a32, v64), TG_EDTYPE, "dtypes must match");
    REFUSED(tg_dot(out_, v32, v64), TG_EDTYPE, "dtypes must match");
    REFUSED(tg_addmm(out_, c64, a32, b32, 1, 1), TG_EDTYPE, "input is f64 but the first");
    REFUSED(tg_addmm(out_, c64, a32, b32, 0, 1), TG_EDTYPE, "input is f64 but the first");
    REFUSED(tg_addmm(out_, c64, a32, b64, 1, 1), TG_EDTYPE, "the second is f64");
    REFUSED(tg_baddbmm(out_, c3, a3, b3, 1, 1), TG_EDTYPE, "the second is f64");
    REFUSED(tg_linear(out_, a32, w64, NULL), TG_EDTYPE, "linear: w is f64 but x is f32");
    REFUSED(tg_linear(out_, a32, w32, bias64), TG_EDTYPE, "linear: b is f64 but x is f32");
    tg_conv_params cp = TG_CONV_PARAMS_INIT;
    REFUSED(tg_conv(out_, x4, k64, NULL, &cp), TG_EDTYPE, "conv2d: weight is f64 but x is f32");

    /* baddbmm: input cast to the batches' dtype, torch's f32 result */
    tg_tensor *y = NULL, *l = NULL;
    OK(tg_tensor_set_requires_grad(c3, true));
    OK(tg_baddbmm(&y, c3, a3, b3f, 0.5, 2));
    cr_assert(eq(int, tg_tensor_dtype(y), TG_F32));
    OK(tg_sum(&l, y));
    OK(tg_backward(l, NULL, NULL));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(c3)), TG_F64));
    for (int64_t e = 0; e < 16; e++) cr_assert(th_at(tg_tensor_grad(c3), e) == 0.5);
    th_release_all(2, (tg_tensor *[]){y, l});
    th_release_all(17, (tg_tensor *[]){a32, b64, bbf, v16, v32, v64, a3, b3, b32, c64, w64, w32,
                                       bias64, x4, k64, c3, b3f});
}

/* Under autocast the cast comes first, as torch's lower_precision_fp list:
 * mm, bmm, addmm and baddbmm of f32 with bf16 give bf16 (input cast too);
 * mv and dot are not on the list and refuse mixed dtypes there as well
 * ("expected scalar type Float but found BFloat16"), and run in their
 * operands' dtype (tests/test_amp_parity.c). */
Test(linalg2, mixed_float_dtypes_under_autocast_as_torch)
{
    tg_tensor *a32 = t_of(TG_F32, 2, (int64_t[]){2, 3});
    tg_tensor *bbf = t_of(TG_BF16, 2, (int64_t[]){3, 4}), *c32 = t_of(TG_F32, 2, (int64_t[]){2, 4});
    tg_tensor *a3 = t_of(TG_F32, 3, (int64_t[]){2, 2, 3});
    tg_tensor *b3 = t_of(TG_BF16, 3, (int64_t[]){2, 3, 4});
    tg_tensor *c3 = t_of(TG_F32, 3, (int64_t[]){2, 2, 4});
    tg_tensor *v32 = t_of(TG_F32, 1, (int64_t[]){3}), *vbf = t_of(TG_BF16, 1, (int64_t[]){3});
    tg_tensor *w = t_of(TG_BF16, 2, (int64_t[]){4, 3}), *y[6] = {NULL};
    OK(tg_tensor_set_requires_grad(c32, true));
    OK(tg_autocast_begin(TG_BF16));
    OK(tg_matmul(&y[0], a32, bbf));
    OK(tg_mm(&y[1], a32, bbf));
    OK(tg_bmm(&y[2], a3, b3));
    OK(tg_addmm(&y[3], c32, a32, bbf, 1, 1));
    OK(tg_baddbmm(&y[4], c3, a3, b3, 0.5, 1));
    OK(tg_linear(&y[5], a32, w, NULL));
    REFUSED(tg_mv(out_, a32, vbf), TG_EDTYPE, "dtypes must match");
    REFUSED(tg_dot(out_, v32, vbf), TG_EDTYPE, "dtypes must match");
    OK(tg_autocast_end());
    for (int i = 0; i < 6; i++) cr_assert(eq(int, tg_tensor_dtype(y[i]), TG_BF16), "y[%d]", i);
    tg_tensor *l = NULL;
    OK(tg_sum(&l, y[3]));
    OK(tg_backward(l, NULL, NULL));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(c32)), TG_F32));
    tg_tensor_release(l);
    th_release_all(6, y);
    th_release_all(10, (tg_tensor *[]){a32, bbf, c32, a3, b3, c3, v32, vbf, w, NULL});
}
