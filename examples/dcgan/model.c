/* examples/dcgan/model.c - the generator and discriminator of model.h. */
#include "model.h"

#include <stddef.h>

#include "tapegrad/status.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        int rc_ = (expr);                                                     \
        if (rc_ < 0) return rc_;                                              \
    } while (0)

/* A top-level module whose forward is its child "net" (PyTorch's
 * `self.net = nn.Sequential(...)` with `forward = self.net`). */
static int wrapper_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    return tg_module_forward(tg_module_child(m, "net"), y, x);
}

static const tg_module_vtable generator_vt = {.type_name = "Generator",
                                              .forward = wrapper_forward};
static const tg_module_vtable discriminator_vt = {.type_name = "Discriminator",
                                                  .forward = wrapper_forward};

/* Wraps net (stolen) as "net" of a new module of type vt, then applies
 * DCGAN's N(0, 0.02) init.  On error everything is released. */
static int wrap(tg_module **out, const tg_module_vtable *vt, tg_module *net, tg_rng *rng)
{
    tg_module *m = NULL;
    int rc = tg_module_new(&m, vt, NULL);
    if (rc < 0) {
        tg_module_release(net);
        return rc;
    }
    rc = tg_module_add_child(m, "net", net);
    if (rc >= 0) rc = tg_nn_init_normal(m, 0.0, 0.02, rng);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

/* Appends layer (stolen) unless an earlier step failed (*rc < 0); the
 * builders below run only while *rc >= 0 and leave their status in *rc, so a
 * chain of add(seq, &rc, builder(&rc, ...)) stops at the first error. */
static void add(tg_module *seq, int *rc, tg_module *layer)
{
    if (*rc < 0) {
        tg_module_release(layer);
        return;
    }
    *rc = tg_nn_sequential_append(seq, layer);
}

static tg_module *act(int *rc, tg_activation a, double slope)
{
    tg_module *m = NULL;
    if (*rc >= 0) *rc = tg_nn_activation_new(&m, a, slope);
    return m;
}

static tg_module *batchnorm2d(int *rc, int64_t c)
{
    tg_module *m = NULL;
    if (*rc >= 0) *rc = tg_nn_batchnorm_new(&m, 2, c, 1e-5, 0.1, true, true);
    return m;
}

static tg_module *linear(int *rc, int64_t in, int64_t out, bool bias, tg_rng *rng)
{
    tg_module *m = NULL;
    if (*rc >= 0) *rc = tg_nn_linear_new(&m, in, out, bias, rng);
    return m;
}

/* Conv2d / ConvTranspose2d with kernel 4, stride 2, padding 1: 28 <-> 14 <-> 7. */
static tg_module *conv4s2(int *rc, bool transpose, int64_t cin, int64_t cout, bool bias,
                          tg_rng *rng)
{
    tg_module *m = NULL;
    const int64_t k[2] = {4, 4};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    tg_conv_params_set_padding(&p, 1);
    if (*rc < 0) return NULL;
    *rc = transpose ? tg_nn_conv_transpose_new(&m, 2, cin, cout, k, &p, bias, rng)
                    : tg_nn_conv_new(&m, 2, cin, cout, k, &p, bias, rng);
    return m;
}

/* SN-GAN: the discriminator's Conv2d weights (net.0, net.2) spectral-normed
 * with torch.nn.utils.spectral_norm's defaults, their u and v drawn from rng. */
static int spectral_norm_convs(tg_module *seq, tg_rng *rng)
{
    static const char *const convs[] = {"0", "2"};
    for (int i = 0; i < 2; i++)
        TRY(tg_nn_spectral_norm(tg_module_child(seq, convs[i]), "weight", 1, 1e-12, -1, rng));
    return TG_OK;
}

int dcgan_arch_check(const dcgan_arch *a)
{
    if (!a) return tg_error_set(TG_EINVAL, "dcgan: no architecture");
    if (a->nz < 1 || a->nz > DCGAN_MAX_WIDTH)
        return tg_error_set(TG_EINVAL, "dcgan: nz=%lld must be in [1, %d]", (long long)a->nz,
                            DCGAN_MAX_WIDTH);
    if (a->g_ch < 2 || a->g_ch > DCGAN_MAX_WIDTH || a->g_ch % 2)
        return tg_error_set(TG_EINVAL, "dcgan: g_ch=%lld must be even and in [2, %d]",
                            (long long)a->g_ch, DCGAN_MAX_WIDTH);
    if (a->d_ch < 1 || a->d_ch > DCGAN_MAX_WIDTH)
        return tg_error_set(TG_EINVAL, "dcgan: d_ch=%lld must be in [1, %d]",
                            (long long)a->d_ch, DCGAN_MAX_WIDTH);
    return TG_OK;
}

int dcgan_arch_from_generator_weight(dcgan_arch *a, const tg_tensor *w0, const char *key)
{
    if (!w0)
        return tg_error_set(TG_ENOTFOUND, "no tensor %s (the generator's first Linear, "
                            "(C*49, nz))", key);
    const int64_t *s = tg_tensor_shape(w0);
    if (tg_tensor_ndim(w0) != 2 || s[0] < 98 || s[0] % 98 != 0 || s[1] < 1) {
        char shape[128];
        return tg_error_set(TG_ESHAPE, "%s is %s: expected (C*49, nz) with C even and >= 2, "
                            "nz >= 1 (examples/dcgan/model.h)", key,
                            tg_shape_str(shape, sizeof shape, tg_tensor_ndim(w0), s));
    }
    dcgan_arch r = *a;
    r.g_ch = s[0] / 49;
    r.nz = s[1];
    TRY(dcgan_arch_check(&r));
    *a = r;
    return TG_OK;
}

int dcgan_latents(tg_tensor **z, int64_t n, int64_t nz, tg_rng *rng)
{
    tg_tensor *t = NULL;
    int rc = tg_tensor_zeros(&t, TG_F32, 2, (int64_t[]){n, nz});
    if (rc >= 0) rc = tg_tensor_rand_normal(t, rng, 0.0, 1.0);
    if (rc < 0) {
        tg_tensor_release(t);
        return rc;
    }
    *z = t;
    return TG_OK;
}

int dcgan_generator_new(tg_module **out, const dcgan_arch *a, tg_rng *rng)
{
    if (out == NULL || rng == NULL) return tg_error_set(TG_EINVAL, "dcgan: out and rng must be set");
    TRY(dcgan_arch_check(a));
    const int64_t C = a->g_ch, chw[3] = {C, 7, 7};
    tg_module *seq = NULL, *m = NULL;
    TRY(tg_nn_sequential_new(&seq));
    int rc = TG_OK;
    add(seq, &rc, linear(&rc, a->nz, C * 49, false, rng));            /* 0 */
    if (rc >= 0) rc = tg_nn_unflatten_new(&m, 1, 3, chw);
    add(seq, &rc, m);                                                     /* 1 */
    add(seq, &rc, batchnorm2d(&rc, C));                               /* 2 */
    add(seq, &rc, act(&rc, TG_ACT_RELU, 0));                          /* 3 */
    add(seq, &rc, conv4s2(&rc, true, C, C / 2, false, rng));          /* 4 */
    add(seq, &rc, batchnorm2d(&rc, C / 2));                           /* 5 */
    add(seq, &rc, act(&rc, TG_ACT_RELU, 0));                          /* 6 */
    add(seq, &rc, conv4s2(&rc, true, C / 2, 1, true, rng));           /* 7 */
    add(seq, &rc, act(&rc, TG_ACT_TANH, 0));                          /* 8 */
    if (rc < 0) {
        tg_module_release(seq);
        return rc;
    }
    return wrap(out, &generator_vt, seq, rng);
}

int dcgan_discriminator_new(tg_module **out, const dcgan_arch *a, tg_rng *rng)
{
    if (out == NULL || rng == NULL) return tg_error_set(TG_EINVAL, "dcgan: out and rng must be set");
    TRY(dcgan_arch_check(a));
    const int64_t D = a->d_ch;
    const bool bn = a->d_batchnorm;
    tg_module *seq = NULL, *m = NULL;
    TRY(tg_nn_sequential_new(&seq));
    int rc = TG_OK;
    add(seq, &rc, conv4s2(&rc, false, 1, D, true, rng));              /* 0 */
    add(seq, &rc, act(&rc, TG_ACT_LEAKY_RELU, 0.2));                  /* 1 */
    add(seq, &rc, conv4s2(&rc, false, D, 2 * D, !bn, rng));           /* 2 */
    /* 3: BatchNorm2d, or nn.Identity (a parameter-free module) for the critic. */
    add(seq, &rc, bn ? batchnorm2d(&rc, 2 * D) : act(&rc, TG_ACT_NONE, 0));
    add(seq, &rc, act(&rc, TG_ACT_LEAKY_RELU, 0.2));                  /* 4 */
    if (rc >= 0) rc = tg_nn_flatten_new(&m, 1, -1);
    add(seq, &rc, m);                                                     /* 5 */
    add(seq, &rc, linear(&rc, 2 * D * 49, 1, true, rng));             /* 6 */
    if (rc < 0) {
        tg_module_release(seq);
        return rc;
    }
    tg_module *m_out = NULL;
    TRY(wrap(&m_out, &discriminator_vt, seq, rng));
    if (a->d_spectral_norm) rc = spectral_norm_convs(seq, rng);
    if (rc < 0) {
        tg_module_release(m_out);
        return rc;
    }
    *out = m_out;
    return TG_OK;
}
