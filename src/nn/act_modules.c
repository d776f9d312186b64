/* src/nn/act_modules.c - modules that call one functional op with numbers
 * fixed at construction and hold no tensors: nn.Softplus(beta, threshold),
 * nn.LogSigmoid, nn.Softmax(dim), nn.LogSoftmax(dim), nn.Identity, nn.SELU,
 * nn.CELU(alpha), nn.Hardshrink(lambd), nn.Softshrink(lambd),
 * nn.Threshold(threshold, value), nn.GLU(dim), nn.Softsign, nn.Tanhshrink,
 * nn.Softmin(dim) and nn.Softmax2d.
 *
 * Each kind is a row of act_vts: torch's class name (the module's type
 * name) and a forward of one line that calls the op with the module's
 * act_args.  The state is those flat numbers, so tg_module_copy copies it
 * bytewise and tg_module_to_dtype has nothing to convert.  Another such
 * module is an enum value, a forward, a row, and a constructor and reader
 * of a few lines over act_new and act_args_of, which check the out-pointer
 * and the module's kind. */
#include <math.h>

#include "nn/module_internal.h"
#include "tapegrad/ops.h"

/* A module's numbers; each forward says which ones it reads. */
typedef struct act_args {
    double a, b;   /* Softplus: beta, threshold; CELU: alpha; the shrinks: lambd;
                      Threshold: threshold, value */
    int dim;       /* Softmax, LogSoftmax, Softmin, GLU */
} act_args;

static const act_args *args(const tg_module *m) { return m->state; }

static int softplus_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_softplus(y, x, args(m)->a, args(m)->b);
}

static int logsigmoid_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    return tg_logsigmoid(y, x);
}

static int softmax_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_softmax(y, x, args(m)->dim);
}

static int log_softmax_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_log_softmax(y, x, args(m)->dim);
}

/* torch's nn.Identity returns its input itself */
static int identity_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    *y = tg_tensor_retain(x);
    return TG_OK;
}

static int selu_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    return tg_selu(y, x);
}

static int celu_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_celu(y, x, args(m)->a);
}

static int hardshrink_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_hardshrink(y, x, args(m)->a);
}

static int softshrink_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_softshrink(y, x, args(m)->a);
}

static int threshold_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_threshold(y, x, args(m)->a, args(m)->b);
}

static int glu_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_glu(y, x, args(m)->dim);
}

static int softsign_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    return tg_softsign(y, x);
}

static int tanhshrink_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    return tg_tanhshrink(y, x);
}

static int softmin_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_softmin(y, x, args(m)->dim);
}

/* torch's Softmax2d: softmax over the channels of a (C, H, W) or
 * (N, C, H, W) input, dim -3; other ranks refused, in its words. */
static int softmax2d_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    TG_CHECK(x != NULL, TG_EINVAL, "Softmax2d: x must not be NULL");
    TG_CHECK(tg_tensor_ndim(x) == 3 || tg_tensor_ndim(x) == 4, TG_ESHAPE,
             "Softmax2d: expected input to be 3D or 4D, got %dD instead", tg_tensor_ndim(x));
    return tg_softmax(y, x, args(m)->dim);
}

typedef enum act_kind {
    ACT_SOFTPLUS,
    ACT_LOGSIGMOID,
    ACT_SOFTMAX,
    ACT_LOG_SOFTMAX,
    ACT_IDENTITY,
    ACT_SELU,
    ACT_CELU,
    ACT_HARDSHRINK,
    ACT_SOFTSHRINK,
    ACT_THRESHOLD,
    ACT_GLU,
    ACT_SOFTSIGN,
    ACT_TANHSHRINK,
    ACT_SOFTMIN,
    ACT_SOFTMAX2D,
    ACT_KINDS
} act_kind;

#define ACT_ROW(name, fwd)                                                                     \
    {.type_name = (name), .forward = (fwd), .release = free, .state_size = sizeof(act_args)}

