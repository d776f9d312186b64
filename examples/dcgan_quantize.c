/* dcgan_quantize: post-training int8 quantization of the trained DCGAN
 * generator (examples/dcgan/model.h) with tg_quantize_model.
 *
 *   dcgan_quantize [--weights out/generator.safetensors] [--latents out/latents.safetensors]
 *                  [--out DIR (out)] [--calib N (8)] [--batch B (64)] [--seed S (1)]
 *                  [--repeat R (7)] [--fold 1|0 (1)] [--fid N (0)]
 *                  [--fid-weights PATH (data/fid_classifier.safetensors)] [--qat STEPS (0)]
 *
 * Loads the generator strictly (prefix "gen" when present), calibrates on N
 * batches of B latents z ~ N(0, 1) (eval mode: BatchNorm uses its running
 * statistics), converts its Linear and two ConvTranspose2d layers to int8
 * (per-channel weights, u8 activations; with --fold 1 each BatchNorm is
 * folded into the layer before it and each ReLU fused into the int8 op,
 * with --fold 0 they stay float), runs both on the latents file's z (or 32
 * fresh latents when the default file is missing; a --latents file given on
 * the command line must be readable) and writes DIR/samples_float.png,
 * DIR/samples_int8.png and DIR/samples_float_int8.png (float row(s) above the
 * int8 ones), then prints PSNR(int8 vs float) over the images in [-1, 1]
 * (peak-to-peak 2): 10 log10(2^2 / MSE), and the median time of R forwards
 * of each model on one batch of B (float and int8 runs alternate, so a
 * load change on a shared machine hits both alike).
 *
 * With --fid N it also prints the FID (tapegrad/metrics.h) of N images of each
 * generator against Fashion-MNIST's test set, from the same latents.  With
 * --qat STEPS (which needs --fold 1) it fine-tunes the folded generator with
 * the int8 roundings simulated (examples/dcgan_qat.h) for STEPS steps,
 * converts that to int8 (same calibration latents) and prints its FID (with
 * --fid) or its PSNR against the float generator.
 *
 * Exit status 0; 1 when a file cannot be read or written, does not hold a
 * generator of model.h or latents (N, nz) of finite values, --out is not a
 * folder it can write in (checked before the calibration), or an output is
 * not finite (no PSNR then); 2 for a usage error; --help prints the usage on
 * stdout.  On error every object is freed.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <tapegrad/quant.h>
#include <tapegrad/tapegrad.h>

#include "dcgan/model.h"
#include "dcgan_qat.h"
#include "example_args.h"
#include "gen_fid.h"

static const char prog[] = "dcgan_quantize";

typedef struct opts {
    const char *weights, *latents, *out;
    int64_t calib, batch, repeat, fid, qat;
    const char *fid_weights;
    uint64_t seed;
    bool fold, latents_given;
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: dcgan_quantize [--weights G.safetensors (out/generator.safetensors)]\n"
               "                      [--latents Z.safetensors (out/latents.safetensors)]\n"
               "                      [--out DIR (out)] [--calib N (8; <= 1000)]\n"
               "                      [--batch B (64; <= 65536)] [--seed S (1)]\n"
               "                      [--repeat R (7; <= 1000)] [--fold 1|0 (1)]\n"
               "                      [--fid N (0: off; 2..100000 images)]\n"
               "                      [--fid-weights PATH (data/fid_classifier.safetensors)]\n"
               "                      [--qat STEPS (0: off; <= 100000)]\n");
}

/* Applies option name = v; -1 after printing what is wrong. */
static int apply(void *opts_, const char *name, const char *v)
{
    opts *o = opts_;
    if (!strcmp(name, "--weights")) return (o->weights = v), 0;
    if (!strcmp(name, "--latents")) return (o->latents = v), (o->latents_given = true), 0;
    if (!strcmp(name, "--out")) return (o->out = v), 0;
    if (!strcmp(name, "--calib")) return ex_arg_i64(prog, name, v, 1, 1000, &o->calib);
    if (!strcmp(name, "--batch")) return ex_arg_i64(prog, name, v, 1, 65536, &o->batch);
    if (!strcmp(name, "--seed")) return ex_arg_u64(prog, name, v, &o->seed);
    if (!strcmp(name, "--repeat")) return ex_arg_i64(prog, name, v, 1, 1000, &o->repeat);
    if (!strcmp(name, "--fid")) {
        if (ex_arg_i64(prog, name, v, 0, 100000, &o->fid) < 0) return -1;
        if (o->fid != 1) return 0;
        fprintf(stderr, "%s: --fid '1': a covariance needs 2 images or more\n", prog);
        return -1;
    }
    if (!strcmp(name, "--fid-weights")) return (o->fid_weights = v), 0;
    if (!strcmp(name, "--qat")) return ex_arg_i64(prog, name, v, 0, 100000, &o->qat);
    if (!strcmp(v, "0") || !strcmp(v, "1")) return (o->fold = v[0] == '1'), 0;   /* --fold */
    fprintf(stderr, "%s: --fold '%s': expected 1 or 0\n", prog, v);
    return -1;
}

