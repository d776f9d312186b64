/* tools/case.c - parsing conv case files (see case.h); running them is in
 * case_run.c. */
#include "case.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapegrad/autograd.h"
#include "tapegrad/status.h"

/* Larger values would only overflow extent arithmetic further down. */
#define CASE_INT_MAX INT64_C(2147483647)
/* Padding can carry 2N values. */
#define CASE_MAX_VALUES (2 * TG_CONV_MAX_SPATIAL)

static const char *const case_ops[] = {"conv1d", "conv2d", "conv3d",
                                       "conv_transpose1d", "conv_transpose2d",
                                       "conv_transpose3d"};
static const char *const case_keys[] = {"op", "stride", "padding", "output_padding",
                                        "dilation", "groups", "activation", "padding_mode",
                                        "x_scale", "x_zero_point", "weight_scale", "y_scale",
                                        "y_zero_point"};
/* case_keys from here on belong to quantized ops only. */
#define CASE_FIRST_QUANT_KEY 8
static const char *const case_tensors[] = {"x", "weight", "bias", "grad_y"};

int tg_case_fail(char *err, size_t n, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && n > 0)
        vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return status;
}

static bool in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return true;
    return false;
}

/* After item k of the list key="s": skips blanks, then either ends the list
 * (returns 1) or steps *p over the ',' before the next item (returns 0); any
 * other character is an error. */
static int list_next(const char **p, const char *key, const char *s, long long k, char *err,
                     size_t n)
{
    while (isspace((unsigned char)**p))
        (*p)++;
    if (**p == '\0')
        return 1;
    if (**p != ',')
        return tg_case_fail(err, n, TG_EINVAL, "case: %s=\"%s\": unexpected '%c' after item %lld",
                            key, s, **p, k);
    (*p)++;
    return 0;
}

/* Parses "a,b,c" (spaces allowed around items) into v[0..*count), each an
 * integer in [min, CASE_INT_MAX]. */
static int parse_int_list(const char *key, const char *s, int64_t min, int64_t *v,
                          int *count, char *err, size_t n)
{
    int k = 0;
    const char *p = s;
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        char *end;
        errno = 0;
        long long val = strtoll(p, &end, 10);
        if (end == p || (*p != '-' && *p != '+' && !isdigit((unsigned char)*p)))
            return tg_case_fail(err, n, TG_EINVAL, "case: %s=\"%s\": item %d is not an integer",
                                key, s, k);
        if (errno == ERANGE || val > CASE_INT_MAX)
            return tg_case_fail(err, n, TG_EINVAL, "case: %s=\"%s\": item %d is too large (max %"
                                PRId64 ")", key, s, k, CASE_INT_MAX);
        if (val < min)
            return tg_case_fail(err, n, TG_EINVAL, "case: %s=\"%s\": item %d=%lld must be >= %"
                                PRId64, key, s, k, val, min);
        if (k == CASE_MAX_VALUES)
            return tg_case_fail(err, n, TG_EINVAL, "case: %s=\"%s\": too many values", key, s);
        v[k++] = val;
        p = end;
        int rc = list_next(&p, key, s, k - 1, err, n);
        if (rc < 0)
            return rc;
        if (rc > 0)
            break;
    }
    *count = k;
    return TG_OK;
}

/* Reads key as N per-axis values (one value means every axis) into out[0..N).
 * Absent keys leave out untouched (the defaults). */
static int parse_axes(const tg_st_file *f, const char *key, int nsp, int64_t min,
                      int64_t *out, char *err, size_t n)
{
    const char *s = tg_st_meta_get(f, key);
    if (!s)
        return TG_OK;
    int64_t v[CASE_MAX_VALUES];
    int k;
    int rc = parse_int_list(key, s, min, v, &k, err, n);
    if (rc < 0)
        return rc;
    if (k != 1 && k != nsp)
        return tg_case_fail(err, n, TG_EINVAL, "case: %s=\"%s\": expected 1 or %d values, got %d",
                            key, s, nsp, k);
    for (int a = 0; a < nsp; a++)
        out[a] = v[k == 1 ? 0 : a];
    return TG_OK;
}

