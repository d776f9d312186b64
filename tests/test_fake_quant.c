/* tests/test_fake_quant.c - fake quantization (values, the straight-through
 * gradient against its mask, the per-channel form against a multi-index loop
 * and torch's fake_quantize_per_channel_affine golden) and the observers
 * (against PyTorch's formulas evaluated by hand). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "quant/quant_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/quant.h"
#include "tapegrad/registry.h"
#include "tapegrad/status.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;   /* each test starts from it (fork) */
static int64_t rnd_int(int64_t lo, int64_t hi) { return th_rand_int(&rng_state, lo, hi); }
static tg_tensor *mk(tg_dtype dt, int nd, const int64_t *shape, double lo, double hi)
{
    return th_rand_tensor(&rng_state, dt, nd, shape, lo, hi);
}

/* ---- fake quantize ---- */

Test(fake_quant, fake_quantize_values_and_straight_through_gradient)
{
    const double xs[] = {-1.0, -0.26, -0.25, 0.05, 0.3, 0.74, 0.76, 2.0};
    int64_t n = 8;
    tg_tensor *x = NULL, *y = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&x, TG_F64, 1, &n, xs), TG_OK));
    tg_tensor_set_requires_grad(x, true);
    /* scale 0.1, zp 2, range [0, 10]: levels rint(x/0.1)+2 */
    cr_assert(eq(int, tg_fake_quantize(&y, x, 0.1, 2, 0, 10), TG_OK));
    cr_assert(tg_tensor_requires_grad(y));
    tg_tensor *g = NULL;
    cr_assert(eq(int, tg_tensor_full(&g, TG_F64, 1, &n, 3.0), TG_OK));
    cr_assert(eq(int, tg_backward(y, g, NULL), TG_OK));
    tg_tensor *dx = tg_tensor_grad(x);
    cr_assert(dx != NULL);
    for (int i = 0; i < 8; i++) {
        double l = rint(xs[i] / 0.1) + 2;
        double want = (fmax(0, fmin(10, l)) - 2) * 0.1;
        cr_assert(epsilon_eq(dbl, th_at(y, i), want, 1e-12), "y[%d]", i);
        cr_assert(eq(dbl, th_at(dx, i), (l >= 0 && l <= 10) ? 3.0 : 0.0), "dx[%d]", i);
    }
    tg_tensor *bad = (tg_tensor *)0x1;
    cr_assert(eq(int, tg_fake_quantize(&bad, x, 0.1, 11, 0, 10), TG_EINVAL));
    cr_assert(eq(int, tg_fake_quantize(&bad, x, 0.1, 0, 5, 5), TG_EINVAL));
    cr_assert(bad == (tg_tensor *)0x1);
    tg_tensor_release(x), tg_tensor_release(y), tg_tensor_release(g);
}

/* The per-channel oracle: element idx of x (any layout, read through
 * tg_tensor_get) uses channel idx[axis]. */
static void fqc_oracle(const tg_tensor *x, int axis, const double *s, const int32_t *z, int32_t qmin,
                       int32_t qmax, double *y, double *mask)
{
    const int64_t *d = tg_tensor_shape(x);
    int64_t idx[4], k = 0;
    for (idx[0] = 0; idx[0] < d[0]; idx[0]++)
        for (idx[1] = 0; idx[1] < d[1]; idx[1]++)
            for (idx[2] = 0; idx[2] < d[2]; idx[2]++)
                for (idx[3] = 0; idx[3] < d[3]; idx[3]++, k++) {
                    double v;
                    cr_assert(eq(int, tg_tensor_get(x, idx, &v), TG_OK));
                    const int64_t c = idx[axis];
                    const double l = rint(v / s[c]) + z[c];
                    y[k] = (fmin(fmax(l, qmin), qmax) - z[c]) * s[c];
                    mask[k] = (l >= qmin && l <= qmax) ? 1.0 : 0.0;
                }
}

