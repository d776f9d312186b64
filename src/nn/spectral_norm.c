/* src/nn/spectral_norm.c - torch.nn.utils.spectral_norm: a module's weight
 * becomes weight_orig / sigma, sigma the largest singular value of
 * weight_orig read as a matrix, estimated by power iteration.
 *
 * W (h, w) is weight_orig with dim `dim` moved first and the other dims
 * flattened; the buffers are u (h) and v (w).  In training, each forward
 * first runs n_power_iterations steps, not recorded, updating u and v in
 * place:
 *     v = normalize(W^T u),  u = normalize(W v),  normalize(x) = x / max(|x|_2, eps);
 * then sigma = u . (W v) is recorded with u and v as constants (copies of the
 * buffers, so that the next step's in-place update leaves this graph's saved
 * values alone), and weight = weight_orig / sigma.  The gradient therefore
 * reaches weight_orig both through the division and through sigma
 * (d sigma / dW = u v^T), as in torch.  In eval, the stored u and v are used
 * without iterating. */
#include <math.h>
#include <string.h>

#include "nn/module_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/ops.h"
#include "tapegrad/registry.h"

#define SN_FN "nn_spectral_norm"

typedef struct sn_state {
    char orig[TG__NN_LOCAL_NAME_MAX], u[TG__NN_LOCAL_NAME_MAX], v[TG__NN_LOCAL_NAME_MAX];
    int n_power_iterations, dim;
    double eps;
} sn_state;

/* W (h, w): weight with dim first and the rest flattened, recorded. */
static int sn_matrix(tg_tensor **out, tg_tensor *weight, int dim, int64_t h)
{
    tg_tensor *p = NULL;
    if (dim != 0) {
        int perm[TG_MAX_DIMS], k = 1;
        perm[0] = dim;
        for (int i = 0; i < tg_tensor_ndim(weight); i++)
            if (i != dim) perm[k++] = i;
        TG_TRY(tg_permute(&p, weight, perm));
    } else {
        p = tg_tensor_retain(weight);
    }
    int rc = tg_reshape(out, p, 2, (int64_t[]){h, -1});
    tg_tensor_release(p);
    return rc;
}

