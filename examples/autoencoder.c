/* autoencoder: a convolutional autoencoder on Fashion-MNIST.
 *
 *   encoder: Conv2d(1, 16, 3, stride 2, pad 1) -> ReLU     (N, 16, 14, 14)
 *            Conv2d(16, 32, 3, stride 2, pad 1) -> ReLU    (N, 32, 7, 7)
 *   decoder: ConvTranspose2d(32, 16, 4, stride 2, pad 1) -> ReLU   (N, 16, 14, 14)
 *            ConvTranspose2d(16, 1, 4, stride 2, pad 1) -> sigmoid (N, 1, 28, 28)
 *
 * Pixels are scaled to [0, 1] (the sigmoid's range); the loss is the MSE
 * between input and reconstruction, minimised with Adam.  Training stops
 * after --epochs, --steps or --seconds, whichever comes first; then the
 * weights are saved to out/autoencoder.safetensors with PyTorch's names
 * (encoder.0.weight, ..., decoder.2.bias), the MSE on 1000 test images (or
 * all, when there are fewer) is printed and out/autoencoder_pairs.png shows
 * test images (odd rows) above their reconstructions (even rows).  A bad
 * option value (exit 2), a missing or empty data set, images that are not
 * 1x28x28, a batch larger than the training set or an --out that is not a
 * folder it can write in (exit 1) is refused before training.
 *
 * examples/autoencoder_torch.py is the same program in PyTorch;
 * docs/from-pytorch.md puts the two side by side.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <tapegrad/tapegrad.h>

#include "example_args.h"

static const char prog[] = "autoencoder";

/* Runs call; when it fails, prints "autoencoder: <what the program was doing,
 * printf(...)>: <the library's message>" and exits with status 1. */
typedef struct opts {
    int64_t epochs, steps, batch, threads;
    double seconds, lr;
    uint64_t seed;
    const char *out, *data;
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: autoencoder [--epochs N (2)] [--steps N (0: no limit)] [--seconds S (60)]\n"
               "                   [--batch N (64)] [--lr X (2e-3, at most 1)] [--seed N (0)]\n"
               "                   [--threads N (1..256)] [--out DIR (out)] [--data DIR]\n"
               "Needs the training and the test IDX files in DIR (default "
               TG_FASHION_MNIST_DIR ").\n");
}

/* Applies option name = v; -1 after printing what is wrong. */
static int apply(void *opts_, const char *name, const char *v)
{
    opts *o = opts_;
    if (!strcmp(name, "--epochs")) return ex_arg_i64(prog, name, v, 1, INT64_MAX, &o->epochs);
    if (!strcmp(name, "--steps")) return ex_arg_i64(prog, name, v, 0, INT64_MAX, &o->steps);
    if (!strcmp(name, "--batch")) return ex_arg_i64(prog, name, v, 1, INT64_MAX, &o->batch);
    if (!strcmp(name, "--seconds")) return ex_arg_positive(prog, name, v, 1e9, &o->seconds);
    if (!strcmp(name, "--lr")) return ex_arg_positive(prog, name, v, 1.0, &o->lr);
    if (!strcmp(name, "--seed")) return ex_arg_u64(prog, name, v, &o->seed);
    if (!strcmp(name, "--threads")) return ex_arg_i64(prog, name, v, 1, 256, &o->threads);
    if (!strcmp(name, "--out")) return (o->out = v), 0;
    return (o->data = v), 0;   /* --data */
}

/* The training (train true) or test set, pixels in [0, 1]; exits after
 * saying why when it is missing, empty or not of 1x28x28 images. */
static tg_dataset *load_set(const opts *o, bool train)
{
    tg_dataset *ds = ex_load_28x28(prog, o->data, train, TG_PIXELS_UNIT);
    if (!ds) exit(EX_EXIT_FAIL);
    return ds;
}

/* Appends Conv2d (or ConvTranspose2d) with kernel k, stride 2, padding 1,
 * then the activation act, to seq. */
