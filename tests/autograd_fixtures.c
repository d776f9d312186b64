/* tests/autograd_fixtures.c - the inputs and expression shared by the
 * autograd engine's tests (autograd_fixtures.h). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "autograd_fixtures.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/ops.h"

const double X[3] = {1.0, 2.0, 3.0}, W[3] = {4.0, -5.0, 0.5};

/* y = sum(x * w + x) */
tg_tensor *expr1(tg_tensor *x, tg_tensor *w)
{
    tg_tensor *xw = NULL, *s = NULL, *y = NULL;
    OK(tg_mul(&xw, x, w));
    OK(tg_add(&s, xw, x));
    OK(tg_sum(&y, s));
    tg_tensor_release(xw);
    tg_tensor_release(s);
    return y;
}
