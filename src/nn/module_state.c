/* src/nn/module_state.c - the state dict: walking parameters and buffers with
 * their dotted names in PyTorch's order, saving to and loading from a
 * safetensors set. */
#include <string.h>

#include "nn/module_internal.h"
#include "nn/state_check.h"
#include "tapegrad/autograd.h"

/* ---- the walk ---- */

typedef struct tg__walk {
    tg_module_state_fn fn;
    void *user;
    char name[TG_MODULE_NAME_MAX];   /* prefix + the current path */
} tg__walk;

/* Writes s (+ suffix) at w->name + len; TG_EINVAL if the name does not fit. */
static int tg__walk_name(tg__walk *w, size_t len, const char *s, const char *suffix,
                         size_t *newlen)
{
    int k = snprintf(w->name + len, sizeof w->name - len, "%s%s", s, suffix);
    TG_CHECK(k >= 0 && (size_t)k < sizeof w->name - len, TG_EINVAL,
             "module state: name '%.*s%s%s' is longer than %d characters", (int)len, w->name, s,
             suffix, TG_MODULE_NAME_MAX - 1);
    *newlen = len + (size_t)k;
    return TG_OK;
}

/* Per module: parameters, then buffers, then each child depth-first
 * (torch.nn.Module.state_dict's order). */
static int tg__walk_rec(const tg_module *m, tg__walk *w, size_t len)
{
    size_t nl = 0;
    for (int i = 0; i < m->n_params; i++) {
        TG_TRY(tg__walk_name(w, len, m->params[i].name, "", &nl));
        TG_TRY(w->fn(w->name, m->params[i].t, true, w->user));
    }
    for (int i = 0; i < m->n_buffers; i++) {
        TG_TRY(tg__walk_name(w, len, m->buffers[i].name, "", &nl));
        TG_TRY(w->fn(w->name, m->buffers[i].t, false, w->user));
    }
    for (int i = 0; i < m->n_children; i++) {
        TG_TRY(tg__walk_name(w, len, m->children[i].name, ".", &nl));
        TG_TRY(tg__walk_rec(m->children[i].m, w, nl));
    }
    w->name[len] = '\0';
    return TG_OK;
}

/* Walks m with every name preceded by prefix ("" / NULL: none; a '.' is
 * added unless prefix already ends with one). */
static int tg__walk_prefixed(const tg_module *m, const char *prefix, tg_module_state_fn fn,
                             void *user)
{
    tg__walk w = {.fn = fn, .user = user};
    size_t len = 0;
    if (prefix && prefix[0]) {
        bool dot = prefix[strlen(prefix) - 1] == '.';
        TG_TRY(tg__walk_name(&w, 0, prefix, dot ? "" : ".", &len));
    }
    return tg__walk_rec(m, &w, len);
}

/* The user's fn and its user pointer, called through user_state_fn. */
typedef struct {
    tg_module_state_fn fn;
    void *user;
} user_walk;

static int user_state_fn(const char *name, tg_tensor *t, bool is_param, void *p)
{
    const user_walk *u = p;
    tg__callback_begin();
    return tg__callback_end("module_foreach_state: fn", u->fn(name, t, is_param, u->user));
}

int tg_module_foreach_state(const tg_module *m, tg_module_state_fn fn, void *user)
{
    TG_CHECK(m != NULL && fn != NULL, TG_EINVAL, "module_foreach_state: m and fn must not be NULL");
    user_walk u = {.fn = fn, .user = user};
    return tg__walk_prefixed(m, NULL, user_state_fn, &u);
}

static int tg__count_fn(const char *name, tg_tensor *t, bool is_param, void *user)
{
    (void)name;
    (void)t;
    (void)is_param;
    ++*(int *)user;
    return TG_OK;
}

int tg_module_state_count(const tg_module *m)
{
    int n = 0;
    const int rc = m ? tg__walk_prefixed(m, NULL, tg__count_fn, &n) : TG_OK;
    return rc < 0 ? rc : n;
}

/* ---- parameters, each tensor once ---- */

/* Calls fn(t, user) for every parameter entry (name) of m and its
 * descendants in state-dict order; stops when fn returns false (and then
 * returns false). */
static bool tg__each_param(const tg_module *m, bool (*fn)(tg_tensor *t, void *user), void *user)
{
    for (int i = 0; i < m->n_params; i++)
        if (!fn(m->params[i].t, user)) return false;
    for (int i = 0; i < m->n_children; i++)
        if (!tg__each_param(m->children[i].m, fn, user)) return false;
    return true;
}

/* Whether t is among the first `left` entries: a repeat of an earlier one. */
typedef struct tg__earlier {
    const tg_tensor *t;
    int left;
    bool seen;
} tg__earlier;