static void stage(tg_module *seq, bool transpose, int64_t cin, int64_t cout, int64_t k,
                  tg_activation act, tg_rng *rng)
{
    tg_module *layer, *a;
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    EX_CHECK((transpose ? tg_nn_conv_transpose_new : tg_nn_conv_new)(&layer, 2, cin, cout,
             (int64_t[]){k, k}, &p, true, rng), "building the model");
    EX_CHECK(tg_nn_sequential_append(seq, layer), "building the model");
    EX_CHECK(tg_nn_activation_new(&a, act, 0), "building the model");
    EX_CHECK(tg_nn_sequential_append(seq, a), "building the model");
}

/* Sequential(encoder, decoder), as nn.Sequential(OrderedDict(...)). */
static tg_module *build_model(uint64_t seed)
{
    tg_module *m, *enc, *dec;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    EX_CHECK(tg_nn_sequential_new(&m), "building the model");
    EX_CHECK(tg_nn_sequential_new(&enc), "building the model");
    stage(enc, false, 1, 16, 3, TG_ACT_RELU, &rng);      /* 28 -> 14 */
    stage(enc, false, 16, 32, 3, TG_ACT_RELU, &rng);     /* 14 -> 7 */
    EX_CHECK(tg_nn_sequential_new(&dec), "building the model");
    stage(dec, true, 32, 16, 4, TG_ACT_RELU, &rng);      /* 7 -> 14 */
    stage(dec, true, 16, 1, 4, TG_ACT_SIGMOID, &rng);    /* 14 -> 28 */
    EX_CHECK(tg_module_add_child(m, "encoder", enc), "building the model");
    EX_CHECK(tg_module_add_child(m, "decoder", dec), "building the model");
    return m;
}

/* Adam on the MSE, one scope per step; a progress line every 2 s. */
static void train(tg_module *m, tg_dataset *ds, const opts *o)
{
    tg_optimizer *opt;
    tg_loader *ld;
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    ao.lr = o->lr;
    EX_CHECK(tg_adam_from_module(&opt, m, &ao), "setting up Adam");
    tg_loader_options lo = {.batch_size = o->batch, .shuffle = true, .seed = o->seed,
                            .drop_last = true};
    EX_CHECK(tg_loader_new(&ld, ds, &lo), "setting up the batches of the training set");
    int64_t step = 0, seen = 0, count = 0;
    double t0 = ex_now_s(), last = t0, total = 0;
    bool done = false;
    for (int64_t e = 0; e < o->epochs && !done; e++) {
        EX_CHECK(tg_loader_reset(ld, e), "shuffling the training set for epoch %lld", (long long)e);
        tg_tensor *x, *labels, *y, *loss;
        int got;
        while (!done && (got = tg_loader_next(ld, &x, &labels)) != 0) {
            const long long s = (long long)++step;
            EX_CHECK(got, "taking batch %lld", s);
            EX_CHECK(tg_scope_begin(), "training step %lld", s);
            tg_scope_add(x), tg_scope_add(labels);
            tg_optimizer_zero_grad(opt);
            EX_CHECK(tg_module_forward(m, &y, x), "training step %lld: reconstructing the batch",
                     s);
            EX_CHECK(tg_mse_loss(&loss, y, x, TG_REDUCTION_MEAN), "training step %lld: the MSE", s);
            EX_CHECK(tg_backward(loss, NULL, NULL), "training step %lld: the gradients", s);
            EX_CHECK(tg_optimizer_step(opt), "training step %lld: updating the weights", s);
            seen += tg_tensor_dim(x, 0), total += tg_tensor_item(loss), count++;
            tg_scope_end();
            double now = ex_now_s();
            done = (o->steps > 0 && step >= o->steps) || now - t0 >= o->seconds;
            if (done || now - last >= 2.0) {
                printf("epoch %lld  step %5lld  mse %.5f  %.0f img/s  %.0f s\n", (long long)e, s,
                       total / (double)count, (double)seen / (now - t0), now - t0);
                fflush(stdout);
                total = 0, count = 0, last = now;
            }
        }
    }
    tg_loader_free(ld);
    tg_optimizer_free(opt);
}

/* The MSE on the first 1000 test images (or all), and a picture of up to 4
 * rows of 8 inputs, each above their reconstructions. */
