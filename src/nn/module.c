/* src/nn/module.c - the module object: refcount, registration of parameters,
 * buffers and children, lookup, forward, train/eval, zero_grad (its dtype:
 * module_dtype.c). */
#include <string.h>

#include "nn/module_internal.h"
#include "tapegrad/autograd.h"

int tg_module_new(tg_module **out, const tg_module_vtable *vt, void *state)
{
    TG_CHECK(out != NULL && vt != NULL, TG_EINVAL, "module_new: out and vt must not be NULL");
    tg_module *m = tg__calloc(1, sizeof *m);
    if (!m) return TG_ENOMEM;
    m->refcount = 1;
    m->vt = vt;
    m->state = state;
    m->training = true;
    *out = m;
    return TG_OK;
}

int tg__module_new_state(tg_module **out, const tg_module_vtable *vt, const void *init)
{
    TG_ASSERT(vt->state_size > 0);
    void *s = tg__malloc(vt->state_size);
    if (!s) return TG_ENOMEM;
    memcpy(s, init, vt->state_size);
    int rc = tg_module_new(out, vt, s);
    if (rc < 0) free(s);
    return rc;
}

void *tg_module_state(const tg_module *m) { return m ? m->state : NULL; }

const char *tg_module_type_name(const tg_module *m)
{
    return m && m->vt->type_name ? m->vt->type_name : "Module";
}

tg_module *tg_module_retain(tg_module *m)
{
    if (m) m->refcount++;
    return m;
}

void tg_module_release(tg_module *m)
{
    if (!m) return;
    TG_ASSERT(m->refcount > 0);
    if (--m->refcount > 0) return;
    for (int i = 0; i < m->n_params; i++) tg_tensor_release(m->params[i].t);
    for (int i = 0; i < m->n_buffers; i++) tg_tensor_release(m->buffers[i].t);
    for (int i = 0; i < m->n_children; i++) tg_module_release(m->children[i].m);
    for (int i = 0; i < m->n_computed; i++) {
        tg_tensor_release(m->computed[i].value);
        if (m->computed[i].release) m->computed[i].release(m->computed[i].state);
    }
    free(m->computed);
    free(m->params);
    free(m->buffers);
    free(m->children);
    if (m->vt->release) m->vt->release(m->state);
    free(m);
}

/* ---- registration ---- */

static bool tg__name_taken(const tg_module *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) return true;
    for (int i = 0; i < m->n_buffers; i++)
        if (strcmp(m->buffers[i].name, name) == 0) return true;
    for (int i = 0; i < m->n_children; i++)
        if (strcmp(m->children[i].name, name) == 0) return true;
    return tg__module_computed(m, name) != NULL;
}

int tg__module_check_name(const char *op, const tg_module *m, const char *name)
{
    TG_CHECK(m != NULL && name != NULL, TG_EINVAL, "%s: module and name must not be NULL", op);
    size_t len = strlen(name);
    TG_CHECK(len > 0 && len < TG__NN_LOCAL_NAME_MAX && !strchr(name, '.'), TG_EINVAL,
             "%s: name '%s' must be 1..%d characters without '.'", op, name,
             TG__NN_LOCAL_NAME_MAX - 1);
    TG_CHECK(!tg__name_taken(m, name), TG_EINVAL,
             "%s: name '%s' is already used by a parameter, buffer or child", op, name);
    return TG_OK;
}

/* Makes room for one more element in *arr (of *cap elements of size sz). */
int tg__module_grow(void **arr, int *cap, int n, size_t sz)
{
    if (n < *cap) return TG_OK;
    int ncap = *cap ? *cap * 2 : 4;
    void *p = realloc(*arr, (size_t)ncap * sz);
    if (!p) return tg__error(TG_ENOMEM, "module: out of memory growing a list to %d", ncap);
    *arr = p;
    *cap = ncap;
    return TG_OK;
}

