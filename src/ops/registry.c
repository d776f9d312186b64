/* The op registry (built once, keyed by name), the one dispatch path of every
 * op (AMP casts, recording, tracing) and the thread-local autocast scopes. */
#include <pthread.h>
#include <string.h>

#include "internal.h"
#include "pointwise_internal.h"
#include "tapegrad/ops.h"

/* ---- registry ---------------------------------------------------------------- */

/* Built on first use, under the lock, by running every family's register
 * function.  A build that fails (out of memory) leaves the registry empty and
 * reports the error; the next use tries again. */
static tg_op_schema *tg__ops;           /* uthash table keyed by name */
static const tg_op_schema **tg__sorted; /* the ops in name order */
static int tg__n_ops;
static bool tg__built;                  /* the built-in ops are in */
static pthread_mutex_t tg__registry_lock = PTHREAD_MUTEX_INITIALIZER;
/* This thread is running the families' register functions (with the lock
 * held), and the first error they met. */
static _Thread_local bool tg__building;
static _Thread_local int tg__build_rc;

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const tg_op_schema *const *)a)->name, (*(const tg_op_schema *const *)b)->name);
}

/* Rebuilds the name-ordered array; called with the lock held.  On TG_ENOMEM
 * the old array is kept. */
static int sort_ops(void)
{
    const tg_op_schema **arr = tg__malloc((size_t)(tg__n_ops ? tg__n_ops : 1) * sizeof *arr);
    if (!arr) return tg__error(TG_ENOMEM, "op registry: out of memory sorting %d ops", tg__n_ops);
    int i = 0;
    for (tg_op_schema *op = tg__ops; op; op = op->hh.next) arr[i++] = op;
    TG_ASSERT(i == tg__n_ops);
    qsort(arr, (size_t)tg__n_ops, sizeof *arr, cmp_name);
    free(tg__sorted);
    tg__sorted = arr;
    return TG_OK;
}

/* Adds op to the table; called with the lock held.  TG_ENOMEM leaves the
 * table as it was. */
static int add_op(tg_op_schema *op)
{
    TG_ASSERT(op != NULL && op->name != NULL && op->forward != NULL);
    tg_op_schema *dup = NULL;
    HASH_FIND_STR(tg__ops, op->name, dup);
    TG_ASSERT(dup == NULL);   /* two schemas with one name */
    HASH_ADD_KEYPTR(hh, tg__ops, op->name, strlen(op->name), op);
    if (TG_HASH_ADD_FAILED(op))
        return tg__error(TG_ENOMEM, "op registry: out of memory registering op '%s'", op->name);
    tg__n_ops++;
    return TG_OK;
}

/* Registers the built-in ops unless they are in; called with the lock held.
 * On error the table is left empty, to be built again by the next call. */
static int build_locked(void)
{
    if (tg__built) return TG_OK;
    tg__building = true;
    tg__build_rc = TG_OK;
    tg__register_binary();
    tg__register_unary();
    tg__register_activation();
    tg__register_cast();
    tg__register_reduce();
    tg__register_shape();
    tg__register_linalg();
    tg__register_conv();
    tg__register_norm();
    tg__register_loss();
    tg__register_quant();
    tg__register_softplus();
    tg__register_clamp();
    tg__register_where();
    tg__register_one_hot();
    tg__register_embedding();
    tg__building = false;
    int rc = tg__build_rc;
    if (rc == TG_OK) rc = sort_ops();
    if (rc < 0) {
        HASH_CLEAR(hh, tg__ops);
        tg__n_ops = 0;
        return rc;
    }
    tg__built = true;
    return TG_OK;
}

/* TG_OK once the built-in ops are registered; TG_ENOMEM (message set) when
 * they cannot be. */
static int registry_ready(void)
{
    pthread_mutex_lock(&tg__registry_lock);
    int rc = build_locked();
    pthread_mutex_unlock(&tg__registry_lock);
    return rc;
}

