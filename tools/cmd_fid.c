/* tools/cmd_fid.c - `tapegrad fid REF SET...`: the Fréchet distance between
 * the features of image sets (tapegrad/metrics.h), each SET against REF, and
 * with --kid their Kernel Inception Distance.
 *
 * A set is Fashion-MNIST's test or training set (all of it, or its first N
 * images), a safetensors file of images, or a DCGAN generator (examples/dcgan's
 * generator.safetensors or checkpoint.safetensors) from which --count images
 * are drawn.  Errors print "tapegrad fid: <what>: <message>" and exit 1;
 * usage errors exit 2. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "../examples/dcgan/model.h"
#include "tapegrad/autograd.h"
#include "tapegrad/data.h"
#include "tapegrad/metrics.h"
#include "tapegrad/safetensors.h"
#include "tapegrad/status.h"
#include "tools.h"

static const char fid_usage[] =
    "usage: tapegrad fid [--weights PATH] [--count N] [--seed N] [--data DIR]\n"
    "                    [--threads N] [--kid SIZE] REF SET...\n"
    "Prints the FID of each SET against REF: the Frechet distance between the\n"
    "means and covariances of their features (the 128 penultimate activations of\n"
    "the Fashion-MNIST classifier in --weights, default\n"
    "data/fid_classifier.safetensors in the source tree, else\n"
    TG_DATADIR "/fid_classifier.safetensors).\n"
    "REF and SET are each one of\n"
    "  test, train        Fashion-MNIST's test or training set (from --data DIR,\n"
    "                     default " TG_FASHION_MNIST_DIR ")\n"
    "  test:N, train:N    its first N images\n"
    "  FILE.safetensors   images (N, 1, 28, 28) in [-1, 1]: the tensor \"images\",\n"
    "                     or the file's only tensor\n"
    "  FILE.safetensors   a DCGAN generator (tensors net.*, gen.net.* or an\n"
    "                     average's module.net.*, as examples/dcgan writes them):\n"
    "                     --count images (default\n"
    "                     10000) from latents drawn with --seed (default 0)\n"
    "Output, one line per SET: fid VALUE SET (N images) vs REF (N images).\n"
    "--kid SIZE adds a line per SET: kid MEAN STD SET (N images) vs REF (N images),\n"
    "the Kernel Inception Distance of the same features over 100 random subsets\n"
    "of SIZE images of each set (torchmetrics' default 1000), drawn with --seed.\n";

/* --weights by default: the source tree's, else the installed copy */
#define FID_WEIGHTS_SRC "data/fid_classifier.safetensors"
#define FID_WEIGHTS_INSTALLED TG_DATADIR "/fid_classifier.safetensors"

#define FID_MAX_COUNT 1000000
#define GEN_BATCH 500

typedef struct fid_args {
    const char *weights, *data;
    int64_t count, kid_size;   /* kid_size 0: no KID */
    uint64_t seed;
    int threads;
    int first_set, n_sets;   /* argv[first_set .. first_set + n_sets) */
} fid_args;

static int usage_error(const char *fmt, const char *arg)
{
    fputs("tapegrad fid: ", stderr);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", fid_usage);
    return -1;
}

/* A decimal integer in [lo, hi], the whole string. */
static int parse_int(const char *s, long long lo, long long hi, long long *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end || s[0] == ' ' || x < lo || x > hi) return -1;
    *v = x;
    return 0;
}

/* Parses the options; the sets are the remaining arguments, in order.
 * Returns 0 to run, 1 after --help, -1 after a usage error (printed). */