static const tg_module_vtable act_vts[] = {
    [ACT_SOFTPLUS] = ACT_ROW("Softplus", softplus_forward),
    [ACT_LOGSIGMOID] = ACT_ROW("LogSigmoid", logsigmoid_forward),
    [ACT_SOFTMAX] = ACT_ROW("Softmax", softmax_forward),
    [ACT_LOG_SOFTMAX] = ACT_ROW("LogSoftmax", log_softmax_forward),
    [ACT_IDENTITY] = ACT_ROW("Identity", identity_forward),
    [ACT_SELU] = ACT_ROW("SELU", selu_forward),
    [ACT_CELU] = ACT_ROW("CELU", celu_forward),
    [ACT_HARDSHRINK] = ACT_ROW("Hardshrink", hardshrink_forward),
    [ACT_SOFTSHRINK] = ACT_ROW("Softshrink", softshrink_forward),
    [ACT_THRESHOLD] = ACT_ROW("Threshold", threshold_forward),
    [ACT_GLU] = ACT_ROW("GLU", glu_forward),
    [ACT_SOFTSIGN] = ACT_ROW("Softsign", softsign_forward),
    [ACT_TANHSHRINK] = ACT_ROW("Tanhshrink", tanhshrink_forward),
    [ACT_SOFTMIN] = ACT_ROW("Softmin", softmin_forward),
    [ACT_SOFTMAX2D] = ACT_ROW("Softmax2d", softmax2d_forward),
};
_Static_assert(sizeof act_vts / sizeof *act_vts == ACT_KINDS, "a row for every act_kind");

/* A new module of kind k holding a (copied); fn names the constructor. */
static int act_new(tg_module **out, act_kind k, act_args a, const char *fn)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", fn);
    return tg__module_new_state(out, &act_vts[k], &a);
}

/* m's numbers in *a when m is of one of the kinds in the bit set `kinds`
 * (1 << kind); else TG_EINVAL naming fn and the kinds wanted (`want`). */
static int act_args_of(const tg_module *m, unsigned kinds, const act_args **a, const char *fn,
                       const char *want)
{
    TG_CHECK(m != NULL, TG_EINVAL, "%s: m must not be NULL", fn);
    for (int k = 0; k < ACT_KINDS; k++) {
        if ((kinds >> k & 1u) && m->vt == &act_vts[k]) {
            *a = args(m);
            return TG_OK;
        }
    }
    return tg__error(TG_EINVAL, "%s: m is a %s module, not %s", fn, tg_module_type_name(m),
                     want);
}

/* ---- the constructors and readers ---- */

int tg_nn_softplus_new(tg_module **out, double beta, double threshold)
{
    const char *fn = "nn_softplus_new";
    TG_CHECK(isfinite(beta) && beta > 0, TG_EINVAL, "%s: beta=%g must be finite and > 0", fn,
             beta);
    TG_CHECK(!isnan(threshold), TG_EINVAL, "%s: threshold must not be NaN", fn);
    return act_new(out, ACT_SOFTPLUS, (act_args){.a = beta, .b = threshold}, fn);
}

int tg_nn_softplus_params(const tg_module *m, double *beta, double *threshold)
{
    const act_args *a = NULL;
    TG_TRY(act_args_of(m, 1u << ACT_SOFTPLUS, &a, "nn_softplus_params", "Softplus"));
    if (beta) *beta = a->a;
    if (threshold) *threshold = a->b;
    return TG_OK;
}

int tg_nn_logsigmoid_new(tg_module **out)
{
    return act_new(out, ACT_LOGSIGMOID, (act_args){0}, "nn_logsigmoid_new");
}

/* dims count from the end when negative; the input's rank is checked by
 * the op at each forward. */
static int dim_module_new(tg_module **out, act_kind k, int dim, const char *fn)
{
    TG_CHECK(dim >= -TG_MAX_DIMS && dim < TG_MAX_DIMS, TG_EINVAL,
             "%s: dim=%d must be in [%d, %d]", fn, dim, -TG_MAX_DIMS, TG_MAX_DIMS - 1);
    return act_new(out, k, (act_args){.dim = dim}, fn);
}

int tg_nn_softmax_new(tg_module **out, int dim)
{
    return dim_module_new(out, ACT_SOFTMAX, dim, "nn_softmax_new");
}