int tg__op_register(tg_op_schema *op)
{
    /* Families register from inside build_locked, on this thread, with the
     * lock held: the first error is kept for it to report. */
    if (tg__building) {
        if (tg__build_rc == TG_OK) tg__build_rc = add_op(op);
        return tg__build_rc;
    }
    /* Anything registered later (tests' own ops) comes after the built-ins. */
    pthread_mutex_lock(&tg__registry_lock);
    int rc = build_locked();
    if (rc == TG_OK) rc = add_op(op);
    if (rc == TG_OK && (rc = sort_ops()) < 0) {
        HASH_DEL(tg__ops, op);
        tg__n_ops--;
    }
    pthread_mutex_unlock(&tg__registry_lock);
    return rc;
}

tg_op_schema *tg__op_find(const char *name)
{
    if (!name || registry_ready() < 0) return NULL;
    tg_op_schema *op = NULL;
    pthread_mutex_lock(&tg__registry_lock);
    HASH_FIND_STR(tg__ops, name, op);
    pthread_mutex_unlock(&tg__registry_lock);
    return op;
}

static void fill_info(const tg_op_schema *op, tg_op_info *out)
{
    out->name = op->name;
    out->arity = op->arity;
    out->amp = op->amp;
    out->has_backward = op->backward != NULL;
    out->has_double_backward = op->backward != NULL && op->double_backward;
}

int tg_op_count(void)
{
    TG_TRY(registry_ready());
    pthread_mutex_lock(&tg__registry_lock);
    int n = tg__n_ops;
    pthread_mutex_unlock(&tg__registry_lock);
    return n;
}

int tg_op_info_at(int i, tg_op_info *out)
{
    TG_CHECK(out != NULL, TG_EINVAL, "op_info_at: out must not be NULL");
    int n = tg_op_count();
    TG_TRY(n);
    TG_CHECK(i >= 0 && i < n, TG_EINVAL, "op_info_at: i=%d must be in [0, %d)", i, n);
    pthread_mutex_lock(&tg__registry_lock);
    fill_info(tg__sorted[i], out);
    pthread_mutex_unlock(&tg__registry_lock);
    return TG_OK;
}

int tg_op_info_find(const char *name, tg_op_info *out)
{
    TG_CHECK(name != NULL, TG_EINVAL, "op_info_find: name must not be NULL");
    TG_CHECK(out != NULL, TG_EINVAL, "op_info_find: out must not be NULL");
    TG_TRY(registry_ready());
    const tg_op_schema *op = tg__op_find(name);
    TG_CHECK(op != NULL, TG_ENOTFOUND, "op_info_find: no op named '%s'", name);
    fill_info(op, out);
    return TG_OK;
}

const char *tg_amp_policy_name(tg_amp_policy p)
{
    static const char *const names[TG_AMP_POLICY_COUNT] = {
        [TG_AMP_PROMOTE] = "promote",
        [TG_AMP_LOWER_PRECISION] = "lower_precision",
        [TG_AMP_FP32] = "fp32",
        [TG_AMP_KEEP] = "keep",
    };
    return (int)p >= 0 && p < TG_AMP_POLICY_COUNT ? names[p] : "?";
}

/* ---- autocast scopes ------------------------------------------------------------ */

#define TG__AUTOCAST_DEPTH 16

typedef struct autocast_entry {
    bool enabled;
    tg_dtype dtype;
} autocast_entry;

static _Thread_local autocast_entry tg__autocast[TG__AUTOCAST_DEPTH];
static _Thread_local int tg__autocast_depth;

static int autocast_push(const char *what, bool enabled, tg_dtype dt)
{
    TG_CHECK(tg__autocast_depth < TG__AUTOCAST_DEPTH, TG_EINVAL,
             "%s: autocast scopes nested deeper than %d", what, TG__AUTOCAST_DEPTH);
    tg__autocast[tg__autocast_depth++] = (autocast_entry){.enabled = enabled, .dtype = dt};
    return TG_OK;
}

int tg_autocast_begin(tg_dtype dt)
{
    TG_CHECK(dt == TG_F16 || dt == TG_BF16 || dt == TG_F32, TG_EINVAL,
             "autocast_begin: dt=%s must be f16, bf16 or f32", tg_dtype_name(dt));
    return autocast_push("autocast_begin", true, dt);
}

int tg_autocast_disable_begin(void) { return autocast_push("autocast_disable_begin", false, TG_F32); }

int tg_autocast_end(void)
{
    TG_CHECK(tg__autocast_depth > 0, TG_EINVAL,
             "autocast_end: no autocast scope is open (unmatched end)");
    tg__autocast_depth--;
    return TG_OK;
}