static int parse_args(fid_args *a, int argc, char **argv)
{
    *a = (fid_args){.weights = NULL, .count = 10000};
    int sets = 0;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            fputs(fid_usage, stdout);
            return 1;
        }
        if (opt[0] != '-' || opt[1] != '-') {
            if (sets++ == 0) a->first_set = i;
            else if (a->first_set + sets - 1 != i)
                return usage_error("options come before the sets, not after '%s'", opt);
            continue;
        }
        if (i + 1 >= argc) return usage_error("option %s needs a value", opt);
        const char *v = argv[++i];
        long long x;
        if (!strcmp(opt, "--weights")) a->weights = v;
        else if (!strcmp(opt, "--data")) a->data = v;
        else if (!strcmp(opt, "--count")) {
            if (parse_int(v, 2, FID_MAX_COUNT, &x))
                return usage_error("--count '%s' must be an integer in 2..1000000", v);
            a->count = x;
        } else if (!strcmp(opt, "--seed")) {
            if (parse_int(v, 0, INT64_MAX, &x)) return usage_error("--seed '%s' must be an "
                                                                   "integer >= 0", v);
            a->seed = (uint64_t)x;
        } else if (!strcmp(opt, "--kid")) {
            if (parse_int(v, 2, FID_MAX_COUNT, &x))
                return usage_error("--kid '%s' must be an integer in 2..1000000", v);
            a->kid_size = x;
        } else if (!strcmp(opt, "--threads")) {
            if (parse_int(v, 1, 256, &x)) return usage_error("--threads '%s' must be an "
                                                             "integer in 1..256", v);
            a->threads = (int)x;
        } else return usage_error("unknown option '%s'", opt);
    }
    if (sets < 2) return usage_error("%s: give a reference set and at least one set to score",
                                     sets ? "one set" : "no sets");
    a->n_sets = sets;
    return 0;
}

/* The first n images of Fashion-MNIST's training or test set (n 0: all). */
static int dataset_images(tg_tensor **images, const char *data, bool train, int64_t n)
{
    tg_dataset *ds = NULL;
    tg_tensor *labels = NULL;
    int rc = tg_fashion_mnist_load(&ds, data, train);
    if (rc < 0) return rc;
    const int64_t size = tg_dataset_size(ds);
    if (n == 0) n = size;
    int64_t *idx = n <= size ? malloc((size_t)n * sizeof *idx) : NULL;
    if (n > size)
        rc = tg_error_set(TG_EINVAL, "the %s set has %lld images, fewer than %lld",
                          train ? "training" : "test", (long long)size, (long long)n);
    else if (!idx) rc = tg_error_set(TG_ENOMEM, "out of memory");
    for (int64_t i = 0; rc >= 0 && i < n; i++) idx[i] = i;
    if (rc >= 0) rc = tg_dataset_batch(images, &labels, ds, idx, n);
    free(idx);
    tg_tensor_release(labels);
    tg_dataset_release(ds);
    return rc;
}

/* count images from the generator in f (its keys under prefix: "", "gen"
 * or "module"), from latents drawn with seed, in eval mode. */
static int generator_images(tg_tensor **images, const tg_st_file *f, const char *prefix,
                            int64_t count, uint64_t seed)
{
    char key[64];
    snprintf(key, sizeof key, "%s%snet.0.weight", prefix, prefix[0] ? "." : "");
    dcgan_arch arch = DCGAN_ARCH_INIT;
    tg_module *gen = NULL;
    tg_tensor *out = NULL, *z = NULL, *img = NULL;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    int rc = dcgan_arch_from_generator_weight(&arch, tg_st_get(f, key), key);
    if (rc >= 0) rc = dcgan_generator_new(&gen, &arch, &rng);
    if (rc >= 0) rc = tg_module_load_state_dict(gen, f, prefix[0] ? prefix : NULL, true);
    if (rc >= 0) rc = tg_tensor_zeros(&out, TG_F32, 4, (int64_t[]){count, 1, 28, 28});
    tg_rng_init(&rng, seed);
    if (rc >= 0) tg_module_train(gen, false);
    tg_no_grad_begin();
    for (int64_t i = 0; rc >= 0 && i < count; i += GEN_BATCH) {
        const int64_t b = count - i < GEN_BATCH ? count - i : GEN_BATCH;
        rc = dcgan_latents(&z, b, arch.nz, &rng);
        if (rc >= 0) rc = tg_module_forward(gen, &img, z);
        if (rc >= 0) {
            tg_tensor *c = NULL;
            rc = tg_tensor_to_dtype(&c, img, TG_F32);
            if (rc >= 0) memcpy((float *)tg_tensor_data(out) + i * 784, tg_tensor_cdata(c),
                                (size_t)b * 784 * sizeof(float));
            tg_tensor_release(c);
        }
        tg_tensor_release(z);
        tg_tensor_release(img);
        z = img = NULL;
    }
    tg_no_grad_end();
    tg_module_release(gen);
    if (rc < 0) {
        tg_tensor_release(out);
        return rc;
    }
    *images = out;
    return TG_OK;
}

