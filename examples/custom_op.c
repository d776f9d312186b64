/* examples/custom_op.c - your own op, with your own backward, checked and
 * trained, using only the installed headers.
 *
 *   build/examples/custom_op [--steps N]
 *
 * 1. registers custom_softplus and custom_mish (examples/custom_ops.c) so
 *    they can be found by name, as `tapegrad ops --plugin` shows them;
 * 2. checks both first derivatives with tg_gradcheck in f64, mish's second
 *    derivative with tg_gradgradcheck, and shows that a second derivative
 *    through softplus (whose backward is hand-written loops) is refused;
 * 3. trains y = w2 . mish(w1 x + b1) + b2 to fit sin(3x) on [-1, 1] with
 *    Adam, and exits 1 unless the loss falls to a tenth of where it starts.
 * Exit 0 when all of that holds.  The PyTorch equivalent is in
 * docs/custom-ops.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "custom_ops.h"
#include "tapegrad/tapegrad.h"

#define CHECK(expr)                                                           \
    do {                                                                      \
        if ((expr) < 0) {                                                     \
            fprintf(stderr, "custom_op: %s\n", tg_error_message());           \
            goto fail;                                                        \
        }                                                                     \
    } while (0)

static int f_softplus(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n, (void)user;
    return custom_softplus(out, in[0]);
}

static int f_mish(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n, (void)user;
    return custom_mish(out, in[0]);
}

/* Both ops against central differences, in f64. */
static int check_gradients(void)
{
    tg_tensor *x = NULL;
    int64_t shape[] = {3, 4};
    tg_rng rng;
    tg_rng_init(&rng, 7);
    int rc = tg_tensor_zeros(&x, TG_F64, 2, shape);
    if (rc == TG_OK) rc = tg_tensor_rand_uniform(x, &rng, -2.0, 2.0);
    if (rc == TG_OK) rc = tg_tensor_set_requires_grad(x, true);
    if (rc == TG_OK) rc = tg_gradcheck(f_softplus, NULL, 1, &x, NULL);
    if (rc == TG_OK) printf("gradcheck     custom_softplus  ok\n");
    if (rc == TG_OK) rc = tg_gradcheck(f_mish, NULL, 1, &x, NULL);
    if (rc == TG_OK) printf("gradcheck     custom_mish      ok\n");
    if (rc == TG_OK) rc = tg_gradgradcheck(f_mish, NULL, 1, &x, NULL);
    if (rc == TG_OK) printf("gradgradcheck custom_mish      ok\n");
    if (rc == TG_OK) {
        /* softplus's backward is loops, not ops: a second derivative through
         * it must be refused, not silently wrong */
        int r2 = tg_gradgradcheck(f_softplus, NULL, 1, &x, NULL);
        if (r2 != TG_EGRAD) {
            tg_tensor_release(x);
            return tg_error_set(TG_EGRADCHECK, "gradgradcheck of custom_softplus gave %s, "
                                "expected TG_EGRAD", tg_status_name(r2));
        }
        printf("gradgradcheck custom_softplus  refused: %s\n", tg_error_message());
    }
    tg_tensor_release(x);
    return rc;
}

/* A tensor of shape (rows, cols) drawn from N(0, std), requiring grad. */
static int param(tg_tensor **out, int64_t rows, int64_t cols, tg_rng *rng, double std)
{
    int64_t shape[] = {rows, cols};
    int rc = tg_tensor_zeros(out, TG_F32, cols ? 2 : 1, shape);
    if (rc == TG_OK && std > 0) rc = tg_tensor_rand_normal(*out, rng, 0, std);
    if (rc == TG_OK) rc = tg_tensor_set_requires_grad(*out, true);
    return rc;
}

