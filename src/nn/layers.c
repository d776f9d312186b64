/* src/nn/layers.c - Linear, ConvNd, ConvTransposeNd and Sequential, plus the
 * initialisers shared by them (torch's defaults and DCGAN's normal init). */
#include <math.h>
#include <string.h>

#include "nn/module_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"

int tg__nn_init_uniform_fan_in(tg_tensor *w, tg_tensor *b, int64_t fan_in, tg_rng *rng)
{
    /* kaiming_uniform_(a=sqrt(5)): gain = sqrt(2 / (1 + a^2)) = sqrt(1/3),
     * bound = sqrt(3) * gain / sqrt(fan_in) = 1 / sqrt(fan_in); torch draws
     * the bias from the same interval. */
    double bound = 1.0 / sqrt((double)fan_in);
    TG_TRY(tg_tensor_rand_uniform(w, rng, -bound, bound));
    if (b) TG_TRY(tg_tensor_rand_uniform(b, rng, -bound, bound));
    return TG_OK;
}

/* A module with a weight of shape wshape and (if bias) a bias of n_bias
 * elements, both drawn with fan_in.  On error *out is untouched. */
static int tg__weighted_new(tg_module **out, const tg_module_vtable *vt, void *state, int wndim,
                            const int64_t *wshape, bool bias, int64_t n_bias, int64_t fan_in,
                            tg_rng *rng)
{
    tg_module *m = NULL;
    int rc = tg_module_new(&m, vt, state);
    if (rc < 0) {
        free(state);
        return rc;
    }
    tg_tensor *w = NULL, *b = NULL;
    rc = tg__nn_add_param_zeros(m, "weight", wndim, wshape, &w);
    if (rc == TG_OK && bias) rc = tg__nn_add_param_zeros(m, "bias", 1, &n_bias, &b);
    if (rc == TG_OK) rc = tg__nn_init_uniform_fan_in(w, b, fan_in, rng);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

typedef struct tg__conv_state {    /* the state of Conv and ConvTranspose modules */
    tg_conv_params p;
} tg__conv_state;

/* ---- Linear ---- */

/* y = op(x, weight, bias) of a Linear or Conv/ConvTranspose module m, with
 * the weights tg__module_weight gives (the module's own, or their casts to
 * the autocast dtype). */
static int tg__weighted_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    tg_tensor *w = NULL, *b = NULL;
    int rc = tg__module_weight(m, tg__module_local(m, "weight"), &w);
    if (rc == TG_OK) rc = tg__module_weight(m, tg__module_local(m, "bias"), &b);
    if (rc == TG_OK) {
        if (m->vt == &tg__nn_linear_vt) {
            rc = tg_linear(y, x, w, b);
        } else {
            const tg_conv_params *p = &((const tg__conv_state *)m->state)->p;
            rc = m->vt == &tg__nn_conv_transpose_vt ? tg_conv_transpose(y, x, w, b, p)
                                                    : tg_conv(y, x, w, b, p);
        }
    }
    tg_tensor_release(b);
    tg_tensor_release(w);
    return rc;
}

const tg_module_vtable tg__nn_linear_vt = {.type_name = "Linear", .forward = tg__weighted_forward};

int tg_nn_linear_new(tg_module **out, int64_t in_f, int64_t out_f, bool bias, tg_rng *rng)
{
    TG_CHECK(out != NULL && rng != NULL, TG_EINVAL, "nn_linear_new: out and rng must not be NULL");
    TG_CHECK(in_f > 0 && out_f > 0, TG_EINVAL,
             "nn_linear_new: in_f=%lld and out_f=%lld must be > 0", (long long)in_f,
             (long long)out_f);
    int64_t ws[2] = {out_f, in_f};
    return tg__weighted_new(out, &tg__nn_linear_vt, NULL, 2, ws, bias, out_f, in_f, rng);
}

/* ---- ConvNd / ConvTransposeNd ---- */

const tg_module_vtable tg__nn_conv_vt = {
    .type_name = "Conv", .forward = tg__weighted_forward, .release = free,
    .state_size = sizeof(tg__conv_state)};
