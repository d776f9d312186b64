/* Gradient hooks: registering and removing a tensor's gradient hooks and a
 * leaf's post-accumulate hooks.  The engine (engine.c) runs them during a
 * backward; a hook removed while hooks run is only marked, and freed when
 * they are done. */

#include <stdlib.h>

#include "core/core.h"
#include "autograd/tape.h"   /* tg_node: a non-leaf's hooks are on its grad_fn */
#include "engine/engine.h"

int tg_tensor_register_hook(tg_tensor *t, tg_grad_hook_fn fn, void *user)
{
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_register_hook: t must not be NULL");
    TG_CHECK(fn != NULL, TG_EINVAL, "tensor_register_hook: fn must not be NULL");
    TG_CHECK(t->requires_grad, TG_EGRAD,
             "tensor_register_hook: t%s%s%s does not require grad (a hook would never run)",
             t->name[0] ? " '" : "", t->name, t->name[0] ? "'" : "");
    tg_hook *h = tg__malloc(sizeof *h);
    if (!h) return TG_ENOMEM;
    *h = (tg_hook){.fn = fn, .user = user, .next = NULL};
    tg_hook **tail = t->grad_fn ? &t->grad_fn->hooks : &t->hooks;
    while (*tail) tail = &(*tail)->next;
    *tail = h;
    return TG_OK;
}

_Thread_local int tg__engine_hooks_running;

int tg_tensor_remove_hook(tg_tensor *t, tg_grad_hook_fn fn, void *user)
{
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_remove_hook: t must not be NULL");
    tg_hook **list = t->grad_fn ? &t->grad_fn->hooks : &t->hooks;
    for (tg_hook **p = list; *p; p = &(*p)->next) {
        if ((*p)->removed || (*p)->fn != fn || (*p)->user != user) continue;
        tg_hook *h = *p;
        if (tg__engine_hooks_running > 0) {   /* from a hook: freed after the loop */
            h->removed = true;
            return TG_OK;
        }
        *p = h->next;
        free(h);
        return TG_OK;
    }
    return tg__error(TG_ENOTFOUND, "tensor_remove_hook: no such hook on t");
}

void tg__engine_sweep_hooks(tg_hook **list)
{
    for (tg_hook **p = list; *p;) {
        tg_hook *h = *p;
        if (!h->removed) {
            p = &h->next;
            continue;
        }
        *p = h->next;
        free(h);
    }
}

int tg_tensor_register_post_accumulate_hook(tg_tensor *t, tg_post_accumulate_hook_fn fn,
                                            void *user)
{
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_register_post_accumulate_hook: t must not be NULL");
    TG_CHECK(fn != NULL, TG_EINVAL, "tensor_register_post_accumulate_hook: fn must not be NULL");
    TG_CHECK(t->grad_fn == NULL, TG_EINVAL,
             "tensor_register_post_accumulate_hook: t must be a leaf (a non-leaf accumulates "
             "no .grad)");
    TG_CHECK(t->requires_grad, TG_EGRAD,
             "tensor_register_post_accumulate_hook: t%s%s%s does not require grad (a hook "
             "would never run)", t->name[0] ? " '" : "", t->name, t->name[0] ? "'" : "");
    tg_post_hook *h = tg__malloc(sizeof *h);
    if (!h) return TG_ENOMEM;
    *h = (tg_post_hook){.fn = fn, .user = user, .next = NULL};
    tg_post_hook **tail = &t->post_hooks;
    while (*tail) tail = &(*tail)->next;
    *tail = h;
    return TG_OK;
}

int tg_tensor_remove_post_accumulate_hook(tg_tensor *t, tg_post_accumulate_hook_fn fn,
                                          void *user)
{
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_remove_post_accumulate_hook: t must not be NULL");
    for (tg_post_hook **p = &t->post_hooks; *p; p = &(*p)->next) {
        if ((*p)->removed || (*p)->fn != fn || (*p)->user != user) continue;
        tg_post_hook *h = *p;
        if (t->post_hooks_running > 0) {   /* from a hook: the engine frees it after */
            h->removed = true;
            return TG_OK;
        }
        *p = h->next;
        free(h);
        return TG_OK;
    }
    return tg__error(TG_ENOTFOUND, "tensor_remove_post_accumulate_hook: no such hook on t");
}

void tg__engine_sweep_post_hooks(tg_tensor *leaf)
{
    for (tg_post_hook **p = &leaf->post_hooks; *p;) {
        tg_post_hook *h = *p;
        if (!h->removed) {
            p = &h->next;
            continue;
        }
        *p = h->next;
        free(h);
    }
}
