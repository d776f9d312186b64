/* tests/fuzz/target_case.c - the "case" fuzz target: conv case files run
 * with the fast and the reference algorithm, quantized ones with every int8
 * kernel. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "../../tools/case.h"
#include "quant/quant_internal.h"   /* tg__q_phase_min_positions */
#include "tapegrad/tapegrad.h"
#include "targets.h"

/* The most work a case may take (multiply-adds of one pass, output
 * elements): larger cases are parsed but not run, so that every input runs
 * in milliseconds. */
#define CASE_MAX_MACS (1 << 22)
#define CASE_MAX_OUT (1 << 18)

/* The largest |value| of t, or INFINITY when t holds a NaN or an infinity. */
static double max_abs(const tg_tensor *t)
{
    double m = 0.0;
    for (int64_t i = 0; t && i < tg_tensor_numel(t); i++) {
        double v = 0.0;
        tg_tensor_get_flat(t, i, &v);
        if (!isfinite(v))
            return INFINITY;
        m = fmax(m, fabs(v));
    }
    return m;
}

/* Sizes of a parsed case: batch, channels, products of the spatial extents
 * of x, y and the kernel, and whether the shapes are sane enough to size. */
typedef struct case_size {
    bool ok;
    int64_t n, c_in, c_out, groups, x_sp, y_sp, k_sp;
} case_size;

static case_size size_case(const tg_case *c)
{
    case_size z = {.ok = false};
    const int nd = tg_tensor_ndim(c->x), ns = nd - 2;
    if (nd < 3 || nd > 5 || tg_tensor_ndim(c->weight) != nd || c->params.groups < 1)
        return z;
    const int64_t *xs = tg_tensor_shape(c->x), *ws = tg_tensor_shape(c->weight);
    int64_t out[3];
    int rc = c->transpose
                 ? tg_conv_transpose_output_size(out, ns, xs + 2, ws + 2, &c->params)
                 : tg_conv_output_size(out, ns, xs + 2, ws + 2, &c->params);
    if (rc < 0)
        return z;
    z.n = xs[0];
    z.c_in = xs[1];
    z.groups = c->params.groups;
    z.c_out = c->transpose ? ws[1] * z.groups : ws[0];
    z.x_sp = z.y_sp = z.k_sp = 1;
    for (int d = 0; d < ns; d++) {
        if (out[d] > CASE_MAX_OUT || ws[d + 2] > CASE_MAX_OUT)
            return z;
        z.x_sp *= xs[d + 2];
        z.y_sp *= out[d];
        z.k_sp *= ws[d + 2];
        if (z.y_sp > CASE_MAX_OUT || z.k_sp > CASE_MAX_OUT)
            return z;
    }
    const double macs = (double)z.n * z.c_out * z.y_sp * (double)(z.c_in / z.groups) * z.k_sp;
    z.ok = macs <= CASE_MAX_MACS && (double)z.n * z.c_out * z.y_sp <= CASE_MAX_OUT;
    return z;
}

/* Unit roundoff of the precision a result is computed and stored in. */
static double unit_roundoff(tg_dtype dt)
{
    switch (dt) {
    case TG_F64: return 0x1p-53;
    case TG_F16: return 0x1p-11;
    case TG_BF16: return 0x1p-8;
    default: return 0x1p-24;
    }
}

static double max_finite(tg_dtype dt)
{
    switch (dt) {
    case TG_F64: return 1.7976931348623157e308;
    case TG_F16: return 65504.0;
    case TG_BF16: return 3.3895313892515355e38;
    default: return 3.4028234663852886e38;
    }
}

/* fast and reference agree on tensor `name` of the two results: each element
 * within a rounding bound of `terms` products of size at most `scale`
 * (summed in f32 or f64), plus one rounding into the result's dtype. */
