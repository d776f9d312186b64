/* tests/attention_fixtures.c - shared by test_attention_fast.c,
 * test_attention_fast_half.c and test_mha_fast_half.c
 * (attention_fixtures.h): the unit roundoff of a half dtype, the inputs and
 * masks of a case, the attention on either path, and a tolerance check
 * that counts the elements whose bits differ. */
#include "attention_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>

#include "helpers.h"
#include "ops/attention_internal.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The unit roundoff of a half dtype (attention_fixtures.h). */
double unit_of(tg_dtype dt) { return dt == TG_BF16 ? 0x1p-8 : 0x1p-11; }

/* The mask of kind `kind` for scores (lead..., L, S) of nd dims. */
tg_tensor *make_mask(int kind, tg_dtype dt, int nd, const int64_t *sc, uint64_t *seed)
{
    const int64_t L = sc[nd - 2], S = sc[nd - 1];
    tg_tensor *m = NULL;
    if (kind == M_U8 || kind == M_CAUSAL) {
        OK(tg_tensor_zeros(&m, kind == M_U8 ? TG_U8 : dt, 2, (int64_t[]){L, S}));
        for (int64_t l = 0; l < L; l++)
            for (int64_t s = 0; s < S; s++) {
                const int64_t i = l * S + s;
                if (kind == M_U8) OK(tg_tensor_set_flat(m, i, th_uniform_pm1(seed) > 0.4));
                else if (s > l + S - L) OK(tg_tensor_set_flat(m, i, -INFINITY));
            }
    } else if (kind == M_FLOAT) {
        m = th_rand_tensor(seed, dt, 2, (int64_t[]){L, S}, -2.0, 2.0);
    } else if (kind == M_PAD_U8) {   /* (lead0, 1, ..., S): keys of batch b padded */
        int64_t sh[4] = {sc[0], 1, 1, 1};
        sh[nd - 1] = S;
        OK(tg_tensor_zeros(&m, TG_U8, nd, sh));
        for (int64_t b = 0; b < sc[0]; b++)
            for (int64_t s = S - b % 3; s < S; s++) OK(tg_tensor_set_flat(m, b * S + s, 1));
    } else if (kind == M_FULL) {
        m = th_rand_tensor(seed, dt, nd, sc, -3.0, 3.0);
    }
    return m;
}


/* Every element: NaN where want is NaN, else |got - want| <= tol (|want| +
 * max |want|); returns the elements whose bits differ. */
int64_t expect_close(const char *what, const tg_tensor *got, const tg_tensor *want,
                            double tol)
{
    th_expect_shape(got, tg_tensor_ndim(want), tg_tensor_shape(want));
    const int64_t n = tg_tensor_numel(want);
    double *a = th_doubles(got), *b = th_doubles(want), big = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(b[i]) > big) big = fabs(b[i]);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(b[i])) {
            cr_assert(isnan(a[i]), "%s: element %lld is %g, the taped path's NaN", what,
                      (long long)i, a[i]);
            continue;
        }
        differ += a[i] != b[i];
        cr_assert(fabs(a[i] - b[i]) <= tol * (fabs(b[i]) + big),
                  "%s: element %lld is %.9g, the taped path's %.9g (tol %g, max %g)", what,
                  (long long)i, a[i], b[i], tol, big);
    }
    free(a);
    free(b);
    return differ;
}

void case_scores_shape(const sdpa_case *c, int64_t sc[4])
{
    const int nl = c->nd - 2;
    for (int i = 0; i < nl; i++) sc[i] = c->lead[i];
    sc[nl] = c->L;
    sc[nl + 1] = c->S;
}

void case_inputs(const sdpa_case *c, tg_dtype dt, uint64_t *seed, tg_tensor **q, tg_tensor **k,
                 tg_tensor **v, tg_attention_opts *o)
{
    int64_t qs[4], ks[4], vs[4], sc[4];
    const int nl = c->nd - 2;
    case_scores_shape(c, sc);
    for (int i = 0; i < nl; i++) qs[i] = ks[i] = vs[i] = c->lead[i];
    qs[nl] = c->L;
    ks[nl] = vs[nl] = c->S;
    qs[nl + 1] = ks[nl + 1] = c->E;
    vs[nl + 1] = c->Ev;
    *q = th_rand_tensor(seed, dt, c->nd, qs, -2.0, 2.0);
    *k = th_rand_tensor(seed, dt, c->nd, ks, -2.0, 2.0);
    *v = th_rand_tensor(seed, dt, c->nd, vs, -1.0, 1.0);
    *o = (tg_attention_opts)TG_ATTENTION_OPTS_INIT;
    o->attn_mask = make_mask(c->mask, dt, c->nd, sc, seed);
}

tg_tensor *sdpa(bool fast, tg_tensor *q, tg_tensor *k, tg_tensor *v, const tg_attention_opts *o,
                bool *took)
{
    if (!fast) setenv("TG_ATTENTION_FAST", "0", 1);
    const uint64_t before = tg__attention_fast_calls();
    tg_tensor *y = NULL;
    const int rc = tg_scaled_dot_product_attention(&y, NULL, q, k, v, o);
    unsetenv("TG_ATTENTION_FAST");
    OK(rc);
    *took = tg__attention_fast_calls() == before + 1;
    return y;
}
