/* tests/test_init.c - torch.nn.init (tapegrad/init.h): fans of Linear,
 * Conv and ConvTranspose weights, gains, and the bounds and standard
 * deviations the fills draw with, against PyTorch 1.13
 * (tests/golden/nn/init.safetensors, scripts/make_init_goldens.py); the
 * distributions checked statistically over many draws (the generator is
 * tapegrad's, not torch's); constant fills; reproducibility; and the errors
 * that name the argument.  trunc_normal_ and orthogonal_ are in
 * test_init_trunc_orthogonal.c. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "init_fixtures.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* Splits s (modified) at sep into at most max fields; returns their count. */
static int split(char *s, char sep, char **f, int max)
{
    int n = 0;
    for (char *at = s; n < max;) {
        f[n++] = at;
        char *end = strchr(at, sep);
        if (!end) break;
        *end = '\0';
        at = end + 1;
    }
    return n;
}

/* "3x2" -> {3, 2}; returns the count. */
static int dims_of(const char *s, int64_t *d)
{
    int n = 0;
    for (const char *p = s; *p; p++) {
        d[n++] = strtoll(p, (char **)&p, 10);
        if (*p != 'x') break;
    }
    return n;
}

/* The module of a golden spec "linear:in:out" / "conv:n:cin:cout:k:groups"
 * / "convT:...", built as tapegrad builds it. */
static tg_module *module_of(char *spec, tg_rng *rng)
{
    char *f[6];
    const int n = split(spec, ':', f, 6);
    tg_module *m = NULL;
    if (!strcmp(f[0], "linear")) {
        cr_assert(eq(int, n, 3));
        OK(tg_nn_linear_new(&m, atoll(f[1]), atoll(f[2]), true, rng));
        return m;
    }
    cr_assert(eq(int, n, 6));
    int64_t k[3];
    const int nk = dims_of(f[4], k);
    cr_assert(eq(int, nk, atoi(f[1])));
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.groups = atoll(f[5]);
    if (!strcmp(f[0], "conv")) OK(tg_nn_conv_new(&m, nk, atoll(f[2]), atoll(f[3]), k, &p, true, rng));
    else OK(tg_nn_conv_transpose_new(&m, nk, atoll(f[2]), atoll(f[3]), k, &p, true, rng));
    return m;
}

Test(init, fans_of_module_weights_match_pytorch)
{
    tg_st_file *f = th_golden_load("nn/init.safetensors");
    char *list = strdup(tg_st_meta_get(f, "modules")), *specs[16];
    const int n = split(list, '|', specs, 16);
    tg_rng rng;
    tg_rng_init(&rng, 1);
    for (int k = 0; k < n; k++) {
        char key[32], spec[64];
        snprintf(spec, sizeof spec, "%s", specs[k]);
        tg_module *m = module_of(specs[k], &rng);
        snprintf(key, sizeof key, "m%d.fans", k);
        const tg_tensor *want = tg_st_get(f, key);
        cr_assert(want != NULL, "%s missing", key);
        int64_t fi = -1, fo = -1;
        OK(tg_init_calculate_fan(&fi, &fo, tg_module_find(m, "weight")));
        cr_assert(eq(i64, fi, (int64_t)th_at(want, 0)), "%s: fan_in", spec);
        cr_assert(eq(i64, fo, (int64_t)th_at(want, 1)), "%s: fan_out", spec);
        tg_module_release(m);
    }
    cr_assert(n >= 9, "only %d modules", n);
    free(list);
    tg_st_free(f);
}

static const struct {
    const char *name;
    tg_nonlinearity nl;
} NLS[] = {{"linear", TG_NL_LINEAR}, {"conv1d", TG_NL_CONV1D}, {"conv2d", TG_NL_CONV2D},
           {"conv3d", TG_NL_CONV3D}, {"conv_transpose1d", TG_NL_CONV_TRANSPOSE1D},
           {"conv_transpose2d", TG_NL_CONV_TRANSPOSE2D},
           {"conv_transpose3d", TG_NL_CONV_TRANSPOSE3D}, {"sigmoid", TG_NL_SIGMOID},
           {"tanh", TG_NL_TANH}, {"relu", TG_NL_RELU}, {"leaky_relu", TG_NL_LEAKY_RELU},
           {"selu", TG_NL_SELU}};