static int results_agree(const tg_st_file *fast, const tg_st_file *ref, const char *name,
                         double scale, double terms, const char *op)
{
    tg_tensor *a = tg_st_get(fast, name), *b = tg_st_get(ref, name);
    if (!a && !b)
        return 0;
    if (!a || !b || tg_tensor_dtype(a) != tg_tensor_dtype(b) || !tg_tensor_same_shape(a, b))
        return tg_fuzz_broken("case", "%s: %s differs in presence, dtype or shape", op, name);
    const tg_dtype dt = tg_tensor_dtype(a);
    const double u_sum = dt == TG_F64 ? 0x1p-53 : 0x1p-24;
    const double tol_abs = 4.0 * (terms + 2.0) * u_sum * scale;
    const double u_out = unit_roundoff(dt);
    for (int64_t i = 0; i < tg_tensor_numel(a); i++) {
        double va = 0.0, vb = 0.0;
        tg_tensor_get_flat(a, i, &va);
        tg_tensor_get_flat(b, i, &vb);
        if (va == vb || (isnan(va) && isnan(vb)))
            continue;
        /* One overflowed and the other nearly did: a result at the edge of
         * the dtype's range rounds either way. */
        if (!isfinite(va) || !isfinite(vb)) {
            const double fin = isfinite(va) ? fabs(va) : isfinite(vb) ? fabs(vb) : 0.0;
            if (!isnan(va) && !isnan(vb) && fin > 0.25 * max_finite(dt))
                continue;
            return tg_fuzz_broken("case", "%s: %s[%lld] fast %.9g, reference %.9g", op, name,
                          (long long)i, va, vb);
        }
        const double tol = tol_abs + 2.0 * u_out * fmax(fabs(va), fabs(vb)) + 2.0 * u_out * tol_abs;
        if (!(fabs(va - vb) <= tol))
            return tg_fuzz_broken("case", "%s: %s[%lld] fast %.9g, reference %.9g (tolerance %.3g)", op,
                          name, (long long)i, va, vb, tol);
    }
    return 0;
}

/* Both algorithms on a float case; they must agree (see targets.h). */
static int case_differential(const tg_case *c)
{
    const case_size z = size_case(c);
    if (!z.ok)
        return 0;
    tg_st_file *fast = NULL, *ref = NULL;
    char err_fast[512], err_ref[512];
    const int rf = tg_case_run(&fast, c, TG_CONV_ALGO_FAST, err_fast, sizeof err_fast);
    const int rr = tg_case_run(&ref, c, TG_CONV_ALGO_REFERENCE, err_ref, sizeof err_ref);
    int bad = 0;
    if ((rf < 0) != (rr < 0)) {
        bad = tg_fuzz_broken("case", "%s: fast %s (%s), reference %s (%s)", c->op, tg_status_name(rf),
                     rf < 0 ? err_fast : "ok", tg_status_name(rr), rr < 0 ? err_ref : "ok");
    } else if (rf < 0) {
        if (rf != rr)
            bad = tg_fuzz_broken("case", "%s: fast refused with %s, reference with %s", c->op,
                         tg_status_name(rf), tg_status_name(rr));
    } else {
        /* Inputs with NaN, infinities or values too large to bound the
         * rounding by are run (they must not crash) but not compared. */
        const double mx = max_abs(c->x), mw = max_abs(c->weight), mb = max_abs(c->bias),
                     mg = max_abs(c->grad_y), lim = 1e15;
        if (mx < lim && mw < lim && mb < lim && mg < lim) {
            /* The activation's derivative is at most 1.13 (GELU). */
            const double cin_g = (double)(z.c_in / z.groups), cout_g = (double)(z.c_out / z.groups);
            bad = results_agree(fast, ref, "y", fmax(mx * mw, mb), cin_g * z.k_sp + 1, c->op);
            if (!bad)
                bad = results_agree(fast, ref, "grad_x", 1.13 * mg * mw, cout_g * z.k_sp, c->op);
            if (!bad)
                bad = results_agree(fast, ref, "grad_weight", 1.13 * mg * mx,
                                    (double)z.n * (double)(z.x_sp > z.y_sp ? z.x_sp : z.y_sp), c->op);
            if (!bad)
                bad = results_agree(fast, ref, "grad_bias", 1.13 * mg, (double)z.n * z.y_sp, c->op);
        }
    }
    tg_st_free(fast);
    tg_st_free(ref);
    return bad;
}