/* Set by the backward engine: a backward's ops are never autocast, since
 * each gradient must keep the dtype its forward gave it. */
static _Thread_local bool tg__autocast_suspended;

bool tg__autocast_suspend(bool suspend)
{
    bool prev = tg__autocast_suspended;
    tg__autocast_suspended = suspend;
    return prev;
}

bool tg__autocast_dtype(tg_dtype *dt)
{
    if (tg__autocast_depth == 0 || tg__autocast_suspended) return false;
    const autocast_entry *e = &tg__autocast[tg__autocast_depth - 1];
    if (!e->enabled) return false;
    if (dt) *dt = e->dtype;
    return true;
}

bool tg_autocast_active(tg_dtype *dt) { return tg__autocast_dtype(dt); }

tg_dtype tg_promote_dtypes(tg_dtype a, tg_dtype b)
{
    if (a == b) return a;
    bool fa = tg_dtype_is_float(a), fb = tg_dtype_is_float(b);
    if (!fa || !fb) return fa ? a : b;   /* a float wins over an integer */
    if (a == TG_F64 || b == TG_F64) return TG_F64;
    /* f32 with a half type, or f16 with bf16 (neither holds the other). */
    return TG_F32;
}

/* ---- dispatch ------------------------------------------------------------------ */

/* The dtype op's AMP policy casts the float inputs to; false when none is cast. */
static bool amp_target(const tg_op_schema *op, int n, tg_tensor *const *in, tg_dtype *target)
{
    if (op->amp == TG_AMP_KEEP) return false;
    /* As PyTorch's type promotion: a 0-d tensor's dtype counts only when every
     * float input is 0-d (an f32 tensor times an f64 0-d tensor is f32). */
    bool any = false, dimensioned = false;
    for (int i = 0; i < n; i++)
        dimensioned |= in[i] && tg_dtype_is_float(in[i]->dtype) && in[i]->ndim > 0;
    tg_dtype widest = TG_F32;
    for (int i = 0; i < n; i++) {
        if (!in[i] || !tg_dtype_is_float(in[i]->dtype) || (dimensioned && in[i]->ndim == 0))
            continue;
        widest = any ? tg_promote_dtypes(widest, in[i]->dtype) : in[i]->dtype;
        any = true;
    }
    if (!any) return false;
    tg_dtype scope;
    *target = widest;
    /* Inside autocast f64 is never lowered: an f64 input makes the op f64. */
    if (widest != TG_F64 && tg__autocast_dtype(&scope)) {
        if (op->amp == TG_AMP_LOWER_PRECISION) *target = scope;
        else if (op->amp == TG_AMP_FP32) *target = TG_F32;
    }
    return true;
}

/* Fills eff[i] with in[i] or a recorded cast of it (casts[i], new reference). */
static int apply_amp(const tg_op_schema *op, int n, tg_tensor *const *in, tg_tensor **eff,
                     tg_tensor **casts)
{
    tg_dtype target = TG_F32;
    bool cast = amp_target(op, n, in, &target);
    for (int i = 0; i < n; i++) {
        eff[i] = in[i];
        casts[i] = NULL;
        if (!cast || !in[i] || !tg_dtype_is_float(in[i]->dtype) || in[i]->dtype == target)
            continue;
        int rc = tg_to_dtype(&casts[i], in[i], target);
        if (rc < 0) {
            for (int j = 0; j < i; j++) tg_tensor_release(casts[j]);
            return rc;
        }
        eff[i] = casts[i];
    }
    return TG_OK;
}

static void describe_input(char *buf, size_t size, const tg_tensor *t)
{
    char shape[96], who[64];
    if (!t) {
        snprintf(buf, size, "none");
        return;
    }
    if (t->grad_fn) snprintf(who, sizeof who, "#%llu", (unsigned long long)t->grad_fn->seq);
    else if (t->requires_grad) snprintf(who, sizeof who, "leaf '%s'", t->name);
    else snprintf(who, sizeof who, "const");
    snprintf(buf, size, "%s %s %s", who, tg_dtype_name(t->dtype),
             tg_shape_str(shape, sizeof shape, t->ndim, t->shape));
}

