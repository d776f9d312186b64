/* tests/fuzz/target_checkpoint.c - the "checkpoint" fuzz target and the
 * seed of its corpus. */
#include <stdlib.h>
#include <string.h>

#include "tapegrad/tapegrad.h"
#include "targets.h"

/* A small training state: Linear(3, 4) + BatchNorm1d(4) after one Adam step,
 * a grad scaler, a loader over four 2x2 images, an RNG, a step counter and a
 * must-match metadata value; the same every time it is made. */
typedef struct train_state {
    tg_module *model;
    tg_optimizer *opt;
    tg_grad_scaler *scaler;
    tg_dataset *data;
    tg_loader *loader;
    tg_rng rng;
    int64_t step;
    tg_checkpoint *ck;
} train_state;

static void state_free(train_state *s)
{
    tg_checkpoint_free(s->ck);
    tg_loader_free(s->loader);
    tg_dataset_release(s->data);
    tg_grad_scaler_free(s->scaler);
    tg_optimizer_free(s->opt);
    tg_module_release(s->model);
}

/* One Adam step on mean(model(x)^2), so that the optimizer has state. */
static int state_train_once(train_state *s)
{
    const int64_t xs[2] = {5, 3};
    tg_tensor *x = NULL, *y = NULL, *sq = NULL, *loss = NULL;
    int rc = tg_tensor_zeros(&x, TG_F32, 2, xs);
    if (rc >= 0) rc = tg_tensor_rand_normal(x, &s->rng, 0.0, 1.0);
    if (rc >= 0) rc = tg_module_forward(s->model, &y, x);
    if (rc >= 0) rc = tg_mul(&sq, y, y);
    if (rc >= 0) rc = tg_mean(&loss, sq);
    if (rc >= 0) rc = tg_backward(loss, NULL, NULL);
    if (rc >= 0) rc = tg_optimizer_step(s->opt);
    tg_tensor_release(loss);
    tg_tensor_release(sq);
    tg_tensor_release(y);
    tg_tensor_release(x);
    return rc;
}

static int state_make(train_state *s)
{
    memset(s, 0, sizeof *s);
    tg_rng_init(&s->rng, 7);
    s->step = 3;
    tg_module *lin = NULL, *bn = NULL;
    int rc = tg_nn_sequential_new(&s->model);
    if (rc >= 0) rc = tg_nn_linear_new(&lin, 3, 4, true, &s->rng);
    if (rc >= 0) rc = tg_nn_sequential_append(s->model, lin);
    if (rc >= 0) rc = tg_nn_batchnorm_new(&bn, 0, 4, 1e-5, 0.1, true, true);
    if (rc >= 0) rc = tg_nn_sequential_append(s->model, bn);
    tg_tensor **params = NULL;
    int np = 0;
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    if (rc >= 0) rc = tg_module_parameters(s->model, &params, &np);
    if (rc >= 0) rc = tg_adam_new(&s->opt, np, params, &ao);
    free(params);
    if (rc >= 0) rc = state_train_once(s);
    if (rc >= 0) rc = tg_grad_scaler_new(&s->scaler, NULL);
    const int64_t is[3] = {4, 2, 2}, ls[1] = {4};
    tg_tensor *images = NULL, *labels = NULL;
    if (rc >= 0) rc = tg_tensor_full(&images, TG_U8, 3, is, 9);
    if (rc >= 0) rc = tg_tensor_full(&labels, TG_I64, 1, ls, 1);
    if (rc >= 0) rc = tg_dataset_from_tensors(&s->data, images, labels);
    tg_tensor_release(images);
    tg_tensor_release(labels);
    tg_loader_options lo = TG_LOADER_OPTIONS_INIT;
    lo.batch_size = 2;
    if (rc >= 0) rc = tg_loader_new(&s->loader, s->data, &lo);
    if (rc >= 0) rc = tg_checkpoint_new(&s->ck);
    if (rc >= 0) rc = tg_checkpoint_add_module(s->ck, "model", s->model);
    if (rc >= 0) rc = tg_checkpoint_add_optimizer(s->ck, "opt", s->opt);
    if (rc >= 0) rc = tg_checkpoint_add_grad_scaler(s->ck, "scaler", s->scaler);
    if (rc >= 0) rc = tg_checkpoint_add_loader(s->ck, "loader", s->loader);
    if (rc >= 0) rc = tg_checkpoint_add_rng(s->ck, "rng", &s->rng);
    if (rc >= 0) rc = tg_checkpoint_add_i64(s->ck, "step", &s->step);
    if (rc >= 0) rc = tg_checkpoint_set_meta(s->ck, "arch", "linear3x4-bn", true);
    if (rc < 0) state_free(s);
    return rc;
}