/* got holds the tensors of want with the same dtypes, shapes and values. */
static int same_results(const tg_st_file *want, const tg_st_file *got, const char *what,
                        const char *op)
{
    for (int i = 0; i < tg_st_count(want); i++) {
        const char *name = NULL;
        tg_tensor *a = NULL;
        tg_st_at(want, i, &name, &a);
        tg_tensor *b = tg_st_get(got, name);
        if (!b || tg_tensor_dtype(a) != tg_tensor_dtype(b) || !tg_tensor_same_shape(a, b))
            return tg_fuzz_broken("case", "%s: %s differs from portable in presence, dtype or shape",
                          op, what);
        for (int64_t e = 0; e < tg_tensor_numel(a); e++) {
            double va = 0.0, vb = 0.0;
            tg_tensor_get_flat(a, e, &va);
            tg_tensor_get_flat(b, e, &vb);
            if (va != vb && !(isnan(va) && isnan(vb)))
                return tg_fuzz_broken("case", "%s: %s[%lld] portable %.9g, %s %.9g", op, name,
                              (long long)e, va, what, vb);
        }
    }
    return 0;
}

/* A quantized case with the portable int8 kernel and with every other one
 * this CPU has (AVX2, VNNI and AMX also with their column-free ConvTranspose
 * forced for any size): the same refusal, or the same values (every kernel computes the
 * same integers and requantizes them the same way). */
static int case_kernels(const tg_case *c)
{
    if (!size_case(c).ok)
        return 0;
    const int64_t phase_default = tg__q_phase_min_positions;
    char err[512];
    tg_st_file *want = NULL;
    tg_int8_kernel_set(TG_INT8_KERNEL_PORTABLE);
    const int rw = tg_case_run(&want, c, TG_CONV_ALGO_DEFAULT, err, sizeof err);
    int bad = rw < 0 && !*err ? tg_fuzz_broken("case", "%s: refused with no message", c->op) : 0;
    static const struct {
        tg_int8_kernel k;
        bool phase_always;
        const char *what;
    } runs[] = {{TG_INT8_KERNEL_AVX2, false, "avx2"},
                {TG_INT8_KERNEL_AVX2, true, "avx2 (column-free forced)"},
                {TG_INT8_KERNEL_VNNI, false, "vnni"},
                {TG_INT8_KERNEL_VNNI, true, "vnni (column-free forced)"},
                {TG_INT8_KERNEL_AMX, false, "amx"},
                {TG_INT8_KERNEL_AMX, true, "amx (column-free forced)"}};
    for (size_t i = 0; !bad && i < sizeof runs / sizeof *runs; i++) {
        if (!tg_int8_kernel_available(runs[i].k))
            continue;
        tg_int8_kernel_set(runs[i].k);
        tg__q_phase_min_positions = runs[i].phase_always ? 1 : phase_default;
        tg_st_file *got = NULL;
        const int rg = tg_case_run(&got, c, TG_CONV_ALGO_DEFAULT, err, sizeof err);
        if (rg != rw)
            bad = tg_fuzz_broken("case", "%s: portable %s, %s %s", c->op, tg_status_name(rw),
                         runs[i].what, tg_status_name(rg));
        else if (rg >= 0)
            bad = same_results(want, got, runs[i].what, c->op);
        tg_st_free(got);
    }
    tg__q_phase_min_positions = phase_default;
    tg_int8_kernel_set(TG_INT8_KERNEL_AUTO);
    tg_st_free(want);
    return bad;
}

int tg_fuzz_case(const uint8_t *data, size_t size)
{
    tg_st_file *f = NULL;
    int rc = tg_safetensors_parse(&f, data, size);
    if (rc < 0)
        return tg_fuzz_refused("case", "tg_safetensors_parse", rc);
    tg_case c;
    char err[512];
    int bad = 0;
    if (tg_case_parse(&c, f, err, sizeof err) >= 0) {
        if (!c.quantized) {
            bad = case_differential(&c);
        } else {
            bad = case_kernels(&c);
        }
    }
    tg_st_free(f);
    return bad;
}