static bool tg__earlier_fn(tg_tensor *t, void *user)
{
    tg__earlier *e = user;
    if (e->left-- == 0) return false;
    e->seen = t == e->t;
    return !e->seen;
}

/* Counts the entries whose tensor no earlier entry holds (pointer
 * comparisons only: no allocation, so counting cannot fail). */
typedef struct tg__unique {
    const tg_module *root;
    int k, n;
} tg__unique;

static bool tg__unique_fn(tg_tensor *t, void *user)
{
    tg__unique *u = user;
    tg__earlier e = {t, u->k++, false};
    tg__each_param(u->root, tg__earlier_fn, &e);
    u->n += !e.seen;
    return true;
}

int tg_module_parameter_count(const tg_module *m)
{
    tg__unique u = {m, 0, 0};
    if (m) tg__each_param(m, tg__unique_fn, &u);
    return u.n;
}

int64_t tg_module_parameter_numel(const tg_module *m)
{
    tg_tensor **params = NULL;
    int n = 0;
    int64_t total = 0;
    if (!m || tg_module_parameters(m, &params, &n) < 0) return 0;
    for (int i = 0; i < n; i++) total += tg_tensor_numel(params[i]);
    free(params);
    return total;
}

typedef struct tg__at {
    int want, seen;
    char *name;
    size_t cap;
    tg_tensor *t;
    bool is_param, found;
} tg__at;

/* Returned by a walk callback to end the walk early (not a tg_status; the
 * caller looks at its own found flag). */
#define TG__WALK_STOP (-1000)

static int tg__at_fn(const char *name, tg_tensor *t, bool is_param, void *user)
{
    tg__at *a = user;
    if (a->seen++ != a->want) return TG_OK;
    if (a->name) {
        TG_CHECK(strlen(name) < a->cap, TG_EINVAL,
                 "module_state_at: name '%s' does not fit in cap=%zu bytes", name, a->cap);
        memcpy(a->name, name, strlen(name) + 1);
    }
    a->t = t;
    a->is_param = is_param;
    a->found = true;
    return TG__WALK_STOP;
}

int tg_module_state_at(const tg_module *m, int i, char *name, size_t cap, tg_tensor **t,
                       bool *is_param)
{
    TG_CHECK(m != NULL, TG_EINVAL, "module_state_at: m must not be NULL");
    tg__at a = {.want = i, .name = name, .cap = cap};
    TG_CHECK(i >= 0, TG_EINVAL, "module_state_at: i=%d must be >= 0", i);
    int rc = tg__walk_prefixed(m, NULL, tg__at_fn, &a);
    if (!a.found) {
        if (rc < 0) return rc;
        return tg__error(TG_EINVAL, "module_state_at: i=%d must be < %d entries", i, a.seen);
    }
    if (t) *t = a.t;
    if (is_param) *is_param = a.is_param;
    return TG_OK;
}

typedef struct tg__plist {
    tg_tensor **v;
    int n;
} tg__plist;

static bool tg__plist_fn(tg_tensor *t, void *user)
{
    tg__plist *p = user;
    for (int i = 0; i < p->n; i++)
        if (p->v[i] == t) return true;   /* shared: listed at its first name */
    p->v[p->n++] = t;
    return true;
}

int tg_module_parameters(const tg_module *m, tg_tensor ***params, int *n)
{
    TG_CHECK(m != NULL && params != NULL && n != NULL, TG_EINVAL,
             "module_parameters: m, params and n must not be NULL");
    int np = tg_module_parameter_count(m);
    tg__plist p = {NULL, 0};
    if (np > 0) {
        p.v = tg__malloc(sizeof *p.v * (size_t)np);
        if (!p.v) return TG_ENOMEM;
        tg__each_param(m, tg__plist_fn, &p);
    }
    TG_ASSERT(p.n == np);
    *params = p.v;
    *n = p.n;
    return TG_OK;
}

/* ---- named parameters ---- */

/* Collects the parameter entries whose tensor no earlier entry holds: with
 * v NULL it counts them and the bytes of their names; with v set it copies
 * the names into text and fills names and v. */
typedef struct tg__named {
    tg_tensor **v;
    char **names;
    char *text;
    int n;
    size_t bytes;
} tg__named;

