/* dcgan_load: the C half of the PyTorch interchange check (examples/dcgan_torch.py).
 *
 *   dcgan_load --weights G.safetensors --latents Z.safetensors --out IMG.safetensors
 *              [--prefix gen] [--key z] [--png IMG.png]
 *       Builds the generator of examples/dcgan/model.h with the architecture
 *       read from the weights (net.0.weight is (C*49, nz)), loads the state
 *       dict strictly (every key, exact shapes and dtypes), runs the latent
 *       batch Z[key] (N, nz) in eval mode and writes {"z", "images"} with
 *       images (N, 1, 28, 28) in [-1, 1].  The prefix is "gen" when the file
 *       has gen.net.0.weight, else none, unless --prefix says otherwise.
 *
 *   dcgan_load --export DIR [--seed S] [--n N] [--warmup K]
 *       Writes a generator made here (DCGAN init, then K training-mode
 *       forwards on random latents so the BatchNorm running statistics are
 *       not the trivial 0/1) as DIR/generator.safetensors (prefix "gen") and
 *       DIR/latents.safetensors {"z", "images"} computed in eval mode: the
 *       same files the dcgan example writes, for checking without training.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tapegrad/tapegrad.h>

#include "dcgan/model.h"

#define CHECK(call)                                                               \
    do {                                                                          \
        int rc_ = (call);                                                         \
        if (rc_ < 0) {                                                            \
            fprintf(stderr, "dcgan_load: %s failed: %s: %s\n", #call,             \
                    tg_status_name(rc_), tg_error_message());                     \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

typedef struct opts {
    const char *weights, *latents, *out, *prefix, *key, *png, *export_dir;
    uint64_t seed;
    int64_t n, warmup;
} opts;

static int usage(void)
{
    fprintf(stderr,
            "usage: dcgan_load --weights G.safetensors --latents Z.safetensors --out O.safetensors\n"
            "                  [--prefix gen] [--key z] [--png O.png]\n"
            "       dcgan_load --export DIR [--seed S (1)] [--n N (16)] [--warmup K (3)]\n");
    return 2;
}

static int parse_opts(opts *o, int argc, char **argv)
{
    *o = (opts){.key = "z", .seed = 1, .n = 16, .warmup = 3};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--weights")) o->weights = v;
        else if (!strcmp(a, "--latents")) o->latents = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--prefix")) o->prefix = v;
        else if (!strcmp(a, "--key")) o->key = v;
        else if (!strcmp(a, "--png")) o->png = v;
        else if (!strcmp(a, "--export")) o->export_dir = v;
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--n")) o->n = strtoll(v, NULL, 10);
        else if (!strcmp(a, "--warmup")) o->warmup = strtoll(v, NULL, 10);
        else return -1;
    }
    if (argc % 2 == 0 || o->n < 1 || o->warmup < 0) return -1;
    if (o->export_dir) return 0;
    return o->weights && o->latents && o->out ? 0 : -1;
}

/* images = G(z) in eval mode, not recorded. */
static tg_tensor *generate(tg_module *g, tg_tensor *z)
{
    tg_tensor *img;
    tg_module_train(g, false);
    tg_no_grad_begin();
    CHECK(tg_module_forward(g, &img, z));
    tg_no_grad_end();
    return img;
}

static void save_pair(const char *path, tg_tensor *z, tg_tensor *img)
{
    tg_st_file *f;
    CHECK(tg_st_new(&f));
    CHECK(tg_st_set(f, "z", z));
    CHECK(tg_st_set(f, "images", img));
    CHECK(tg_safetensors_save(f, path));
    tg_st_free(f);
}

