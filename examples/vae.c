/* vae: a convolutional variational autoencoder on Fashion-MNIST
 * (Kingma and Welling 2014).
 *
 *   encoder:   Conv2d(1, 32, 4, stride 2, pad 1) -> ReLU         (N, 32, 14, 14)
 *              Conv2d(32, 64, 4, stride 2, pad 1) -> ReLU        (N, 64, 7, 7)
 *              Flatten                                           (N, 3136)
 *   fc_mu, fc_logvar: Linear(3136, Z) each                       (N, Z)
 *   decoder:   Linear(Z, 3136) -> ReLU -> Unflatten(64, 7, 7)
 *              ConvTranspose2d(64, 32, 4, stride 2, pad 1) -> ReLU   (N, 32, 14, 14)
 *              ConvTranspose2d(32, 1, 4, stride 2, pad 1)            (N, 1, 28, 28) logits
 *
 * The encoder gives the mean mu and log-variance logvar of q(z | x); a
 * sample z = mu + exp(logvar / 2) * eps, eps ~ N(0, I), is the
 * reparameterisation that lets the gradient reach mu and logvar; the loss
 * per image is the Bernoulli reconstruction term (binary cross-entropy of
 * the decoder's logits against the pixels in [0, 1], summed over pixels)
 * plus KL(q(z | x) || N(0, I)) = -1/2 sum(1 + logvar - mu^2 - exp(logvar)).
 * Adam minimises its batch mean.  Training stops after --epochs, --steps or
 * --seconds, whichever comes first; then out/vae.safetensors holds the
 * weights with PyTorch's names (encoder.0.weight, fc_mu.weight, ...,
 * decoder.5.bias), the loss on the test images is printed, and
 * out/vae_samples.png shows 64 images decoded from z ~ N(0, I) and
 * out/vae_pairs.png test images (odd rows) above their reconstructions
 * from z = mu (even rows).  Bad options exit 2; a data set that is
 * missing, empty or not of 1x28x28 images, a batch larger than the
 * training set or an --out it cannot write in exit 1 before training.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <tapegrad/tapegrad.h>

#include "example_args.h"

static const char prog[] = "vae";

/* Runs call; when it fails, prints "vae: <what the program was doing>:
 * <the library's message>" and exits with status 1. */
typedef struct opts {
    int64_t epochs, steps, batch, threads, latent;
    double seconds, lr;
    uint64_t seed;
    const char *out, *data;
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: vae [--epochs N (5)] [--steps N (0: no limit)] [--seconds S (60)]\n"
               "           [--batch N (64)] [--latent Z (16)] [--lr X (1e-3, at most 1)]\n"
               "           [--seed N (0)] [--threads N (1..256)] [--out DIR (out)] [--data DIR]\n"
               "Needs the training and the test IDX files in DIR (default "
               TG_FASHION_MNIST_DIR ").\n");
}

static int apply(void *opts_, const char *name, const char *v)
{
    opts *o = opts_;
    if (!strcmp(name, "--epochs")) return ex_arg_i64(prog, name, v, 1, INT64_MAX, &o->epochs);
    if (!strcmp(name, "--steps")) return ex_arg_i64(prog, name, v, 0, INT64_MAX, &o->steps);
    if (!strcmp(name, "--batch")) return ex_arg_i64(prog, name, v, 1, INT64_MAX, &o->batch);
    if (!strcmp(name, "--latent")) return ex_arg_i64(prog, name, v, 1, 4096, &o->latent);
    if (!strcmp(name, "--seconds")) return ex_arg_positive(prog, name, v, 1e9, &o->seconds);
    if (!strcmp(name, "--lr")) return ex_arg_positive(prog, name, v, 1.0, &o->lr);
    if (!strcmp(name, "--seed")) return ex_arg_u64(prog, name, v, &o->seed);
    if (!strcmp(name, "--threads")) return ex_arg_i64(prog, name, v, 1, 256, &o->threads);
    if (!strcmp(name, "--out")) return (o->out = v), 0;
    return (o->data = v), 0;   /* --data */
}

/* ---- the model -------------------------------------------------------------- */

/* Appends *m, made by the call that returned rc (*m is read after it). */
static void add(tg_module *seq, int rc, tg_module **m)
{
    EX_CHECK(rc, "building the model");
    EX_CHECK(tg_nn_sequential_append(seq, *m), "building the model");
}

