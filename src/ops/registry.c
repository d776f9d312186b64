/* src/ops/registry.c - the op registry: a table of names, built once.
 *
 * The registry only finds ops by name (tg_op_find, `tapegrad ops`, the CLI's
 * gradcheck); calling an op goes through src/ops/dispatch.c and needs no
 * lookup.  Schemas are the caller's const data: the table keeps entries of
 * its own that point at them. */
#include <ctype.h>
#include <pthread.h>
#include <string.h>

#include "core/core.h"
#include "ops/dispatch.h"

typedef struct op_entry {
    const tg_op_schema *op;
    UT_hash_handle hh;
} op_entry;

/* Built on first use, under the lock, by registering the built-in families.
 * A build that fails (out of memory) leaves the registry empty and reports
 * the error; the next use tries again. */
static op_entry *tg__ops;               /* uthash table keyed by name */
static const tg_op_schema **tg__sorted; /* the ops in name order */
static int tg__n_ops;
static bool tg__built;                  /* the built-in ops are in */
static pthread_mutex_t tg__registry_lock = PTHREAD_MUTEX_INITIALIZER;
/* This thread is registering the built-in families (with the lock held). */
static _Thread_local bool tg__building;

#define TG__OP_NAME_MAX 63

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
    for (op_entry *e = tg__ops; e; e = e->hh.next) arr[i++] = e->op;
    TG_ASSERT(i == tg__n_ops);
    qsort(arr, (size_t)tg__n_ops, sizeof *arr, cmp_name);
    free(tg__sorted);
    tg__sorted = arr;
    return TG_OK;
}

static op_entry *find_locked(const char *name)
{
    op_entry *e = NULL;
    HASH_FIND_STR(tg__ops, name, e);
    return e;
}

static void remove_locked(op_entry *e)
{
    HASH_DEL(tg__ops, e);
    free(e);
    tg__n_ops--;
}

/* Checks a schema from a caller: every rule of tapegrad/op.h. */
static int check_schema(const tg_op_schema *op)
{
    TG_CHECK(op != NULL, TG_EINVAL, "op_register: op must not be NULL");
    TG_CHECK(op->name != NULL && op->name[0] != '\0', TG_EINVAL,
             "op_register: name must be a non-empty string");
    size_t len = strlen(op->name);
    TG_CHECK(len <= TG__OP_NAME_MAX, TG_EINVAL, "op_register: name '%.20s...' is %zu characters; "
             "at most %d", op->name, len, TG__OP_NAME_MAX);
    for (size_t i = 0; i < len; i++)
        TG_CHECK(isalnum((unsigned char)op->name[i]) || op->name[i] == '_', TG_EINVAL,
                 "op_register: name '%s' has '%c' at %zu; letters, digits and '_' only",
                 op->name, op->name[i], i);
    TG_CHECK(op->arity >= TG_OP_VARIADIC && op->arity <= TG_OP_MAX_INPUTS, TG_EINVAL,
             "op_register: %s: arity=%d must be in [0, %d] or TG_OP_VARIADIC (-1)", op->name,
             op->arity, TG_OP_MAX_INPUTS);
    TG_CHECK((int)op->amp >= 0 && op->amp < TG_AMP_POLICY_COUNT, TG_EINVAL,
             "op_register: %s: amp=%d is not a tg_amp_policy", op->name, (int)op->amp);
    TG_CHECK(op->forward != NULL, TG_EINVAL, "op_register: %s: forward must not be NULL",
             op->name);
    TG_CHECK(op->backward != NULL || !op->double_backward, TG_EINVAL,
             "op_register: %s: double_backward needs a backward", op->name);
    return TG_OK;
}

/* Adds op to the table; called with the lock held.  On error the table is
 * as it was. */
static int add_locked(const tg_op_schema *op)
{
    TG_TRY(check_schema(op));
    TG_CHECK(find_locked(op->name) == NULL, TG_EINVAL,
             "op_register: an op named '%s' is registered already", op->name);
    op_entry *e = tg__calloc(1, sizeof *e);
    if (!e) return TG_ENOMEM;
    e->op = op;
    HASH_ADD_KEYPTR(hh, tg__ops, op->name, strlen(op->name), e);
    if (TG_HASH_ADD_FAILED(e)) {
        free(e);
        return tg__error(TG_ENOMEM, "op registry: out of memory registering op '%s'", op->name);
    }
    tg__n_ops++;
    return TG_OK;
}

/* Registers the built-in ops unless they are in; called with the lock held.
 * On error the table is left empty, to be built again by the next call. */
static int build_locked(void)
{
    if (tg__built) return TG_OK;
    tg__building = true;
    int rc = tg__register_builtin_ops();
    tg__building = false;
    if (rc == TG_OK) rc = sort_ops();
    if (rc < 0) {
        op_entry *e, *tmp;
        HASH_ITER(hh, tg__ops, e, tmp) remove_locked(e);
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

int tg_op_register(const tg_op_schema *op)
{
    /* The built-in families register from inside build_locked, on this
     * thread, with the lock held; the build sorts once at its end. */
    if (tg__building) return add_locked(op);
    /* Anything registered later (a program's own ops) comes after the
     * built-ins, so that their names are taken first. */
    pthread_mutex_lock(&tg__registry_lock);
    int rc = build_locked();
    if (rc == TG_OK) rc = add_locked(op);
    if (rc == TG_OK && (rc = sort_ops()) < 0) remove_locked(find_locked(op->name));
    pthread_mutex_unlock(&tg__registry_lock);
    return rc;
}

const tg_op_schema *tg__op_find(const char *name)
{
    if (!name || registry_ready() < 0) return NULL;
    pthread_mutex_lock(&tg__registry_lock);
    const op_entry *e = find_locked(name);
    pthread_mutex_unlock(&tg__registry_lock);
    return e ? e->op : NULL;
}

int tg_op_find(const tg_op_schema **out, const char *name)
{
    TG_CHECK(out != NULL, TG_EINVAL, "op_find: out must not be NULL");
    TG_CHECK(name != NULL, TG_EINVAL, "op_find: name must not be NULL");
    TG_TRY(registry_ready());
    const tg_op_schema *op = tg__op_find(name);
    TG_CHECK(op != NULL, TG_ENOTFOUND, "op_find: no op named '%s'", name);
    *out = op;
    return TG_OK;
}

static void fill_info(const tg_op_schema *op, tg_op_info *out)
{
    out->name = op->name;
    out->arity = op->arity;
    out->amp = op->amp;
    out->has_backward = op->backward != NULL;
    out->has_double_backward = op->backward != NULL && op->double_backward;
    out->vjp = op->vjp;
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