static int load_and_run(const opts *o)
{
    tg_st_file *wf, *zf;
    tg_module *g;
    tg_rng rng;
    CHECK(tg_safetensors_load(&wf, o->weights));
    CHECK(tg_safetensors_load(&zf, o->latents));
    const char *prefix = o->prefix ? o->prefix
                         : tg_st_get(wf, "gen.net.0.weight") ? "gen" : "";
    char key[TG_MODULE_NAME_MAX];
    snprintf(key, sizeof key, "%s%snet.0.weight", prefix, prefix[0] ? "." : "");
    tg_tensor *w0 = tg_st_get(wf, key), *z = tg_st_get(zf, o->key);
    if (!w0 || tg_tensor_ndim(w0) != 2 || tg_tensor_dim(w0, 0) % 49 != 0) {
        fprintf(stderr, "dcgan_load: %s: no 2-d %s of shape (C*49, nz)\n", o->weights, key);
        return 1;
    }
    if (!z) {
        fprintf(stderr, "dcgan_load: %s has no tensor '%s'\n", o->latents, o->key);
        return 1;
    }
    dcgan_arch a = DCGAN_ARCH_INIT;
    a.g_ch = tg_tensor_dim(w0, 0) / 49;
    a.nz = tg_tensor_dim(w0, 1);
    tg_rng_init(&rng, 0);
    CHECK(dcgan_generator_new(&g, &a, &rng));
    CHECK(tg_module_load_state_dict(g, wf, prefix, true));
    tg_tensor *img = generate(g, z);
    save_pair(o->out, z, img);
    if (o->png) CHECK(tg_png_write_grid(o->png, img, 8, -1.0, 1.0, 2));
    printf("dcgan_load: generator nz=%lld C=%lld loaded strictly from %s (prefix '%s'); "
           "%lld images -> %s\n", (long long)a.nz, (long long)a.g_ch, o->weights, prefix,
           (long long)tg_tensor_dim(img, 0), o->out);
    tg_tensor_release(img);
    tg_module_release(g);
    tg_st_free(zf);
    tg_st_free(wf);
    return 0;
}

static tg_tensor *randn(tg_rng *rng, int64_t n, int64_t nz)
{
    tg_tensor *z;
    CHECK(tg_tensor_zeros(&z, TG_F32, 2, (int64_t[]){n, nz}));
    CHECK(tg_tensor_rand_normal(z, rng, 0.0, 1.0));
    return z;
}

static int export_files(const opts *o)
{
    char path[4096];
    tg_module *g;
    tg_rng rng;
    dcgan_arch a = DCGAN_ARCH_INIT;
    if (mkdir(o->export_dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "dcgan_load: cannot create %s: %s\n", o->export_dir, strerror(errno));
        return 1;
    }
    tg_rng_init(&rng, o->seed);
    CHECK(dcgan_generator_new(&g, &a, &rng));
    tg_no_grad_begin();   /* training-mode forwards only update running stats */
    for (int64_t k = 0; k < o->warmup; k++) {
        tg_tensor *zw = randn(&rng, 32, a.nz), *y;
        CHECK(tg_module_forward(g, &y, zw));
        tg_tensor_release(y);
        tg_tensor_release(zw);
    }
    tg_no_grad_end();
    tg_tensor *z = randn(&rng, o->n, a.nz), *img = generate(g, z);
    tg_st_file *f;
    CHECK(tg_st_new(&f));
    CHECK(tg_module_state_dict_save(g, f, "gen"));
    snprintf(path, sizeof path, "%s/generator.safetensors", o->export_dir);
    CHECK(tg_safetensors_save(f, path));
    tg_st_free(f);
    snprintf(path, sizeof path, "%s/latents.safetensors", o->export_dir);
    save_pair(path, z, img);
    printf("dcgan_load: wrote %s/generator.safetensors and %s/latents.safetensors\n",
           o->export_dir, o->export_dir);
    tg_tensor_release(img);
    tg_tensor_release(z);
    tg_module_release(g);
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse_opts(&o, argc, argv) < 0) return usage();
    return o.export_dir ? export_files(&o) : load_and_run(&o);
}