static tg_nonlinearity nl_of(const char *name)
{
    for (size_t i = 0; i < sizeof NLS / sizeof NLS[0]; i++)
        if (!strcmp(NLS[i].name, name)) return NLS[i].nl;
    cr_assert(0, "unknown nonlinearity %s", name);
    return TG_NL_COUNT;
}

Test(init, gains_match_pytorch)
{
    tg_st_file *f = th_golden_load("nn/init.safetensors");
    char *list = strdup(tg_st_meta_get(f, "gains")), *specs[32];
    const int n = split(list, '|', specs, 32);
    const tg_tensor *want = tg_st_get(f, "gains");
    cr_assert(want != NULL && tg_tensor_numel(want) == n);
    for (int k = 0; k < n; k++) {
        char *parts[2];
        const int np = split(specs[k], ':', parts, 2);
        double g = -1;
        OK(tg_init_calculate_gain(&g, nl_of(parts[0]), np == 2 ? strtod(parts[1], NULL) : NAN));
        cr_assert(eq(dbl, g, th_at(want, k)), "%s: %.17g, torch %.17g", parts[0], g,
                  th_at(want, k));
    }
    cr_assert(n >= 15, "only %d gains", n);
    free(list);
    tg_st_free(f);
}

/* Mean, standard deviation and largest magnitude of t's elements. */
static void moments(const tg_tensor *t, double *mean, double *std, double *maxabs)
{
    const int64_t n = tg_tensor_numel(t);
    double *v = th_doubles(t), s = 0, ss = 0;
    *maxabs = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) {
        ss += (v[i] - *mean) * (v[i] - *mean);
        *maxabs = fmax(*maxabs, fabs(v[i]));
    }
    *std = sqrt(ss / (double)(n - 1));
    free(v);
}

/* Each fill of a golden entry, on 200k elements drawn as several tensors
 * of the entry's shape (so the fans stay the entry's): the uniform ones lie
 * within torch's bound and reach 0.999 of it, with std bound / sqrt(3); the
 * normal ones have torch's std; both have mean 0.  Tolerances are 5
 * standard errors for n = 200k: the mean 1.1e-2 std (1 / sqrt(n)), the
 * sample std 8e-3 of it for a normal (1 / sqrt(2 n)) and 5e-3 for a
 * uniform (sqrt(0.8 / (4 n)), its kurtosis being 1.8). */
Test(init, fills_draw_with_pytorchs_bounds_and_stds)
{
    tg_st_file *f = th_golden_load("nn/init.safetensors");
    char *list = strdup(tg_st_meta_get(f, "inits")), *specs[16];
    const int n = split(list, '|', specs, 16);
    const tg_tensor *scales = tg_st_get(f, "scales");
    cr_assert(scales != NULL && tg_tensor_numel(scales) == n);
    tg_rng rng;
    tg_rng_init(&rng, 7);
    for (int k = 0; k < n; k++) {
        char spec[96], *p[5] = {0};
        snprintf(spec, sizeof spec, "%s", specs[k]);
        const int np = split(specs[k], ';', p, 5);
        cr_assert(np >= 3, "spec %s: fewer than 3 fields", specs[k]);
        int64_t shape[8], numel = 1;
        const int nd = dims_of(p[1], shape);
        for (int d = 0; d < nd; d++) numel *= shape[d];
        const bool uniform = strstr(p[0], "uniform") != NULL;
        const double want = th_at(scales, k), std = uniform ? want / sqrt(3.0) : want;
        const int reps = (int)(200000 / numel) + 1;
        tg_tensor **parts = calloc((size_t)reps, sizeof *parts), *all = NULL;
        for (int r = 0; r < reps; r++) {
            OK(tg_tensor_zeros(&parts[r], TG_F64, nd, shape));
            if (!strncmp(p[0], "xavier", 6)) {
                cr_assert(eq(int, np, 3));
                OK((uniform ? tg_init_xavier_uniform_ : tg_init_xavier_normal_)(
                    parts[r], strtod(p[2], NULL), &rng));
            } else {
                cr_assert(eq(int, np, 5));
                const tg_fan_mode mode = !strcmp(p[3], "fan_in") ? TG_FAN_IN : TG_FAN_OUT;
                OK((uniform ? tg_init_kaiming_uniform_ : tg_init_kaiming_normal_)(
                    parts[r], strtod(p[2], NULL), mode, nl_of(p[4]), &rng));
            }
        }
        OK(tg_cat(&all, reps, parts, 0));
        double mean, sd, maxabs;
        moments(all, &mean, &sd, &maxabs);
        cr_assert(fabs(mean) < 1.1e-2 * std, "%s: mean %g (std %g)", spec, mean, std);
        if (uniform) {
            cr_assert(maxabs < want && maxabs > 0.999 * want, "%s: max |x| %.9g, bound %.9g",
                      spec, maxabs, want);
            cr_assert(fabs(sd / std - 1) < 5e-3, "%s: std %g, want %g", spec, sd, std);
        } else {
            cr_assert(fabs(sd / std - 1) < 8e-3, "%s: std %g, torch %g", spec, sd, std);
        }
        th_release_all(reps, parts);
        tg_tensor_release(all);
        free(parts);
    }
    cr_assert(n >= 9, "only %d fills", n);
    free(list);
    tg_st_free(f);
}

