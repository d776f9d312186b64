/* src/nn/module_copy.c - tg_module_copy: a deep copy of a module tree, as
 * copy.deepcopy(model).  A memo maps each tensor and module of the original
 * to its copy, so that what the original shares (tied weights, a module
 * added under two names) is shared the same way in the copy. */
#include <string.h>

#include "nn/module_internal.h"

typedef struct tg__copy_memo {
    int n, cap;
    const void **from;   /* an original tensor or module */
    void **to;           /* its copy (borrowed: the copied tree owns it) */
} tg__copy_memo;

static void *tg__memo_find(const tg__copy_memo *memo, const void *from)
{
    for (int i = 0; i < memo->n; i++)
        if (memo->from[i] == from) return memo->to[i];
    return NULL;
}

static int tg__memo_add(tg__copy_memo *memo, const void *from, void *to)
{
    if (memo->n == memo->cap) {
        int cap = memo->cap ? memo->cap * 2 : 16;
        const void **f = realloc(memo->from, (size_t)cap * sizeof *f);
        if (f) memo->from = f;
        void **t = f ? realloc(memo->to, (size_t)cap * sizeof *t) : NULL;
        if (!t) return tg__error(TG_ENOMEM, "module_copy: out of memory");
        memo->to = t;
        memo->cap = cap;
    }
    memo->from[memo->n] = from;
    memo->to[memo->n++] = to;
    return TG_OK;
}

/* The copy of m's private state, or TG_EUNSUPPORTED naming path. */
static int tg__copy_state(void **out, const tg_module *m, const char *path)
{
    *out = NULL;
    if (!m->state) return TG_OK;
    if (m->vt->copy_state) return m->vt->copy_state(out, m->state);
    TG_CHECK(m->vt->state_size > 0, TG_EUNSUPPORTED,
             "module_copy: module '%s' (%s) has private state that its vtable cannot copy "
             "(neither copy_state nor state_size)", path[0] ? path : "<root>",
             tg_module_type_name(m));
    void *s = tg__malloc(m->vt->state_size);
    if (!s) return TG_ENOMEM;
    memcpy(s, m->state, m->vt->state_size);
    *out = s;
    return TG_OK;
}

/* Adds the copy of tensor t to c as parameter or buffer `name`. */
static int tg__copy_tensor(tg__copy_memo *memo, tg_module *c, const char *name, tg_tensor *t,
                           bool param)
{
    tg_tensor *ct = tg__memo_find(memo, t);
    if (ct) {
        tg_tensor_retain(ct);
    } else {
        TG_TRY(tg_tensor_clone(&ct, t));
        tg_tensor_set_name(ct, tg_tensor_name(t));
        int rc = tg__memo_add(memo, t, ct);
        if (rc < 0) {
            tg_tensor_release(ct);
            return rc;
        }
    }
    /* add_* steal ct, also on error; a parameter becomes requires_grad */
    TG_TRY(param ? tg_module_add_parameter(c, name, ct) : tg_module_add_buffer(c, name, ct));
    if (param && !tg_tensor_requires_grad(t)) TG_TRY(tg_tensor_set_requires_grad(ct, false));
    return TG_OK;
}

static int tg__copy_module(tg__copy_memo *memo, tg_module **out, const tg_module *m,
                           const char *path);

/* Copies m's computed tensors (spectral_norm's weight) into c, which has
 * none: each one's flat state bytewise and its last value cloned. */
static int tg__copy_computed(tg_module *c, const tg_module *m, const char *path)
{
    if (m->n_computed == 0) return TG_OK;
    for (int i = 0; i < m->n_computed; i++)
        TG_CHECK(m->computed[i].state_size > 0, TG_EUNSUPPORTED,
                 "module_copy: %s: the computed tensor '%s' cannot be copied",
                 path[0] ? path : "<root>", m->computed[i].name);
    c->computed = tg__calloc((size_t)m->n_computed, sizeof *c->computed);
    if (!c->computed) return TG_ENOMEM;
    for (int i = 0; i < m->n_computed; i++) {
        const tg__nn_computed *src = &m->computed[i];
        tg__nn_computed *dst = &c->computed[c->n_computed];
        *dst = *src;
        dst->state = NULL, dst->value = NULL;
        if (!(dst->state = tg__malloc(src->state_size))) return TG_ENOMEM;
        memcpy(dst->state, src->state, src->state_size);
        c->n_computed++;   /* c owns it from here, freed with c */
        if (src->value) TG_TRY(tg_tensor_clone(&dst->value, src->value));
    }
    return TG_OK;
}

/* Copies m's parameters, buffers, computed tensors and children into c. */
static int tg__copy_contents(tg__copy_memo *memo, tg_module *c, const tg_module *m,
                             const char *path)
{
    for (int i = 0; i < m->n_params; i++)
        TG_TRY(tg__copy_tensor(memo, c, m->params[i].name, m->params[i].t, true));
    for (int i = 0; i < m->n_buffers; i++)
        TG_TRY(tg__copy_tensor(memo, c, m->buffers[i].name, m->buffers[i].t, false));
    TG_TRY(tg__copy_computed(c, m, path));
    for (int i = 0; i < m->n_children; i++) {
        char sub[TG_MODULE_NAME_MAX];
        snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", m->children[i].name);
        tg_module *child = NULL;
        TG_TRY(tg__copy_module(memo, &child, m->children[i].m, sub));
        TG_TRY(tg_module_add_child(c, m->children[i].name, child));   /* steals child */
    }
    return TG_OK;
}

/* *out: a new reference to the copy of m (the memo's one when m was met
 * before). */
static int tg__copy_module(tg__copy_memo *memo, tg_module **out, const tg_module *m,
                           const char *path)
{
    tg_module *c = tg__memo_find(memo, m);
    if (c) {
        *out = tg_module_retain(c);
        return TG_OK;
    }
    void *state = NULL;
    TG_TRY(tg__copy_state(&state, m, path));
    int rc = tg_module_new(&c, m->vt, state);
    if (rc < 0) {
        if (state && m->vt->release) m->vt->release(state);
        return rc;
    }
    c->training = m->training;
    c->autocast_weights = m->autocast_weights;
    rc = tg__memo_add(memo, m, c);
    if (rc == TG_OK) rc = tg__copy_contents(memo, c, m, path);
    if (rc < 0) {
        tg_module_release(c);
        return rc;
    }
    *out = c;
    return TG_OK;
}

int tg_module_copy(tg_module **out, const tg_module *m)
{
    TG_CHECK(out != NULL && m != NULL, TG_EINVAL, "module_copy: out and m must not be NULL");
    tg__copy_memo memo = {0};
    tg_module *c = NULL;
    int rc = tg__copy_module(&memo, &c, m, "");
    free(memo.from);
    free(memo.to);
    if (rc == TG_OK) *out = c;
    return rc;
}