static void trace_record(const tg_node *node, int n, tg_tensor *const *in, const tg_tensor *out)
{
    char desc[160], shape[96];
    fprintf(stderr, "[tape] record #%llu %s(", (unsigned long long)node->seq, node->op->name);
    for (int i = 0; i < n; i++) {
        describe_input(desc, sizeof desc, in[i]);
        fprintf(stderr, "%s%s", i ? ", " : "", desc);
    }
    fprintf(stderr, ") -> %s %s\n", tg_dtype_name(out->dtype),
            tg_shape_str(shape, sizeof shape, out->ndim, out->shape));
}

static bool any_requires_grad(int n, tg_tensor *const *in)
{
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->requires_grad) return true;
    return false;
}

/* A recorded output must be a tensor of its own: a forward that hands back an
 * input (retained) gets a fresh view of it instead, so the input's grad_fn is
 * not overwritten. */
static int own_output(tg_tensor **res)
{
    tg_tensor *t = *res;
    if (t->refcount == 1 && !t->grad_fn && !t->requires_grad) return TG_OK;
    tg_tensor *v = tg__tensor_view_of(t->storage, t->dtype, t->ndim, t->shape, t->strides,
                                      t->offset);
    if (!v) return TG_ENOMEM;
    tg_tensor_release(t);
    *res = v;
    return TG_OK;
}

static tg_node *make_node(const tg_op_schema *op, int n, tg_tensor *const *in,
                          const void *params, size_t params_size)
{
    tg_node *node = tg__node_new(op, n, in);
    if (!node || params_size == 0) return node;
    node->params = tg__malloc(params_size);
    if (!node->params) {
        tg__node_release(node);
        return NULL;
    }
    memcpy(node->params, params, params_size);
    node->params_size = params_size;
    return node;
}

static int op_call(const tg_op_schema *op, tg_tensor **out, int n, tg_tensor *const *in,
                   const void *params, size_t params_size)
{
    TG_ASSERT(op != NULL && (op->arity < 0 || op->arity == n));
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op->name);
    TG_CHECK(n >= 0 && n <= TG_NODE_MAX_INPUTS, TG_EINVAL, "%s: n=%d inputs must be in [0, %d]",
             op->name, n, TG_NODE_MAX_INPUTS);
    TG_CHECK(n == 0 || in != NULL, TG_EINVAL, "%s: inputs must not be NULL", op->name);
    TG_ASSERT(params_size == 0 || params != NULL);

    tg_tensor *eff[TG_NODE_MAX_INPUTS], *casts[TG_NODE_MAX_INPUTS];
    TG_TRY(apply_amp(op, n, in, eff, casts));

    int rc = TG_OK;
    tg_node *node = NULL;
    tg_tensor *res = NULL;
    if (tg_grad_enabled() && op->backward && any_requires_grad(n, eff)) {
        node = make_node(op, n, eff, params, params_size);
        if (!node) {
            rc = TG_ENOMEM;
            goto done;
        }
    }
    bool prev = tg_set_grad_enabled(false);
    rc = op->forward(node, &res, n, eff, params);
    tg_set_grad_enabled(prev);
    if (rc < 0) {
        tg_tensor_release(res);   /* a forward should not leave one; be safe */
        goto done;
    }
    TG_ASSERT(res != NULL);
    if (node) {
        rc = own_output(&res);
        if (rc < 0) {
            tg_tensor_release(res);
            goto done;
        }
        tg__node_save_uncast(node, n, in, casts);
        node->out_meta.dtype = res->dtype;
        node->out_meta.ndim = res->ndim;
        memcpy(node->out_meta.shape, res->shape, sizeof(int64_t) * (size_t)res->ndim);
        res->grad_fn = node;   /* steals the node's first reference */
        res->requires_grad = true;
        if (tg__trace_enabled()) trace_record(node, n, eff, res);
        node = NULL;
    }
    *out = res;
done:
    tg__node_release(node);
    for (int i = 0; i < n; i++) tg_tensor_release(casts[i]);
    return rc;
}

/* The ops an op runs itself (casts, its forward's helpers) are the library's;
 * its result goes to the caller's scope (tapegrad/scope.h). */
int tg__op_call(const tg_op_schema *op, tg_tensor **out, int n, tg_tensor *const *in,
                const void *params, size_t params_size)
{
    tg__lib_enter();
    int rc = op_call(op, out, n, in, params, params_size);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