/* Conv2d or ConvTranspose2d with kernel 4, stride 2, padding 1 (28 <-> 14 <-> 7). */
static int conv(tg_module **m, bool transpose, int64_t cin, int64_t cout, tg_rng *rng)
{
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    return (transpose ? tg_nn_conv_transpose_new : tg_nn_conv_new)(m, 2, cin, cout,
                                                                 (int64_t[]){4, 4}, &p, true, rng);
}

/* A container with children encoder, fc_mu, fc_logvar and decoder, as a
 * torch nn.Module with those attributes; its parts are run one by one. */
static tg_module *build_model(int64_t latent, uint64_t seed)
{
    tg_module *m, *enc, *dec, *mu, *logvar, *l;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    const int64_t hidden = 64 * 7 * 7, shape[3] = {64, 7, 7};
    EX_CHECK(tg_nn_sequential_new(&enc), "building the model");
    add(enc, conv(&l, false, 1, 32, &rng), &l);
    add(enc, tg_nn_activation_new(&l, TG_ACT_RELU, 0), &l);
    add(enc, conv(&l, false, 32, 64, &rng), &l);
    add(enc, tg_nn_activation_new(&l, TG_ACT_RELU, 0), &l);
    add(enc, tg_nn_flatten_new(&l, 1, -1), &l);
    EX_CHECK(tg_nn_linear_new(&mu, hidden, latent, true, &rng), "building the model");
    EX_CHECK(tg_nn_linear_new(&logvar, hidden, latent, true, &rng), "building the model");
    EX_CHECK(tg_nn_sequential_new(&dec), "building the model");
    add(dec, tg_nn_linear_new(&l, latent, hidden, true, &rng), &l);
    add(dec, tg_nn_activation_new(&l, TG_ACT_RELU, 0), &l);
    add(dec, tg_nn_unflatten_new(&l, 1, 3, shape), &l);
    add(dec, conv(&l, true, 64, 32, &rng), &l);
    add(dec, tg_nn_activation_new(&l, TG_ACT_RELU, 0), &l);
    add(dec, conv(&l, true, 32, 1, &rng), &l);
    EX_CHECK(tg_nn_sequential_new(&m), "building the model");
    EX_CHECK(tg_module_add_child(m, "encoder", enc), "building the model");
    EX_CHECK(tg_module_add_child(m, "fc_mu", mu), "building the model");
    EX_CHECK(tg_module_add_child(m, "fc_logvar", logvar), "building the model");
    EX_CHECK(tg_module_add_child(m, "decoder", dec), "building the model");
    return m;
}

/* The batch-mean loss of x (new tensors in the open scope): *rec the
 * reconstruction term, *kl the KL term, *loss their sum; *logits the
 * decoder's output.  With rng, z is sampled; without, z = mu. */
static int vae_loss(tg_module *m, tg_tensor *x, tg_rng *rng, tg_tensor **logits,
                    tg_tensor **rec, tg_tensor **kl, tg_tensor **loss)
{
    tg_tensor *h, *mu, *logvar, *z, *std, *eps, *t, *var, *mu2;
    const double n = (double)tg_tensor_dim(x, 0);
    TG_TRY(tg_module_forward(tg_module_child(m, "encoder"), &h, x));
    TG_TRY(tg_module_forward(tg_module_child(m, "fc_mu"), &mu, h));
    TG_TRY(tg_module_forward(tg_module_child(m, "fc_logvar"), &logvar, h));
    z = mu;
    if (rng) {                                                 /* z = mu + std * eps */
        TG_TRY(tg_mul_scalar(&t, logvar, 0.5));
        TG_TRY(tg_exp(&std, t));
        TG_TRY(tg_tensor_randn_like(&eps, std, rng));
        tg_scope_add(eps);
        TG_TRY(tg_mul(&t, std, eps));
        TG_TRY(tg_add(&z, mu, t));
    }
    TG_TRY(tg_module_forward(tg_module_child(m, "decoder"), logits, z));
    TG_TRY(tg_bce_with_logits(&t, *logits, x, TG_REDUCTION_SUM));
    TG_TRY(tg_mul_scalar(rec, t, 1.0 / n));
    /* KL = -1/2 sum(1 + logvar - mu^2 - exp(logvar)) / n */
    TG_TRY(tg_exp(&var, logvar));
    TG_TRY(tg_mul(&mu2, mu, mu));
    TG_TRY(tg_add_scalar(&t, logvar, 1.0));
    TG_TRY(tg_sub(&t, t, mu2));
    TG_TRY(tg_sub(&t, t, var));
    TG_TRY(tg_sum(&t, t));
    TG_TRY(tg_mul_scalar(kl, t, -0.5 / n));
    return tg_add(loss, *rec, *kl);
}

