/* src/core/scope.c - scopes (tapegrad/scope.h): a per-thread stack of lists
 * of owned tensors.
 *
 * Capture rule.  Public functions that hand out tensors call
 * tg__scope_capture at their end.  Whether the caller is the user or the
 * library itself is told by a per-thread depth: the functions that run other
 * public ops on their own behalf (tg_op_call, losses, backward, module
 * forwards, gradcheck, the grad scaler) raise it while they run
 * (tg__lib_enter/tg__lib_leave), and only a result handed out at depth 0 is
 * captured.  A scope starts its body at depth 0 and restores the depth at its
 * end, so a callback (a module's forward) may open a scope of its own. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tapegrad/scope.h"

typedef struct scope {
    tg_tensor **items;   /* owned references, in capture order */
    int n, cap;
    int saved_depth;     /* the library depth when the scope opened */
} scope;

static _Thread_local scope *stack;   /* stack[0..n_open) */
static _Thread_local int n_open, cap_open;
static _Thread_local int lib_depth;

void tg__lib_enter(void)
{
    lib_depth++;
}

/* A scope left open inside a callback (a caller's mistake, not an invariant)
 * may have reset the depth to 0: it then stays there. */
void tg__lib_leave(void)
{
    if (lib_depth > 0) lib_depth--;
}

static int push_item(scope *s, tg_tensor *t)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        tg_tensor **items = realloc(s->items, sizeof *items * (size_t)cap);
        if (!items) return tg__error(TG_ENOMEM, "scope: no memory to own another tensor");
        s->items = items;
        s->cap = cap;
    }
    s->items[s->n++] = t;
    return TG_OK;
}

int tg__scope_capture(tg_tensor **out, int rc)
{
    if (rc < 0 || n_open == 0 || lib_depth > 0 || !out || !*out) return rc;
    int prc = push_item(&stack[n_open - 1], *out);
    if (prc < 0) {
        tg_tensor_release(*out);
        *out = NULL;
    }
    return prc < 0 ? prc : rc;
}

int tg__scope_capture_pair(tg_tensor **out_a, tg_tensor *a, tg_tensor **out_b, tg_tensor *b,
                           int rc)
{
    if (rc < 0) {
        tg_tensor_release(a);
        tg_tensor_release(b);
        return rc;
    }
    rc = tg__scope_capture(&a, TG_OK);
    if (rc < 0) {   /* a was released by the capture */
        tg_tensor_release(b);
        return rc;
    }
    if (b) {
        rc = tg__scope_capture(&b, TG_OK);
        if (rc < 0) {
            if (tg_scope_keep(a)) tg_tensor_release(a);
            return rc;
        }
        *out_b = b;
    }
    *out_a = a;
    return TG_OK;
}

int tg_scope_begin(void)
{
    if (n_open == cap_open) {
        int cap = cap_open ? 2 * cap_open : 8;
        scope *st = realloc(stack, sizeof *st * (size_t)cap);
        if (!st) return tg__error(TG_ENOMEM, "scope_begin: no memory for another scope");
        stack = st;
        cap_open = cap;
    }
    stack[n_open++] = (scope){.saved_depth = lib_depth};
    lib_depth = 0;
    return TG_OK;
}

int tg_scope_end(void)
{
    TG_CHECK(n_open > 0, TG_EINVAL, "scope_end: no scope is open on this thread");
    scope *s = &stack[--n_open];
    for (int i = s->n - 1; i >= 0; i--) tg_tensor_release(s->items[i]);
    free(s->items);
    lib_depth = s->saved_depth;
    if (n_open == 0) {   /* a thread that ends without scopes leaves nothing behind */
        free(stack);
        stack = NULL;
        cap_open = 0;
    }
    return TG_OK;
}

tg_tensor *tg_scope_keep(tg_tensor *t)
{
    if (n_open == 0) {
        tg__error(TG_EINVAL, "scope_keep: no scope is open on this thread");
        return NULL;
    }
    scope *s = &stack[n_open - 1];
    for (int i = s->n - 1; i >= 0; i--) {
        if (s->items[i] != t) continue;
        /* The rest keep their order (released last-created first). */
        memmove(&s->items[i], &s->items[i + 1], sizeof *s->items * (size_t)(s->n - 1 - i));
        s->n--;
        return t;
    }
    tg__error(TG_EINVAL, "scope_keep: t is not owned by the innermost scope");
    return NULL;
}

tg_tensor *tg_scope_add(tg_tensor *t)
{
    if (!t) return NULL;
    if (n_open == 0) {
        tg_tensor_release(t);
        tg__error(TG_EINVAL, "scope_add: no scope is open on this thread (t was released)");
        return NULL;
    }
    if (push_item(&stack[n_open - 1], t) < 0) {
        tg_tensor_release(t);
        return NULL;
    }
    return t;
}

int tg_scope_depth(void)
{
    return n_open;
}

int tg_scope_size(void)
{
    return n_open ? stack[n_open - 1].n : 0;
}