/* One step: loss = mse(w2 . mish(w1 x + b1) + b2, target); *loss_value. */
static int train_step(tg_tensor *const *p, tg_tensor *x, tg_tensor *target, tg_optimizer *opt,
                      double *loss_value)
{
    enum { H, A, Y, LOSS, N };
    tg_tensor *t[N] = {0};
    tg_optimizer_zero_grad(opt);
    int rc = tg_linear(&t[H], x, p[0], p[1]);
    if (rc == TG_OK) rc = custom_mish(&t[A], t[H]);
    if (rc == TG_OK) rc = tg_linear(&t[Y], t[A], p[2], p[3]);
    if (rc == TG_OK) rc = tg_mse_loss(&t[LOSS], t[Y], target, TG_REDUCTION_MEAN);
    if (rc == TG_OK) rc = tg_backward(t[LOSS], NULL, NULL);
    if (rc == TG_OK) rc = tg_optimizer_step(opt);
    if (rc == TG_OK) rc = tg_tensor_get_flat(t[LOSS], 0, loss_value);
    for (int i = 0; i < N; i++) tg_tensor_release(t[i]);
    return rc;
}

static int train(int steps)
{
    enum { W1, B1, W2, B2, NP };
    tg_tensor *p[NP] = {0}, *x = NULL, *target = NULL;
    tg_optimizer *opt = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    const int64_t n = 64, hidden = 16;
    int64_t xs[] = {n, 1};
    double first = 0, last = 0;
    CHECK(param(&p[W1], hidden, 1, &rng, 1.0));
    CHECK(param(&p[B1], hidden, 0, &rng, 0));
    CHECK(param(&p[W2], 1, hidden, &rng, 0.25));
    CHECK(param(&p[B2], 1, 0, &rng, 0));
    CHECK(tg_tensor_zeros(&x, TG_F32, 2, xs));
    CHECK(tg_tensor_zeros(&target, TG_F32, 2, xs));
    for (int64_t i = 0; i < n; i++) {
        double v = -1 + 2.0 * (double)i / (double)(n - 1);
        CHECK(tg_tensor_set_flat(x, i, v));
        CHECK(tg_tensor_set_flat(target, i, sin(3 * v)));
    }
    tg_adam_opts o = TG_ADAM_OPTS_INIT;
    o.lr = 0.02;
    CHECK(tg_adam_new(&opt, NP, p, &o));
    for (int s = 0; s < steps; s++) {
        CHECK(train_step(p, x, target, opt, &last));
        if (s == 0) first = last;
        if (s == 0 || (s + 1) % (steps / 4 > 0 ? steps / 4 : 1) == 0)
            printf("step %4d  loss %.5f\n", s + 1, last);
    }
    int rc = last <= first / 10 ? TG_OK
                                : tg_error_set(TG_EINVAL, "the loss went from %.5f to %.5f "
                                               "only, not to a tenth", first, last);
    if (rc < 0) fprintf(stderr, "custom_op: %s\n", tg_error_message());
    tg_optimizer_free(opt);
    for (int i = 0; i < NP; i++) tg_tensor_release(p[i]);
    tg_tensor_release(x);
    tg_tensor_release(target);
    return rc;
fail:
    tg_optimizer_free(opt);
    for (int i = 0; i < NP; i++) tg_tensor_release(p[i]);
    tg_tensor_release(x);
    tg_tensor_release(target);
    return -1;
}

int main(int argc, char **argv)
{
    int steps = 300;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            steps = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: custom_op [--steps N]\n");
            return 2;
        }
    }
    if (steps < 1) {
        fprintf(stderr, "custom_op: --steps must be >= 1\n");
        return 2;
    }
    const tg_op_schema *found = NULL;
    if (tapegrad_register() < 0 || tg_op_find(&found, "custom_mish") < 0) {
        fprintf(stderr, "custom_op: %s\n", tg_error_message());
        return 1;
    }
    printf("registered    custom_softplus, custom_mish\n");
    if (check_gradients() < 0) {
        fprintf(stderr, "custom_op: %s\n", tg_error_message());
        return 1;
    }
    return train(steps) < 0 ? 1 : 0;
}
