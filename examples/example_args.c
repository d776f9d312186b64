/* examples/example_args.c - strict command-line values, output folders and
 * failure messages; see example_args.h. */
#include "example_args.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tapegrad/tapegrad.h>

bool ex_arg_is_help(const char *arg)
{
    return !strcmp(arg, "--help") || !strcmp(arg, "-h");
}

const char *ex_arg_value(const char *prog, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: option %s needs a value\n", prog, argv[*i]);
        return NULL;
    }
    /* "--out --seconds" is an --out whose value was forgotten, not a folder
     * named "--seconds"; "-1" goes on to the number parsers' range rules. */
    const char *v = argv[*i + 1];
    if (!strncmp(v, "--", 2)) {
        fprintf(stderr, "%s: option %s needs a value (got '%s'; write ./%s for a path of that "
                "name)\n", prog, argv[*i], v, v);
        return NULL;
    }
    return argv[++*i];
}

int ex_args_parse(const char *prog, int argc, char **argv, const char *const *names,
                  size_t n_names, int (*apply)(void *o, const char *name, const char *value),
                  void *o, void (*usage)(FILE *f))
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (ex_arg_is_help(a)) {
            usage(stdout);
            return 1;
        }
        size_t k = 0;
        while (k < n_names && strcmp(a, names[k])) k++;
        if (k == n_names) {
            fprintf(stderr, "%s: unknown option '%s'\n", prog, a);
            return -1;
        }
        if (!(v = ex_arg_value(prog, argc, argv, &i)) || apply(o, a, v) < 0) return -1;
    }
    return 0;
}

/* strto* skip leading blanks and take a sign; a value must start with what
 * the caller allows (a digit, or a sign where one makes sense). */
static bool starts_ok(const char *s, bool sign)
{
    return isdigit((unsigned char)s[0]) || (sign && (s[0] == '-' || s[0] == '+'));
}

int ex_arg_i64(const char *prog, const char *opt, const char *s, int64_t lo, int64_t hi,
               int64_t *v)
{
    char *end = NULL;
    errno = 0;
    long long x = starts_ok(s, true) ? strtoll(s, &end, 10) : 0;
    if (!end || end == s || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "%s: %s '%s': expected an integer in [%" PRId64 ", %" PRId64 "]\n", prog,
                opt, s, lo, hi);
        return -1;
    }
    *v = x;
    return 0;
}

int ex_arg_u64(const char *prog, const char *opt, const char *s, uint64_t *v)
{
    char *end = NULL;
    errno = 0;
    unsigned long long x = starts_ok(s, false) ? strtoull(s, &end, 10) : 0;
    if (!end || end == s || *end || errno) {
        fprintf(stderr, "%s: %s '%s': expected an integer in [0, %" PRIu64 "]\n", prog, opt, s,
                UINT64_MAX);
        return -1;
    }
    *v = x;
    return 0;
}

int ex_arg_positive(const char *prog, const char *opt, const char *s, double hi, double *v)
{
    char *end = NULL;
    errno = 0;
    double x = starts_ok(s, true) || s[0] == '.' ? strtod(s, &end) : NAN;
    /* ERANGE on underflow still gives a usable tiny number; only overflow
     * (HUGE_VAL) is refused, by the isfinite test. */
    if (!end || end == s || *end || !isfinite(x) || !(x > 0) || x > hi) {
        fprintf(stderr, "%s: %s '%s': expected a finite number > 0 and <= %g\n", prog, opt, s,
                hi);
        return -1;
    }
    *v = x;
    return 0;
}

int ex_out_dir(const char *prog, const char *opt, const char *dir)
{
    struct stat st;
    char probe[4096];
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "%s: %s %s: cannot create the folder: %s\n", prog, opt, dir,
                strerror(errno));
        return -1;
    }
    if (stat(dir, &st) < 0) {
        fprintf(stderr, "%s: %s %s: cannot use the folder: %s\n", prog, opt, dir,
                strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s %s: must be a folder to write the outputs into, not a file\n",
                prog, opt, dir);
        return -1;
    }
    int fd = -1;
    if (snprintf(probe, sizeof probe, "%s/.%s-write-test-XXXXXX", dir, prog) <
        (int)sizeof probe)
        fd = mkstemp(probe);
    else
        errno = ENAMETOOLONG;
    if (fd < 0) {
        fprintf(stderr, "%s: %s %s: cannot write in the folder: %s\n", prog, opt, dir,
                strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

void ex_fail(const char *prog, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %s\n", tg_error_message());
}

tg_dataset *ex_load_28x28(const char *prog, const char *dir, bool train, tg_pixel_range range)
{
    tg_dataset *ds = NULL;
    const char *where = dir ? dir : TG_FASHION_MNIST_DIR, *set = train ? "training" : "test";
    if (tg_fashion_mnist_load(&ds, dir, train) < 0) {
        ex_fail(prog, "cannot load the %s set from %s", set, where);
        return NULL;
    }
    int64_t s[3] = {0, 0, 0};
    tg_dataset_image_shape(ds, s);
    if (tg_dataset_set_pixel_range(ds, range) < 0)
        ex_fail(prog, "scaling the %s set", set);
    else if (tg_dataset_size(ds) < 1)
        fprintf(stderr, "%s: the %s set in %s is empty\n", prog, set, where);
    else if (s[0] != 1 || s[1] != 28 || s[2] != 28)
        fprintf(stderr, "%s: --data %s: the %s images are (%lld, %lld, %lld): the model takes "
                "(1, 28, 28)\n", prog, where, set, (long long)s[0], (long long)s[1],
                (long long)s[2]);
    else
        return ds;
    tg_dataset_release(ds);
    return NULL;
}

double ex_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int ex_save_module(const char *prog, const tg_module *m, const char *dir, const char *file)
{
    tg_st_file *f = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (tg_st_new(&f) < 0 || tg_module_state_dict_save(m, f, NULL) < 0) {
        ex_fail(prog, "collecting the weights");
        tg_st_free(f);
        return -1;
    }
    int rc = tg_safetensors_save(f, path);
    if (rc < 0) ex_fail(prog, "saving the weights to %s", path);
    tg_st_free(f);
    return rc < 0 ? -1 : 0;
}