const tg_module_vtable tg__nn_conv_transpose_vt = {
    .type_name = "ConvTranspose", .forward = tg__weighted_forward, .release = free,
    .state_size = sizeof(tg__conv_state)};

int tg_nn_conv_params(const tg_module *m, tg_conv_params *p)
{
    TG_CHECK(m && p, TG_EINVAL, "nn_conv_params: m and p must not be NULL");
    TG_CHECK(m->vt == &tg__nn_conv_vt || m->vt == &tg__nn_conv_transpose_vt, TG_EINVAL,
             "nn_conv_params: m is a %s module, not Conv or ConvTranspose",
             tg_module_type_name(m));
    *p = ((const tg__conv_state *)m->state)->p;
    return TG_OK;
}

static int tg__conv_module_new(tg_module **out, bool transpose, int nspatial, int64_t c_in,
                               int64_t c_out, const int64_t *kernel, const tg_conv_params *p,
                               bool bias, tg_rng *rng)
{
    const char *op = transpose ? "nn_conv_transpose_new" : "nn_conv_new";
    TG_CHECK(out != NULL && kernel != NULL && rng != NULL, TG_EINVAL,
             "%s: out, kernel and rng must not be NULL", op);
    TG_CHECK(nspatial >= 1 && nspatial <= TG_CONV_MAX_SPATIAL, TG_EINVAL,
             "%s: nspatial=%d must be 1, 2 or 3", op, nspatial);
    tg_conv_params prm = TG_CONV_PARAMS_INIT;
    if (p) prm = *p;
    TG_CHECK(c_in > 0 && c_out > 0 && prm.groups > 0 && c_in % prm.groups == 0 &&
                 c_out % prm.groups == 0,
             TG_EINVAL, "%s: c_in=%lld and c_out=%lld must be > 0 and divisible by groups=%lld",
             op, (long long)c_in, (long long)c_out, (long long)prm.groups);
    /* as torch: the mode is known at construction; ConvTranspose pads with zeros */
    TG_CHECK(prm.padding_mode >= TG_PAD_CONSTANT && prm.padding_mode <= TG_PAD_CIRCULAR &&
                 (!transpose || prm.padding_mode == TG_PAD_CONSTANT),
             TG_EINVAL, "%s: padding_mode=%d must be %s", op, (int)prm.padding_mode,
             transpose ? "TG_PAD_CONSTANT (zeros), as PyTorch's ConvTranspose"
                       : "a tg_pad_mode");
    /* weight is (C_out, C_in/g, K...) for Conv, (C_in, C_out/g, K...) for
     * ConvTranspose; torch's fan_in is shape[1] * prod(K) either way. */
    int64_t ws[2 + TG_CONV_MAX_SPATIAL];
    ws[0] = transpose ? c_in : c_out;
    ws[1] = (transpose ? c_out : c_in) / prm.groups;
    int64_t fan_in = ws[1];
    for (int i = 0; i < nspatial; i++) {
        TG_CHECK(kernel[i] > 0, TG_EINVAL, "%s: kernel[%d]=%lld must be > 0", op, i,
                 (long long)kernel[i]);
        ws[2 + i] = kernel[i];
        fan_in *= kernel[i];
    }
    tg__conv_state *s = tg__malloc(sizeof *s);
    if (!s) return TG_ENOMEM;
    s->p = prm;
    return tg__weighted_new(out, transpose ? &tg__nn_conv_transpose_vt : &tg__nn_conv_vt, s,
                            2 + nspatial, ws, bias, c_out, fan_in, rng);
}

int tg_nn_conv_new(tg_module **out, int nspatial, int64_t c_in, int64_t c_out,
                   const int64_t *kernel, const tg_conv_params *p, bool bias, tg_rng *rng)
{
    return tg__conv_module_new(out, false, nspatial, c_in, c_out, kernel, p, bias, rng);
}

int tg_nn_conv_transpose_new(tg_module **out, int nspatial, int64_t c_in, int64_t c_out,
                             const int64_t *kernel, const tg_conv_params *p, bool bias,
                             tg_rng *rng)
{
    return tg__conv_module_new(out, true, nspatial, c_in, c_out, kernel, p, bias, rng);
}

