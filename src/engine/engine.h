/* src/engine/engine.h - what the backward engine's files share (prefix
 * tg__engine): the request that backward.c's entry points hand to the run in
 * engine.c. */
#ifndef TAPEGRAD_ENGINE_ENGINE_H
#define TAPEGRAD_ENGINE_ENGINE_H

#include <stdbool.h>

#include "core/core.h"
#include "tapegrad/autograd.h"

/* One backward: either tg_backward's (accumulate set, no targets: the leaves'
 * .grad receive the gradients) or tg_grad's (n_targets inputs, whose
 * gradients go to results[0, n_targets), borrowed, each slot NULL or a new
 * reference that the run adds into). */
typedef struct tg__engine_req {
    bool create_graph, retain_graph;  /* create_graph implies retain_graph */
    bool accumulate;                  /* tg_backward: into leaves' .grad */
    int n_targets;                    /* tg_grad: the inputs and their result slots */
    tg_tensor *const *targets;
    tg_tensor **results;
    tg_backward_step_fn on_step;      /* tg_backward_steps' callback, or NULL */
    void *step_user;
} tg__engine_req;

/* Runs backward from n_roots roots, each seeded with grads[r] (borrowed, of
 * its root's shape and dtype), with grad mode set to create_graph and
 * autocast suspended.  On error the leaves' .grad keep what was delivered
 * before the failure, and results hold what was added so far (the caller
 * releases them). */
int tg__engine_run(const tg__engine_req *r, int n_roots, tg_tensor *const *roots,
                   tg_tensor *const *grads);

/* The request of the innermost backward running on this thread (NULL when
 * none): a node's backward that runs a backward of its own (recompute.c)
 * reads whether the outer one accumulates into .grad. */
extern _Thread_local const tg__engine_req *tg__engine_current;

/* Unlinks and frees leaf's post-accumulate hooks that were removed while
 * they ran (hooks.c). */
void tg__engine_sweep_post_hooks(tg_tensor *leaf);
/* > 0 while this thread runs gradient hooks: tg_tensor_remove_hook then
 * marks the hook removed (engine.c skips it and frees it with
 * tg__engine_sweep_hooks) instead of freeing it under the running loop. */
extern _Thread_local int tg__engine_hooks_running;
void tg__engine_sweep_hooks(tg_hook **list);

#endif