/* The images tensor of a file that holds images, not a generator. */
static int file_images(tg_tensor **images, const tg_st_file *f)
{
    tg_tensor *t = tg_st_get(f, "images");
    if (!t && tg_st_count(f) == 1) tg_st_at(f, 0, NULL, &t);
    if (!t)
        return tg_error_set(TG_ENOTFOUND, "no generator (net.0.weight, gen.net.0.weight or "
                            "module.net.0.weight) and no images (a tensor \"images\" or a single tensor) among its %d "
                            "tensors", tg_st_count(f));
    const int64_t n = tg_tensor_numel(t);
    for (int64_t i = 0; i < n && tg_dtype_is_float(tg_tensor_dtype(t)); i++) {
        double v;
        int rc = tg_tensor_get_flat(t, i, &v);
        if (rc < 0) return rc;
        if (!(v >= -1.0 - 1e-3 && v <= 1.0 + 1e-3))
            return tg_error_set(TG_EINVAL, "images[%lld]=%g: pixels must be in [-1, 1] (the "
                                "generator's tanh range)", (long long)i, v);
    }
    *images = tg_tensor_retain(t);
    return TG_OK;
}

/* The images of one set given on the command line (see the usage). */
static int set_images(tg_tensor **images, const char *spec, const fid_args *a)
{
    long long n = 0;
    for (int train = 0; train < 2; train++) {
        const char *name = train ? "train" : "test";
        size_t len = strlen(name);
        if (strncmp(spec, name, len) != 0) continue;
        if (spec[len] == '\0') return dataset_images(images, a->data, train, 0);
        if (spec[len] == ':') {
            if (parse_int(spec + len + 1, 2, INT64_MAX, &n))
                return tg_error_set(TG_EINVAL, "the count after '%s:' must be an integer >= 2",
                                    name);
            return dataset_images(images, a->data, train, n);
        }
    }
    tg_st_file *f = NULL;
    int rc = tg_safetensors_load(&f, spec);
    if (rc < 0) return rc;
    const char *prefix = tg_st_get(f, "gen.net.0.weight")      ? "gen"
                         : tg_st_get(f, "module.net.0.weight") ? "module"
                         : tg_st_get(f, "net.0.weight")        ? ""
                                                               : NULL;
    rc = prefix ? generator_images(images, f, prefix, a->count, a->seed) : file_images(images, f);
    tg_st_free(f);
    return rc;
}

/* The mean and covariance of one set's features (buffers of TG_FID_FEATURES
 * and its square), its image count and, when features is not NULL, the
 * features themselves (a new reference). */
static int set_stats(double *mu, double *cov, int64_t *n, tg_tensor **features, tg_module *net,
                     const char *spec, const fid_args *a)
{
    tg_tensor *images = NULL, *feat = NULL;
    int rc = set_images(&images, spec, a);
    if (rc >= 0) rc = tg_fid_features(&feat, NULL, net, images);
    if (rc >= 0) rc = tg_feature_stats(mu, cov, feat);
    if (rc >= 0) *n = tg_tensor_dim(images, 0);
    if (rc >= 0 && features) *features = tg_tensor_retain(feat);
    tg_tensor_release(feat);
    tg_tensor_release(images);
    if (rc < 0) fprintf(stderr, "tapegrad fid: %s: %s\n", spec, tg_error_message());
    return rc;
}

