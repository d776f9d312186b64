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
 *       --out and --png must name files other than the inputs and each other.
 *
 *   dcgan_load --export DIR [--seed S] [--n N] [--warmup K] [--overwrite]
 *       Writes a generator made here (DCGAN init, then K training-mode
 *       forwards on random latents so the BatchNorm running statistics are
 *       not the trivial 0/1) as DIR/generator.safetensors (prefix "gen") and
 *       DIR/latents.safetensors {"z", "images"} computed in eval mode: the
 *       same files the dcgan example writes, for checking without training.
 *       When DIR holds either file already (a trained run's, perhaps) the
 *       run is refused unless --overwrite.
 *
 * Exit status 0, 1 when a file cannot be read or written or does not hold a
 * generator of model.h (the reason is printed; on error every object is
 * freed), 2 for a usage error; --help prints the usage on stdout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tapegrad/tapegrad.h>

#include "dcgan/model.h"
#include "example_args.h"

static const char prog[] = "dcgan_load";

typedef struct opts {
    const char *weights, *latents, *out, *prefix, *key, *png, *export_dir;
    uint64_t seed;
    int64_t n, warmup;
    bool overwrite;   /* --export may replace the files in DIR */
    const char *load_opt, *export_opt;   /* an option of each mode, when given */
} opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dcgan_load --weights G.safetensors --latents Z.safetensors --out O.safetensors\n"
            "                  [--prefix gen] [--key z] [--png O.png]\n"
            "       dcgan_load --export DIR [--seed S (1)] [--n N (16; <= 100000)]\n"
            "                  [--warmup K (3; <= 1000)] [--overwrite]\n"
            "--overwrite lets --export replace DIR/generator.safetensors and\n"
            "DIR/latents.safetensors.\n");
}

/* Applies option name = v; -1 after printing what is wrong. */
static int apply(opts *o, const char *name, const char *v)
{
    if (!strcmp(name, "--seed")) return ex_arg_u64(prog, name, v, &o->seed);
    if (!strcmp(name, "--n")) return ex_arg_i64(prog, name, v, 1, 100000, &o->n);
    if (!strcmp(name, "--warmup")) return ex_arg_i64(prog, name, v, 0, 1000, &o->warmup);
    if (!strcmp(name, "--export")) return (o->export_dir = v), 0;
    const char **dst = !strcmp(name, "--weights")   ? &o->weights
                       : !strcmp(name, "--latents") ? &o->latents
                       : !strcmp(name, "--out")     ? &o->out
                       : !strcmp(name, "--prefix")  ? &o->prefix
                       : !strcmp(name, "--key")     ? &o->key
                                                    : &o->png;
    *dst = v;
    return 0;
}

/* 0 to run, 1 after --help, -1 after a usage error (printed). */
static int parse_opts(opts *o, int argc, char **argv)
{
    static const char *const load_names[] = {"--weights", "--latents", "--out", "--prefix",
                                             "--key", "--png"};
    static const char *const export_names[] = {"--export", "--seed", "--n", "--warmup"};
    *o = (opts){.key = "z", .seed = 1, .n = 16, .warmup = 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (ex_arg_is_help(a)) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--overwrite")) {   /* the one flag: no value */
            o->overwrite = true;
            o->export_opt = a;
            continue;
        }
        bool known = false;
        for (size_t k = 0; k < 6; k++)
            if (!strcmp(a, load_names[k])) known = true, o->load_opt = a;
        for (size_t k = 0; k < 4; k++)
            if (!strcmp(a, export_names[k])) known = true, o->export_opt = a;
        if (!known) {
            fprintf(stderr, "%s: unknown option '%s'\n", prog, a);
            return -1;
        }
        if (!(v = ex_arg_value(prog, argc, argv, &i)) || apply(o, a, v) < 0) return -1;
    }
    if (o->load_opt && o->export_opt) {
        fprintf(stderr, "%s: %s and %s belong to different modes: load (--weights ...) or "
                "--export\n", prog, o->load_opt, o->export_opt);
        return -1;
    }
    if (o->export_opt && !o->export_dir) {
        fprintf(stderr, "%s: %s goes with --export DIR\n", prog, o->export_opt);
        return -1;
    }
    if (o->export_dir) return 0;
    const char *missing = !o->weights ? "--weights" : !o->latents ? "--latents"
                          : !o->out   ? "--out" : NULL;
    if (missing) fprintf(stderr, "%s: missing option %s\n", prog, missing);
    return missing ? -1 : 0;
}