static int tg__named_fn(const char *name, tg_tensor *t, bool is_param, void *user)
{
    tg__named *a = user;
    if (!is_param) return TG_OK;
    const tg_tensor *const *seen = (const tg_tensor *const *)a->v;
    if (seen) {
        for (int i = 0; i < a->n; i++)
            if (seen[i] == t) return TG_OK;   /* shared: listed at its first name */
        const size_t len = strlen(name) + 1;
        memcpy(a->text + a->bytes, name, len);
        a->names[a->n] = a->text + a->bytes;
        a->v[a->n] = t;
        a->bytes += len;
    } else {
        a->bytes += strlen(name) + 1;   /* a repeat's name is counted too: an upper bound */
    }
    a->n++;
    return TG_OK;
}

int tg_module_named_parameters(const tg_module *m, char ***names, tg_tensor ***params, int *n)
{
    TG_CHECK(m != NULL && names != NULL && params != NULL && n != NULL, TG_EINVAL,
             "module_named_parameters: m, names, params and n must not be NULL");
    tg__named size = {0};
    TG_TRY(tg__walk_prefixed(m, NULL, tg__named_fn, &size));
    const int np = tg_module_parameter_count(m);
    char **nv = NULL;
    tg_tensor **pv = NULL;
    if (np > 0) {
        nv = tg__malloc(sizeof *nv * (size_t)np + size.bytes);
        pv = tg__malloc(sizeof *pv * (size_t)np);
        if (!nv || !pv) {
            free(nv);
            free(pv);
            return TG_ENOMEM;
        }
        tg__named fill = {.v = pv, .names = nv, .text = (char *)(nv + np)};
        const int rc = tg__walk_prefixed(m, NULL, tg__named_fn, &fill);
        TG_ASSERT(rc == TG_OK && fill.n == np);
    }
    *names = nv;
    *params = pv;
    *n = np;
    return TG_OK;
}

/* ---- save ---- */

static int tg__save_fn(const char *name, tg_tensor *t, bool is_param, void *user)
{
    (void)is_param;
    return tg_st_set(user, name, t);
}

int tg_module_state_dict_save(const tg_module *m, tg_st_file *f, const char *prefix)
{
    TG_CHECK(m != NULL && f != NULL, TG_EINVAL, "state_dict_save: m and f must not be NULL");
    return tg__walk_prefixed(m, prefix, tg__save_fn, f);
}

/* ---- load: validate everything, then copy ---- */

typedef struct tg__load {
    const tg_module *root;
    const tg_st_file *f;
    bool strict, copy;
    int matched;
} tg__load;

/* Whether t is the zero_if_missing buffer (BatchNorm's num_batches_tracked)
 * of a module among m and its descendants. */
static bool tg__is_zero_if_missing(const tg_module *m, const tg_tensor *t)
{
    const char *name = m->vt->zero_if_missing;
    if (name && tg__module_local(m, name) == t) return true;
    for (int i = 0; i < m->n_children; i++)
        if (tg__is_zero_if_missing(m->children[i].m, t)) return true;
    return false;
}

static int tg__load_check(const char *key, const tg_tensor *dst, const tg_tensor *src)
{
    char a[160], b[160];
    const tg_dtype fdt = tg_tensor_dtype(src), mdt = tg_tensor_dtype(dst);
    /* tg_module_to_dtype converts float tensors only: no hint for the others */
    TG_CHECK(fdt == mdt, TG_EDTYPE,
             "load_state_dict: '%s' has dtype %s in the file but %s in the module "
             "(no implicit conversion%s)", key, tg_dtype_name(fdt), tg_dtype_name(mdt),
             tg_dtype_is_float(fdt) && tg_dtype_is_float(mdt) ? "; use tg_module_to_dtype" : "");
    TG_CHECK(tg_tensor_same_shape(src, dst), TG_ESHAPE,
             "load_state_dict: '%s' has shape %s in the file but %s in the module", key,
             tg_shape_str(a, sizeof a, tg_tensor_ndim(src), tg_tensor_shape(src)),
             tg_shape_str(b, sizeof b, tg_tensor_ndim(dst), tg_tensor_shape(dst)));
    return TG_OK;
}