Test(fake_quant, fake_quantize_per_channel_matches_a_naive_loop_on_every_axis)
{
    const int64_t shape[] = {2, 3, 4, 5};
    const int32_t ranges[][2] = {{0, 255}, {-128, 127}, {0, 15}, {-8, 7}};
    tg_tensor *x = mk(TG_F64, 4, shape, -3.0, 3.0), *xt = NULL;
    cr_assert(eq(int, tg_transpose(&xt, x, 0, 3), TG_OK));   /* (5, 3, 4, 2), strided */
    double y_want[120], m_want[120], s[8];
    int32_t z[8];
    for (int view = 0; view < 2; view++) {
        tg_tensor *in = view ? xt : x;
        for (int axis = 0; axis < 4; axis++) {
            const int64_t n = tg_tensor_dim(in, axis);
            const int32_t qmin = ranges[axis][0], qmax = ranges[axis][1];
            /* x spans about +-(qmax - qmin) / (1 + c/2) levels around a zero point in
             * the lower or upper quarter: both sides of the clamp are hit */
            const int32_t q4 = (qmax - qmin) / 4;
            for (int64_t c = 0; c < n; c++) {
                s[c] = 3.0 * (1.0 + 0.5 * (double)c) / (qmax - qmin);
                z[c] = (int32_t)(c % 2 ? rnd_int(qmax - q4, qmax) : rnd_int(qmin, qmin + q4));
            }
            fqc_oracle(in, axis, s, z, qmin, qmax, y_want, m_want);
            tg_tensor *leaf = NULL, *y = NULL, *dy = NULL;
            cr_assert(eq(int, tg_tensor_clone(&leaf, in), TG_OK));
            tg_tensor_set_requires_grad(leaf, true);
            /* the last axis is also given as -1 */
            cr_assert(eq(int, tg_fake_quantize_per_channel(&y, view ? in : leaf, axis == 3 ? -1 : axis,
                                                           n, s, z, qmin, qmax), TG_OK),
                      "%s", tg_error_message());
            cr_assert(eq(int, tg_tensor_dtype(y), TG_F64));
            cr_assert(tg_tensor_same_shape(y, in));
            int clamped = 0;
            for (int64_t i = 0; i < 120; i++) {
                cr_assert(epsilon_eq(dbl, th_at(y, i), y_want[i], 1e-12), "view %d axis %d elt %lld",
                          view, axis, (long long)i);
                clamped += m_want[i] == 0;
            }
            cr_assert(clamped > 5 && clamped < 115, "axis %d: %d clamped, not a useful case", axis,
                      clamped);
            if (!view) {   /* the straight-through gradient: dx = dy * mask */
                dy = mk(TG_F64, 4, tg_tensor_shape(in), -1.0, 1.0);
                cr_assert(eq(int, tg_backward(y, dy, NULL), TG_OK));
                tg_tensor *dx = tg_tensor_grad(leaf);
                cr_assert(dx != NULL);
                for (int64_t i = 0; i < 120; i++)
                    cr_assert(eq(dbl, th_at(dx, i), th_at(dy, i) * m_want[i]), "axis %d dx %lld",
                              axis, (long long)i);
            }
            tg_tensor_release(leaf), tg_tensor_release(y), tg_tensor_release(dy);
        }
    }
    tg_tensor_release(xt), tg_tensor_release(x);
}

Test(fake_quant, fake_quantize_per_channel_keeps_dtype_and_one_channel_is_per_tensor)
{
    const int64_t shape[] = {3, 40};
    tg_tensor *x = mk(TG_F32, 2, shape, -2.0, 2.0), *yc = NULL, *yt = NULL;
    const double s[] = {0.07};
    const int32_t z[] = {-3};
    tg_tensor *row = NULL;
    cr_assert(eq(int, tg_reshape(&row, x, 2, (int64_t[]){1, 120}), TG_OK));
    cr_assert(eq(int, tg_fake_quantize_per_channel(&yc, row, 0, 1, s, z, -8, 7), TG_OK));
    cr_assert(eq(int, tg_fake_quantize(&yt, row, 0.07, -3, -8, 7), TG_OK));
    cr_assert(eq(int, tg_tensor_dtype(yc), TG_F32));
    for (int64_t i = 0; i < 120; i++) cr_assert(eq(dbl, th_at(yc, i), th_at(yt, i)));
    tg_tensor_release(row), tg_tensor_release(yc), tg_tensor_release(yt), tg_tensor_release(x);
}

