/* src/nn/update_bn.c - torch.optim.swa_utils.update_bn: the running
 * statistics of a model's BatchNorms recomputed from a pass over data.
 *
 * Every BatchNorm with running statistics is reset (mean 0, variance 1,
 * num_batches_tracked 0) and switched to the cumulative average (momentum
 * None), so after the pass its statistics are the mean over the batches of
 * each batch's statistics, as torch computes them.  The old statistics are
 * kept until the pass succeeded, so that a failure changes nothing. */
#include <stdlib.h>
#include <string.h>

#include "nn/module_internal.h"
#include "tapegrad/autograd.h"
#include "tapegrad/optim.h"

typedef struct saved_bn {
    tg_module *m;
    double momentum;
    tg_tensor *old[3];   /* running_mean, running_var, num_batches_tracked */
} saved_bn;

typedef struct bn_list {
    saved_bn *v;
    int n, cap;
} bn_list;

static const char *const bn_buffers[3] = {"running_mean", "running_var", "num_batches_tracked"};

static int collect(tg_module *m, void *user)
{
    bn_list *l = user;
    TG_CHECK(strcmp(tg_module_type_name(m), "SyncBatchNorm") != 0, TG_EUNSUPPORTED,
             "update_bn: the model has a SyncBatchNorm, whose cumulative average (momentum "
             "None) tapegrad does not compute; run update_bn on the model before "
             "tg_dist_convert_sync_batchnorm");
    if (!tg__nn_batchnorm_tracks(m)) return TG_OK;
    for (int i = 0; i < l->n; i++)
        if (l->v[i].m == m) return TG_OK;   /* a module that appears twice */
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        saved_bn *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return tg__error(TG_ENOMEM, "update_bn: out of memory");
        l->v = v;
        l->cap = cap;
    }
    saved_bn *s = &l->v[l->n];
    *s = (saved_bn){.m = m};
    for (int k = 0; k < 3; k++) {
        int rc = tg_tensor_clone(&s->old[k], tg__module_local(m, bn_buffers[k]));
        if (rc < 0) {
            for (int j = 0; j < k; j++) tg_tensor_release(s->old[j]);
            return rc;
        }
    }
    l->n++;
    return TG_OK;
}

/* One batch: *done set when next has no more. */
static int run_batch(tg_module *model, tg_update_bn_fn next, void *user, bool *done)
{
    tg_tensor *x = NULL, *y = NULL;
    tg__callback_begin();
    int rc = tg__callback_end("update_bn: the batch function", next(user, &x));
    if (rc < 0) return rc;
    if (rc == 0) {
        *done = true;
        return TG_OK;
    }
    TG_CHECK(x != NULL, TG_EINVAL, "update_bn: the batch function returned %d with a NULL "
             "tensor (1 gives a batch, 0 ends)", rc);
    rc = tg_module_forward(model, &y, x);
    tg_tensor_release(y);
    tg_tensor_release(x);
    return rc;
}

static int update(tg_module *model, tg_update_bn_fn next, void *user, const bn_list *l)
{
    for (int i = 0; i < l->n; i++) {
        tg_module *m = l->v[i].m;
        TG_TRY(tg_tensor_fill(tg__module_local(m, "running_mean"), 0.0));
        TG_TRY(tg_tensor_fill(tg__module_local(m, "running_var"), 1.0));
        TG_TRY(tg_tensor_fill(tg__module_local(m, "num_batches_tracked"), 0.0));
    }
    tg_module_train(model, true);
    tg_no_grad_begin();
    int rc = TG_OK;
    for (bool done = false; rc == TG_OK && !done;) rc = run_batch(model, next, user, &done);
    tg_no_grad_end();
    return rc;
}

int tg_update_bn(tg_module *model, tg_update_bn_fn next, void *user)
{
    TG_CHECK(model != NULL && next != NULL, TG_EINVAL,
             "update_bn: model and next must not be NULL");
    bn_list l = {0};
    int rc = tg__module_visit(model, collect, &l);
    if (rc == TG_OK && l.n > 0) {
        const bool was_training = tg_module_is_training(model);
        for (int i = 0; i < l.n; i++)
            l.v[i].momentum = tg__nn_batchnorm_swap_momentum(l.v[i].m, -1.0);
        tg__lib_enter();
        rc = update(model, next, user, &l);
        tg__lib_leave();
        for (int i = 0; i < l.n; i++) {
            tg__nn_batchnorm_swap_momentum(l.v[i].m, l.v[i].momentum);
            for (int k = 0; rc < 0 && k < 3; k++)
                tg_tensor_copy_(tg__module_local(l.v[i].m, bn_buffers[k]), l.v[i].old[k]);
        }
        tg_module_train(model, was_training);
    }
    for (int i = 0; i < l.n; i++)
        for (int k = 0; k < 3; k++) tg_tensor_release(l.v[i].old[k]);
    free(l.v);
    return rc;
}

static int loader_next(void *ld, tg_tensor **x)
{
    tg_tensor *labels = NULL;
    int rc = tg_loader_next(ld, x, &labels);
    tg_tensor_release(labels);
    return rc;
}

int tg_update_bn_loader(tg_module *model, tg_loader *ld)
{
    TG_CHECK(model != NULL && ld != NULL, TG_EINVAL,
             "update_bn_loader: model and ld must not be NULL");
    int64_t epoch = 0, index = 0;
    tg_loader_position(ld, &epoch, &index);
    TG_TRY(tg_loader_reset(ld, epoch));
    int rc = tg_update_bn(model, loader_next, ld);
    int rc2 = tg_loader_set_position(ld, epoch, index);
    return rc < 0 ? rc : rc2;
}
