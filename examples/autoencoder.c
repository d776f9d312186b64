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
 * weights are saved to out/autoencoder.safetensors, with PyTorch's
 * state-dict names for the same nn.Module with children `encoder` and
 * `decoder` (encoder.0.weight, ..., decoder.2.bias), the MSE on 1000 test
 * images (or all, when there are fewer) is printed and
 * out/autoencoder_pairs.png shows test images (odd rows) above their
 * reconstructions (even rows).  A bad option value (exit 2), a missing or
 * empty training or test set, images that are not 1x28x28, a batch larger
 * than the training set or an --out that is not a folder it can write in
 * (exit 1) is refused before training, with nothing written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include <tapegrad/tapegrad.h>

#include "example_args.h"

static const char prog[] = "autoencoder";

/* Runs call; when it fails, prints "autoencoder: <what the program was doing,
 * printf(...)>: <the library's message>" and exits with status 1. */
#define CHECK(call, ...)                                                          \
    do {                                                                          \
        if ((call) < 0) {                                                         \
            ex_fail(prog, __VA_ARGS__);                                           \
            exit(EX_EXIT_FAIL);                                                   \
        }                                                                         \
    } while (0)

/* malloc(n) or, when there is no memory, exit with status 1 after saying so. */
static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "%s: out of memory (%zu bytes)\n", prog, n);
        exit(EX_EXIT_FAIL);
    }
    return p;
}

typedef struct opts {
    int64_t epochs, steps, batch;
    double seconds, lr;
    uint64_t seed;
    int64_t threads;   /* 0: leave the libraries' defaults */
    const char *out, *data;
} opts;

/* The model maps (N, 1, 28, 28) to itself: the encoder halves 28 twice to 7,
 * the decoder doubles 7 back to 28 (build_model). */
enum { IMAGE_SIDE = 28 };

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

/* 0 to run, 1 after --help, -1 after a usage error (printed). */
static int parse_opts(opts *o, int argc, char **argv)
{
    static const char *const names[] = {"--epochs", "--steps", "--batch", "--seconds", "--lr",
                                        "--seed", "--threads", "--out", "--data"};
    *o = (opts){.epochs = 2, .steps = 0, .batch = 64, .seconds = 60, .lr = 2e-3,
                .seed = 0, .threads = 0, .out = "out", .data = NULL};
    return ex_args_parse(prog, argc, argv, names, sizeof names / sizeof *names, apply, o, usage);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* forward = decoder(encoder(x)), as `def forward(self, x)` in PyTorch. */
static int ae_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    tg_tensor *z = NULL;
    int rc = tg_module_forward(tg_module_child(m, "encoder"), &z, x);
    if (rc < 0) return rc;
    rc = tg_module_forward(tg_module_child(m, "decoder"), y, z);
    tg_tensor_release(z);
    return rc;
}

static const tg_module_vtable ae_vt = {.type_name = "AutoEncoder", .forward = ae_forward};

/* Appends (conv or conv_transpose, kernel k, stride 2, padding 1) + act. */
static void add_stage(tg_module *seq, bool transpose, int64_t cin, int64_t cout, int64_t k,
                      tg_activation act, tg_rng *rng)
{
    tg_module *layer, *a;
    const int64_t kk[2] = {k, k};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    if (transpose)
        CHECK(tg_nn_conv_transpose_new(&layer, 2, cin, cout, kk, &p, true, rng),
              "building the model");
    else CHECK(tg_nn_conv_new(&layer, 2, cin, cout, kk, &p, true, rng), "building the model");
    CHECK(tg_nn_sequential_append(seq, layer), "building the model");
    CHECK(tg_nn_activation_new(&a, act, 0), "building the model");
    CHECK(tg_nn_sequential_append(seq, a), "building the model");
}

static int64_t count_weights(const tg_module *m)
{
    tg_tensor **params;
    int np;
    int64_t total = 0;
    CHECK(tg_module_parameters(m, &params, &np), "counting the weights");
    for (int i = 0; i < np; i++) total += tg_tensor_numel(params[i]);
    free(params);
    return total;
}

static tg_module *build_model(uint64_t seed)
{
    tg_module *m, *enc, *dec;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    CHECK(tg_module_new(&m, &ae_vt, NULL), "building the model");
    CHECK(tg_nn_sequential_new(&enc), "building the model");
    /* 28 -> (28 + 2 - 3) / 2 + 1 = 14 -> 7 */
    add_stage(enc, false, 1, 16, 3, TG_ACT_RELU, &rng);
    add_stage(enc, false, 16, 32, 3, TG_ACT_RELU, &rng);
    CHECK(tg_nn_sequential_new(&dec), "building the model");
    /* 7 -> (7 - 1) * 2 - 2 + 4 = 14 -> 28 */
    add_stage(dec, true, 32, 16, 4, TG_ACT_RELU, &rng);
    add_stage(dec, true, 16, 1, 4, TG_ACT_SIGMOID, &rng);
    CHECK(tg_module_add_child(m, "encoder", enc), "building the model");
    CHECK(tg_module_add_child(m, "decoder", dec), "building the model");
    return m;
}

