/* src/dist/zero.c - ZeroRedundancyOptimizer: the parameters partitioned
 * over the ranks (zero_partition.c), an optimizer on each rank over its
 * own, and a step that updates each parameter on its owner and then
 * broadcasts it from there.
 *
 * The update of a parameter depends only on that parameter, its gradient
 * and its own state, so the owner's optimizer over a part of the list
 * computes what one optimizer over the whole list would, bit for bit, when
 * the gradients are the same on every rank (as DDP leaves them).  The
 * state (zero_state.c) moves between the two numberings: parameter i of
 * tg_zero_new's list is local_index[i] of its owner's optimizer. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist/zero_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/sparse.h"

/* FNV-1a over bytes: the parameters' layout, compared across ranks. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

int tg__zero_check_params(const char *fn, int n, tg_tensor *const *params, uint64_t *layout)
{
    TG_CHECK(n >= 1 && params != NULL, TG_EINVAL,
             "%s: n=%d parameters; at least 1, params not NULL", fn, n);
    uint64_t h = fnv(*layout, &n, sizeof n);
    for (int i = 0; i < n; i++) {
        const tg_tensor *p = params[i];
        TG_CHECK(p != NULL, TG_EINVAL, "%s: params[%d] is NULL", fn, i);
        TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(p)), TG_EDTYPE,
                 "%s: params[%d] is %s; float parameters only", fn, i,
                 tg_dtype_name(tg_tensor_dtype(p)));
        TG_CHECK(tg_tensor_is_contiguous(p) && !tg_tensor_is_sparse(p), TG_EINVAL,
                 "%s: params[%d] must be contiguous and dense (it is broadcast as bytes)", fn,
                 i);
        for (int j = 0; j < i; j++)
            TG_CHECK(params[j] != p, TG_EINVAL, "%s: params[%d] is params[%d] again", fn, i, j);
        const int dt = (int)tg_tensor_dtype(p), nd = tg_tensor_ndim(p);
        h = fnv(h, &dt, sizeof dt);
        h = fnv(h, &nd, sizeof nd);
        h = fnv(h, tg_tensor_shape(p), sizeof(int64_t) * (size_t)nd);
    }
    *layout = h;
    return TG_OK;
}

/* The groups' parameters in a row (*all, *n_all of them; freed by the
 * caller), checked, and their layout with the groups' sizes hashed. */
static int check_groups(tg_zero **out, int n_groups, const tg_zero_group *groups,
                        tg_zero_make_fn make, tg_zero_add_fn add, tg_tensor ***all, int *n_all,
                        int64_t *layout)
{
    static const char fn[] = "zero_new";
    TG_CHECK(out != NULL && make != NULL, TG_EINVAL, "%s: out and make must not be NULL", fn);
    TG_CHECK(n_groups >= 1 && groups != NULL, TG_EINVAL,
             "%s: n_groups=%d; at least 1, groups not NULL", fn, n_groups);
    TG_CHECK(add != NULL || n_groups == 1, TG_EINVAL,
             "%s: add must not be NULL for %d param groups", fn, n_groups);
    int n = 0;
    for (int g = 0; g < n_groups; g++) {
        TG_CHECK(groups[g].n >= 1 && groups[g].params != NULL, TG_EINVAL,
                 "%s: groups[%d] has n=%d parameters; at least 1, params not NULL", fn, g,
                 groups[g].n);
        TG_CHECK(groups[g].n <= INT_MAX - n, TG_EINVAL, "%s: more than %d parameters", fn,
                 INT_MAX);
        n += groups[g].n;
    }
    *all = tg__calloc((size_t)n, sizeof **all);
    if (!*all) return TG_ENOMEM;
    for (int g = 0, k = 0; g < n_groups; g++)
        for (int i = 0; i < groups[g].n; i++) (*all)[k++] = groups[g].params[i];
    uint64_t h = TG__ZERO_FNV_BASIS;
    h = fnv(h, &n_groups, sizeof n_groups);
    for (int g = 0; g < n_groups; g++) h = fnv(h, &groups[g].n, sizeof groups[g].n);
    TG_TRY(tg__zero_check_params(fn, n, *all, &h));
    *n_all = n, *layout = (int64_t)h;
    return TG_OK;
}