Test(fake_quant, fake_quantize_per_channel_matches_torch)
{
    tg_st_file *f = th_golden_load("quant/fake_quantize_per_channel.safetensors");
    const int cases = atoi(tg_st_meta_get(f, "cases"));
    cr_assert(cases >= 4);
    for (int i = 0; i < cases; i++) {
        char key[64];
#define FQC_GET(name) (snprintf(key, sizeof key, "%d." name, i), tg_st_get(f, key))
#define FQC_META(name) (snprintf(key, sizeof key, "%d." name, i), atoi(tg_st_meta_get(f, key)))
        tg_tensor *x = FQC_GET("x"), *sc = FQC_GET("scale"), *zp = FQC_GET("zero_point");
        tg_tensor *dy = FQC_GET("dy"), *want = FQC_GET("y"), *dx_want = FQC_GET("dx");
        const int axis = FQC_META("axis"), qmin = FQC_META("quant_min"), qmax = FQC_META("quant_max");
        cr_assert(x && sc && zp && dy && want && dx_want, "case %d incomplete", i);
        const int64_t n = tg_tensor_numel(sc);
        double s[8];
        int32_t z[8];
        cr_assert(n <= 8);
        for (int64_t c = 0; c < n; c++) s[c] = th_at(sc, c), z[c] = (int32_t)th_at(zp, c);
        tg_tensor *leaf = NULL, *y = NULL;
        cr_assert(eq(int, tg_tensor_clone(&leaf, x), TG_OK));
        tg_tensor_set_requires_grad(leaf, true);
        cr_assert(eq(int, tg_fake_quantize_per_channel(&y, leaf, axis, n, s, z, qmin, qmax), TG_OK),
                  "case %d: %s", i, tg_error_message());
        cr_assert(eq(int, tg_backward(y, dy, NULL), TG_OK));
        tg_tensor *dx = tg_tensor_grad(leaf);
        for (int64_t k = 0; k < tg_tensor_numel(x); k++) {
            cr_assert(eq(dbl, th_at(y, k), th_at(want, k)), "case %d (axis %d) y[%lld]", i, axis,
                      (long long)k);
            cr_assert(eq(dbl, th_at(dx, k), th_at(dx_want, k)), "case %d dx[%lld]", i, (long long)k);
        }
        tg_tensor_release(leaf), tg_tensor_release(y);
#undef FQC_GET
#undef FQC_META
    }
    tg_st_free(f);
}

Test(fake_quant, fake_quantize_ops_are_registered_with_keep_policy)
{
    const char *names[] = {"fake_quantize", "fake_quantize_per_channel"};
    for (int i = 0; i < 2; i++) {
        tg_op_info info;
        cr_assert(eq(int, tg_op_info_find(names[i], &info), TG_OK), "%s", names[i]);
        cr_assert(eq(int, info.arity, 1));
        cr_assert(info.has_backward);
        cr_assert(eq(str, (char *)tg_amp_policy_name(info.amp), (char *)tg_amp_policy_name(TG_AMP_KEEP)));
    }
}

