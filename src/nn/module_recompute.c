/* tg_module_forward_recompute: a module's forward as a recomputed block
 * (tg_recompute_ex), with its parameters and its Dropouts' mask counts.
 *
 * A Dropout's k-th training mask depends on (seed, k) alone.  The block's
 * user data (copied into the node) keeps each Dropout's count as it was
 * before the forward; when fn runs again (grad mode on: the backward) it
 * sets the counts back to those, runs the module, and then puts back the
 * counts the recomputation found, so the recomputation draws the forward's
 * masks and the sequence of later forwards is unchanged. */
#include <stdlib.h>
#include <string.h>

#include "nn/module_internal.h"
#include "tapegrad/autograd.h"

typedef struct dropout_count {
    tg_module *m;        /* borrowed: a Dropout inside the block */
    uint64_t calls;      /* its count before the forward */
    uint64_t now;        /* its count when the recomputation starts */
} dropout_count;

typedef struct block {
    tg_module *m;        /* borrowed */
    int n_dropouts;
    dropout_count d[];   /* n_dropouts */
} block;

static int count_dropout(tg_module *m, void *user)
{
    uint64_t calls;
    if (tg__nn_dropout_calls(m, &calls)) ++*(int *)user;
    return TG_OK;
}

static int note_dropout(tg_module *m, void *user)
{
    block *b = user;
    uint64_t calls;
    if (tg__nn_dropout_calls(m, &calls)) b->d[b->n_dropouts++] = (dropout_count){m, calls, 0};
    return TG_OK;
}

static int block_fn(tg_tensor **outs, int n_out, int n_in, tg_tensor *const *in, void *user)
{
    (void)n_out;
    (void)n_in;
    block *b = user;
    if (!tg_grad_enabled()) return tg_module_forward(b->m, &outs[0], in[0]);
    /* the recomputation: the forward's masks, then the counts as they were */
    for (int i = 0; i < b->n_dropouts; i++) {
        tg__nn_dropout_calls(b->d[i].m, &b->d[i].now);
        tg__nn_dropout_set_calls(b->d[i].m, b->d[i].calls);
    }
    int rc = tg_module_forward(b->m, &outs[0], in[0]);
    for (int i = 0; i < b->n_dropouts; i++) tg__nn_dropout_set_calls(b->d[i].m, b->d[i].now);
    return rc;
}

int tg_module_forward_recompute(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    TG_CHECK(m, TG_EINVAL, "module_forward_recompute: m is NULL");
    TG_CHECK(y, TG_EINVAL, "module_forward_recompute: y is NULL");
    TG_CHECK(x, TG_EINVAL, "module_forward_recompute: x is NULL");
    int n_dropouts = 0, n_params = 0;
    TG_TRY(tg__module_visit(m, count_dropout, &n_dropouts));
    size_t size = sizeof(block) + (size_t)n_dropouts * sizeof(dropout_count);
    block *b = tg__calloc(1, size);
    if (!b) return TG_ENOMEM;
    b->m = m;
    tg_tensor **params = NULL;
    int rc = tg__module_visit(m, note_dropout, b);
    if (rc >= 0) rc = tg_module_parameters(m, &params, &n_params);
    if (rc >= 0) rc = tg_recompute_ex(y, 1, block_fn, b, size, 1, &x, n_params, params);
    free(params);
    free(b);
    return rc;
}