/* uniform_ and normal_ with their own parameters, in f32 and bf16. */
Test(init, uniform_and_normal_have_their_moments)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    const tg_dtype dts[2] = {TG_F32, TG_BF16};
    for (int k = 0; k < 2; k++) {
        tg_tensor *t = NULL;
        double mean, sd, maxabs;
        OK(tg_tensor_zeros(&t, dts[k], 2, (int64_t[]){400, 500}));
        OK(tg_init_uniform_(t, -0.5, 1.5, &rng));
        moments(t, &mean, &sd, &maxabs);
        cr_assert(fabs(mean - 0.5) < 6e-3, "uniform mean %g", mean);
        cr_assert(fabs(sd - 2 / sqrt(12.0)) < 6e-3, "uniform std %g", sd);
        cr_assert(maxabs <= 1.5, "%g", maxabs);
        for (int64_t i = 0; i < tg_tensor_numel(t); i++) {
            const double v = th_at(t, i);
            cr_assert(v >= -0.5 && v < 1.5, "uniform [%lld] = %g", (long long)i, v);
        }
        OK(tg_init_normal_(t, 2.0, 0.25, &rng));
        moments(t, &mean, &sd, &maxabs);
        cr_assert(fabs(mean - 2.0) < 4e-3, "normal mean %g", mean);
        cr_assert(fabs(sd / 0.25 - 1) < 1e-2, "normal std %g", sd);
        tg_tensor_release(t);
    }
}

/* The same seed gives the same weights; the rng moves on, so a second
 * fill differs. */
Test(init, draws_follow_the_rng)
{
    tg_rng r1, r2;
    tg_rng_init(&r1, 11);
    tg_rng_init(&r2, 11);
    tg_tensor *a = NULL, *b = NULL;
    OK(tg_tensor_zeros(&a, TG_F32, 2, (int64_t[]){4, 6}));
    OK(tg_tensor_zeros(&b, TG_F32, 2, (int64_t[]){4, 6}));
    OK(tg_init_kaiming_normal_(a, 0, TG_FAN_IN, TG_NL_RELU, &r1));
    OK(tg_init_kaiming_normal_(b, 0, TG_FAN_IN, TG_NL_RELU, &r2));
    th_expect_same_bits("same seed", a, a, b);
    OK(tg_init_kaiming_normal_(b, 0, TG_FAN_IN, TG_NL_RELU, &r2));
    cr_assert(th_at(a, 0) != th_at(b, 0));
    th_release_all(2, (tg_tensor *[]){a, b});
}

/* constant_, zeros_ and ones_ fill any dtype, strided views too; an empty
 * tensor is left alone by the draws. */