/* padding: 1 value, N symmetric values or 2N values lo0,hi0,lo1,hi1,... */
static int parse_padding(const tg_st_file *f, int nsp, int64_t pad[][2], char *err,
                         size_t n)
{
    const char *s = tg_st_meta_get(f, "padding");
    if (!s)
        return TG_OK;
    int64_t v[CASE_MAX_VALUES];
    int k;
    int rc = parse_int_list("padding", s, 0, v, &k, err, n);
    if (rc < 0)
        return rc;
    if (k != 1 && k != nsp && k != 2 * nsp)
        return tg_case_fail(err, n, TG_EINVAL,
                            "case: padding=\"%s\": expected 1, %d or %d values, got %d", s, nsp,
                            2 * nsp, k);
    for (int a = 0; a < nsp; a++) {
        if (k == 2 * nsp) {
            pad[a][0] = v[2 * a];
            pad[a][1] = v[2 * a + 1];
        } else {
            pad[a][0] = pad[a][1] = v[k == 1 ? 0 : a];
        }
    }
    return TG_OK;
}

static int parse_groups(const tg_st_file *f, int64_t *groups, char *err, size_t n)
{
    const char *s = tg_st_meta_get(f, "groups");
    if (!s)
        return TG_OK;
    int64_t v[CASE_MAX_VALUES];
    int k;
    int rc = parse_int_list("groups", s, 1, v, &k, err, n);
    if (rc < 0)
        return rc;
    if (k != 1)
        return tg_case_fail(err, n, TG_EINVAL, "case: groups=\"%s\": expected one value, got %d",
                            s, k);
    *groups = v[0];
    return TG_OK;
}

static int parse_activation(const tg_st_file *f, tg_conv_params *p, char *err, size_t n)
{
    const char *s = tg_st_meta_get(f, "activation");
    if (!s)
        return TG_OK;
    if (tg_activation_parse(s, &p->act, &p->act_slope) < 0)
        return tg_case_fail(err, n, TG_EINVAL, "case: activation=\"%s\": %s", s,
                            tg_error_message());
    return TG_OK;
}

/* padding_mode: zeros (the default), reflect, replicate or circular, as
 * PyTorch's Conv takes them. */
static int parse_padding_mode(const tg_st_file *f, tg_conv_params *p, char *err, size_t n)
{
    const char *s = tg_st_meta_get(f, "padding_mode");
    if (!s) return TG_OK;
    static const char *const names[] = {"zeros", "reflect", "replicate", "circular"};
    for (int m = 0; m < 4; m++)
        if (!strcmp(s, names[m])) {
            p->padding_mode = (tg_pad_mode)m;   /* TG_PAD_CONSTANT is zeros */
            return TG_OK;
        }
    return tg_case_fail(err, n, TG_EINVAL, "case: padding_mode=\"%s\" is not one of zeros, "
                        "reflect, replicate, circular", s);
}

static int parse_op(const tg_st_file *f, tg_case *c, char *err, size_t n)
{
    const char *op = tg_st_meta_get(f, "op");
    if (!op)
        return tg_case_fail(err, n, TG_EINVAL, "case: metadata key 'op' is missing");
    static const char qprefix[] = "quantized_";
    const bool quantized = strncmp(op, qprefix, sizeof qprefix - 1) == 0;
    const char *base = quantized ? op + sizeof qprefix - 1 : op;
    size_t nops = sizeof case_ops / sizeof *case_ops;
    for (size_t i = 0; i < nops; i++) {
        if (strcmp(base, case_ops[i]) == 0) {
            c->op = op;
            c->quantized = quantized;
            c->transpose = i >= 3;
            c->nspatial = (int)(i % 3) + 1;
            return TG_OK;
        }
    }
    return tg_case_fail(err, n, TG_EINVAL, "case: op=\"%s\" is not one of conv1d, conv2d, conv3d, "
                        "conv_transpose1d, conv_transpose2d, conv_transpose3d (or one of them "
                        "prefixed by quantized_)", op);
}

/* Unknown metadata keys and tensor names are errors: a typo ("strides")
 * would otherwise silently run with the default. */