Test(fake_quant, fake_quantize_per_channel_errors_leave_out_untouched)
{
    const int64_t shape[] = {2, 3, 4};
    tg_tensor *x = mk(TG_F32, 3, shape, -1.0, 1.0), *xi = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&xi, TG_I32, 3, shape), TG_OK));
    const double s[] = {0.1, 0.2, 0.3, 0.4}, bad_s[] = {0.1, 0.0, 0.3};
    const int32_t z[] = {0, 1, 2, 3}, bad_z[] = {0, 300, 2};
    const double before = th_at(x, 5);
    tg_tensor *y = NULL;
    struct { tg_tensor *x; int axis; int64_t n; const double *s; const int32_t *z; int lo, hi, rc; } rows[] = {
        {x, 3, 3, s, z, 0, 255, TG_EINVAL},         /* axis out of range */
        {x, -4, 2, s, z, 0, 255, TG_EINVAL},
        {x, 1, 4, s, z, 0, 255, TG_ESHAPE},         /* n != shape[1] = 3 */
        {x, 1, 3, bad_s, z, 0, 255, TG_EINVAL},     /* scale 0 */
        {x, 1, 3, NULL, z, 0, 255, TG_EINVAL},
        {x, 1, 3, s, bad_z, 0, 255, TG_EINVAL},     /* zero point outside [qmin, qmax] */
        {x, 1, 3, s, z, 5, 5, TG_EINVAL},           /* qmin >= qmax */
        {x, 1, 3, s, z, 10, 2, TG_EINVAL},
        {x, 1, 3, s, NULL, 1, 255, TG_EINVAL},      /* NULL zero points mean 0, outside */
        {NULL, 1, 3, s, z, 0, 255, TG_EINVAL},
        {xi, 1, 3, s, z, 0, 255, TG_EDTYPE},        /* not float */
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        cr_assert(eq(int, tg_fake_quantize_per_channel(&y, rows[i].x, rows[i].axis, rows[i].n, rows[i].s,
                                                       rows[i].z, rows[i].lo, rows[i].hi), rows[i].rc),
                  "row %zu", i);
        cr_assert(y == NULL, "row %zu", i);
        cr_assert(strlen(tg_error_message()) > 0);
    }
    cr_assert(eq(int, tg_fake_quantize_per_channel(NULL, x, 1, 3, s, z, 0, 255), TG_EINVAL));
    cr_assert(eq(dbl, th_at(x, 5), before));
    /* NULL zero points are fine when 0 is in range */
    cr_assert(eq(int, tg_fake_quantize_per_channel(&y, x, 1, 3, s, NULL, -8, 7), TG_OK));
    tg_tensor_release(y), tg_tensor_release(x), tg_tensor_release(xi);
}

/* ---- observers ---- */

Test(fake_quant, minmax_observer_matches_torch_formula)
{
    const float a[] = {-1.0f, 0.5f, 3.0f}, b[] = {-2.0f, 1.0f, 2.0f};
    int64_t n = 3;
    tg_tensor *ta = NULL, *tb = NULL;
    tg_tensor_from_data(&ta, TG_F32, 1, &n, a);
    tg_tensor_from_data(&tb, TG_F32, 1, &n, b);
    tg_observer o;
    double s;
    int32_t z;
    cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_MINMAX, TG_U8, false, 0), TG_OK));
    cr_assert(eq(int, tg_observer_qparams(&o, &s, &z), TG_EINVAL));
    cr_assert(eq(int, tg_observer_update(&o, ta), TG_OK));
    cr_assert(eq(int, tg_observer_update(&o, tb), TG_OK));
    /* range [-2, 3]: scale = 5/255, zp = 0 - rint(-2 / (5/255)) = rint(102) = 102 */
    cr_assert(eq(int, tg_observer_qparams(&o, &s, &z), TG_OK));
    cr_assert(epsilon_eq(dbl, s, 5.0 / 255, 1e-7));
    cr_assert(eq(i32, z, 102));
    tg_observer_free(&o);
    /* moving average, c = 0.01: min = -1 + 0.01*(-2 - -1) = -1.01, max = 3 - 0.01 = 2.99 */
    cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_MOVING_AVERAGE, TG_I8, true, 0), TG_OK));
    tg_observer_update(&o, ta);
    tg_observer_update(&o, tb);
    cr_assert(epsilon_eq(flt, o.min[0], -1.01f, 1e-6));
    cr_assert(epsilon_eq(flt, o.max[0], 2.99f, 1e-6));
    cr_assert(eq(int, tg_observer_qparams(&o, &s, &z), TG_OK));
    cr_assert(epsilon_eq(dbl, s, 2.99f / 127.5f, 1e-7));   /* symmetric: max|.| / 127.5 */
    cr_assert(eq(i32, z, 0));
    tg_observer_free(&o);
    tg_tensor_release(ta), tg_tensor_release(tb);
}

