/* tests/consumer/consumer.c - a program outside the tapegrad tree, built by
 * scripts/test_install.sh against an installed tapegrad (pkg-config, shared
 * and static), against the build tree (the uninstalled pkg-config file) and
 * as a meson subproject (tests/consumer/meson.build).  It fits y = 2x - 1
 * with a Linear layer in scopes and checks that the image functions agree
 * with tg_png_available()/tg_plot_available().  Exit 0 when all holds. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        if ((call) < 0) {                                                             \
            fprintf(stderr, "consumer: %s: %s\n", #call, tg_error_message());         \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

/* PNG and plot either work or say that the build lacks them. */
static int check_images(void)
{
    tg_tensor *img;
    CHECK(tg_tensor_zeros(&img, TG_F32, 4, (int64_t[]){1, 1, 2, 2}));
    int rc = tg_png_write_grid("/nonexistent-dir/x.png", img, 1, 0.0, 1.0, 0);
    tg_tensor_release(img);
    bool said = strstr(tg_error_message(), "built without PNG support") != NULL;
    if (tg_png_available() ? rc != TG_EIO : rc != TG_EUNSUPPORTED || !said) {
        fprintf(stderr, "consumer: png_write_grid gave %d (%s)\n", rc, tg_error_message());
        return 1;
    }
    const double v[2] = {1, 2}, *vals[1] = {v};
    const char *names[1] = {"x"};
    rc = tg_plot_losses_png("/nonexistent-dir/x.png", NULL, 1, names, vals, 2);
    if (tg_plot_available() ? rc != TG_EIO : rc != TG_EUNSUPPORTED) {
        fprintf(stderr, "consumer: plot_losses_png gave %d (%s)\n", rc, tg_error_message());
        return 1;
    }
    tg_plot_release_caches();   /* cairo's font caches, for LeakSanitizer */
    printf("png %s, plot %s\n", tg_png_available() ? "yes" : "no",
           tg_plot_available() ? "yes" : "no");
    return 0;
}

int main(void)
{
    tg_module *lin;
    tg_optimizer *opt;
    tg_tensor *x, *t;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    CHECK(tg_nn_linear_new(&lin, 1, 1, true, &rng));
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.1;
    CHECK(tg_sgd_from_module(&opt, lin, &so));
    CHECK(tg_tensor_from_data(&x, TG_F32, 2, (int64_t[]){4, 1}, (float[]){-1, 0, 1, 2}));
    CHECK(tg_tensor_from_data(&t, TG_F32, 2, (int64_t[]){4, 1}, (float[]){-3, -1, 1, 3}));
    double loss = INFINITY;
    for (int step = 0; step < 200; step++) {
        CHECK(tg_scope_begin());
        tg_tensor *y, *l;
        tg_optimizer_zero_grad(opt);
        CHECK(tg_module_forward(lin, &y, x));
        CHECK(tg_mse_loss(&l, y, t, TG_REDUCTION_MEAN));
        CHECK(tg_backward(l, NULL, NULL));
        CHECK(tg_optimizer_step(opt));
        loss = tg_tensor_item(l);
        CHECK(tg_scope_end());
    }
    printf("tapegrad %s: loss after 200 steps %.2e\n", TG_VERSION_STRING, loss);
    tg_optimizer_free(opt);
    tg_module_release(lin);
    tg_tensor_release(x);
    tg_tensor_release(t);
    if (!(loss < 1e-4)) return 1;
    return check_images();
}