/* z->all over every group (make, then add for each group after the
 * first), each group its own: one group per call. */
static int make_all(tg_zero *z, int n_groups, const tg_zero_group *groups, tg_zero_add_fn add)
{
    for (int g = 0; g < n_groups; g++) {
        if (g == 0) TG_TRY(z->make(&z->all, groups[0].n, groups[0].params, groups[0].opts));
        else TG_TRY(add(z->all, groups[g].n, groups[g].params, groups[g].opts));
        TG_CHECK(z->all != NULL, TG_EINVAL, "zero_new: make returned TG_OK without an optimizer");
        TG_CHECK(tg_optimizer_param_group_count(z->all) == g + 1, TG_EINVAL,
                 "zero_new: the optimizer has %d param groups after group %d; make and add "
                 "give one each", tg_optimizer_param_group_count(z->all), g);
    }
    return TG_OK;
}

int tg_zero_new_groups(tg_zero **out, tg_dist *d, int n_groups, const tg_zero_group *groups,
                       tg_zero_make_fn make, tg_zero_add_fn add)
{
    TG_CHECK(d != NULL, TG_EINVAL, "zero_new: d must not be NULL");
    int64_t layout = 0;
    tg_tensor **all = NULL;
    int n = 0, differs = -1;
    int rc = check_groups(out, n_groups, groups, make, add, &all, &n, &layout);
    int64_t sig[2] = {rc >= 0 ? n : 0, layout};
    rc = tg__dist_agree_sig(d, rc, 2, sig, &differs);
    if (rc >= 0 && differs >= 0)
        rc = tg__error(TG_EINVAL, "zero_new: the ranks passed different parameter lists "
                                  "(groups, count, shapes or dtypes)");
    if (rc < 0) {
        free(all);
        return rc;
    }
    tg_zero *z = tg__calloc(1, sizeof *z);
    rc = z ? TG_OK : TG_ENOMEM;
    if (rc >= 0) {
        *z = (tg_zero){.d = d, .make = make};
        rc = tg__zero_reserve(z, n, n_groups);
    }
    if (rc >= 0) {
        z->n = n, z->n_groups = n_groups;
        for (int i = 0; i < n; i++) z->params[i] = tg_tensor_retain(all[i]);
        for (int g = 0, end = 0; g < n_groups; g++) {
            end += groups[g].n;
            z->group_end[g] = end;
            z->local_group[g] = -1;
        }
        rc = make_all(z, n_groups, groups, add);
    }
    for (int g = 0; rc >= 0 && g < n_groups; g++)
        rc = tg__zero_place_group(z, g, add, groups[g].opts);
    if (rc >= 0) rc = tg__zero_sync(z);
    free(all);
    rc = tg_dist_agree(d, rc);
    if (rc < 0) {
        tg_zero_free(z);
        return rc;
    }
    *out = z;
    return TG_OK;
}

int tg_zero_new(tg_zero **out, tg_dist *d, int n, tg_tensor *const *params, tg_zero_make_fn make,
                const void *opts)
{
    const tg_zero_group group = {.n = n, .params = params, .opts = opts};
    return tg_zero_new_groups(out, d, 1, &group, make, NULL);
}

void tg_zero_free(tg_zero *z)
{
    if (!z) return;
    tg_optimizer_free(z->opt);
    tg_optimizer_free(z->all);
    for (int i = 0; z->params && i < z->n; i++) tg_tensor_release(z->params[i]);
    free(z->params);
    free(z->owner);
    free(z->local_index);
    free(z->group_end);
    free(z->local_group);
    for (int k = 0; k < z->n_buckets; k++) tg_tensor_release(z->buckets[k]);
    free(z->buckets);
    free(z->bucket_root);
    free(z->bucket_of);
    free(z);
}

