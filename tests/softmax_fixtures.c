/* tests/softmax_fixtures.c - the golden lookup, tolerances and comparison
 * shared by the softmax and nll_loss tests (softmax_fixtures.h). */
#include "softmax_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>

#include "helpers.h"

/* The tolerance of a dtype against torch, relative to the largest value:
 * torch computes f32 and bf16 in their own precision, tapegrad in double
 * rounded once (measured: 5e-16, 4.2e-7 = 3.5 ulps of f32, 6.6e-3 = one ulp
 * of bf16). */
double tol_of(tg_dtype dt)
{
    return dt == TG_F64 ? 2e-15 : dt == TG_F32 ? 1e-6 : 1e-2;
}

/* Each element of got within rtol of want, relative to the element or to
 * the largest finite |want| (for sums that cancel); NaN matches NaN only and
 * an infinity itself. */
void expect_close(const char *what, const tg_tensor *got, const tg_tensor *want,
                  double rtol)
{
    cr_assert(got != NULL && want != NULL, "%s: missing", what);
    cr_assert(tg_tensor_same_shape(got, want), "%s: shape", what);
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)), "%s: dtype", what);
    double scale = 0;
    for (int64_t i = 0; i < tg_tensor_numel(want); i++)
        if (isfinite(th_at(want, i))) scale = fmax(scale, fabs(th_at(want, i)));
    for (int64_t i = 0; i < tg_tensor_numel(want); i++)
        cr_assert(th_close(th_at(got, i), th_at(want, i), rtol, rtol * scale),
                  "%s[%lld]: %.17g, torch %.17g", what, (long long)i, th_at(got, i),
                  th_at(want, i));
}

tg_tensor *leaf_clone(const tg_tensor *t)
{
    tg_tensor *c = NULL;
    OK(tg_tensor_clone(&c, t));
    OK(tg_tensor_set_requires_grad(c, true));
    return c;
}

tg_tensor *golden(const tg_st_file *f, const char *fmt, const char *a, const char *b,
                  const char *c)
{
    char key[160];
    snprintf(key, sizeof key, fmt, a, b, c);
    tg_tensor *t = tg_st_get(f, key);
    cr_assert(t != NULL, "golden key %s missing", key);
    return t;
}