static int tg__add_tensor(const char *op, tg_module *m, const char *name, tg_tensor *t,
                          bool param)
{
    int rc = t ? tg__module_check_name(op, m, name)
               : tg__error(TG_EINVAL, "%s: tensor must not be NULL", op);
    if (rc == TG_OK && param && !tg_tensor_is_leaf(t))
        rc = tg__error(TG_EINVAL, "%s: '%s' must be a leaf tensor (detach it first)", op, name);
    if (rc == TG_OK && param && !tg_dtype_is_float(tg_tensor_dtype(t)))
        rc = tg__error(TG_EDTYPE, "%s: '%s' has dtype %s; a parameter must be a float tensor "
                                  "(add others as buffers)",
                       op, name, tg_dtype_name(tg_tensor_dtype(t)));
    if (rc == TG_OK && param) rc = tg_tensor_set_requires_grad(t, true);
    if (rc == TG_OK) {
        rc = param ? tg__module_grow((void **)&m->params, &m->cap_params, m->n_params,
                                     sizeof *m->params)
                   : tg__module_grow((void **)&m->buffers, &m->cap_buffers, m->n_buffers,
                                     sizeof *m->buffers);
    }
    if (rc < 0) {
        tg_tensor_release(t);
        return rc;
    }
    tg__nn_tensor_entry *e = param ? &m->params[m->n_params++] : &m->buffers[m->n_buffers++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->t = t;
    /* an unnamed tensor takes its local name, for the tape's printouts and
     * messages ("leaf 'weight'") */
    if (!tg_tensor_name(t)[0]) tg_tensor_set_name(t, name);
    return TG_OK;
}

int tg_module_add_parameter(tg_module *m, const char *name, tg_tensor *t)
{
    return tg__add_tensor("module_add_parameter", m, name, t, true);
}

int tg_module_add_buffer(tg_module *m, const char *name, tg_tensor *t)
{
    return tg__add_tensor("module_add_buffer", m, name, t, false);
}

/* Whether m is root or one of its descendants (the tree has no cycle). */
static bool tg__module_contains(const tg_module *root, const tg_module *m)
{
    if (root == m) return true;
    for (int i = 0; i < root->n_children; i++)
        if (tg__module_contains(root->children[i].m, m)) return true;
    return false;
}

int tg_module_add_child(tg_module *parent, const char *name, tg_module *child)
{
    return tg__module_add_child_as("module_add_child", parent, name, child);
}

int tg__module_add_child_as(const char *fn, tg_module *parent, const char *name,
                            tg_module *child)
{
    int rc = child ? tg__module_check_name(fn, parent, name)
                   : tg__error(TG_EINVAL, "%s: child must not be NULL", fn);
    if (rc == TG_OK && child == parent)
        rc = tg__error(TG_EINVAL, "%s: a module cannot be its own child", fn);
    else if (rc == TG_OK && tg__module_contains(child, parent))
        rc = tg__error(TG_EINVAL, "%s: child '%s' (%s) contains the parent: "
                                  "modules form a tree, without cycles",
                       fn, name, tg_module_type_name(child));
    if (rc == TG_OK)
        rc = tg__module_grow((void **)&parent->children, &parent->cap_children,
                             parent->n_children, sizeof *parent->children);
    if (rc < 0) {
        tg_module_release(child);
        return rc;
    }
    tg__nn_child_entry *e = &parent->children[parent->n_children++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->m = child;
    return TG_OK;
}

void tg__module_replace_child(tg_module *parent, int i, tg_module *child)
{
    TG_ASSERT(parent && child && i >= 0 && i < parent->n_children);
    tg_module_release(parent->children[i].m);
    parent->children[i].m = child;
}

int tg__nn_add_param_zeros(tg_module *m, const char *name, int ndim, const int64_t *shape,
                           tg_tensor **borrowed)
{
    tg_tensor *t = NULL;
    TG_TRY(tg_tensor_zeros(&t, TG_F32, ndim, shape));
    TG_TRY(tg_module_add_parameter(m, name, t));
    if (borrowed) *borrowed = t;
    return TG_OK;
}

/* ---- lookup ---- */

tg_module *tg_module_child(const tg_module *m, const char *name)
{
    if (!m || !name) return NULL;
    for (int i = 0; i < m->n_children; i++)
        if (strcmp(m->children[i].name, name) == 0) return m->children[i].m;
    return NULL;
}

int tg_module_child_count(const tg_module *m) { return m ? m->n_children : 0; }

tg_module *tg_module_child_at(const tg_module *m, int i)
{
    return m && i >= 0 && i < m->n_children ? m->children[i].m : NULL;
}

const char *tg_module_child_name_at(const tg_module *m, int i)
{
    return m && i >= 0 && i < m->n_children ? m->children[i].name : NULL;
}

tg_tensor *tg__module_local(const tg_module *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) return m->params[i].t;
    for (int i = 0; i < m->n_buffers; i++)
        if (strcmp(m->buffers[i].name, name) == 0) return m->buffers[i].t;
    const tg__nn_computed *c = tg__module_computed(m, name);
    return c ? c->value : NULL;
}

const tg__nn_computed *tg__module_computed(const tg_module *m, const char *name)
{
    for (int i = 0; i < m->n_computed; i++)
        if (strcmp(m->computed[i].name, name) == 0) return &m->computed[i];
    return NULL;
}

tg_tensor *tg_module_find(const tg_module *m, const char *dotted_name)
{
    if (!m || !dotted_name) return NULL;
    const char *dot;
    while ((dot = strchr(dotted_name, '.')) != NULL) {
        size_t len = (size_t)(dot - dotted_name);
        const tg_module *next = NULL;
        for (int i = 0; i < m->n_children && !next; i++)
            if (strlen(m->children[i].name) == len &&
                memcmp(m->children[i].name, dotted_name, len) == 0)
                next = m->children[i].m;
        if (!next) return NULL;
        m = next;
        dotted_name = dot + 1;
    }
    return tg__module_local(m, dotted_name);
}

int tg__module_visit(tg_module *m, int (*visit)(tg_module *m, void *user), void *user)
{
    TG_TRY(visit(m, user));
    for (int i = 0; i < m->n_children; i++) TG_TRY(tg__module_visit(m->children[i].m, visit, user));
    return TG_OK;
}

/* ---- running ---- */

int tg__module_compute(tg_module *m)
{
    int rc = TG_OK;
    for (int i = 0; rc == TG_OK && i < m->n_computed; i++) {   /* torch's forward pre-hooks */
        tg__nn_computed *c = &m->computed[i];
        tg_tensor *v = NULL;
        rc = c->compute(m, c->state, &v);
        if (rc == TG_OK) {
            tg_tensor_release(c->value);
            c->value = v;
        }
    }
    return rc;
}

/* Runs m's forward for n inputs, on the library's behalf: only *y goes to the
 * caller's scope (tapegrad/scope.h). */
static int forward(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    tg_tensor *r = NULL;
    tg__callback_begin();
    tg__lib_enter();
    int rc = tg__module_compute(m);
    if (rc == TG_OK)
        rc = m->vt->forward_n ? m->vt->forward_n(m, &r, n, xs) : m->vt->forward(m, &r, xs[0]);
    tg__lib_leave();
    if (rc < 0) {
        char what[96];
        snprintf(what, sizeof what, "module_forward: %s's forward", tg_module_type_name(m));
        return tg__callback_end(what, rc);
    }
    if (!r)
        return tg__error(TG_EINVAL, "module_forward: %s's forward returned TG_OK without an "
                                    "output", tg_module_type_name(m));
    *y = r;
    return tg__scope_capture(y, TG_OK);
}

int tg_module_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    TG_CHECK(m != NULL && y != NULL && x != NULL, TG_EINVAL,
             "module_forward: m, y and x must not be NULL");
    TG_CHECK(m->vt->forward != NULL || m->vt->forward_n != NULL, TG_EUNSUPPORTED,
             "module_forward: %s has no forward (a container: call its children)",
             tg_module_type_name(m));
    TG_CHECK(m->vt->forward || m->vt->n_inputs <= 1, TG_EINVAL,
             "module_forward: %s takes %d inputs; give them to tg_module_forward_n",
             tg_module_type_name(m), m->vt->n_inputs);
    return forward(m, y, 1, &x);
}