/* ---- training and evaluation ------------------------------------------------ */

static void train(tg_module *m, tg_dataset *ds, const opts *o)
{
    tg_optimizer *opt;
    tg_loader *ld;
    tg_rng rng;
    tg_rng_init(&rng, o->seed + 1);
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    ao.lr = o->lr;
    EX_CHECK(tg_adam_from_module(&opt, m, &ao), "setting up Adam");
    tg_loader_options lo = {.batch_size = o->batch, .shuffle = true, .seed = o->seed,
                            .drop_last = true};
    EX_CHECK(tg_loader_new(&ld, ds, &lo), "setting up the batches of the training set");
    int64_t step = 0, seen = 0, count = 0;
    double t0 = ex_now_s(), last = t0, sum_rec = 0, sum_kl = 0;
    bool done = false;
    for (int64_t e = 0; e < o->epochs && !done; e++) {
        EX_CHECK(tg_loader_reset(ld, e), "shuffling the training set for epoch %lld", (long long)e);
        tg_tensor *x, *labels, *logits, *rec, *kl, *loss;
        int got;
        while (!done && (got = tg_loader_next(ld, &x, &labels)) != 0) {
            const long long s = (long long)++step;
            EX_CHECK(got, "taking batch %lld", s);
            EX_CHECK(tg_scope_begin(), "training step %lld", s);
            tg_scope_add(x), tg_scope_add(labels);
            tg_optimizer_zero_grad(opt);
            EX_CHECK(vae_loss(m, x, &rng, &logits, &rec, &kl, &loss), "training step %lld", s);
            EX_CHECK(tg_backward(loss, NULL, NULL), "training step %lld: the gradients", s);
            EX_CHECK(tg_optimizer_step(opt), "training step %lld: updating the weights", s);
            seen += tg_tensor_dim(x, 0), count++;
            sum_rec += tg_tensor_item(rec), sum_kl += tg_tensor_item(kl);
            tg_scope_end();
            double now = ex_now_s();
            done = (o->steps > 0 && step >= o->steps) || now - t0 >= o->seconds;
            if (done || now - last >= 2.0) {
                printf("epoch %lld  step %5lld  loss %.2f (reconstruction %.2f + kl %.2f)  "
                       "%.0f img/s  %.0f s\n", (long long)e, s, (sum_rec + sum_kl) / count,
                       sum_rec / count, sum_kl / count, (double)seen / (now - t0), now - t0);
                fflush(stdout);
                sum_rec = sum_kl = 0, count = 0, last = now;
            }
        }
    }
    tg_loader_free(ld);
    tg_optimizer_free(opt);
}

/* The loss on the first 1000 test images (or all) with z = mu, up to 4 rows
 * of 8 of them above their reconstructions, and 64 samples from N(0, I). */
