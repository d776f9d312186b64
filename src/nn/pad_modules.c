/* src/nn/pad_modules.c - the padding modules: ConstantPad{1,2,3}d,
 * ZeroPad2d, ReflectionPad{1,2,3}d, ReplicationPad{1,2,3}d and
 * CircularPad{1,2,3}d.  Each keeps its mode, n_spatial, the 2 n_spatial
 * paddings in torch's order (left, right, top, bottom, front, back: the
 * last dim first, as tg_pad takes them) and the constant, and runs tg_pad
 * after checking the input's rank as torch's module does. */
#include <assert.h>
#include <string.h>

#include "nn/module_internal.h"
#include "tapegrad/ops.h"

#define PAD_MAX_SPATIAL 3

typedef struct tg__pad_state {
    tg_pad_mode mode;
    int ns;
    int64_t pads[2 * PAD_MAX_SPATIAL];
    double value;
} tg__pad_state;

/* The input ranks torch takes: F.pad's constant mode pads the last ns dims
 * of any x with at least ns; the other modes want (C, S...) or
 * (N, C, S...). */
static int tg__pad_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    const tg__pad_state *s = m->state;
    const char *type = tg_module_type_name(m);
    const int nd = tg_tensor_ndim(x);
    if (s->mode == TG_PAD_CONSTANT)
        TG_CHECK(nd >= s->ns, TG_ESHAPE, "%s: x has %d dims; it must have at least %d", type,
                 nd, s->ns);
    else
        TG_CHECK(nd == s->ns + 1 || nd == s->ns + 2, TG_ESHAPE,
                 "%s: x has %d dims; it must have %d (C, S...) or %d (N, C, S...)", type, nd,
                 s->ns + 1, s->ns + 2);
    return tg_pad(y, x, 2 * s->ns, s->pads, s->mode, s->value);
}

#define PAD_VT(name)                                                          \
    {.type_name = name, .forward = tg__pad_forward, .release = free,          \
     .state_size = sizeof(tg__pad_state)}
/* Indexed by tg_pad_mode, then n_spatial - 1: torch's class names
 * (CircularPadNd: torch 2.1's, which torch 1.13 lacks). */
static const tg_module_vtable tg__nn_pad_vts[][PAD_MAX_SPATIAL] = {
    [TG_PAD_CONSTANT] = {PAD_VT("ConstantPad1d"), PAD_VT("ConstantPad2d"),
                         PAD_VT("ConstantPad3d")},
    [TG_PAD_REFLECT] = {PAD_VT("ReflectionPad1d"), PAD_VT("ReflectionPad2d"),
                        PAD_VT("ReflectionPad3d")},
    [TG_PAD_REPLICATE] = {PAD_VT("ReplicationPad1d"), PAD_VT("ReplicationPad2d"),
                          PAD_VT("ReplicationPad3d")},
    [TG_PAD_CIRCULAR] = {PAD_VT("CircularPad1d"), PAD_VT("CircularPad2d"),
                         PAD_VT("CircularPad3d")},
};
/* torch's ZeroPad2d: a ConstantPad2d of 0 under its own name */
static const tg_module_vtable tg__nn_zero_pad2d_vt = PAD_VT("ZeroPad2d");
#undef PAD_VT
#define PAD_N_MODES ((int)(sizeof tg__nn_pad_vts / sizeof tg__nn_pad_vts[0]))
static_assert(PAD_N_MODES == TG_PAD_CIRCULAR + 1, "a row of padding modules per tg_pad_mode");

static bool tg__nn_is_pad(const tg_module *m)
{
    if (m->vt == &tg__nn_zero_pad2d_vt) return true;
    for (int k = 0; k < PAD_N_MODES; k++)
        for (int a = 0; a < PAD_MAX_SPATIAL; a++)
            if (m->vt == &tg__nn_pad_vts[k][a]) return true;
    return false;
}

/* Checks the arguments (messages naming fn) and makes the module of vt. */
static int tg__pad_new(const char *fn, tg_module **out, const tg_module_vtable *vt,
                       tg_pad_mode mode, int n_spatial, const int64_t *pads, double value)
{
    TG_CHECK(out != NULL && pads != NULL, TG_EINVAL, "%s: out and pads must not be NULL", fn);
    tg__pad_state s = {.mode = mode, .ns = n_spatial, .value = value};
    for (int i = 0; i < 2 * n_spatial; i++) {
        TG_CHECK(pads[i] >= -INT32_MAX && pads[i] <= INT32_MAX, TG_EINVAL,
                 "%s: pads[%d]=%lld must be in [%d, %d]", fn, i, (long long)pads[i],
                 -INT32_MAX, INT32_MAX);
        s.pads[i] = pads[i];
    }
    return tg__module_new_state(out, vt, &s);
}

int tg_nn_pad_new(tg_module **out, tg_pad_mode mode, int n_spatial, const int64_t *pads,
                  double value)
{
    const char *fn = "nn_pad_new";
    TG_CHECK((int)mode >= 0 && (int)mode < PAD_N_MODES, TG_EINVAL,
             "%s: mode=%d is not a tg_pad_mode", fn, (int)mode);
    TG_CHECK(n_spatial >= 1 && n_spatial <= PAD_MAX_SPATIAL, TG_EINVAL,
             "%s: n_spatial=%d must be 1, 2 or 3", fn, n_spatial);
    TG_CHECK(mode == TG_PAD_CONSTANT || value == 0.0, TG_EINVAL,
             "%s: value=%g is for TG_PAD_CONSTANT; %s takes none (give 0)", fn, value,
             tg__nn_pad_vts[mode][n_spatial - 1].type_name);
    return tg__pad_new(fn, out, &tg__nn_pad_vts[mode][n_spatial - 1], mode, n_spatial, pads,
                       value);
}

int tg_nn_pad_new_int(tg_module **out, tg_pad_mode mode, int n_spatial, int64_t padding,
                      double value)
{
    const int64_t pads[2 * PAD_MAX_SPATIAL] = {padding, padding, padding,
                                               padding, padding, padding};
    return tg_nn_pad_new(out, mode, n_spatial, pads, value);
}

int tg_nn_zero_pad2d_new(tg_module **out, const int64_t *pads)
{
    return tg__pad_new("nn_zero_pad2d_new", out, &tg__nn_zero_pad2d_vt, TG_PAD_CONSTANT, 2,
                       pads, 0.0);
}

int tg_nn_pad_params(const tg_module *m, tg_pad_mode *mode, int *n_spatial, int64_t *pads,
                     double *value)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_pad_params: m must not be NULL");
    TG_CHECK(tg__nn_is_pad(m), TG_EINVAL,
             "nn_pad_params: m is a %s module, not one of the padding modules",
             tg_module_type_name(m));
    const tg__pad_state *s = m->state;
    if (mode) *mode = s->mode;
    if (n_spatial) *n_spatial = s->ns;
    if (pads) memcpy(pads, s->pads, (size_t)(2 * s->ns) * sizeof *pads);
    if (value) *value = s->value;
    return TG_OK;
}