static int check_names(const tg_st_file *f, char *err, size_t n)
{
    int nm = tg_st_meta_count(f);
    for (int i = 0; i < nm; i++) {
        const char *key, *value;
        if (tg_st_meta_at(f, i, &key, &value) < 0)
            return tg_case_fail(err, n, TG_EFORMAT, "case: %s", tg_error_message());
        if (!in_list(key, case_keys, sizeof case_keys / sizeof *case_keys))
            return tg_case_fail(err, n, TG_EINVAL, "case: unknown metadata key '%s' (expected op, "
                                "stride, padding, output_padding, dilation, groups, activation, "
                                "padding_mode; "
                                "quantized ops also x_scale, x_zero_point, weight_scale, y_scale, "
                                "y_zero_point)", key);
    }
    int nt = tg_st_count(f);
    for (int i = 0; i < nt; i++) {
        const char *name;
        tg_tensor *t;
        if (tg_st_at(f, i, &name, &t) < 0)
            return tg_case_fail(err, n, TG_EFORMAT, "case: %s", tg_error_message());
        if (!in_list(name, case_tensors, sizeof case_tensors / sizeof *case_tensors))
            return tg_case_fail(err, n, TG_EINVAL, "case: unknown tensor '%s' (expected x, weight, "
                                "bias, grad_y)", name);
    }
    return TG_OK;
}

static int parse_tensors(const tg_st_file *f, tg_case *c, char *err, size_t n)
{
    c->x = tg_st_get(f, "x");
    c->weight = tg_st_get(f, "weight");
    c->bias = tg_st_get(f, "bias");
    c->grad_y = tg_st_get(f, "grad_y");
    if (!c->x || !c->weight)
        return tg_case_fail(err, n, TG_EINVAL, "case: tensor '%s' is missing",
                            c->x ? "weight" : "x");
    int want = c->nspatial + 2;
    if (tg_tensor_ndim(c->x) != want || tg_tensor_ndim(c->weight) != want)
        return tg_case_fail(err, n, TG_ESHAPE, "case: %s needs x and weight with %d dims, got %d "
                            "and %d", c->op, want, tg_tensor_ndim(c->x),
                            tg_tensor_ndim(c->weight));
    return TG_OK;
}

/* ---- quantized cases ---- */

/* Parses "a,b,c" into finite doubles > 0: v[0..*count), at most max. */
static int parse_scale_list(const char *key, const char *s, double *v, int64_t max,
                            int64_t *count, char *err, size_t n)
{
    int64_t k = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        double d = strtod(p, &end);
        if (end == p || errno == ERANGE || !isfinite(d) || d <= 0)
            return tg_case_fail(err, n, TG_EINVAL, "case: %s=\"%s\": item %lld is not a finite "
                                "number > 0", key, s, (long long)k);
        if (k == max)
            return tg_case_fail(err, n, TG_EINVAL, "case: %s=\"%s\": more than %lld values", key, s,
                                (long long)max);
        v[k++] = d;
        p = end;
        int rc = list_next(&p, key, s, k - 1, err, n);
        if (rc < 0)
            return rc;
        if (rc > 0)
            break;
    }
    *count = k;
    return TG_OK;
}

static int parse_one_scale(const tg_st_file *f, const char *key, double *v, char *err,
                           size_t n)
{
    const char *s = tg_st_meta_get(f, key);
    if (!s)
        return tg_case_fail(err, n, TG_EINVAL, "case: quantized ops need metadata key '%s'", key);
    int64_t k;
    return parse_scale_list(key, s, v, 1, &k, err, n);
}

static int parse_zero_point(const tg_st_file *f, const char *key, tg_dtype dt, int32_t *zp,
                            char *err, size_t n)
{
    const char *s = tg_st_meta_get(f, key);
    if (!s)
        return TG_OK;
    int64_t v[CASE_MAX_VALUES];
    int k;
    int64_t lo = dt == TG_U8 ? 0 : -128, hi = dt == TG_U8 ? 255 : 127;
    int rc = parse_int_list(key, s, lo, v, &k, err, n);
    if (rc < 0)
        return rc;
    if (k != 1 || v[0] > hi)
        return tg_case_fail(err, n, TG_EINVAL, "case: %s=\"%s\": expected one int in [%lld, %lld]",
                            key, s, (long long)lo, (long long)hi);
    *zp = (int32_t)v[0];
    return TG_OK;
}