static void evaluate(tg_module *m, tg_dataset *test, const opts *o)
{
    const int64_t n = tg_dataset_size(test) < 1000 ? tg_dataset_size(test) : 1000;
    const int64_t per = n < 8 ? n : 8, rows = n / per < 4 ? n / per : 4;
    tg_tensor *x, *labels, *logits, *rec, *kl, *loss, *y, *parts[8], *grid, *z, *s;
    int64_t *idx = malloc(sizeof *idx * (size_t)n);
    for (int64_t i = 0; idx && i < n; i++) idx[i] = i;
    EX_CHECK(idx ? tg_dataset_batch(&x, &labels, test, idx, n) : tg_error_set(TG_ENOMEM, NULL),
             "taking the first %lld test images", (long long)n);
    free(idx);
    tg_scope_add(x), tg_scope_add(labels);
    tg_module_train(m, false);
    tg_no_grad_begin();
    EX_CHECK(vae_loss(m, x, NULL, &logits, &rec, &kl, &loss), "the loss on the test images");
    printf("test loss on %lld images (z = mu): %.2f (reconstruction %.2f + kl %.2f)\n",
           (long long)n, tg_tensor_item(loss), tg_tensor_item(rec), tg_tensor_item(kl));
    char path[4096];
    snprintf(path, sizeof path, "%s/vae_pairs.png", o->out);
    EX_CHECK(tg_sigmoid(&y, logits), "arranging %s", path);
    for (int64_t r = 0; r < rows; r++) {
        EX_CHECK(tg_slice(&parts[2 * r], x, 0, per * r, per * r + per, 1), "arranging %s", path);
        EX_CHECK(tg_slice(&parts[2 * r + 1], y, 0, per * r, per * r + per, 1), "arranging %s",
                 path);
    }
    EX_CHECK(tg_cat(&grid, (int)(2 * rows), parts, 0), "arranging %s", path);
    EX_CHECK(tg_png_write_grid(path, grid, (int)per, 0.0, 1.0, 2), "writing %s", path);
    printf("wrote %s (rows 1, 3, 5, 7: test inputs; rows 2, 4, 6, 8: reconstructions)\n", path);
    tg_rng rng;
    tg_rng_init(&rng, o->seed + 2);
    snprintf(path, sizeof path, "%s/vae_samples.png", o->out);
    EX_CHECK(tg_tensor_randn(&z, TG_F32, 2, (int64_t[]){64, o->latent}, &rng), "drawing z");
    tg_scope_add(z);
    EX_CHECK(tg_module_forward(tg_module_child(m, "decoder"), &logits, z), "decoding samples");
    EX_CHECK(tg_sigmoid(&s, logits), "decoding samples");
    EX_CHECK(tg_png_write_grid(path, s, 8, 0.0, 1.0, 2), "writing %s", path);
    printf("wrote %s (64 images decoded from z ~ N(0, I))\n", path);
    tg_no_grad_end();
}

/* The options, both data sets and the output folder are checked before
 * training, so that a bad input costs no training and writes nothing. */
int main(int argc, char **argv)
{
    static const char *const names[] = {"--epochs", "--steps", "--batch", "--latent", "--seconds",
                                        "--lr", "--seed", "--threads", "--out", "--data"};
    opts o = {.epochs = 5, .batch = 64, .latent = 16, .seconds = 60, .lr = 1e-3, .out = "out"};
    int rc = ex_args_parse(prog, argc, argv, names, 10, apply, &o, usage);
    if (rc != 0) {
        if (rc < 0) usage(stderr);
        return rc < 0 ? EX_EXIT_USAGE : EX_EXIT_OK;
    }
    tg_dataset *ds = ex_load_28x28(prog, o.data, true, TG_PIXELS_UNIT);
    tg_dataset *test = ds ? ex_load_28x28(prog, o.data, false, TG_PIXELS_UNIT) : NULL;
    if (test && o.batch > tg_dataset_size(ds))
        fprintf(stderr, "%s: batch %lld is larger than the %lld training images: no full "
                "batch to train on\n", prog, (long long)o.batch, (long long)tg_dataset_size(ds));
    if (!test || o.batch > tg_dataset_size(ds) || ex_out_dir(prog, "--out", o.out) < 0) {
        tg_dataset_release(test);
        tg_dataset_release(ds);
        return EX_EXIT_FAIL;
    }
    if (o.threads > 0) openblas_set_num_threads((int)o.threads), tg_set_num_threads((int)o.threads);
    EX_CHECK(tg_scope_begin(), "starting");
    tg_module *m = build_model(o.latent, o.seed);
    printf("vae: %lld weights, latent %lld, %lld training images, batch %lld, up to %lld "
           "epochs / %.0f s\n", (long long)tg_module_parameter_numel(m), (long long)o.latent,
           (long long)tg_dataset_size(ds), (long long)o.batch, (long long)o.epochs, o.seconds);
    train(m, ds, &o);
    if (ex_save_module(prog, m, o.out, "vae.safetensors") < 0) exit(EX_EXIT_FAIL);
    evaluate(m, test, &o);
    tg_scope_end();
    tg_module_release(m);
    tg_dataset_release(test);
    tg_dataset_release(ds);
    return EX_EXIT_OK;
}