int tg_module_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    TG_CHECK(m != NULL && y != NULL, TG_EINVAL, "module_forward_n: m and y must not be NULL");
    TG_CHECK(n >= 1 && xs != NULL, TG_EINVAL,
             "module_forward_n: n=%d must be >= 1 with xs not NULL", n);
    for (int i = 0; i < n; i++)
        TG_CHECK(xs[i] != NULL, TG_EINVAL, "module_forward_n: xs[%d] must not be NULL", i);
    TG_CHECK(m->vt->forward_n != NULL || (n == 1 && m->vt->forward != NULL), TG_EUNSUPPORTED,
             "module_forward_n: %s has no forward for %d inputs%s", tg_module_type_name(m), n,
             m->vt->forward ? " (its forward takes one)" : "");
    TG_CHECK(!m->vt->forward_n || m->vt->n_inputs <= 0 || n == m->vt->n_inputs ||
                 (n == 1 && m->vt->forward), TG_EINVAL,
             "module_forward_n: %s takes %d inputs, got n=%d", tg_module_type_name(m),
             m->vt->n_inputs, n);
    return forward(m, y, n, xs);
}

int tg_module_output_count(const tg_module *m)
{
    return m && m->vt->forward_outputs && m->vt->n_outputs > 1 ? m->vt->n_outputs : 1;
}