Test(init, constant_fills_and_empty_tensors)
{
    tg_tensor *t = NULL, *v = NULL;
    OK(tg_tensor_zeros(&t, TG_I32, 2, (int64_t[]){3, 4}));
    OK(tg_init_constant_(t, -7));
    for (int i = 0; i < 12; i++) cr_assert(eq(dbl, th_at(t, i), -7.0));
    OK(tg_init_ones_(t));
    cr_assert(eq(dbl, th_at(t, 11), 1.0));
    OK(tg_transpose(&v, t, 0, 1));
    OK(tg_init_zeros_(v));
    for (int i = 0; i < 12; i++) cr_assert(eq(dbl, th_at(t, i), 0.0));
    th_release_all(2, (tg_tensor *[]){t, v});
    tg_rng rng;
    tg_rng_init(&rng, 2);
    OK(tg_tensor_zeros(&t, TG_F32, 2, (int64_t[]){0, 5}));
    const tg_rng before = rng;
    OK(tg_init_kaiming_uniform_(t, 0, TG_FAN_OUT, TG_NL_LEAKY_RELU, &rng));
    OK(tg_init_xavier_normal_(t, 1, &rng));
    cr_assert(rng.counter == before.counter);
    tg_tensor_release(t);
}

Test(init, bad_arguments_name_the_rule)
{
    tg_rng rng;
    tg_rng_init(&rng, 0);
    tg_tensor *v = NULL, *w = NULL, *i = NULL;
    refusal_tensors(&v, &w, &i);
    cr_assert(eq(int, tg_init_xavier_uniform_(v, 1, &rng), TG_ESHAPE));
    th_expect_in(tg_error_message(), "init_xavier_uniform_: t is (5); fan_in and fan_out need "
                 "a tensor of at least 2 dims");
    cr_assert(eq(int, tg_init_calculate_fan(NULL, NULL, v), TG_ESHAPE));
    cr_assert(eq(int, tg_init_kaiming_normal_(i, 0, TG_FAN_IN, TG_NL_RELU, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_kaiming_normal_: t is i64; only float dtypes");
    cr_assert(eq(int, tg_init_kaiming_uniform_(w, 0, (tg_fan_mode)2, TG_NL_RELU, &rng),
                 TG_EINVAL));
    th_expect_in(tg_error_message(), "init_kaiming_uniform_: mode=2 must be TG_FAN_IN or "
                 "TG_FAN_OUT");
    cr_assert(eq(int, tg_init_kaiming_uniform_(w, 0, TG_FAN_IN, TG_NL_COUNT, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_kaiming_uniform_: nonlinearity=12 is not a "
                 "tg_nonlinearity");
    cr_assert(eq(int, tg_init_kaiming_uniform_(w, NAN, TG_FAN_IN, TG_NL_RELU, &rng), TG_EINVAL));
    cr_assert(eq(int, tg_init_xavier_normal_(w, -1, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_xavier_normal_: gain=-1 must be finite and >= 0");
    cr_assert(eq(int, tg_init_uniform_(w, 1, 0, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_uniform_: a=1, b=0 must be finite with a <= b");
    cr_assert(eq(int, tg_init_normal_(w, 0, -1, &rng), TG_EINVAL));
    cr_assert(eq(int, tg_init_normal_(w, 0, 1, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_normal_: rng must not be NULL");
    cr_assert(eq(int, tg_init_constant_(i, 1e300), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_constant_: value 1.0000000000000001e+300 cannot be "
                 "converted to i64");
    cr_assert(eq(int, tg_init_ones_(NULL), TG_EINVAL));
    double g;
    cr_assert(eq(int, tg_init_calculate_gain(&g, (tg_nonlinearity)-1, NAN), TG_EINVAL));
    th_expect_in(tg_error_message(), "init_calculate_gain: nonlinearity=-1 is not a "
                 "tg_nonlinearity (0..11)");
    cr_assert(eq(int, tg_init_calculate_gain(&g, TG_NL_LEAKY_RELU, INFINITY), TG_EINVAL));
    /* nothing was written by the refused calls */
    for (int k = 0; k < 12; k++) cr_assert(eq(dbl, th_at(w, k), 0.0));
    th_release_all(3, (tg_tensor *[]){v, w, i});
}
