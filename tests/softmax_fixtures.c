/* tests/softmax_fixtures.c - the golden lookup and tolerances
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