/* True when the folder part of path a (up to its last '/'; "." when none)
 * is the folder of b and the names after it are equal. */
static bool same_entry(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    const char *na = sa ? sa + 1 : a, *nb = sb ? sb + 1 : b;
    char da[4096], db[4096];
    struct stat fa, fb;
    if (!na[0] || strcmp(na, nb)) return false;
    snprintf(da, sizeof da, "%.*s", sa ? (int)(sa - a) + 1 : 1, sa ? a : ".");
    snprintf(db, sizeof db, "%.*s", sb ? (int)(sb - b) + 1 : 1, sb ? b : ".");
    return stat(da, &fa) == 0 && stat(db, &fb) == 0 && fa.st_dev == fb.st_dev &&
           fa.st_ino == fb.st_ino;
}

/* True when a and b name the same file: the same name; when either exists,
 * both exist with the same device and inode (a link is its target); when
 * neither does, the same name in the same folder ("o", "./o", "d/../o"). */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!a || !b) return false;
    if (!strcmp(a, b)) return true;
    const bool has_a = stat(a, &sa) == 0, has_b = stat(b, &sb) == 0;
    if (has_a || has_b)
        return has_a && has_b && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return same_entry(a, b);
}

/* z must be (N, nz), N >= 1: -1 after saying what is wrong. */
static int check_latents(const tg_tensor *z, const opts *o, int64_t nz)
{
    char shape[128];
    if (!z) {
        fprintf(stderr, "%s: %s has no tensor '%s'\n", prog, o->latents, o->key);
        return -1;
    }
    const int64_t *s = tg_tensor_shape(z);
    if (tg_tensor_ndim(z) == 2 && s[0] >= 1 && s[1] == nz) return 0;
    fprintf(stderr, "%s: %s: '%s' is %s: expected (N, %lld) with N >= 1 for this generator\n",
            prog, o->latents, o->key, tg_shape_str(shape, sizeof shape, tg_tensor_ndim(z), s),
            (long long)nz);
    return -1;
}

/* *img = G(z) in eval mode, not recorded. */
static int generate(tg_module *g, tg_tensor **img, tg_tensor *z)
{
    tg_module_train(g, false);
    tg_no_grad_begin();
    int rc = tg_module_forward(g, img, z);
    tg_no_grad_end();
    return rc;
}

static int save_pair(const char *path, tg_tensor *z, tg_tensor *img)
{
    tg_st_file *f = NULL;
    int rc = tg_st_new(&f);
    if (rc >= 0) rc = tg_st_set(f, "z", z);
    if (rc >= 0) rc = tg_st_set(f, "images", img);
    if (rc >= 0) rc = tg_safetensors_save(f, path);
    tg_st_free(f);
    return rc;
}

static int load_and_run(const opts *o)
{
    tg_st_file *wf = NULL, *zf = NULL;
    tg_module *g = NULL;
    tg_tensor *img = NULL;
    tg_rng rng;
    int status = EX_EXIT_FAIL;
    const char *in[2] = {o->weights, o->latents}, *outs[2] = {o->out, o->png};
    for (int i = 0; i < 4; i++)
        if (same_file(outs[i / 2], in[i % 2])) {
            fprintf(stderr, "%s: %s %s would overwrite the input %s\n", prog,
                    i / 2 ? "--png" : "--out", outs[i / 2], in[i % 2]);
            return EX_EXIT_USAGE;
        }
    if (same_file(o->png, o->out)) {
        fprintf(stderr, "%s: --png %s is the file of --out %s: they must differ\n", prog,
                o->png, o->out);
        return EX_EXIT_USAGE;
    }
    EX_TRY(tg_safetensors_load(&wf, o->weights), "reading --weights %s", o->weights);
    EX_TRY(tg_safetensors_load(&zf, o->latents), "reading --latents %s", o->latents);
    const char *prefix = o->prefix ? o->prefix
                         : tg_st_get(wf, "gen.net.0.weight") ? "gen" : "";
    char key[TG_MODULE_NAME_MAX];
    snprintf(key, sizeof key, "%s%snet.0.weight", prefix, prefix[0] ? "." : "");
    tg_tensor *z = tg_st_get(zf, o->key);
    dcgan_arch a = DCGAN_ARCH_INIT;
    if (dcgan_arch_from_generator_weight(&a, tg_st_get(wf, key), key) < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, o->weights, tg_error_message());
        goto done;
    }
    if (check_latents(z, o, a.nz) < 0) goto done;
    tg_rng_init(&rng, 0);
    EX_TRY(dcgan_generator_new(&g, &a, &rng), "building the generator");
    EX_TRY(tg_module_load_state_dict(g, wf, prefix, true),
           "loading the generator from %s (prefix '%s', strict)", o->weights, prefix);
    EX_TRY(generate(g, &img, z), "generating the images");
    EX_TRY(save_pair(o->out, z, img), "writing --out %s", o->out);
    if (o->png) EX_TRY(tg_png_write_grid(o->png, img, 8, -1.0, 1.0, 2), "writing --png %s", o->png);
    printf("dcgan_load: generator nz=%lld C=%lld loaded strictly from %s (prefix '%s'); "
           "%lld images -> %s\n", (long long)a.nz, (long long)a.g_ch, o->weights, prefix,
           (long long)tg_tensor_dim(img, 0), o->out);
    status = EX_EXIT_OK;