int tg_cmd_fid(int argc, char **argv)
{
    fid_args a;
    int prc = parse_args(&a, argc, argv);
    if (prc != 0) return prc > 0 ? TG_EXIT_OK : TG_EXIT_USAGE;
    if (a.threads > 0) {
        /* for the statistics' LAPACK calls; an unchanged count is not set
         * again, which would start OpenBLAS's pool at once (core/blas.c) */
        if (openblas_get_num_threads() != a.threads) openblas_set_num_threads(a.threads);
        tg_set_num_threads(a.threads);
    }
    enum { D = TG_FID_FEATURES };
    tg_module *net = NULL;
    const char *weights = a.weights ? a.weights : FID_WEIGHTS_SRC;
    if (!a.weights && access(weights, F_OK) != 0) weights = FID_WEIGHTS_INSTALLED;
    if (tg_fid_net_load(&net, weights) < 0) {
        if (a.weights) fprintf(stderr, "tapegrad fid: --weights: %s\n", tg_error_message());
        else fprintf(stderr, "tapegrad fid: the classifier's weights (neither %s nor %s; give "
                             "--weights PATH): %s\n",
                     FID_WEIGHTS_SRC, FID_WEIGHTS_INSTALLED, tg_error_message());
        return TG_EXIT_FAIL;
    }
    double *mu = malloc(2 * D * sizeof *mu), *cov = malloc(2 * D * D * sizeof *cov);
    int code = TG_EXIT_FAIL;
    int64_t n_ref = 0, n = 0;
    tg_tensor *ref_feat = NULL;
    const char *ref = argv[a.first_set];
    if (!mu || !cov) {
        fprintf(stderr, "tapegrad fid: out of memory\n");
        goto done;
    }
    if (set_stats(mu, cov, &n_ref, a.kid_size ? &ref_feat : NULL, net, ref, &a) < 0) goto done;
    code = TG_EXIT_OK;
    for (int i = 1; i < a.n_sets; i++) {
        const char *spec = argv[a.first_set + i];
        tg_tensor *feat = NULL;
        double fid, kid = 0, kid_std = 0;
        n = 0;
        int rc = set_stats(mu + D, cov + D * D, &n, a.kid_size ? &feat : NULL, net, spec, &a);
        if (rc >= 0) rc = tg_frechet_distance(&fid, D, mu + D, cov + D * D, mu, cov);
        if (rc >= 0 && a.kid_size) {
            tg_kid_opts ko = TG_KID_OPTS_INIT;
            tg_rng rng;
            ko.subset_size = a.kid_size;
            tg_rng_init(&rng, a.seed);
            rc = tg_kid(&kid, &kid_std, ref_feat, feat, &ko, &rng);
        }
        tg_tensor_release(feat);
        if (rc < 0) {
            if (n > 0) fprintf(stderr, "tapegrad fid: %s: %s\n", spec, tg_error_message());
            code = TG_EXIT_FAIL;
            continue;
        }
        /* A distance is >= 0; a set against itself can come out as -1e-12. */
        printf("fid %.4f %s (%lld images) vs %s (%lld images)\n", fid > 0 ? fid : 0.0, spec,
               (long long)n, ref, (long long)n_ref);
        /* KID is an unbiased estimate: it may come out below 0. */
        if (a.kid_size)
            printf("kid %.6f %.6f %s (%lld images) vs %s (%lld images)\n", kid, kid_std, spec,
                   (long long)n, ref, (long long)n_ref);
        fflush(stdout);
    }
done:
    tg_tensor_release(ref_feat);
    free(mu);
    free(cov);
    tg_module_release(net);
    return code;
}