/* Adam step number step (from 1) on a batch; returns the batch's loss. */
static double train_step(tg_module *m, tg_optimizer *opt, tg_tensor *x, int64_t step)
{
    tg_tensor *y, *loss;
    double l;
    const long long s = (long long)step;
    tg_optimizer_zero_grad(opt);
    CHECK(tg_module_forward(m, &y, x), "training step %lld: reconstructing the batch", s);
    CHECK(tg_mse_loss(&loss, y, x, TG_REDUCTION_MEAN), "training step %lld: the MSE", s);
    CHECK(tg_backward(loss, NULL, NULL), "training step %lld: the gradients", s);
    CHECK(tg_optimizer_step(opt), "training step %lld: updating the weights", s);
    CHECK(tg_tensor_get_flat(loss, 0, &l), "training step %lld: reading the MSE", s);
    tg_tensor_release(loss);
    tg_tensor_release(y);
    return l;
}

typedef struct progress {
    int64_t step, seen;
    double t0, sum, last_print;
    int64_t n_sum;
} progress;

static void report(progress *p, int64_t epoch, bool force)
{
    double t = now_s();
    if (!force && t - p->last_print < 2.0) return;
    printf("epoch %lld  step %5lld  mse %.5f  %.0f img/s  %.0f s\n", (long long)epoch,
           (long long)p->step, p->n_sum ? p->sum / (double)p->n_sum : 0.0,
           (double)p->seen / (t - p->t0), t - p->t0);
    fflush(stdout);
    p->sum = 0;
    p->n_sum = 0;
    p->last_print = t;
}

static void train(tg_module *m, tg_dataset *ds, const opts *o)
{
    tg_tensor **params;
    int np;
    tg_optimizer *opt;
    tg_loader *ld;
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    ao.lr = o->lr;
    CHECK(tg_module_parameters(m, &params, &np), "setting up Adam");
    CHECK(tg_adam_new(&opt, np, params, &ao), "setting up Adam");
    free(params);
    tg_loader_options lo = {.batch_size = o->batch, .shuffle = true, .seed = o->seed,
                            .drop_last = true};
    CHECK(tg_loader_new(&ld, ds, &lo), "setting up the batches of the training set");
    progress p = {.t0 = now_s()};
    p.last_print = p.t0;
    bool done = false;
    for (int64_t e = 0; e < o->epochs && !done; e++) {
        tg_tensor *x, *labels;
        CHECK(tg_loader_reset(ld, e), "shuffling the training set for epoch %lld", (long long)e);
        int got;
        while (!done && (got = tg_loader_next(ld, &x, &labels)) != 0) {
            CHECK(got, "taking batch %lld of epoch %lld", (long long)p.step + 1, (long long)e);
            p.step++;
            p.sum += train_step(m, opt, x, p.step);
            p.n_sum++;
            p.seen += tg_tensor_dim(x, 0);
            tg_tensor_release(x);
            tg_tensor_release(labels);
            done = (o->steps > 0 && p.step >= o->steps) || now_s() - p.t0 >= o->seconds;
            report(&p, e, done);
        }
    }
    tg_loader_free(ld);
    tg_optimizer_free(opt);
}

/* Reconstructs the first n test images in eval mode without recording. */
static void reconstruct(tg_module *m, tg_dataset *test, int64_t n, tg_tensor **x,
                        tg_tensor **y)
{
    tg_tensor *labels;
    int64_t *idx = xmalloc(sizeof *idx * (size_t)n);
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    CHECK(tg_dataset_batch(x, &labels, test, idx, n), "taking the first %lld test images",
          (long long)n);
    free(idx);
    tg_tensor_release(labels);
    tg_module_train(m, false);
    tg_no_grad_begin();
    CHECK(tg_module_forward(m, y, *x), "reconstructing the test images");
    tg_no_grad_end();
}

/* Rows of per (8, or n when n < 8): inputs 0..per-1, their reconstructions,
 * the next per inputs, ...; up to 4 such pairs of rows, as many as n allows. */
static void write_pairs(const char *path, tg_tensor *x, tg_tensor *y)
{
    const int64_t n = tg_tensor_dim(x, 0), per = n < 8 ? n : 8;
    const int64_t rows = n / per < 4 ? n / per : 4;
    tg_tensor **parts = xmalloc(sizeof *parts * (size_t)(2 * rows)), *grid;
    for (int64_t r = 0; r < rows; r++) {
        CHECK(tg_slice(&parts[2 * r], x, 0, per * r, per * r + per, 1),
              "arranging the pictures of %s", path);
        CHECK(tg_slice(&parts[2 * r + 1], y, 0, per * r, per * r + per, 1),
              "arranging the pictures of %s", path);
    }
    CHECK(tg_cat(&grid, (int)(2 * rows), parts, 0),   /* (2 * rows * per, 1, 28, 28) */
          "arranging the pictures of %s", path);
    CHECK(tg_png_write_grid(path, grid, (int)per, 0.0, 1.0, 2), "writing %s", path);
    for (int64_t i = 0; i < 2 * rows; i++) tg_tensor_release(parts[i]);
    free(parts);
    tg_tensor_release(grid);
}

