/* src/nn/clip_grad.c - torch.nn.utils.clip_grad_norm_ and clip_grad_value_
 * (tapegrad/optim.h).
 *
 * clip_grad_norm, as PyTorch 1.13 computes it:
 *   n_i   = ||g_i||_p                  in g_i's dtype,
 *   total = ||(n_1, ..., n_k)||_p      in the promoted dtype R of the g_i
 *                                      (p = inf: the largest |g| element),
 *   coef  = min(max_norm / (total + 1e-6), 1)   in R,
 *   g_i  *= coef                       in g_i's dtype (coef rounded to it),
 *                                      every gradient, also when coef is 1.
 * Sums run in f64 and each result is rounded to the dtype PyTorch holds it
 * in, so an f32 total differs from PyTorch's only by its summation order. */
#include <math.h>

#include "core/core.h"
#include "tapegrad/optim.h"

/* PyTorch's promotion among float dtypes: the wider; f16 with bf16 is f32. */
static tg_dtype promote(tg_dtype a, tg_dtype b)
{
    if (a == b) return a;
    if (a == TG_F64 || b == TG_F64) return TG_F64;
    return TG_F32;
}

/* The p-norm of g's elements (p = INFINITY: the largest magnitude), in f64;
 * NaN when an element is NaN, as torch.norm. */
static int grad_norm(const tg_tensor *g, double p, double *out)
{
    const int64_t n = tg__numel(g->ndim, g->shape);
    const tg_dtype cdt = tg__compute_dtype(g->dtype);
    const bool direct = g->dtype == cdt && tg_tensor_is_contiguous(g);
    void *buf = direct ? tg_tensor_data((tg_tensor *)g)
                       : tg__work_alloc((size_t)(n ? n : 1) * tg_dtype_size(cdt));
    if (!buf) return TG_ENOMEM;
    if (!direct) tg__gather(g, cdt, buf);
    double acc = 0.0;
    bool nan = false;
    for (int64_t i = 0; i < n; i++) {
        const double a = fabs(cdt == TG_F64 ? ((const double *)buf)[i]
                                            : (double)((const float *)buf)[i]);
        nan |= isnan(a);
        if (isinf(p)) acc = a > acc ? a : acc;
        else if (p == 2.0) acc += a * a;
        else if (p == 1.0) acc += a;
        else acc += pow(a, p);
    }
    if (!direct) tg__work_free(buf);
    if (nan) acc = NAN;
    else if (!isinf(p) && p != 1.0) acc = p == 2.0 ? sqrt(acc) : pow(acc, 1.0 / p);
    *out = acc;
    return TG_OK;
}

/* What scale_or_clamp does to each element. */
typedef struct clip_op {
    double c;
    bool clamp;
} clip_op;

static void clip_elems(tg_dtype cdt, void *buf, int64_t n, void *user)
{
    const clip_op *op = user;
    const double c = op->c;
    const bool clamp = op->clamp;
    if (cdt == TG_F64) {
        double *d = buf;
        for (int64_t i = 0; i < n; i++)
            d[i] = clamp ? (d[i] < -c ? -c : d[i] > c ? c : d[i]) : d[i] * c;   /* NaN stays */
    } else {
        float *f = buf, cf = (float)c;
        for (int64_t i = 0; i < n; i++)
            f[i] = clamp ? (f[i] < -cf ? -cf : f[i] > cf ? cf : f[i]) : f[i] * cf;
    }
}

/* g *= c (or g = clamp(g, -c, c)) in g's compute dtype, rounded once. */
static int scale_or_clamp(tg_tensor *g, double c, bool clamp)
{
    clip_op op = {c, clamp};
    return tg__update_in_compute_dtype(g, clip_elems, &op);
}

int tg_clip_grad_norm(double *total_norm, int n, tg_tensor *const *params, double max_norm,
                      double norm_type, bool error_if_nonfinite)
{
    static const char fn[] = "clip_grad_norm";
    TG_TRY(tg__check_param_list(fn, n, params, true));
    TG_CHECK(max_norm >= 0.0, TG_EINVAL, "%s: max_norm=%g must be >= 0", fn, max_norm);
    TG_CHECK(norm_type > 0.0, TG_EINVAL,
             "%s: norm_type=%g must be > 0 (INFINITY for the largest magnitude)", fn, norm_type);
    const bool inf = isinf(norm_type);
    double total = 0.0;
    tg_dtype rd = TG_F32;   /* PyTorch's 0-d result when there is no gradient */
    bool any = false;
    for (int i = 0; i < n; i++) {
        const tg_tensor *g = params[i]->grad;
        if (!g) continue;
        double ni;
        TG_TRY(grad_norm(g, norm_type, &ni));
        ni = tg__round_to(g->dtype, ni);
        rd = any ? promote(rd, g->dtype) : g->dtype;
        any = true;
        if (isnan(ni) || isnan(total)) total = NAN;
        else if (inf) total = ni > total ? ni : total;
        else total += norm_type == 2.0 ? ni * ni : pow(ni, norm_type);
    }
    if (!inf && !isnan(total)) total = norm_type == 2.0 ? sqrt(total) : pow(total, 1.0 / norm_type);
    total = tg__round_to(rd, total);
    if (total_norm) *total_norm = total;
    if (!any) return TG_OK;
    TG_CHECK(!error_if_nonfinite || isfinite(total), TG_EINVAL,
             "%s: the total norm of order %g of the gradients is %g: set error_if_nonfinite "
             "false to scale them anyway", fn, norm_type, total);
    /* coef = min(max_norm / (total + 1e-6), 1), each step rounded to rd */
    double coef = tg__round_to(rd, max_norm / tg__round_to(rd, total + 1e-6));
    if (coef > 1.0) coef = 1.0;
    for (int i = 0; i < n; i++) {   /* the factor in the gradient's dtype, as mul_'s */
        tg_tensor *g = params[i]->grad;
        if (g) TG_TRY(scale_or_clamp(g, tg__round_to(g->dtype, coef), false));
    }
    return TG_OK;
}

int tg_clip_grad_value(int n, tg_tensor *const *params, double clip_value)
{
    static const char fn[] = "clip_grad_value";
    TG_TRY(tg__check_param_list(fn, n, params, true));
    TG_CHECK(clip_value >= 0.0, TG_EINVAL, "%s: clip_value=%g must be >= 0", fn, clip_value);
    for (int i = 0; i < n; i++)
        if (params[i]->grad) TG_TRY(scale_or_clamp(params[i]->grad, clip_value, true));
    return TG_OK;
}
