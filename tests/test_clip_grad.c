/* tests/test_clip_grad.c - tg_clip_grad_norm and tg_clip_grad_value against
 * torch.nn.utils.clip_grad_norm_ / clip_grad_value_ (tests/golden/optim/
 * clip.safetensors, scripts/make_optim_goldens.py): f32, f64, bf16, f16 and
 * mixed gradients, norms of order 1, 2, 3 and inf, a parameter without a
 * gradient; then strided gradients, non-finite totals and refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

#define NP 3

/* The relative error the golden values allow in dtype dt: a few units in
 * the last place of f32 and f64, whose sums run in another order than
 * PyTorch's; the half cases agree with PyTorch to the bit (each of their
 * norms and factors is rounded to 8 or 11 bits, as PyTorch's). */
static double tol_of(tg_dtype dt)
{
    switch (dt) {
    case TG_F64: return 1e-13;
    case TG_F32: return 4e-7;
    case TG_F16: return 1e-9;
    default: return 1e-9;
    }
}

static const char *meta_str(const tg_st_file *f, const char *c, const char *k)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", c, k);
    const char *v = tg_st_meta_get(f, key);
    cr_assert(v != NULL, "metadata %s", key);
    return v;
}

static double meta_num(const tg_st_file *f, const char *c, const char *k)
{
    const char *v = meta_str(f, c, k);
    return strcmp(v, "inf") == 0 ? INFINITY : strtod(v, NULL);
}

/* Parameters with the case's gradients (a zero f32 parameter where the case
 * has none). */
static void make_params(const tg_st_file *f, const char *c, tg_tensor **p)
{
    for (int j = 0; j < NP; j++) {
        char key[96];
        snprintf(key, sizeof key, "%s.g%d", c, j);
        tg_tensor *g = tg_st_get(f, key), *gc = NULL;
        const int64_t one = 1;
        if (g) cr_assert(eq(int, tg_tensor_zeros_like(&p[j], g), TG_OK));
        else cr_assert(eq(int, tg_tensor_zeros(&p[j], TG_F32, 1, &one), TG_OK));
        cr_assert(eq(int, tg_tensor_set_requires_grad(p[j], true), TG_OK));
        if (!g) continue;
        cr_assert(eq(int, tg_tensor_clone(&gc, g), TG_OK));
        cr_assert(eq(int, tg_tensor_set_grad(p[j], gc), TG_OK));
    }
}

static void expect_close(const char *what, const tg_tensor *got, const tg_tensor *want)
{
    cr_assert(eq(int, tg_tensor_dtype(got), tg_tensor_dtype(want)), "%s dtype", what);
    const double tol = tol_of(tg_tensor_dtype(want));
    th_expect_near(what, got, want, tol, tol * 1e-3);
}

Test(clip_grad, matches_pytorch)
{
    tg_st_file *f = th_golden_load("optim/clip.safetensors");
    char *cases = strdup(tg_st_meta_get(f, "cases")), *save = NULL;
    int n_cases = 0;
    for (char *c = strtok_r(cases, ",", &save); c; c = strtok_r(NULL, ",", &save), n_cases++) {
        tg_tensor *p[NP];
        make_params(f, c, p);
        char key[96];
        if (strcmp(meta_str(f, c, "fn"), "norm") == 0) {
            double total = -1;
            int rc = tg_clip_grad_norm(&total, NP, p, meta_num(f, c, "max_norm"),
                                       meta_num(f, c, "norm_type"), false);
            cr_assert(eq(int, rc, TG_OK), "%s: %s", c, tg_error_message());
            snprintf(key, sizeof key, "%s.total", c);
            const tg_tensor *want = tg_st_get(f, key);
            const tg_dtype rd = tg_tensor_dtype(tg_tensor_grad(p[0]));
            cr_assert(th_close(total, th_at(want, 0), tol_of(rd), 0), "%s: total %.9g, "
                      "PyTorch %.9g", c, total, th_at(want, 0));
        } else {
            int rc = tg_clip_grad_value(NP, p, meta_num(f, c, "clip_value"));
            cr_assert(eq(int, rc, TG_OK), "%s: %s", c, tg_error_message());
        }
        for (int j = 0; j < NP; j++) {
            snprintf(key, sizeof key, "%s.out%d", c, j);
            const tg_tensor *want = tg_st_get(f, key);
            const bool has = tg_tensor_grad(p[j]) != NULL;
            cr_assert(eq(int, has, want != NULL), "%s", key);
            if (want) expect_close(key, tg_tensor_grad(p[j]), want);
        }
        th_release_all(NP, p);
    }
    cr_assert(n_cases >= 10);
    free(cases);
    tg_st_free(f);
}

/* A transposed gradient is scaled through a copy and written back in its
 * own layout; the result is the contiguous one's. */