int tg_module_forward_outputs(tg_module *m, tg_tensor **ys, int n, tg_tensor *const *xs)
{
    TG_CHECK(ys != NULL, TG_EINVAL, "module_forward_outputs: ys must not be NULL");
    const int k = tg_module_output_count(m);
    if (k == 1) return tg_module_forward_n(m, ys, n, xs);
    TG_CHECK(n >= 1 && xs != NULL, TG_EINVAL,
             "module_forward_outputs: n=%d must be >= 1 with xs not NULL", n);
    for (int i = 0; i < n; i++)
        TG_CHECK(xs[i] != NULL, TG_EINVAL, "module_forward_outputs: xs[%d] must not be NULL",
                 i);
    /* the inputs forward_n takes, or forward's one */
    const int want = m->vt->forward_n ? m->vt->n_inputs : 1;
    TG_CHECK(want <= 0 || n == want || (n == 1 && m->vt->forward), TG_EINVAL,
             "module_forward_outputs: %s takes %d inputs, got n=%d", tg_module_type_name(m),
             want, n);
    TG_CHECK(k <= TG_MODULE_MAX_OUTPUTS, TG_EINVAL,
             "module_forward_outputs: %s's vtable has n_outputs=%d, above %d",
             tg_module_type_name(m), k, TG_MODULE_MAX_OUTPUTS);
    tg_tensor *r[TG_MODULE_MAX_OUTPUTS] = {NULL};
    tg__callback_begin();
    tg__lib_enter();
    int rc = tg__module_compute(m);
    if (rc == TG_OK) rc = m->vt->forward_outputs(m, r, n, xs);
    tg__lib_leave();
    for (int i = 0; rc >= 0 && i < k; i++)
        if (!r[i])
            rc = tg__error(TG_EINVAL, "module_forward_outputs: %s's forward returned TG_OK "
                           "without output %d", tg_module_type_name(m), i);
    if (rc < 0) {
        for (int i = 0; i < k; i++) tg_tensor_release(r[i]);
        char what[96];
        snprintf(what, sizeof what, "module_forward_outputs: %s's forward",
                 tg_module_type_name(m));
        return tg__callback_end(what, rc);
    }
    for (int i = 0; i < k; i++) {   /* a failed capture releases its tensor */
        rc = tg__scope_capture(&r[i], TG_OK);
        if (rc < 0) {
            for (int j = i + 1; j < k; j++) tg_tensor_release(r[j]);
            return rc;
        }
        ys[i] = r[i];
    }
    return TG_OK;
}

void tg_module_train(tg_module *m, bool training)
{
    if (!m) return;
    m->training = training;
    if (m->vt->train) m->vt->train(m, training);
    for (int i = 0; i < m->n_children; i++) tg_module_train(m->children[i].m, training);
}

bool tg_module_is_training(const tg_module *m) { return m && m->training; }

static int tg__zero_grad_visit(tg_module *m, void *user)
{
    (void)user;
    for (int i = 0; i < m->n_params; i++) tg_tensor_zero_grad(m->params[i].t);
    return TG_OK;
}

void tg_module_zero_grad(tg_module *m)
{
    if (m) tg__module_visit(m, tg__zero_grad_visit, NULL);
}

int tg_module_zero_grad_ex(tg_module *m, bool set_to_none)
{
    TG_CHECK(m != NULL, TG_EINVAL, "module_zero_grad: m must not be NULL");
    if (set_to_none) {
        tg_module_zero_grad(m);
        return TG_OK;
    }
    tg_tensor **params = NULL;
    int n = 0;
    TG_TRY(tg_module_parameters(m, &params, &n));
    int rc = tg__zero_grads_in_place(n, params);
    free(params);
    return rc;
}
