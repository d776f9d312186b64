/* tests/test_einsum_diag.c - einsum's repeated letters and long
 * equations: values and gradients against PyTorch (letters repeated two
 * and three times, two repeats in a term, repeats beside "...", a batch
 * or a contraction; eight dims in a term; all 52 letters), gradcheck and
 * gradgradcheck in f64, a diagonal taken as a view of its operand (no
 * extra operand in the plan), and the refusals.  Goldens:
 * scripts/make_einsum_diag_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The value and each operand's gradient, scaled to the largest element. */
Test(einsum_diag, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("einsum_diag.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int long_eqs = 0;
    for (int i = 0; i < n; i++) {
        char c[16], what[160], key[16];
        snprintf(c, sizeof c, "case%d", i);
        const char *eq = th_golden_meta(f, c, "eq"), *dt = th_golden_meta(f, c, "dtype");
        const int k = atoi(th_golden_meta(f, c, "n"));
        tg_tensor *in[8] = {NULL}, *y = NULL, *d[8] = {NULL};
        for (int j = 0; j < k; j++) {
            snprintf(key, sizeof key, "in%d", j);
            in[j] = th_leaf_clone(th_golden_get(f, c, key));
        }
        snprintf(what, sizeof what, "%s (%s '%s')", c, dt, eq);
        cr_assert(eq(int, tg_einsum(&y, eq, k, in), TG_OK), "%s: %s", what, tg_error_message());
        const double tol = strcmp(dt, "f64") == 0 ? 1e-12 : 2e-6;
        th_expect_close_scaled(what, y, th_golden_get(f, c, "y"), tol);
        tg_tensor *g = (tg_tensor *)th_golden_get(f, c, "g");
        cr_assert(eq(int, tg_grad(d, 1, &y, &g, k, in, NULL), TG_OK), "%s: %s", what,
                  tg_error_message());
        for (int j = 0; j < k; j++) {
            snprintf(key, sizeof key, "d%d", j);
            cr_assert(d[j] != NULL, "%s: operand %d has no gradient", what, j);
            th_expect_close_scaled(what, d[j], th_golden_get(f, c, key), tol);
        }
        long_eqs += strlen(eq) > 50;
        th_release_all(8, in);
        th_release_all(8, d);
        tg_tensor_release(y);
    }
    cr_assert(n >= 38 && long_eqs == 2, "%d cases, %d with all 52 letters", n, long_eqs);
    tg_st_free(f);
}

typedef struct call {
    const char *eq;
    int n;
    int nd[2];
    int64_t shape[2][4];
} call;

static int call_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const call *c = user;
    return tg_einsum(out, c->eq, n, in);
}

static const call CHECKED[] = {
    {"iii->i", 1, {3}, {{3, 3, 3}}},
    {"abab->ba", 1, {4}, {{2, 3, 2, 3}}},
    {"...ii->i...", 1, {3}, {{2, 3, 3}}},
    {"ii,ij->j", 2, {2, 2}, {{3, 3}, {3, 2}}},
    {"bii,bij->bj", 2, {3, 3}, {{2, 3, 3}, {2, 3, 2}}},
    {"iij,jj", 2, {3, 2}, {{2, 2, 3}, {3, 3}}},
};

Test(einsum_diag, gradcheck_and_gradgradcheck_f64)
{
    for (size_t i = 0; i < sizeof CHECKED / sizeof *CHECKED; i++) {
        const call *c = &CHECKED[i];
        tg_tensor *in[2] = {NULL};
        for (int j = 0; j < c->n; j++) {
            uint64_t s = 300 + 7 * i + (uint64_t)j;
            in[j] = th_rand_tensor(&s, TG_F64, c->nd[j], c->shape[j], -2, 2);
            OK(tg_tensor_set_requires_grad(in[j], true));
        }
        th_expect_gradchecks(call_fn, (void *)c, c->n, in, "'%s'", c->eq);
        th_release_all(c->n, in);
    }
}

/* "ii->i" is tg_diagonal's view of x: the same storage, stride n + 1 and
 * no new tensor memory; a plan has one operand per term, so eight traces
 * are eight operands, within OPTIMAL's reach. */
Test(einsum_diag, a_diagonal_is_a_view_not_an_operand)
{
    uint64_t s = 9;
    tg_tensor *x = th_rand_tensor(&s, TG_F64, 2, (int64_t[]){4, 4}, -1, 1), *y = NULL;
    int64_t before, after;
    tg_memory_stats(&before, NULL);
    OK(tg_einsum(&y, "ii->i", 1, &x));
    tg_memory_stats(&after, NULL);
    cr_assert(eq(i64, after, before), "the diagonal took %lld bytes", (long long)(after - before));
    cr_assert(tg_tensor_cdata(y) == tg_tensor_cdata(x));
    cr_assert(eq(i64, tg_tensor_strides(y)[0], 5));
    tg_tensor_release(y);
    tg_tensor *m[8];
    for (int k = 0; k < 8; k++) m[k] = x;
    tg_einsum_plan plan, opt;
    OK(tg_einsum_path(&plan, "ii,ij->j", 2, (tg_tensor *[]){x, x}, TG_EINSUM_AUTO));
    cr_assert(eq(int, plan.n_operands, 2));
    const char *eq8 = "aa,bb,cc,dd,ee,ff,gg,hh->";
    OK(tg_einsum_path(&plan, eq8, 8, m, TG_EINSUM_AUTO));
    OK(tg_einsum_path(&opt, eq8, 8, m, TG_EINSUM_OPTIMAL));
    cr_assert(eq(int, plan.n_operands, 8));
    cr_assert(eq(int, plan.n_steps, 7));
    cr_assert(memcmp(plan.steps, opt.steps, sizeof(int) * 2 * 7) == 0);
    tg_tensor_release(x);
}

/* Eight letters fill a term of an 8-d operand; a ninth is refused before
 * the operand's rank is read, and a repeat needs equal extents. */
Test(einsum_diag, letters_per_term_and_repeats_refused)
{
    uint64_t s = 11;
    const int64_t shape8[8] = {2, 2, 1, 1, 3, 3, 1, 2};
    tg_tensor *x8 = th_rand_tensor(&s, TG_F64, 8, shape8, -1, 1), *y = NULL;
    tg_tensor *x3 = th_rand_tensor(&s, TG_F64, 3, (int64_t[]){3, 3, 2}, -1, 1);
    OK(tg_einsum(&y, "aabbccde->eadbc", 1, &x8));
    cr_assert(eq(int, tg_tensor_ndim(y), 5));
    tg_tensor_release(y);
    th_expect_refused_clean(tg_einsum(out_, "abcdefghi", 1, &x8), TG_EINVAL,
                            "term 0 of \"abcdefghi\" has more than 8 letters");
    th_expect_refused_clean(tg_einsum(out_, "iii->i", 1, &x3), TG_ESHAPE,
                            "letter 'i' repeats in term 0 over dims of extents 3 and 2");
    th_expect_refused_clean(tg_einsum(out_, "aabbccdd->abcd", 1, &x8), TG_ESHAPE,
                            "letter 'd' repeats in term 0 over dims of extents 1 and 2");
    th_release_all(2, (tg_tensor *[]){x8, x3});
}