/* 0 to run, 1 after --help, -1 after a usage error (printed). */
static int parse_opts(opts *o, int argc, char **argv)
{
    static const char *const names[] = {"--weights", "--latents", "--out",    "--calib",
                                        "--batch",   "--seed",    "--repeat", "--fold",
                                        "--fid",     "--fid-weights", "--qat"};
    *o = (opts){.weights = "out/generator.safetensors", .latents = "out/latents.safetensors",
                .out = "out", .calib = 8, .batch = 64, .repeat = 7, .seed = 1, .fold = true,
                .fid_weights = "data/fid_classifier.safetensors"};
    int rc = ex_args_parse(prog, argc, argv, names, sizeof names / sizeof *names, apply, o,
                           usage);
    if (rc == 0 && o->qat > 0 && !o->fold) {
        fprintf(stderr, "%s: --qat trains the folded generator: it needs --fold 1\n", prog);
        return -1;
    }
    return rc;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* *img = m(z) without grad; *ms receives the time of the forward. */
static int generate(tg_module *m, tg_tensor **img, tg_tensor *z, double *ms)
{
    tg_no_grad_begin();
    double t0 = now_ms();
    int rc = tg_module_forward(m, img, z);
    *ms = now_ms() - t0;
    tg_no_grad_end();
    return rc;
}

/* The generator of model.h with the architecture read from the weights, in
 * eval mode; NULL after saying what is wrong. */
static tg_module *load_generator(const char *path, int64_t *nz)
{
    tg_st_file *wf = NULL;
    tg_module *g = NULL;
    tg_rng rng;
    dcgan_arch a = DCGAN_ARCH_INIT;
    EX_TRY(tg_safetensors_load(&wf, path), "reading --weights %s", path);
    const char *prefix = tg_st_get(wf, "gen.net.0.weight") ? "gen" : "";
    char key[TG_MODULE_NAME_MAX];
    snprintf(key, sizeof key, "%s%snet.0.weight", prefix, prefix[0] ? "." : "");
    if (dcgan_arch_from_generator_weight(&a, tg_st_get(wf, key), key) < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, tg_error_message());
        goto done;
    }
    tg_rng_init(&rng, 0);
    EX_TRY(dcgan_generator_new(&g, &a, &rng), "building the generator");
    if (tg_module_load_state_dict(g, wf, prefix, true) < 0) {
        ex_fail(prog, "loading the generator from %s (prefix '%s', strict)", path, prefix);
        tg_module_release(g);
        g = NULL;
        goto done;
    }
    tg_module_train(g, false);
    *nz = a.nz;
done:
    tg_st_free(wf);
    return g;
}

/* The number of elements of t that are not finite. */
static int64_t count_nonfinite(const tg_tensor *t)
{
    int64_t bad = 0;
    double v;
    for (int64_t i = 0; i < tg_tensor_numel(t); i++)
        bad += tg_tensor_get_flat(t, i, &v) < 0 || !isfinite(v);
    return bad;
}