/* NaN in calibration data (and an infinity, for the moving average) is
 * refused at update with the state kept; PyTorch fails later, at qparams. */
Test(fake_quant, observers_refuse_nan_and_keep_their_state)
{
    const int64_t s4[1] = {4};
    tg_tensor *good = NULL, *nan = NULL, *inf = NULL;
    tg_tensor_from_data(&good, TG_F32, 1, s4, (float[]){-1, 2, 3, 4});
    tg_tensor_from_data(&nan, TG_F32, 1, s4, (float[]){NAN, 1, 2, -1});
    tg_tensor_from_data(&inf, TG_F32, 1, s4, (float[]){-1, 2, 3, INFINITY});
    for (int kind = TG_OBSERVER_MINMAX; kind <= TG_OBSERVER_MOVING_AVERAGE; kind++) {
        tg_observer o;
        cr_assert(eq(int, tg_observer_init(&o, kind, TG_U8, false, 0), TG_OK));
        cr_assert(eq(int, tg_observer_update(&o, nan), TG_EINVAL), "kind %d", kind);
        cr_assert(strstr(tg_error_message(), "x[0] is nan") != NULL, "%s", tg_error_message());
        double s0, s1;
        int32_t z0, z1;
        cr_assert(eq(int, tg_observer_update(&o, good), TG_OK));
        cr_assert(eq(int, tg_observer_qparams(&o, &s0, &z0), TG_OK));
        cr_assert(eq(int, tg_observer_update(&o, nan), TG_EINVAL));
        int rc = tg_observer_update(&o, inf);
        cr_assert(eq(int, rc, kind == TG_OBSERVER_MOVING_AVERAGE ? TG_EINVAL : TG_OK));
        if (kind == TG_OBSERVER_MOVING_AVERAGE) {
            cr_assert(eq(int, tg_observer_qparams(&o, &s1, &z1), TG_OK));
            cr_assert(s1 == s0 && z1 == z0, "state changed: %g/%d -> %g/%d", s0, z0, s1, z1);
        }
        tg_observer_free(&o);
    }
    tg_tensor_release(good), tg_tensor_release(nan), tg_tensor_release(inf);
}

/* A weight packed with groups > 1 is not a Linear weight: refused (it used
 * to compute only the first group's outputs). */
Test(fake_quant, packed_linear_needs_groups_1)
{
    tg_tensor *x = NULL, *w = NULL, *y = NULL;
    tg_tensor_full(&x, TG_U8, 2, (int64_t[]){2, 4}, 7);
    tg_tensor_full(&w, TG_I8, 2, (int64_t[]){4, 4}, 1);
    const double ws = 0.01;
    tg_qscales q = {.x_scale = 0.1, .x_zero_point = 3, .n_weight_scales = 1,
                    .weight_scales = &ws, .y_scale = 0.05, .y_zero_point = 10};
    tg_qweight *pw = NULL;
    cr_assert(eq(int, tg_qweight_new(&pw, w, false, 2), TG_OK));
    cr_assert(eq(int, tg_quantized_linear_packed(&y, x, pw, NULL, &q, false), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "packed with groups 1") != NULL, "%s", tg_error_message());
    cr_assert(y == NULL);
    tg_qweight_free(pw);
    tg_tensor_release(x), tg_tensor_release(w);
}

/* Per-channel min/max over an axis with dimensions before and after it,
 * across updates, against a plain loop; and the first NaN of a long tensor
 * is the one named. */
