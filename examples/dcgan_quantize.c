/* dcgan_quantize: post-training int8 quantization of the trained DCGAN
 * generator (examples/dcgan/model.h) with tg_quantize_model.
 *
 *   dcgan_quantize [--weights out/generator.safetensors] [--latents out/latents.safetensors]
 *                  [--out DIR (out)] [--calib N (8)] [--batch B (64)] [--seed S (1)]
 *                  [--repeat R (7)] [--fold 1|0 (1)]
 *
 * Loads the generator strictly (prefix "gen" when present), calibrates on N
 * batches of B latents z ~ N(0, 1) (eval mode: BatchNorm uses its running
 * statistics), converts its Linear and two ConvTranspose2d layers to int8
 * (per-channel weights, u8 activations; with --fold 1 each BatchNorm is
 * folded into the layer before it and each ReLU fused into the int8 op,
 * with --fold 0 they stay float), runs both on the latents file's z (or 32
 * fresh latents when the file is missing) and writes DIR/samples_float.png,
 * DIR/samples_int8.png and DIR/samples_float_int8.png (float row(s) above the
 * int8 ones), then prints PSNR(int8 vs float) over the images in [-1, 1]
 * (peak-to-peak 2): 10 log10(2^2 / MSE), and the median time of R forwards
 * of each model on one batch of B (float and int8 runs alternate, so a
 * load change on a shared machine hits both alike).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tapegrad/quant.h>
#include <tapegrad/tapegrad.h>

#include "dcgan/model.h"

#define CHECK(call)                                                               \
    do {                                                                          \
        int rc_ = (call);                                                         \
        if (rc_ < 0) {                                                            \
            fprintf(stderr, "dcgan_quantize: %s failed: %s: %s\n", #call,         \
                    tg_status_name(rc_), tg_error_message());                     \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

typedef struct opts {
    const char *weights, *latents, *out;
    int64_t calib, batch, repeat;
    uint64_t seed;
    bool fold;
} opts;

static int parse_opts(opts *o, int argc, char **argv)
{
    *o = (opts){.weights = "out/generator.safetensors", .latents = "out/latents.safetensors",
                .out = "out", .calib = 8, .batch = 64, .repeat = 7, .seed = 1, .fold = true};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--weights")) o->weights = v;
        else if (!strcmp(a, "--latents")) o->latents = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--calib")) o->calib = strtoll(v, NULL, 10);
        else if (!strcmp(a, "--batch")) o->batch = strtoll(v, NULL, 10);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--repeat")) o->repeat = strtoll(v, NULL, 10);
        else if (!strcmp(a, "--fold") && (!strcmp(v, "0") || !strcmp(v, "1"))) o->fold = v[0] == '1';
        else return -1;
    }
    return argc % 2 == 1 && o->calib >= 1 && o->calib <= 1000 && o->batch >= 1 &&
                   o->repeat >= 1 && o->repeat <= 1000
               ? 0
               : -1;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static tg_tensor *randn(tg_rng *rng, int64_t n, int64_t nz)
{
    tg_tensor *z;
    CHECK(tg_tensor_zeros(&z, TG_F32, 2, (int64_t[]){n, nz}));
    CHECK(tg_tensor_rand_normal(z, rng, 0.0, 1.0));
    return z;
}

/* images = m(z) without grad; *ms receives the time of the forward. */
static tg_tensor *generate(tg_module *m, tg_tensor *z, double *ms)
{
    tg_tensor *img;
    tg_no_grad_begin();
    double t0 = now_ms();
    CHECK(tg_module_forward(m, &img, z));
    *ms = now_ms() - t0;
    tg_no_grad_end();
    return img;
}

/* The generator of model.h with the architecture read from the weights. */
static tg_module *load_generator(const char *path)
{
    tg_st_file *wf;
    CHECK(tg_safetensors_load(&wf, path));
    const char *prefix = tg_st_get(wf, "gen.net.0.weight") ? "gen" : "";
    char key[TG_MODULE_NAME_MAX];
    snprintf(key, sizeof key, "%s%snet.0.weight", prefix, prefix[0] ? "." : "");
    tg_tensor *w0 = tg_st_get(wf, key);
    if (!w0 || tg_tensor_ndim(w0) != 2 || tg_tensor_dim(w0, 0) % 49 != 0) {
        fprintf(stderr, "dcgan_quantize: %s: no 2-d %s of shape (C*49, nz)\n", path, key);
        exit(1);
    }
    dcgan_arch a = DCGAN_ARCH_INIT;
    a.g_ch = tg_tensor_dim(w0, 0) / 49;
    a.nz = tg_tensor_dim(w0, 1);
    tg_module *g;
    tg_rng rng;
    tg_rng_init(&rng, 0);
    CHECK(dcgan_generator_new(&g, &a, &rng));
    CHECK(tg_module_load_state_dict(g, wf, prefix, true));
    tg_st_free(wf);
    tg_module_train(g, false);
    return g;
}