int tg_nn_log_softmax_new(tg_module **out, int dim)
{
    return dim_module_new(out, ACT_LOG_SOFTMAX, dim, "nn_log_softmax_new");
}

int tg_nn_softmax2d_new(tg_module **out)
{
    return act_new(out, ACT_SOFTMAX2D, (act_args){.dim = -3}, "nn_softmax2d_new");
}

int tg_nn_identity_new(tg_module **out)
{
    return act_new(out, ACT_IDENTITY, (act_args){0}, "nn_identity_new");
}

int tg_nn_selu_new(tg_module **out)
{
    return act_new(out, ACT_SELU, (act_args){0}, "nn_selu_new");
}

/* The refusals are tg_celu's, tg_hardshrink's and tg_softshrink's, made at
 * construction instead of at each forward. */
int tg_nn_celu_new(tg_module **out, double alpha)
{
    const char *fn = "nn_celu_new";
    TG_CHECK(isfinite(alpha) && alpha != 0, TG_EINVAL, "%s: alpha=%g must be finite and not 0",
             fn, alpha);
    return act_new(out, ACT_CELU, (act_args){.a = alpha}, fn);
}

int tg_nn_hardshrink_new(tg_module **out, double lambd)
{
    const char *fn = "nn_hardshrink_new";
    TG_CHECK(!isnan(lambd), TG_EINVAL, "%s: lambd must not be NaN", fn);
    return act_new(out, ACT_HARDSHRINK, (act_args){.a = lambd}, fn);
}

int tg_nn_softshrink_new(tg_module **out, double lambd)
{
    const char *fn = "nn_softshrink_new";
    TG_CHECK(lambd >= 0, TG_EINVAL, "%s: lambd=%g must be >= 0", fn, lambd);
    return act_new(out, ACT_SOFTSHRINK, (act_args){.a = lambd}, fn);
}

/* Any numbers: what tg_threshold refuses depends on x's dtype (a NaN
 * threshold or a value outside an integer x's range), so it is refused at
 * the forward. */
int tg_nn_threshold_new(tg_module **out, double threshold, double value)
{
    return act_new(out, ACT_THRESHOLD, (act_args){.a = threshold, .b = value},
                   "nn_threshold_new");
}

int tg_nn_glu_new(tg_module **out, int dim)
{
    return dim_module_new(out, ACT_GLU, dim, "nn_glu_new");
}

int tg_nn_softsign_new(tg_module **out)
{
    return act_new(out, ACT_SOFTSIGN, (act_args){0}, "nn_softsign_new");
}

int tg_nn_tanhshrink_new(tg_module **out)
{
    return act_new(out, ACT_TANHSHRINK, (act_args){0}, "nn_tanhshrink_new");
}

int tg_nn_softmin_new(tg_module **out, int dim)
{
    return dim_module_new(out, ACT_SOFTMIN, dim, "nn_softmin_new");
}

int tg_nn_act_number(const tg_module *m, double *value)
{
    const act_args *a = NULL;
    TG_TRY(act_args_of(m, 1u << ACT_CELU | 1u << ACT_HARDSHRINK | 1u << ACT_SOFTSHRINK, &a,
                       "nn_act_number", "CELU, Hardshrink or Softshrink"));
    if (value) *value = a->a;
    return TG_OK;
}

int tg_nn_threshold_params(const tg_module *m, double *threshold, double *value)
{
    const act_args *a = NULL;
    TG_TRY(act_args_of(m, 1u << ACT_THRESHOLD, &a, "nn_threshold_params", "Threshold"));
    if (threshold) *threshold = a->a;
    if (value) *value = a->b;
    return TG_OK;
}

int tg_nn_act_dim(const tg_module *m, int *dim)
{
    const act_args *a = NULL;
    TG_TRY(act_args_of(m,
                       1u << ACT_SOFTMAX | 1u << ACT_LOG_SOFTMAX | 1u << ACT_SOFTMIN |
                           1u << ACT_GLU | 1u << ACT_SOFTMAX2D,
                       &a, "nn_act_dim", "Softmax, LogSoftmax, Softmin, GLU or Softmax2d"));
    if (dim) *dim = a->dim;
    return TG_OK;
}