/* The MSE on the first 1000 test images (all of them when there are fewer),
 * and the picture of some of them with their reconstructions. */
static void evaluate(tg_module *m, tg_dataset *test, const opts *o)
{
    tg_tensor *x, *y, *mse;
    char path[4096];
    double v;
    const int64_t size = tg_dataset_size(test), n = size < 1000 ? size : 1000;
    reconstruct(m, test, n, &x, &y);
    CHECK(tg_mse_loss(&mse, y, x, TG_REDUCTION_MEAN), "the MSE on the test images");
    CHECK(tg_tensor_get_flat(mse, 0, &v), "the MSE on the test images");
    printf("test mse on %lld images: %.5f\n", (long long)n, v);
    snprintf(path, sizeof path, "%s/autoencoder_pairs.png", o->out);
    write_pairs(path, x, y);
    printf("wrote %s (rows 1, 3, 5, 7: test inputs; rows 2, 4, 6, 8: reconstructions)\n", path);
    tg_tensor_release(mse);
    tg_tensor_release(y);
    tg_tensor_release(x);
}

static void save_weights(const tg_module *m, const char *dir)
{
    tg_st_file *f;
    char path[4096];
    snprintf(path, sizeof path, "%s/autoencoder.safetensors", dir);
    CHECK(tg_st_new(&f), "collecting the weights");
    CHECK(tg_module_state_dict_save(m, f, NULL), "collecting the weights");
    CHECK(tg_safetensors_save(f, path), "saving the weights to %s", path);
    tg_st_free(f);
    printf("wrote %s\n", path);
}

/* The training (train true) or test set in [0, 1] of (1, IMAGE_SIDE,
 * IMAGE_SIDE) images, or NULL after saying why it cannot be used. */
static tg_dataset *load_set(const opts *o, bool train)
{
    tg_dataset *ds = NULL;
    const char *dir = o->data ? o->data : TG_FASHION_MNIST_DIR;
    if (tg_fashion_mnist_load(&ds, o->data, train) < 0 ||
        tg_dataset_set_pixel_range(ds, TG_PIXELS_UNIT) < 0) {
        fprintf(stderr, "%s: cannot load the %s set from %s: %s\n", prog,
                train ? "training" : "test", dir, tg_error_message());
        tg_dataset_release(ds);
        return NULL;
    }
    if (tg_dataset_size(ds) < 1) {
        fprintf(stderr, "%s: the %s set in %s is empty\n", prog, train ? "training" : "test", dir);
        tg_dataset_release(ds);
        return NULL;
    }
    int64_t s[3];
    tg_dataset_image_shape(ds, s);
    if (s[0] != 1 || s[1] != IMAGE_SIDE || s[2] != IMAGE_SIDE) {
        fprintf(stderr, "%s: --data %s: the %s images are (%lld, %lld, %lld): the model takes "
                "(1, %d, %d)\n", prog, dir, train ? "training" : "test", (long long)s[0],
                (long long)s[1], (long long)s[2], IMAGE_SIDE, IMAGE_SIDE);
        tg_dataset_release(ds);
        return NULL;
    }
    return ds;
}

/* Everything that can be checked before training is: the options, both data
 * sets and the output folder, so that a bad input costs no training and
 * writes nothing.  The weights are saved before the evaluation. */
int main(int argc, char **argv)
{
    opts o;
    int rc = parse_opts(&o, argc, argv);
    if (rc != 0) {
        if (rc < 0) usage(stderr);
        return rc < 0 ? EX_EXIT_USAGE : EX_EXIT_OK;
    }
    tg_dataset *ds = load_set(&o, true), *test = ds ? load_set(&o, false) : NULL;
    if (!test) {
        tg_dataset_release(ds);
        return EX_EXIT_FAIL;
    }
    if (o.batch > tg_dataset_size(ds)) {
        fprintf(stderr, "%s: batch %lld is larger than the %lld training images: no full "
                "batch to train on\n", prog, (long long)o.batch, (long long)tg_dataset_size(ds));
        tg_dataset_release(test);
        tg_dataset_release(ds);
        return EX_EXIT_FAIL;
    }
    if (ex_out_dir(prog, "--out", o.out) < 0) {
        tg_dataset_release(test);
        tg_dataset_release(ds);
        return EX_EXIT_FAIL;
    }
    if (o.threads > 0) {
        openblas_set_num_threads((int)o.threads);
        tg_set_num_threads((int)o.threads);
    }
    tg_module *m = build_model(o.seed);
    printf("autoencoder: %lld weights, %lld training images, batch %lld, "
           "up to %lld epochs / %.0f s\n", (long long)count_weights(m),
           (long long)tg_dataset_size(ds), (long long)o.batch, (long long)o.epochs, o.seconds);
    train(m, ds, &o);
    save_weights(m, o.out);
    evaluate(m, test, &o);
    tg_module_release(m);
    tg_dataset_release(test);
    tg_dataset_release(ds);
    return EX_EXIT_OK;
}