Test(fake_quant, per_channel_observer_ranges_on_a_middle_axis)
{
    const int64_t shape[3] = {3, 5, 7};
    tg_observer o;
    cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_PER_CHANNEL, TG_I8, true, 1), TG_OK));
    float want_lo[5], want_hi[5];
    for (int c = 0; c < 5; c++) want_lo[c] = INFINITY, want_hi[c] = -INFINITY;
    uint64_t seed = 12345;
    for (int update = 0; update < 3; update++) {
        float v[105];
        for (int i = 0; i < 105; i++)
            v[i] = (float)(th_uniform_pm1(&seed) * 10) * (float)(1 + (i / 7) % 5);
        for (int i = 0; i < 105; i++) {
            const int c = (i / 7) % 5;
            want_lo[c] = fminf(want_lo[c], v[i]);
            want_hi[c] = fmaxf(want_hi[c], v[i]);
        }
        tg_tensor *t = NULL;
        cr_assert(eq(int, tg_tensor_from_data(&t, TG_F32, 3, shape, v), TG_OK));
        cr_assert(eq(int, tg_observer_update(&o, t), TG_OK));
        tg_tensor_release(t);
        for (int c = 0; c < 5; c++)
            cr_assert(o.min[c] == want_lo[c] && o.max[c] == want_hi[c],
                      "update %d, channel %d: [%g, %g], not [%g, %g]", update, c, o.min[c],
                      o.max[c], want_lo[c], want_hi[c]);
    }
    tg_observer_free(&o);

    enum { N = 100000 };
    float *v = malloc(N * sizeof *v);
    cr_assert(v != NULL);
    for (int i = 0; i < N; i++) v[i] = (float)i;
    v[76543] = NAN, v[90000] = NAN;
    tg_tensor *t = NULL;
    cr_assert(eq(int, tg_tensor_from_data(&t, TG_F32, 1, (int64_t[]){N}, v), TG_OK));
    cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_MINMAX, TG_U8, false, 0), TG_OK));
    cr_assert(eq(int, tg_observer_update(&o, t), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "x[76543] is nan") != NULL, "%s", tg_error_message());
    tg_observer_free(&o);
    tg_tensor_release(t);
    free(v);
}

Test(fake_quant, per_channel_observer_and_errors)
{
    const float w[] = {-0.5f, 0.25f, 0.0f, 0.0f, 2.0f, -1.0f};   /* (3, 2) */
    int64_t shape[] = {3, 2};
    tg_tensor *t = NULL;
    tg_tensor_from_data(&t, TG_F32, 2, shape, w);
    tg_observer o;
    cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_PER_CHANNEL, TG_I8, true, 0), TG_OK));
    cr_assert(eq(int, tg_observer_update(&o, t), TG_OK));
    double s[3];
    int32_t z[3] = {9, 9, 9};
    cr_assert(eq(int, tg_observer_channel_qparams(&o, 2, s, z), TG_ESHAPE));
    cr_assert(z[0] == 9);
    cr_assert(eq(int, tg_observer_channel_qparams(&o, 3, s, z), TG_OK));
    cr_assert(epsilon_eq(dbl, s[0], 0.5f / 127.5f, 1e-9));
    cr_assert(epsilon_eq(dbl, s[1], FLT_EPSILON, 1e-12));   /* all-zero channel: eps */
    cr_assert(epsilon_eq(dbl, s[2], 2.0f / 127.5f, 1e-9));
    cr_assert(z[0] == 0 && z[1] == 0 && z[2] == 0);
    double ps;
    int32_t pz;
    cr_assert(eq(int, tg_observer_qparams(&o, &ps, &pz), TG_EINVAL));
    int64_t s4[] = {4, 2};
    tg_tensor *t4 = NULL;
    tg_tensor_zeros(&t4, TG_F32, 2, s4);
    cr_assert(eq(int, tg_observer_update(&o, t4), TG_ESHAPE));
    cr_assert(eq(int, o.n, 3));
    cr_assert(eq(int, tg_observer_init(&o, TG_OBSERVER_MINMAX, TG_F32, false, 0), TG_EDTYPE));
    cr_assert(eq(int, o.kind, TG_OBSERVER_PER_CHANNEL));   /* unchanged */
    tg_observer_free(&o);
    tg_tensor_release(t), tg_tensor_release(t4);
}