/* The latents file's z, or n fresh ones when there is no such file. */
static tg_tensor *test_latents(const char *path, tg_rng *rng, int64_t nz)
{
    tg_st_file *zf = NULL;
    tg_tensor *z = NULL;
    if (tg_safetensors_load(&zf, path) >= 0 && tg_st_get(zf, "z")) {
        z = tg_tensor_retain(tg_st_get(zf, "z"));
        printf("dcgan_quantize: %lld test latents from %s\n", (long long)tg_tensor_dim(z, 0), path);
    } else {
        z = randn(rng, 32, nz);
        printf("dcgan_quantize: no latents in %s; 32 fresh test latents\n", path);
    }
    tg_st_free(zf);
    return z;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median times of o->repeat forwards of f and q on z, alternating. */
static void time_both(const opts *o, tg_module *f, tg_module *q, tg_tensor *z, double *ms_f,
                      double *ms_q)
{
    double *tf = calloc((size_t)o->repeat, sizeof *tf), *tq = calloc((size_t)o->repeat, sizeof *tq);
    if (!tf || !tq) exit(1);
    for (int64_t r = 0; r < o->repeat; r++) {
        tg_tensor_release(generate(f, z, &tf[r]));
        tg_tensor_release(generate(q, z, &tq[r]));
    }
    qsort(tf, (size_t)o->repeat, sizeof *tf, cmp_double);
    qsort(tq, (size_t)o->repeat, sizeof *tq, cmp_double);
    *ms_f = tf[o->repeat / 2];
    *ms_q = tq[o->repeat / 2];
    free(tf), free(tq);
}

static double psnr_db(const tg_tensor *ref, const tg_tensor *got)
{
    double se = 0, a, b;
    const int64_t n = tg_tensor_numel(ref);
    for (int64_t i = 0; i < n; i++) {
        CHECK(tg_tensor_get_flat(ref, i, &a));
        CHECK(tg_tensor_get_flat(got, i, &b));
        se += (a - b) * (a - b);
    }
    return 10.0 * log10(4.0 / fmax(se / (double)n, 1e-300));   /* peak-to-peak 2: 2^2 */
}

static void write_pngs(const opts *o, tg_tensor *imf, tg_tensor *imq)
{
    char path[4096];
    const int64_t n = tg_tensor_dim(imf, 0);
    const int nrow = (int)(n < 16 ? n : 16);
    snprintf(path, sizeof path, "%s/samples_float.png", o->out);
    CHECK(tg_png_write_grid(path, imf, nrow, -1.0, 1.0, 2));
    snprintf(path, sizeof path, "%s/samples_int8.png", o->out);
    CHECK(tg_png_write_grid(path, imq, nrow, -1.0, 1.0, 2));
    tg_tensor *both, *parts[2] = {imf, imq};
    CHECK(tg_cat(&both, 2, parts, 0));
    snprintf(path, sizeof path, "%s/samples_float_int8.png", o->out);
    CHECK(tg_png_write_grid(path, both, nrow, -1.0, 1.0, 2));
    tg_tensor_release(both);
    printf("dcgan_quantize: wrote %s/samples_float.png, samples_int8.png and "
           "samples_float_int8.png (float rows first)\n", o->out);
}

int main(int argc, char **argv)
{
    opts o;
    if (parse_opts(&o, argc, argv) < 0) {
        fprintf(stderr, "usage: dcgan_quantize [--weights G.safetensors] [--latents Z.safetensors]\n"
                        "                      [--out DIR] [--calib N] [--batch B] [--seed S]\n"
                        "                      [--repeat R] [--fold 1|0]\n");
        return 2;
    }
    tg_module *g = load_generator(o.weights), *gq = NULL;
    const int64_t nz = tg_tensor_dim(tg_module_find(g, "net.0.weight"), 1);
    tg_rng rng;
    tg_rng_init(&rng, o.seed);
    tg_tensor **calib = calloc((size_t)o.calib, sizeof *calib);
    if (!calib) return 1;
    for (int64_t i = 0; i < o.calib; i++) calib[i] = randn(&rng, o.batch, nz);
    double t0 = now_ms();
    tg_quantize_options qo = TG_QUANTIZE_OPTIONS_INIT;
    qo.fold_batchnorm = qo.fuse_relu = o.fold;
    CHECK(tg_quantize_model(&gq, g, (int)o.calib, calib, &qo));
    printf("dcgan_quantize: calibrated on %lld batches of %lld latents and converted in %.0f ms "
           "(BatchNorm %s)\n", (long long)o.calib, (long long)o.batch, now_ms() - t0,
           o.fold ? "folded, ReLU fused" : "kept float");
    tg_tensor *z = test_latents(o.latents, &rng, nz);
    double ms_f, ms_q;
    tg_tensor *imf = generate(g, z, &ms_f), *imq = generate(gq, z, &ms_q);
    write_pngs(&o, imf, imq);
    printf("dcgan_quantize: PSNR int8 vs float = %.2f dB over %lld images "
           "(forward: float %.1f ms, int8 %.1f ms)\n",
           psnr_db(imf, imq), (long long)tg_tensor_dim(imf, 0), ms_f, ms_q);
    time_both(&o, g, gq, calib[0], &ms_f, &ms_q);
    printf("dcgan_quantize: batch of %lld, median of %lld: float %.1f ms, int8 %.1f ms (%.2fx)\n",
           (long long)o.batch, (long long)o.repeat, ms_f, ms_q, ms_f / ms_q);
    for (int64_t i = 0; i < o.calib; i++) tg_tensor_release(calib[i]);
    free(calib);
    tg_tensor_release(imf), tg_tensor_release(imq), tg_tensor_release(z);
    tg_module_release(gq);
    tg_module_release(g);
    return 0;
}