/* Everything a checkpoint load may change, as one file: the state dicts of
 * the model and the optimizer plus the scalar state as tensors. */
static int state_snapshot(const train_state *s, tg_st_file **out)
{
    tg_st_file *f = NULL;
    int64_t epoch, index;
    tg_loader_position(s->loader, &epoch, &index);
    const double scalars[] = {(double)s->rng.seed, (double)s->rng.counter, (double)s->step,
                              (double)epoch, (double)index,
                              tg_grad_scaler_get_scale(s->scaler),
                              (double)tg_grad_scaler_growth_tracker(s->scaler),
                              tg_module_is_training(s->model)};
    const int64_t n = sizeof scalars / sizeof scalars[0];
    tg_tensor *t = NULL;
    int rc = tg_st_new(&f);
    if (rc >= 0) rc = tg_module_state_dict_save(s->model, f, "model");
    if (rc >= 0) rc = tg_optimizer_state_save(s->opt, f, "opt");
    if (rc >= 0) rc = tg_tensor_from_data(&t, TG_F64, 1, &n, scalars);
    if (rc >= 0) rc = tg_st_set(f, "scalars", t);
    tg_tensor_release(t);
    if (rc < 0) {
        tg_st_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

int tg_fuzz_checkpoint(const uint8_t *data, size_t size)
{
    tg_st_file *f = NULL;
    int rc = tg_safetensors_parse(&f, data, size);
    if (rc < 0)
        return tg_fuzz_refused("checkpoint", "tg_safetensors_parse", rc);
    train_state s;
    tg_st_file *before = NULL, *after = NULL;
    int bad = 0;
    if (state_make(&s) < 0) {
        tg_st_free(f);
        return tg_fuzz_broken("checkpoint", "making the training state failed: %s",
                      tg_error_message());
    }
    if (state_snapshot(&s, &before) < 0) {
        bad = tg_fuzz_broken("checkpoint", "snapshot failed: %s", tg_error_message());
    } else if ((rc = tg_checkpoint_load_file(s.ck, f)) < 0) {
        bad = tg_fuzz_refused("checkpoint", "tg_checkpoint_load_file", rc);
        if (!bad && state_snapshot(&s, &after) < 0)
            bad = tg_fuzz_broken("checkpoint", "snapshot failed: %s", tg_error_message());
        else if (!bad && !tg_fuzz_same_tensors(before, after))
            bad = tg_fuzz_broken("checkpoint", "a refused load (%s: %s) changed the state",
                         tg_status_name(rc), tg_error_message());
    } else if (state_train_once(&s) < 0 &&
               !strstr(tg_error_message(), "num_batches_tracked = 9223372036854775807 cannot")) {
        /* An accepted state must be one training can go on from, but for a
         * BatchNorm count of INT64_MAX: PyTorch loads it too, and the step
         * refuses to increment it (torch's add_(1) would wrap around). */
        bad = tg_fuzz_broken("checkpoint", "a step after an accepted load failed: %s",
                     tg_error_message());
    }
    tg_st_free(after);
    tg_st_free(before);
    state_free(&s);
    tg_st_free(f);
    return bad;
}

int tg_fuzz_checkpoint_seed(const char *path)
{
    train_state s;
    int rc = state_make(&s);
    if (rc < 0)
        return rc;
    rc = tg_checkpoint_save(s.ck, path, NULL);
    state_free(&s);
    return rc;
}
