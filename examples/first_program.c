/* first_program: the README's first program.  Fits y = 2x - 1 with a
 * Linear(1, 1) layer and SGD; each step runs in a scope, which releases the
 * step's tensors at its end.  Exits 1 with the library's message when a call
 * fails, or when the fit is off. */
#include <stdio.h>
#include <tapegrad/tapegrad.h>

#define CHECK(call)                                                              \
    do {                                                                         \
        if ((call) < 0) {                                                        \
            fprintf(stderr, "first_program: %s\n", tg_error_message());          \
            return 1;                                                            \
        }                                                                        \
    } while (0)

int main(void)
{
    tg_module *model;
    tg_optimizer *opt;
    tg_tensor *x, *t, *y, *loss;
    tg_rng rng;
    tg_rng_init(&rng, 0);
    CHECK(tg_nn_linear_new(&model, 1, 1, true, &rng));            /* nn.Linear(1, 1) */
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.1;
    CHECK(tg_sgd_from_module(&opt, model, &so));                  /* optim.SGD(..., lr=0.1) */
    CHECK(tg_tensor_from_data(&x, TG_F32, 2, (int64_t[]){4, 1}, (float[]){-1, 0, 1, 2}));
    CHECK(tg_tensor_from_data(&t, TG_F32, 2, (int64_t[]){4, 1}, (float[]){-3, -1, 1, 3}));
    double last = 0;
    for (int step = 0; step < 100; step++) {
        CHECK(tg_scope_begin());                                  /* owns y and loss */
        tg_optimizer_zero_grad(opt);
        CHECK(tg_module_forward(model, &y, x));
        CHECK(tg_mse_loss(&loss, y, t, TG_REDUCTION_MEAN));
        CHECK(tg_backward(loss, NULL, NULL));
        CHECK(tg_optimizer_step(opt));
        last = tg_tensor_item(loss);
        if (step % 25 == 0) printf("step %2d  loss %.6f\n", step, last);
        CHECK(tg_scope_end());                                    /* releases them */
    }
    tg_tensor *w = tg_module_find(model, "weight"), *b = tg_module_find(model, "bias");
    printf("y = %.3f x %+.3f\n", tg_tensor_item(w), tg_tensor_item(b));
    tg_optimizer_free(opt);
    tg_module_release(model);
    tg_tensor_release(x);
    tg_tensor_release(t);
    return last < 1e-3 ? 0 : 1;
}