/* dst (n) = normalize(y), y of n elements, written in place. */
static int sn_normalize_into(tg_tensor *dst, tg_tensor *y, double eps)
{
    enum { SQ, SS, NRM, CL, R, FLAT, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    const int64_t n = tg_tensor_numel(dst);
    int rc = tg_mul(&t[SQ], y, y);
    if (rc == TG_OK) rc = tg_sum(&t[SS], t[SQ]);
    if (rc == TG_OK) rc = tg_sqrt(&t[NRM], t[SS]);
    if (rc == TG_OK) rc = tg_clamp(&t[CL], t[NRM], eps, NAN);
    if (rc == TG_OK) rc = tg_div(&t[R], y, t[CL]);
    if (rc == TG_OK) rc = tg_reshape(&t[FLAT], t[R], 1, &n);
    if (rc == TG_OK) rc = tg_tensor_copy_(dst, t[FLAT]);
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}

/* dst (n) = normalize(a (n, k) x (k)), written in place. */
static int sn_step(tg_tensor *dst, tg_tensor *a, tg_tensor *x, double eps)
{
    tg_tensor *col = NULL, *ax = NULL;
    int rc = tg_reshape(&col, x, 2, (int64_t[]){tg_tensor_numel(x), 1});
    if (rc == TG_OK) rc = tg_matmul(&ax, a, col);                  /* (n, 1) */
    if (rc == TG_OK) rc = sn_normalize_into(dst, ax, eps);
    tg_tensor_release(ax);
    tg_tensor_release(col);
    return rc;
}

/* u, v: the buffers after `iterate` power-iteration steps (copies of them
 * when there were any).  *out = weight_orig / (u . W v). */
static int sn_weight_body(const sn_state *s, tg_tensor *w, tg_tensor *u, tg_tensor *v,
                          bool iterate, tg_tensor **out)
{
    enum { MAT, MAT_T, UC, VC, UCOL, VCOL, WV, PROD, SIGMA, N_TMP };
    tg_tensor *t[N_TMP] = {NULL};
    const int64_t h = tg_tensor_numel(u), wd = tg_tensor_numel(v);
    int rc = sn_matrix(&t[MAT], w, s->dim, h);
    if (rc == TG_OK && iterate) {
        tg_no_grad_begin();
        rc = tg_transpose(&t[MAT_T], t[MAT], 0, 1);
        for (int i = 0; rc == TG_OK && i < s->n_power_iterations; i++) {
            rc = sn_step(v, t[MAT_T], u, s->eps);
            if (rc == TG_OK) rc = sn_step(u, t[MAT], v, s->eps);
        }
        tg_no_grad_end();
        if (rc == TG_OK) rc = tg_tensor_clone(&t[UC], u);
        if (rc == TG_OK) rc = tg_tensor_clone(&t[VC], v);
    } else if (rc == TG_OK) {
        t[UC] = tg_tensor_retain(u);
        t[VC] = tg_tensor_retain(v);
    }
    if (rc == TG_OK) rc = tg_reshape(&t[UCOL], t[UC], 2, (int64_t[]){h, 1});
    if (rc == TG_OK) rc = tg_reshape(&t[VCOL], t[VC], 2, (int64_t[]){wd, 1});
    if (rc == TG_OK) rc = tg_matmul(&t[WV], t[MAT], t[VCOL]);      /* (h, 1) */
    if (rc == TG_OK) rc = tg_mul(&t[PROD], t[UCOL], t[WV]);
    if (rc == TG_OK) rc = tg_sum(&t[SIGMA], t[PROD]);               /* 0-d */
    if (rc == TG_OK) rc = tg_div(out, w, t[SIGMA]);
    for (int i = 0; i < N_TMP; i++) tg_tensor_release(t[i]);
    return rc;
}

/* As torch on the CPU, sigma is computed in the weight's dtype, also under
 * autocast. */
static int sn_weight(const sn_state *s, tg_tensor *w, tg_tensor *u, tg_tensor *v, bool iterate,
                     tg_tensor **out)
{
    TG_TRY(tg_autocast_disable_begin());
    int rc = sn_weight_body(s, w, u, v, iterate, out);
    tg_autocast_end();
    return rc;
}

static int sn_compute(tg_module *m, void *state, tg_tensor **out)
{
    const sn_state *s = state;
    tg_tensor *w = tg__module_local(m, s->orig), *u = tg__module_local(m, s->u),
              *v = tg__module_local(m, s->v);
    TG_ASSERT(w && u && v);
    return sn_weight(s, w, u, v, m->training, out);
}

static int sn_check(tg_module *m, const char *name, int n_power_iterations, double eps,
                    int dim, tg_rng *rng, tg_tensor **weight, int *resolved_dim)
{
    TG_CHECK(m != NULL && name != NULL && rng != NULL, TG_EINVAL,
             SN_FN ": m, name and rng must not be NULL");
    TG_CHECK(n_power_iterations >= 1, TG_EINVAL,
             SN_FN ": n_power_iterations=%d must be >= 1", n_power_iterations);
    TG_CHECK(eps > 0, TG_EINVAL, SN_FN ": eps=%g must be > 0", eps);
    tg_tensor *w = NULL;
    TG_TRY(tg__module_reparam_target(SN_FN, m, name, "spectral norm", sn_compute, 5, &w));
    const int nd = tg_tensor_ndim(w);
    TG_CHECK(nd >= 1, TG_ESHAPE, SN_FN ": '%s' is 0-d; it must have at least 1 dim", name);
    /* torch's default: dim 1 for ConvTranspose, whose weight is (C_in, C_out/g, K...) */
    if (dim == -1) dim = m->vt == &tg__nn_conv_transpose_vt ? 1 : 0;
    TG_CHECK(dim >= 0 && dim < nd, TG_EINVAL,
             SN_FN ": dim=%d must be in [0, %d) ('%s' has %d dims) or -1 for the default", dim,
             nd, name, nd);
    *weight = w;
    *resolved_dim = dim;
    return TG_OK;
}

/* A buffer of n elements of w's dtype, drawn from N(0, 1) and normalized. */
static int sn_random_unit(tg_tensor **out, const tg_tensor *w, int64_t n, double eps,
                          tg_rng *rng)
{
    tg_tensor *x = NULL;
    int rc = tg_tensor_zeros(&x, tg_tensor_dtype(w), 1, &n);
    if (rc == TG_OK) rc = tg_tensor_rand_normal(x, rng, 0.0, 1.0);
    tg_no_grad_begin();
    if (rc == TG_OK) rc = sn_normalize_into(x, x, eps);
    tg_no_grad_end();
    if (rc < 0) {
        tg_tensor_release(x);
        return rc;
    }
    *out = x;
    return TG_OK;
}

int tg_nn_spectral_norm(tg_module *m, const char *name, int n_power_iterations, double eps,
                        int dim, tg_rng *rng)
{
    tg_tensor *w = NULL;
    TG_TRY(sn_check(m, name, n_power_iterations, eps, dim, rng, &w, &dim));
    sn_state *s = tg__calloc(1, sizeof *s);
    if (!s) return TG_ENOMEM;
    snprintf(s->orig, sizeof s->orig, "%s_orig", name);
    snprintf(s->u, sizeof s->u, "%s_u", name);
    snprintf(s->v, sizeof s->v, "%s_v", name);
    s->n_power_iterations = n_power_iterations;
    s->dim = dim;
    s->eps = eps;
    const int64_t h = tg_tensor_dim(w, dim), wd = tg_tensor_numel(w) / (h ? h : 1);
    tg_tensor *bufs[2] = {NULL, NULL};
    /* u, v and the weight's value belong to the module, never to a caller's
     * scope: the ops run on the library's behalf */
    tg__lib_enter();
    int rc = sn_random_unit(&bufs[0], w, h, eps, rng);
    if (rc == TG_OK) rc = sn_random_unit(&bufs[1], w, wd, eps, rng);
    /* until the first forward, `name` reads as the eval-mode weight */
    tg_tensor *value = NULL;
    if (rc == TG_OK) {
        tg_no_grad_begin();
        rc = sn_weight(s, w, bufs[0], bufs[1], false, &value);
        tg_no_grad_end();
    }
    tg__lib_leave();
    if (rc < 0) {
        tg_tensor_release(bufs[0]);
        tg_tensor_release(bufs[1]);
        free(s);
        return rc;
    }
    tg__nn_computed c = {.compute = sn_compute, .release = free, .state_size = sizeof *s,
                         .state = s, .value = value};
    const char *names[2] = {s->u, s->v};
    return tg__module_reparametrize(SN_FN, m, name, s->orig, 0, NULL, NULL, 2, names, bufs, &c);
}

int tg_nn_remove_spectral_norm(tg_module *m, const char *name)
{
    TG_CHECK(m != NULL && name != NULL, TG_EINVAL,
             "nn_remove_spectral_norm: m and name must not be NULL");
    const tg__nn_computed *c = tg__module_computed(m, name);
    TG_CHECK(c != NULL && c->compute == sn_compute, TG_EINVAL,
             "nn_remove_spectral_norm: spectral norm of '%s' not found in %s", name,
             tg_module_type_name(m));
    const sn_state *s = c->state;
    tg_tensor *w = tg__module_local(m, s->orig), *u = tg__module_local(m, s->u),
              *v = tg__module_local(m, s->v), *value = NULL;
    TG_ASSERT(w && u && v);
    /* torch's remove: the weight with the stored u and v, without iterating
     * and not recorded, as a new parameter */
    tg__lib_enter();
    tg_no_grad_begin();
    int rc = sn_weight(s, w, u, v, false, &value);
    tg_no_grad_end();
    tg__lib_leave();
    if (rc < 0) return rc;
    return tg__module_unreparametrize("nn_remove_spectral_norm", m, name, value, 3,
                                      (const char *const[]){s->orig, s->u, s->v});
}