static int tg__load_fn(const char *key, tg_tensor *dst, bool is_param, void *user)
{
    (void)is_param;
    tg__load *l = user;
    tg_tensor *src = tg_st_get(l->f, key);
    /* PyTorch's BatchNorm and SyncBatchNorm read a state dict without
     * version metadata (as every safetensors file is) that lacks
     * num_batches_tracked as holding 0, strict or not: checkpoints from
     * before torch 0.4.1 have no count.  Modules say so by their vtable's
     * zero_if_missing. */
    if (!src && !is_param && tg__is_zero_if_missing(l->root, dst))
        return l->copy ? tg_tensor_set_flat(dst, 0, 0.0) : TG_OK;
    if (!src) {
        const char *other = tg_st_skipped_dtype(l->f, key);
        TG_CHECK(!l->strict || !other, TG_EDTYPE, "load_state_dict: key '%s' is stored as %s, "
                 "a dtype tapegrad does not load (strict)", key, other);
        TG_CHECK(!l->strict, TG_ENOTFOUND, "load_state_dict: missing key '%s' (strict)", key);
        return TG_OK;
    }
    if (!l->copy) {
        l->matched++;
        return tg__load_check(key, dst, src);
    }
    /* Shapes and dtypes are equal (checked in the first pass), so a
     * contiguous destination takes a straight gather that cannot fail. */
    if (tg_tensor_is_contiguous(dst)) {
        tg__gather(src, tg_tensor_dtype(dst), tg_tensor_data(dst));
        tg_tensor_bump_version(dst);
        return TG_OK;
    }
    return tg_tensor_copy_(dst, src);
}

/* TG_EINVAL naming the first key of f under prefix that m does not have. */
static int tg__load_unexpected(const tg_module *m, const tg_st_file *f, const char *prefix)
{
    size_t plen = prefix ? strlen(prefix) : 0;
    bool add_dot = plen > 0 && prefix[plen - 1] != '.';
    for (int i = 0; i < tg_st_count(f); i++) {
        const char *key = NULL;
        tg_tensor *t = NULL;
        tg_st_at(f, i, &key, &t);
        if (plen && (strncmp(key, prefix, plen) != 0 || (add_dot && key[plen] != '.')))
            continue;
        const char *rest = key + plen + (add_dot ? 1 : 0);
        TG_CHECK(tg_module_find(m, rest) != NULL, TG_EINVAL,
                 "load_state_dict: unexpected key '%s' (strict): the module has no such "
                 "parameter or buffer", key);
    }
    return TG_OK;
}

/* ---- the keys a load leaves out (PyTorch's missing / unexpected keys) ---- */

typedef struct compare_walk {
    const tg_module *root;
    const tg_st_file *f;
    tg_state_key_fn fn;
    void *user;
    int missing, unexpected;
} compare_walk;

static void report(compare_walk *c, const char *key, bool missing)
{
    if (missing) c->missing++;
    else c->unexpected++;
    if (c->fn) c->fn(key, missing, c->user);
}

static int missing_fn(const char *key, tg_tensor *dst, bool is_param, void *user)
{
    compare_walk *c = user;
    /* a zero_if_missing buffer (BatchNorm's count) loads as 0 when absent
     * (tg__load_fn) */
    if (!tg_st_get(c->f, key) && (is_param || !tg__is_zero_if_missing(c->root, dst)))
        report(c, key, true);
    return TG_OK;
}

int tg_module_state_dict_compare(const tg_module *m, const tg_st_file *f, const char *prefix,
                                 tg_state_key_fn fn, void *user, int *n_missing,
                                 int *n_unexpected)
{
    TG_CHECK(m != NULL && f != NULL, TG_EINVAL,
             "state_dict_compare: m and f must not be NULL");
    compare_walk c = {.root = m, .f = f, .fn = fn, .user = user};
    TG_TRY(tg__walk_prefixed(m, prefix, missing_fn, &c));
    const size_t plen = prefix ? strlen(prefix) : 0;
    const bool add_dot = plen > 0 && prefix[plen - 1] != '.';
    for (int i = 0; i < tg_st_count(f); i++) {
        const char *key = NULL;
        tg_st_at(f, i, &key, NULL);
        if (plen && (strncmp(key, prefix, plen) != 0 || (add_dot && key[plen] != '.')))
            continue;
        if (!tg_module_find(m, key + plen + (add_dot ? 1 : 0))) report(&c, key, false);
    }
    if (n_missing) *n_missing = c.missing;
    if (n_unexpected) *n_unexpected = c.unexpected;
    return TG_OK;
}

int tg__module_state_dict_check(const tg_module *m, const tg_st_file *f, const char *prefix,
                                bool strict)
{
    tg__load l = {.root = m, .f = f, .strict = strict};
    TG_TRY(tg__walk_prefixed(m, prefix, tg__load_fn, &l));
    return strict ? tg__load_unexpected(m, f, prefix) : TG_OK;
}

int tg_module_load_state_dict(tg_module *m, const tg_st_file *f, const char *prefix, bool strict)
{
    TG_CHECK(m != NULL && f != NULL, TG_EINVAL, "load_state_dict: m and f must not be NULL");
    TG_TRY(tg__module_state_dict_check(m, f, prefix, strict));
    tg__load l = {.root = m, .f = f, .strict = strict, .copy = true};
    return tg__walk_prefixed(m, prefix, tg__load_fn, &l);
}