/* The checks of tg_optimizer_step on this rank's gradients, made before
 * any rank steps: a float gradient of its parameter's shape. */
static int check_grads(const tg_zero *z)
{
    for (int i = 0; i < z->n; i++) {
        const tg_tensor *p = z->params[i], *g = tg_tensor_grad(p);
        if (z->local_index[i] < 0 || !g) continue;
        TG_CHECK(tg_dtype_is_float(tg_tensor_dtype(g)), TG_EDTYPE,
                 "zero_step: the gradient of parameter %d is %s; float only", i,
                 tg_dtype_name(tg_tensor_dtype(g)));
        TG_CHECK(tg_tensor_same_shape(g, p), TG_ESHAPE,
                 "zero_step: the gradient of parameter %d has another shape than it", i);
    }
    return TG_OK;
}

/* z usable: not NULL, not broken by a failed add_param_group (local). */
static int check_z(const tg_zero *z, const char *fn)
{
    TG_CHECK(z != NULL, TG_EINVAL, "%s: z must not be NULL", fn);
    TG_CHECK(!z->broken, TG_EINVAL,
             "%s: z ran out of memory in zero_add_param_group; it can only be freed", fn);
    return TG_OK;
}

/* The step after the checks of z: the hyperparameters synced, the
 * gradients checked, the local step, the broadcasts. */
static int step(tg_zero *z)
{
    int rc = tg__zero_sync(z);
    if (rc >= 0) rc = check_grads(z);
    if (rc >= 0) rc = tg__zero_check_buckets(z);
    TG_TRY(tg_dist_agree(z->d, rc));
    rc = z->opt ? tg_optimizer_step(z->opt) : TG_OK;
    TG_TRY(tg_dist_agree(z->d, rc));
    TG_TRY(tg__zero_broadcast(z));
    z->steps++;
    return TG_OK;
}

int tg_zero_step(tg_zero *z)
{
    TG_TRY(check_z(z, "zero_step"));
    return step(z);
}

int tg_zero_step_closure(tg_zero *z, tg_closure_fn closure, void *user, double *loss)
{
    static const char fn[] = "zero_step_closure";
    TG_TRY(check_z(z, fn));
    int rc = closure ? TG_OK : tg__error(TG_EINVAL, "%s: closure must not be NULL", fn);
    double l = NAN;
    if (rc >= 0) {
        /* as tg_optimizer_step_closure: the closure with grad mode on */
        const bool prev = tg_set_grad_enabled(true);
        rc = closure(user, &l);
        tg_set_grad_enabled(prev);
        if (rc >= 0) rc = TG_OK;
    }
    TG_TRY(tg_dist_agree(z->d, rc));
    TG_TRY(step(z));
    if (loss) *loss = l;
    return TG_OK;
}

void tg_zero_zero_grad(tg_zero *z)
{
    for (int i = 0; z && i < z->n; i++) tg_tensor_zero_grad(z->params[i]);
}

int tg_zero_set_lr(tg_zero *z, double lr)
{
    TG_TRY(check_z(z, "zero_set_lr"));
    TG_CHECK(lr >= 0 && lr <= 1e300, TG_EINVAL, "zero_set_lr: lr=%g must be >= 0 and finite",
             lr);
    TG_TRY(tg_optimizer_set_lr(z->all, lr));
    return z->opt ? tg_optimizer_set_lr(z->opt, lr) : TG_OK;
}

int tg_zero_owner(const tg_zero *z, int i)
{
    return z && i >= 0 && i < z->n ? z->owner[i] : -1;
}

int tg_zero_local_index(const tg_zero *z, int i)
{
    return z && i >= 0 && i < z->n ? z->local_index[i] : -1;
}

tg_optimizer *tg_zero_local(const tg_zero *z) { return z ? z->opt : NULL; }
int64_t tg_zero_steps(const tg_zero *z) { return z ? z->steps : 0; }
tg_optimizer *tg_zero_optimizer(const tg_zero *z) { return z ? z->all : NULL; }