static void evaluate(tg_module *m, tg_dataset *test, const char *dir)
{
    const int64_t n = tg_dataset_size(test) < 1000 ? tg_dataset_size(test) : 1000;
    const int64_t per = n < 8 ? n : 8, rows = n / per < 4 ? n / per : 4;
    tg_tensor *x, *labels, *y, *mse, *parts[8], *grid;
    int64_t *idx = malloc(sizeof *idx * (size_t)n);
    for (int64_t i = 0; idx && i < n; i++) idx[i] = i;
    EX_CHECK(idx ? tg_dataset_batch(&x, &labels, test, idx, n) : tg_error_set(TG_ENOMEM, NULL),
             "taking the first %lld test images", (long long)n);
    free(idx);
    tg_scope_add(x), tg_scope_add(labels);
    tg_module_train(m, false);
    tg_no_grad_begin();
    EX_CHECK(tg_module_forward(m, &y, x), "reconstructing the test images");
    EX_CHECK(tg_mse_loss(&mse, y, x, TG_REDUCTION_MEAN), "the MSE on the test images");
    printf("test mse on %lld images: %.5f\n", (long long)n, tg_tensor_item(mse));
    char path[4096];
    snprintf(path, sizeof path, "%s/autoencoder_pairs.png", dir);
    for (int64_t r = 0; r < rows; r++) {
        EX_CHECK(tg_slice(&parts[2 * r], x, 0, per * r, per * r + per, 1), "arranging %s", path);
        EX_CHECK(tg_slice(&parts[2 * r + 1], y, 0, per * r, per * r + per, 1), "arranging %s",
                 path);
    }
    EX_CHECK(tg_cat(&grid, (int)(2 * rows), parts, 0), "arranging %s", path);
    EX_CHECK(tg_png_write_grid(path, grid, (int)per, 0.0, 1.0, 2), "writing %s", path);
    printf("wrote %s (rows 1, 3, 5, 7: test inputs; rows 2, 4, 6, 8: reconstructions)\n", path);
    tg_no_grad_end();
}

/* The options, both data sets and the output folder are checked before
 * training, so that a bad input costs no training and writes nothing. */
int main(int argc, char **argv)
{
    static const char *const names[] = {"--epochs", "--steps", "--batch", "--seconds", "--lr",
                                        "--seed", "--threads", "--out", "--data"};
    opts o = {.epochs = 2, .batch = 64, .seconds = 60, .lr = 2e-3, .out = "out"};
    int rc = ex_args_parse(prog, argc, argv, names, 9, apply, &o, usage);
    if (rc != 0) {
        if (rc < 0) usage(stderr);
        return rc < 0 ? EX_EXIT_USAGE : EX_EXIT_OK;
    }
    tg_dataset *ds = load_set(&o, true), *test = load_set(&o, false);
    if (o.batch > tg_dataset_size(ds))
        fprintf(stderr, "%s: batch %lld is larger than the %lld training images: no full "
                "batch to train on\n", prog, (long long)o.batch, (long long)tg_dataset_size(ds));
    if (o.batch > tg_dataset_size(ds) || ex_out_dir(prog, "--out", o.out) < 0) {
        tg_dataset_release(test);
        tg_dataset_release(ds);
        return EX_EXIT_FAIL;
    }
    if (o.threads > 0) openblas_set_num_threads((int)o.threads), tg_set_num_threads((int)o.threads);
    EX_CHECK(tg_scope_begin(), "starting");
    tg_module *m = build_model(o.seed);
    printf("autoencoder: %lld weights, %lld training images, batch %lld, up to %lld epochs / "
           "%.0f s\n", (long long)tg_module_parameter_numel(m), (long long)tg_dataset_size(ds),
           (long long)o.batch, (long long)o.epochs, o.seconds);
    train(m, ds, &o);
    if (ex_save_module(prog, m, o.out, "autoencoder.safetensors") < 0) exit(EX_EXIT_FAIL);
    evaluate(m, test, o.out);
    tg_scope_end();
    tg_module_release(m);
    tg_dataset_release(test);
    tg_dataset_release(ds);
    return EX_EXIT_OK;
}
