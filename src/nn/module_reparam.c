/* src/nn/module_reparam.c - a module's parameter replaced by a tensor
 * computed before each forward from new parameters and buffers, as torch's
 * spectral_norm and weight_norm do it with a forward pre-hook, and the
 * parameter put back (remove_spectral_norm, remove_weight_norm).  Both
 * check everything first, so that on error the module is unchanged. */
#include <string.h>

#include "nn/module_internal.h"
#include "tapegrad/autograd.h"

int tg__module_reparam_target(const char *fn, tg_module *m, const char *name, const char *what,
                              tg__nn_compute_fn compute, int suffix_len, tg_tensor **w)
{
    const tg__nn_computed *c = tg__module_computed(m, name);
    TG_CHECK(c == NULL || c->compute != compute, TG_EINVAL,
             "%s: %s's '%s' already has %s: it cannot be applied twice", fn,
             tg_module_type_name(m), name, what);
    TG_CHECK(c == NULL, TG_EINVAL, "%s: %s's '%s' is already computed, not a parameter", fn,
             tg_module_type_name(m), name);
    *w = NULL;
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) *w = m->params[i].t;
    TG_CHECK(*w != NULL, TG_EINVAL, "%s: %s has no parameter '%s'", fn, tg_module_type_name(m),
             name);
    const size_t len = strlen(name);
    TG_CHECK(len > 0 && len + (size_t)suffix_len < TG__NN_LOCAL_NAME_MAX, TG_EINVAL,
             "%s: name '%s' must be 1..%d characters", fn, name,
             TG__NN_LOCAL_NAME_MAX - 1 - suffix_len);
    return TG_OK;
}

static int reparametrize_check(const char *fn, tg_module *m, const char *name,
                               const char *orig, int np, const char *const *param_names,
                               int nb, const char *const *buf_names, int *at)
{
    *at = -1;
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) *at = i;
    TG_CHECK(*at >= 0, TG_EINVAL, "%s: %s has no parameter '%s'", fn, tg_module_type_name(m),
             name);
    const char *all[8];
    const int n = 1 + np + nb;
    TG_ASSERT(n <= 8);
    all[0] = orig;
    for (int i = 0; i < np; i++) all[1 + i] = param_names[i];
    for (int i = 0; i < nb; i++) all[1 + np + i] = buf_names[i];
    for (int i = 0; i < n; i++) {
        TG_TRY(tg__module_check_name(fn, m, all[i]));
        bool twice = false;
        for (int j = 0; j < i; j++) twice = twice || strcmp(all[i], all[j]) == 0;
        TG_CHECK(!twice, TG_EINVAL, "%s: name '%s' is given twice", fn, all[i]);
    }
    /* room for the new parameters and buffers and the computed entry (the
     * parameter `name` becomes `orig`) */
    for (int i = 0; i < np; i++)
        TG_TRY(tg__module_grow((void **)&m->params, &m->cap_params, m->n_params + i,
                               sizeof *m->params));
    for (int i = 0; i < nb; i++)
        TG_TRY(tg__module_grow((void **)&m->buffers, &m->cap_buffers, m->n_buffers + i,
                               sizeof *m->buffers));
    tg__nn_computed *c = realloc(m->computed, (size_t)(m->n_computed + 1) * sizeof *c);
    if (!c) return tg__error(TG_ENOMEM, "%s: out of memory", fn);
    m->computed = c;
    return TG_OK;
}

static void add_entry(tg__nn_tensor_entry *e, const char *name, tg_tensor *t)
{
    snprintf(e->name, sizeof e->name, "%s", name);
    e->t = t;
    if (!tg_tensor_name(t)[0]) tg_tensor_set_name(t, name);
}

int tg__module_reparametrize(const char *fn, tg_module *m, const char *name, const char *orig,
                             int np, const char *const *param_names, tg_tensor *const *params,
                             int nb, const char *const *buf_names, tg_tensor *const *bufs,
                             const tg__nn_computed *c)
{
    int at = -1;
    int rc = reparametrize_check(fn, m, name, orig, np, param_names, nb, buf_names, &at);
    for (int i = 0; rc == TG_OK && i < np; i++) rc = tg_tensor_set_requires_grad(params[i], true);
    if (rc < 0) {
        for (int i = 0; i < np; i++) tg_tensor_release(params[i]);
        for (int i = 0; i < nb; i++) tg_tensor_release(bufs[i]);
        tg_tensor_release(c->value);
        if (c->release) c->release(c->state);
        return rc;
    }
    /* torch deletes the parameter and registers the new parameters, then it
     * again under `orig`, which puts them last */
    tg__nn_tensor_entry e = m->params[at];
    memmove(&m->params[at], &m->params[at + 1],
            (size_t)(m->n_params - at - 1) * sizeof *m->params);
    m->n_params--;
    for (int i = 0; i < np; i++) add_entry(&m->params[m->n_params++], param_names[i], params[i]);
    snprintf(e.name, sizeof e.name, "%s", orig);
    if (strcmp(tg_tensor_name(e.t), name) == 0) tg_tensor_set_name(e.t, orig);
    m->params[m->n_params++] = e;
    for (int i = 0; i < nb; i++) add_entry(&m->buffers[m->n_buffers++], buf_names[i], bufs[i]);
    tg__nn_computed *d = &m->computed[m->n_computed++];
    *d = *c;
    snprintf(d->name, sizeof d->name, "%s", name);
    return TG_OK;
}

/* Removes the entry named name from arr (of *n), releasing its tensor;
 * false when there is none. */
static bool remove_entry(tg__nn_tensor_entry *arr, int *n, const char *name)
{
    for (int i = 0; i < *n; i++) {
        if (strcmp(arr[i].name, name) != 0) continue;
        tg_tensor_release(arr[i].t);
        memmove(&arr[i], &arr[i + 1], (size_t)(*n - i - 1) * sizeof *arr);
        (*n)--;
        return true;
    }
    return false;
}

int tg__module_unreparametrize(const char *fn, tg_module *m, const char *name, tg_tensor *w,
                               int nr, const char *const *names)
{
    int ci = -1;
    for (int i = 0; i < m->n_computed; i++)
        if (strcmp(m->computed[i].name, name) == 0) ci = i;
    TG_ASSERT(ci >= 0 && nr >= 1);
    int rc = tg_tensor_is_leaf(w) && tg_dtype_is_float(tg_tensor_dtype(w))
                 ? tg_tensor_set_requires_grad(w, true)
                 : tg__error(TG_EINVAL, "%s: the weight to register must be a float leaf", fn);
    if (rc < 0) {
        tg_tensor_release(w);
        return rc;
    }
    /* the entries first: names may point into the computed entry's state */
    int removed_params = 0;
    for (int i = 0; i < nr; i++) {
        bool found = remove_entry(m->params, &m->n_params, names[i]);
        if (found)
            removed_params++;
        else
            found = remove_entry(m->buffers, &m->n_buffers, names[i]);
        TG_ASSERT(found);
    }
    tg__nn_computed *c = &m->computed[ci];
    tg_tensor_release(c->value);
    if (c->release) c->release(c->state);
    memmove(c, c + 1, (size_t)(m->n_computed - ci - 1) * sizeof *c);
    m->n_computed--;
    /* a parameter was removed, so the list has room */
    TG_ASSERT(removed_params >= 1 && m->n_params < m->cap_params);
    add_entry(&m->params[m->n_params++], name, w);
    return TG_OK;
}