Test(clip_grad, strided_gradient_as_contiguous)
{
    tg_tensor *a = NULL, *b = NULL, *g = NULL, *gt = NULL, *gc = NULL;
    const int64_t shape[2] = {3, 4}, tshape[2] = {4, 3};
    g = th_seq(TG_F32, 2, shape, -2.0, 3.0);
    cr_assert(eq(int, tg_transpose(&gt, g, 0, 1), TG_OK));
    cr_assert(eq(int, tg_tensor_contiguous(&gc, gt), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F32, 2, tshape), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&b, TG_F32, 2, tshape), TG_OK));
    cr_assert(eq(int, tg_tensor_set_requires_grad(a, true), TG_OK));
    cr_assert(eq(int, tg_tensor_set_requires_grad(b, true), TG_OK));
    cr_assert(eq(int, tg_tensor_set_grad(a, gt), TG_OK));   /* steals */
    cr_assert(eq(int, tg_tensor_set_grad(b, gc), TG_OK));
    double ta, tb;
    cr_assert(eq(int, tg_clip_grad_norm(&ta, 1, &a, 0.5, 2.0, false), TG_OK));
    cr_assert(eq(int, tg_clip_grad_norm(&tb, 1, &b, 0.5, 2.0, false), TG_OK));
    cr_assert(eq(dbl, ta, tb));
    const bool contiguous = tg_tensor_is_contiguous(tg_tensor_grad(a));
    cr_assert(contiguous == false);
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 3; j++) {
            const int64_t idx[2] = {i, j};
            cr_assert(eq(dbl, th_get(tg_tensor_grad(a), idx), th_get(tg_tensor_grad(b), idx)));
        }
    th_release_all(3, (tg_tensor *[]){a, b, g});
}

/* A NaN in a gradient: error_if_nonfinite refuses before any gradient
 * changes; without it every gradient becomes NaN, as PyTorch's. */
Test(clip_grad, nonfinite_total)
{
    tg_tensor *p[2];
    for (int j = 0; j < 2; j++) {
        p[j] = th_vec(TG_F32, 3, (double[]){1.0, -2.0, j ? NAN : 0.5}, "p", true);
        tg_tensor *g = th_vec(TG_F32, 3, (double[]){1.0, -2.0, j ? NAN : 0.5}, "g", false);
        cr_assert(eq(int, tg_tensor_set_grad(p[j], g), TG_OK));
    }
    const uint64_t v0 = tg_tensor_version(tg_tensor_grad(p[0]));
    double total = 0;
    cr_assert(eq(int, tg_clip_grad_norm(&total, 2, p, 1.0, 2.0, true), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "error_if_nonfinite") != NULL, "%s",
              tg_error_message());
    cr_assert(isnan(total));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(p[0]), 1), -2.0));
    cr_assert(eq(u64, tg_tensor_version(tg_tensor_grad(p[0])), v0));
    cr_assert(eq(int, tg_clip_grad_norm(&total, 2, p, 1.0, INFINITY, false), TG_OK));
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 3; i++) cr_assert(isnan(th_at(tg_tensor_grad(p[j]), i)));
    /* clip_grad_value keeps a NaN a NaN */
    cr_assert(eq(int, tg_clip_grad_value(1, &p[1], 0.1), TG_OK));
    cr_assert(isnan(th_at(tg_tensor_grad(p[1]), 0)));
    th_release_all(2, p);
}

Test(clip_grad, no_gradient_and_refusals)
{
    tg_tensor *p = th_vec(TG_F32, 2, (double[]){1.0, 2.0}, "p", true);
    double total = -1;
    cr_assert(eq(int, tg_clip_grad_norm(&total, 1, &p, 1.0, 2.0, true), TG_OK));
    cr_assert(eq(dbl, total, 0.0));   /* PyTorch: tensor(0.) */
    cr_assert(eq(int, tg_clip_grad_norm(NULL, 0, NULL, 1.0, 2.0, false), TG_OK));
    tg_tensor *g = th_vec(TG_F32, 2, (double[]){3.0, 4.0}, "g", false);
    cr_assert(eq(int, tg_tensor_set_grad(p, g), TG_OK));
    static const struct {
        double max_norm, norm_type;
        const char *words;
    } bad[] = {{-1.0, 2.0, "max_norm=-1 must be >= 0"}, {NAN, 2.0, "max_norm=nan"},
               {1.0, 0.0, "norm_type=0 must be > 0"}, {1.0, -2.0, "norm_type=-2"},
               {1.0, NAN, "norm_type=nan"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert(eq(int, tg_clip_grad_norm(&total, 1, &p, bad[i].max_norm, bad[i].norm_type,
                                            false),
                     TG_EINVAL));
        th_expect_in(tg_error_message(), bad[i].words);
    }
    cr_assert(eq(int, tg_clip_grad_norm(&total, 2, (tg_tensor *[]){p, p}, 1.0, 2.0, false),
                 TG_EINVAL));
    th_expect_in(tg_error_message(), "params[1] is params[0] again");
    cr_assert(eq(int, tg_clip_grad_norm(&total, 2, (tg_tensor *[]){p, NULL}, 1.0, 2.0, false),
                 TG_EINVAL));
    th_expect_in(tg_error_message(), "params[1] must not be NULL");
    cr_assert(eq(int, tg_clip_grad_norm(&total, -1, &p, 1.0, 2.0, false), TG_EINVAL));
    cr_assert(eq(int, tg_clip_grad_value(1, &p, -0.5), TG_EINVAL));
    th_expect_in(tg_error_message(), "clip_value=-0.5 must be >= 0");
    cr_assert(eq(int, tg_clip_grad_value(1, &p, NAN), TG_EINVAL));
    /* nothing changed: the gradient is still (3, 4), norm 5 */
    cr_assert(eq(dbl, th_at(tg_tensor_grad(p), 0), 3.0));
    cr_assert(eq(int, tg_clip_grad_norm(&total, 1, &p, 10.0, 2.0, false), TG_OK));
    cr_assert(eq(dbl, total, 5.0));
    cr_assert(eq(dbl, th_at(tg_tensor_grad(p), 1), 4.0));   /* factor min(10 / 5, 1) */
    tg_tensor_release(p);
}