/* The latents file's z, (N, nz) of finite values; or 32 fresh latents when
 * the file was not named on the command line and does not exist.  NULL after
 * saying what is wrong. */
static tg_tensor *test_latents(const opts *o, tg_rng *rng, int64_t nz)
{
    tg_st_file *zf = NULL;
    tg_tensor *z = NULL;
    char shape[128];
    struct stat st;
    if (!o->latents_given && stat(o->latents, &st) < 0 && errno == ENOENT) {
        EX_TRY(dcgan_latents(&z, 32, nz, rng), "drawing 32 test latents");
        printf("%s: no latents in %s; 32 fresh test latents\n", prog, o->latents);
        return z;
    }
    EX_TRY(tg_safetensors_load(&zf, o->latents), "reading --latents %s", o->latents);
    const tg_tensor *zt = tg_st_get(zf, "z");
    if (!zt) {
        fprintf(stderr, "%s: %s has no tensor 'z'\n", prog, o->latents);
        goto done;
    }
    const int64_t *s = tg_tensor_shape(zt), bad = count_nonfinite(zt);
    if (tg_tensor_ndim(zt) != 2 || s[0] < 1 || s[1] != nz) {
        fprintf(stderr, "%s: %s: 'z' is %s: expected (N, %lld) with N >= 1 for this generator\n",
                prog, o->latents, tg_shape_str(shape, sizeof shape, tg_tensor_ndim(zt), s),
                (long long)nz);
        goto done;
    }
    if (bad > 0) {
        fprintf(stderr, "%s: %s: 'z' has %lld non-finite values of %lld\n", prog, o->latents,
                (long long)bad, (long long)tg_tensor_numel(zt));
        goto done;
    }
    z = tg_tensor_retain((tg_tensor *)zt);
    printf("%s: %lld test latents from %s\n", prog, (long long)s[0], o->latents);
done:
    tg_st_free(zf);
    return z;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median times of o->repeat forwards of f and q on z, alternating. */
static int time_both(const opts *o, tg_module *f, tg_module *q, tg_tensor *z, double *ms_f,
                     double *ms_q)
{
    double *tf = calloc((size_t)o->repeat, sizeof *tf), *tq = calloc((size_t)o->repeat, sizeof *tq);
    int rc = tf && tq ? TG_OK : TG_ENOMEM;
    for (int64_t r = 0; r < o->repeat && rc >= 0; r++) {
        tg_tensor *y = NULL;
        rc = generate(f, &y, z, &tf[r]);
        tg_tensor_release(y);
        y = NULL;
        if (rc >= 0) rc = generate(q, &y, z, &tq[r]);
        tg_tensor_release(y);
    }
    if (rc >= 0) {
        qsort(tf, (size_t)o->repeat, sizeof *tf, cmp_double);
        qsort(tq, (size_t)o->repeat, sizeof *tq, cmp_double);
        *ms_f = tf[o->repeat / 2];
        *ms_q = tq[o->repeat / 2];
    }
    free(tf), free(tq);
    return rc;
}

/* 10 log10(2^2 / MSE) over images in [-1, 1]; inf when they are equal.
 * Both must be finite (count_nonfinite). */
static double psnr_db(const tg_tensor *ref, const tg_tensor *got)
{
    double se = 0, a, b;
    const int64_t n = tg_tensor_numel(ref);
    for (int64_t i = 0; i < n; i++) {
        if (tg_tensor_get_flat(ref, i, &a) < 0 || tg_tensor_get_flat(got, i, &b) < 0) return NAN;
        se += (a - b) * (a - b);
    }
    return se == 0 ? INFINITY : 10.0 * log10(4.0 / (se / (double)n));   /* peak-to-peak 2 */
}

static int write_pngs(const opts *o, tg_tensor *imf, tg_tensor *imq)
{
    char path[4096];
    tg_tensor *both = NULL, *parts[2] = {imf, imq};
    const int64_t n = tg_tensor_dim(imf, 0);
    const int nrow = (int)(n < 16 ? n : 16);
    int status = -1;
    snprintf(path, sizeof path, "%s/samples_float.png", o->out);
    EX_TRY(tg_png_write_grid(path, imf, nrow, -1.0, 1.0, 2), "writing %s", path);
    snprintf(path, sizeof path, "%s/samples_int8.png", o->out);
    EX_TRY(tg_png_write_grid(path, imq, nrow, -1.0, 1.0, 2), "writing %s", path);
    snprintf(path, sizeof path, "%s/samples_float_int8.png", o->out);
    EX_TRY(tg_cat(&both, 2, parts, 0), "arranging the pictures of %s", path);
    EX_TRY(tg_png_write_grid(path, both, nrow, -1.0, 1.0, 2), "writing %s", path);
    printf("%s: wrote %s/samples_float.png, samples_int8.png and "
           "samples_float_int8.png (float rows first)\n", prog, o->out);
    status = 0;
done:
    tg_tensor_release(both);
    return status;
}

/* Prints the PSNR of imq against imf, or says why there is none (-1). */
static int report_psnr(tg_tensor *imf, tg_tensor *imq, double ms_f, double ms_q)
{
    const int64_t bad_f = count_nonfinite(imf), bad_q = count_nonfinite(imq);
    const double db = bad_f || bad_q ? NAN : psnr_db(imf, imq);
    if (isnan(db)) {
        fprintf(stderr, "%s: PSNR int8 vs float: n/a: non-finite output (float %lld, int8 %lld "
                "of %lld values)\n", prog, (long long)bad_f, (long long)bad_q,
                (long long)tg_tensor_numel(imf));
        return -1;
    }
    printf("%s: PSNR int8 vs float = %.2f dB over %lld images "
           "(forward: float %.1f ms, int8 %.1f ms)\n",
           prog, db, (long long)tg_tensor_dim(imf, 0), ms_f, ms_q);
    return 0;
}

/* --fid and --qat (see the file comment): the FID of the float and int8
 * generators, then the int8 generator made after fine-tuning; imf is the
 * float generator's images of the test latents z.  -1 after saying what
 * failed. */
static int quality(const opts *o, tg_module *g, tg_module *gq, int64_t nz, tg_tensor **calib,
                   const tg_quantize_options *qo, tg_tensor *z, tg_tensor *imf)
{
    gen_fid r = {0};
    tg_module *folded = NULL, *gq2 = NULL;
    tg_tensor *im2 = NULL;
    double f_float = 0, f_int8 = 0, f_qat, l0 = 0, l1 = 0, ms;
    const long long n = (long long)o->fid;
    const uint64_t seed = o->seed + 1000003;   /* the same latents for every generator */
    int status = -1;
    if (o->fid > 0) {
        EX_TRY(gen_fid_init(&r, o->fid_weights, NULL),
               "loading the FID classifier %s and the test set", o->fid_weights);
        EX_TRY(gen_fid_score(&r, g, nz, o->fid, seed, &f_float), "the float generator's FID");
        EX_TRY(gen_fid_score(&r, gq, nz, o->fid, seed, &f_int8), "the int8 generator's FID");
        printf("%s: FID of %lld images vs the test set: float %.2f, int8 %.2f (%+.1f%%)\n",
               prog, n, f_float, f_int8, 100.0 * (f_int8 / f_float - 1.0));
    }
    if (o->qat > 0) {
        dcgan_qat_opts qa = DCGAN_QAT_OPTS_INIT;
        qa.steps = o->qat;
        qa.batch = o->batch;
        const double t0 = now_ms();
        EX_TRY(dcgan_qat(&folded, &l0, &l1, g, nz, (int)o->calib, calib, &qa),
               "fine-tuning the generator with fake quantization");
        EX_TRY(tg_quantize_model(&gq2, folded, (int)o->calib, calib, qo),
               "converting the fine-tuned generator to int8");
        printf("%s: QAT: %lld steps of %lld latents in %.0f s, distillation MSE %.5f -> %.5f\n",
               prog, (long long)qa.steps, (long long)qa.batch, (now_ms() - t0) / 1e3, l0, l1);
        EX_TRY(generate(gq2, &im2, z, &ms), "running the fine-tuned int8 generator");
        if (count_nonfinite(im2) == 0)
            printf("%s: PSNR int8 after QAT vs float = %.2f dB over %lld images\n", prog,
                   psnr_db(imf, im2), (long long)tg_tensor_dim(imf, 0));
        if (o->fid > 0) {
            EX_TRY(gen_fid_score(&r, gq2, nz, o->fid, seed, &f_qat),
                   "the fine-tuned int8 generator's FID");
            printf("%s: FID after QAT: int8 %.2f (%+.1f%% vs float %.2f; %.2f before QAT)\n",
                   prog, f_qat, 100.0 * (f_qat / f_float - 1.0), f_float, f_int8);
        }
    }
    status = 0;
done:
    tg_tensor_release(im2);
    tg_module_release(gq2);
    tg_module_release(folded);
    gen_fid_free(&r);
    return status;
}

int main(int argc, char **argv)
{
    opts o;
    int status = parse_opts(&o, argc, argv);
    if (status != 0) {
        if (status < 0) usage(stderr);
        return status < 0 ? EX_EXIT_USAGE : EX_EXIT_OK;
    }
    status = EX_EXIT_FAIL;
    int64_t nz = 0;
    tg_module *g = load_generator(o.weights, &nz), *gq = NULL;
    tg_tensor **calib = NULL, *z = NULL, *imf = NULL, *imq = NULL;
    tg_rng rng;
    tg_rng_init(&rng, o.seed);
    if (!g) goto done;
    if (!(calib = calloc((size_t)o.calib, sizeof *calib))) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    for (int64_t i = 0; i < o.calib; i++)
        EX_TRY(dcgan_latents(&calib[i], o.batch, nz, &rng), "drawing the calibration latents");
    if (!(z = test_latents(&o, &rng, nz))) goto done;
    /* The last check before the calibration: a refused input makes no folder. */
    if (ex_out_dir(prog, "--out", o.out) < 0) goto done;
    double t0 = now_ms(), ms_f, ms_q;
    tg_quantize_options qo = TG_QUANTIZE_OPTIONS_INIT;
    qo.fold_batchnorm = qo.fuse_relu = o.fold;
    EX_TRY(tg_quantize_model(&gq, g, (int)o.calib, calib, &qo),
        "calibrating the generator and converting it to int8");
    printf("%s: calibrated on %lld batches of %lld latents and converted in %.0f ms "
           "(BatchNorm %s)\n", prog, (long long)o.calib, (long long)o.batch, now_ms() - t0,
           o.fold ? "folded, ReLU fused" : "kept float");
    EX_TRY(generate(g, &imf, z, &ms_f), "running the float generator");
    EX_TRY(generate(gq, &imq, z, &ms_q), "running the int8 generator");
    if (write_pngs(&o, imf, imq) < 0 || report_psnr(imf, imq, ms_f, ms_q) < 0) goto done;
    EX_TRY(time_both(&o, g, gq, calib[0], &ms_f, &ms_q), "timing the two generators");
    printf("%s: batch of %lld, median of %lld: float %.1f ms, int8 %.1f ms (%.2fx)\n", prog,
           (long long)o.batch, (long long)o.repeat, ms_f, ms_q, ms_f / ms_q);
    if ((o.fid > 0 || o.qat > 0) && quality(&o, g, gq, nz, calib, &qo, z, imf) < 0) goto done;
    status = EX_EXIT_OK;
done:
    for (int64_t i = 0; calib && i < o.calib; i++) tg_tensor_release(calib[i]);
    free(calib);
    tg_tensor_release(imf), tg_tensor_release(imq), tg_tensor_release(z);
    tg_module_release(gq);
    tg_module_release(g);
    return status;
}
