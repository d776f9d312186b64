/* tests/attention_half_fixtures.c - shared by test_attention_fast_half.c and
 * test_mha_fast_half.c (attention_half_fixtures.h): the unit roundoff of a
 * half dtype, the masks of a case, and a tolerance check that counts the
 * elements whose bits differ. */
#include "attention_half_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>

#include "helpers.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The unit roundoff of a half dtype (attention_half_fixtures.h). */
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