/* Quantization metadata of a quantized case; for a float case, its keys
 * are errors. */
static int parse_quant(const tg_st_file *f, tg_case *c, char *err, size_t n)
{
    if (!c->quantized) {
        size_t nk = sizeof case_keys / sizeof *case_keys;
        for (size_t i = CASE_FIRST_QUANT_KEY; i < nk; i++)
            if (tg_st_meta_get(f, case_keys[i]))
                return tg_case_fail(err, n, TG_EINVAL, "case: metadata key '%s' is only for "
                                    "quantized ops", case_keys[i]);
        return TG_OK;
    }
    tg_dtype dt = tg_tensor_dtype(c->x);
    if (dt != TG_U8 && dt != TG_I8)
        return tg_case_fail(err, n, TG_EDTYPE, "case: %s needs x of dtype U8 or I8, got %s", c->op,
                            tg_dtype_name(dt));
    if (c->grad_y)
        return tg_case_fail(err, n, TG_EINVAL, "case: %s is not differentiable: remove grad_y",
                            c->op);
    int rc = parse_one_scale(f, "x_scale", &c->q.x_scale, err, n);
    if (rc >= 0)
        rc = parse_one_scale(f, "y_scale", &c->q.y_scale, err, n);
    if (rc >= 0)
        rc = parse_zero_point(f, "x_zero_point", dt, &c->q.x_zero_point, err, n);
    if (rc >= 0)
        rc = parse_zero_point(f, "y_zero_point", dt, &c->q.y_zero_point, err, n);
    const char *ws = tg_st_meta_get(f, "weight_scale");
    if (rc >= 0 && !ws)
        rc = tg_case_fail(err, n, TG_EINVAL,
                          "case: quantized ops need metadata key 'weight_scale'");
    if (rc >= 0)
        rc = parse_scale_list("weight_scale", ws, c->weight_scales, TG_CASE_MAX_CHANNELS,
                              &c->q.n_weight_scales, err, n);
    c->q.weight_scales = c->weight_scales;
    return rc;
}

int tg_case_parse(tg_case *out, const tg_st_file *f, char *err, size_t errlen)
{
    if (!out || !f)
        return tg_case_fail(err, errlen, TG_EINVAL, "case: NULL argument");
    tg_case c = {.params = TG_CONV_PARAMS_INIT};
    int rc = check_names(f, err, errlen);
    if (rc >= 0)
        rc = parse_op(f, &c, err, errlen);
    if (rc >= 0)
        rc = parse_tensors(f, &c, err, errlen);
    int nsp = c.nspatial;
    if (rc >= 0)
        rc = parse_axes(f, "stride", nsp, 1, c.params.stride, err, errlen);
    if (rc >= 0)
        rc = parse_axes(f, "dilation", nsp, 1, c.params.dilation, err, errlen);
    if (rc >= 0)
        rc = parse_axes(f, "output_padding", nsp, 0, c.params.output_padding, err, errlen);
    if (rc >= 0)
        rc = parse_padding(f, nsp, c.params.padding, err, errlen);
    if (rc >= 0)
        rc = parse_groups(f, &c.params.groups, err, errlen);
    if (rc >= 0)
        rc = parse_activation(f, &c.params, err, errlen);
    if (rc >= 0)
        rc = parse_padding_mode(f, &c.params, err, errlen);
    if (rc >= 0)
        rc = parse_quant(f, &c, err, errlen);
    if (rc >= 0 && !c.transpose) {
        for (int a = 0; a < nsp; a++)
            if (c.params.output_padding[a] != 0)
                return tg_case_fail(err, errlen, TG_EINVAL, "case: output_padding=\"%s\" is only "
                                    "allowed for conv_transpose ops",
                                    tg_st_meta_get(f, "output_padding"));
    }
    if (rc < 0)
        return rc;
    *out = c;
    out->q.weight_scales = out->weight_scales;
    return TG_OK;
}