/* ---- Sequential ---- */

/* A child's failure, its message led by the child's path and type: "in
 * 1 (Linear): linear: ...", and "in enc.1 (Linear): ..." once the
 * Sequential that holds this one adds its own name. */
static int child_failed(const tg_module *child, const char *name, int rc)
{
    char msg[512], inner[256];
    snprintf(msg, sizeof msg, "%s", tg_error_message());
    int n = 0;
    if (sscanf(msg, "in %255s (%n", inner, &n) == 1 && n > 0)   /* a nested Sequential's */
        return tg__error(rc, "in %s.%s", name, msg + 3);
    return tg__error(rc, "in %s (%s): %s", name, tg_module_type_name(child),
                     msg[0] ? msg : tg_status_message(rc));
}

/* cur[0..n): the values flowing from one child to the next; a child gives
 * all its outputs to the next when that one takes as many inputs. */
static int tg__sequential_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    tg_tensor *cur[TG_MODULE_MAX_OUTPUTS] = {tg_tensor_retain(x)};
    int n = 1;
    for (int i = 0; i < m->n_children; i++) {
        tg_module *c = m->children[i].m;
        const tg_module *after = i + 1 < m->n_children ? m->children[i + 1].m : NULL;
        const int k = tg_module_output_count(c);
        const bool all = k > 1 && after && after->vt->n_inputs == k;
        tg_tensor *next[TG_MODULE_MAX_OUTPUTS] = {NULL};
        int rc = all      ? tg_module_forward_outputs(c, next, n, cur)
                 : n == 1 ? tg_module_forward(c, next, cur[0])
                          : tg_module_forward_n(c, next, n, cur);
        for (int j = 0; j < n; j++) tg_tensor_release(cur[j]);
        if (rc < 0) return child_failed(c, m->children[i].name, rc);
        n = all ? k : 1;
        memcpy(cur, next, sizeof cur);
    }
    *y = cur[0];
    return TG_OK;
}

static const tg_module_vtable tg__nn_sequential_vt = {
    .type_name = "Sequential", .forward = tg__sequential_forward};

int tg_nn_sequential_new(tg_module **out)
{
    TG_CHECK(out != NULL, TG_EINVAL, "nn_sequential_new: out must not be NULL");
    return tg_module_new(out, &tg__nn_sequential_vt, NULL);
}

int tg_nn_sequential_append(tg_module *seq, tg_module *child)
{
    if (!seq || seq->vt != &tg__nn_sequential_vt) {
        tg_module_release(child);
        return tg__error(TG_EINVAL, "nn_sequential_append: seq must be a Sequential");
    }
    char name[24];
    snprintf(name, sizeof name, "%d", seq->n_children);
    return tg__module_add_child_as("nn_sequential_append", seq, name, child);
}

/* ---- DCGAN init ---- */

typedef struct tg__init_normal {
    double mean, std;
    tg_rng *rng;
} tg__init_normal;

static int tg__init_normal_visit(tg_module *m, void *user)
{
    const tg__init_normal *a = user;
    tg_tensor *w = tg__module_local(m, "weight"), *b = tg__module_local(m, "bias");
    if (m->vt == &tg__nn_linear_vt || m->vt == &tg__nn_conv_vt ||
        m->vt == &tg__nn_conv_transpose_vt)
        return tg_tensor_rand_normal(w, a->rng, a->mean, a->std);
    if (m->vt == &tg__nn_batchnorm_vt && w) {
        TG_TRY(tg_tensor_rand_normal(w, a->rng, 1.0, a->std));
        return tg_tensor_fill(b, 0.0);
    }
    return TG_OK;
}

int tg_nn_init_normal(tg_module *m, double mean, double std, tg_rng *rng)
{
    TG_CHECK(m != NULL && rng != NULL, TG_EINVAL, "nn_init_normal: m and rng must not be NULL");
    TG_CHECK(isfinite(mean) && isfinite(std) && std >= 0, TG_EINVAL,
             "nn_init_normal: mean=%g, std=%g must be finite with std >= 0", mean, std);
    tg__init_normal a = {mean, std, rng};
    return tg__module_visit(m, tg__init_normal_visit, &a);
}
