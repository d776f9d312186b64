/* tests/recompute_fixtures.c - the blocks, inputs and gradient comparison
 * shared by the tests of tg_recompute (recompute_fixtures.h). */
#include "recompute_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "tapegrad/autograd.h"
#include "tapegrad/nn.h"

/* Appends *m, made by a constructor that returned rc (*m is read after the
 * call that set it). */
void append(tg_module *seq, int rc, tg_module **m)
{
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    OK(tg_nn_sequential_append(seq, *m));
}

/* depth x (Linear(width, width), tanh) */
tg_module *mlp(int depth, int64_t width, uint64_t seed)
{
    tg_module *seq = NULL, *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    OK(tg_nn_sequential_new(&seq));
    for (int i = 0; i < depth; i++) {
        append(seq, tg_nn_linear_new(&m, width, width, true, &rng), &m);
        append(seq, tg_nn_activation_new(&m, TG_ACT_TANH, 0), &m);
    }
    return seq;
}

tg_tensor *randn(int ndim, const int64_t *shape, uint64_t seed, bool requires_grad)
{
    tg_tensor *t = NULL;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    OK(tg_tensor_zeros(&t, TG_F32, ndim, shape));
    OK(tg_tensor_rand_normal(t, &rng, 0, 1));
    OK(tg_tensor_set_requires_grad(t, requires_grad));
    return t;
}

/* A contiguous copy of t's .grad, or NULL. */
tg_tensor *grad_copy(const tg_tensor *t)
{
    tg_tensor *g = tg_tensor_grad(t), *c = NULL;
    if (!g) return NULL;
    OK(tg_tensor_clone(&c, g));
    return c;
}

void expect_same_bits(const tg_tensor *a, const tg_tensor *b, const char *what)
{
    cr_assert(a && b, "%s: a gradient is missing", what);
    cr_assert(tg_tensor_same_shape(a, b), "%s: shapes differ", what);
    size_t n = (size_t)tg_tensor_numel(a) * tg_dtype_size(tg_tensor_dtype(a));
    cr_assert(memcmp(tg_tensor_data((tg_tensor *)a), tg_tensor_data((tg_tensor *)b), n) == 0,
              "%s: gradients differ", what);
}