done:
    tg_tensor_release(img);
    tg_module_release(g);
    tg_st_free(zf);
    tg_st_free(wf);
    return status;
}

/* k training-mode forwards of g on batches of 32 latents: they only update
 * the BatchNorm running statistics. */
static int warm_up(tg_module *g, tg_rng *rng, int64_t k, int64_t nz)
{
    int rc = TG_OK;
    tg_no_grad_begin();
    for (int64_t i = 0; i < k && rc >= 0; i++) {
        tg_tensor *zw = NULL, *y = NULL;
        rc = dcgan_latents(&zw, 32, nz, rng);
        if (rc >= 0) rc = tg_module_forward(g, &y, zw);
        tg_tensor_release(y);
        tg_tensor_release(zw);
    }
    tg_no_grad_end();
    return rc;
}

/* -1 after saying why, when DIR/name exists and --overwrite is not given. */
static int check_keep(const opts *o, const char *name)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", o->export_dir, name);
    if (o->overwrite || lstat(path, &st) != 0) return 0;
    fprintf(stderr, "%s: --export %s: %s exists: give --overwrite to replace it, or choose "
            "another folder\n", prog, o->export_dir, path);
    return -1;
}

static int export_files(const opts *o)
{
    char path[4096];
    tg_module *g = NULL;
    tg_tensor *z = NULL, *img = NULL;
    tg_st_file *f = NULL;
    tg_rng rng;
    dcgan_arch a = DCGAN_ARCH_INIT;
    int status = EX_EXIT_FAIL;
    if (check_keep(o, "generator.safetensors") < 0 || check_keep(o, "latents.safetensors") < 0)
        return EX_EXIT_USAGE;
    if (ex_out_dir(prog, "--export", o->export_dir) < 0) return EX_EXIT_FAIL;
    tg_rng_init(&rng, o->seed);
    EX_TRY(dcgan_generator_new(&g, &a, &rng), "building the generator");
    EX_TRY(warm_up(g, &rng, o->warmup, a.nz), "warming up the BatchNorm statistics");
    EX_TRY(dcgan_latents(&z, o->n, a.nz, &rng), "drawing %lld latents", (long long)o->n);
    EX_TRY(generate(g, &img, z), "generating the images");
    EX_TRY(tg_st_new(&f), "collecting the weights");
    EX_TRY(tg_module_state_dict_save(g, f, "gen"), "collecting the weights");
    snprintf(path, sizeof path, "%s/generator.safetensors", o->export_dir);
    EX_TRY(tg_safetensors_save(f, path), "writing %s", path);
    snprintf(path, sizeof path, "%s/latents.safetensors", o->export_dir);
    EX_TRY(save_pair(path, z, img), "writing %s", path);
    printf("dcgan_load: wrote %s/generator.safetensors and %s/latents.safetensors\n",
           o->export_dir, o->export_dir);
    status = EX_EXIT_OK;
done:
    tg_st_free(f);
    tg_tensor_release(img);
    tg_tensor_release(z);
    tg_module_release(g);
    return status;
}

int main(int argc, char **argv)
{
    opts o;
    int rc = parse_opts(&o, argc, argv);
    if (rc != 0) {
        if (rc < 0) usage(stderr);
        return rc < 0 ? EX_EXIT_USAGE : EX_EXIT_OK;
    }
    return o.export_dir ? export_files(&o) : load_and_run(&o);
}
