/* tests/checkpoint_fixtures.c - the small training state and the
 * temporary folder shared by test_checkpoint.c and test_checkpoint_load.c
 * (checkpoint_fixtures.h). */
#include "checkpoint_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "tapegrad/autograd.h"
#include "tapegrad/checkpoint.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"

void state_init(state *s, uint64_t seed, bool with_opt)
{
    memset(s, 0, sizeof *s);
    tg_rng_init(&s->rng, seed);
    tg_module *lin, *bn, *flat;
    cr_assert(eq(int, tg_nn_sequential_new(&s->model), 0));
    cr_assert(eq(int, tg_nn_flatten_new(&flat, 1, -1), 0));
    cr_assert(eq(int, tg_nn_sequential_append(s->model, flat), 0));
    cr_assert(eq(int, tg_nn_linear_new(&lin, 4, 3, true, &s->rng), 0));
    cr_assert(eq(int, tg_nn_sequential_append(s->model, lin), 0));
    cr_assert(eq(int, tg_nn_batchnorm_new(&bn, 1, 3, 1e-5, 0.1, true, true), 0));
    cr_assert(eq(int, tg_nn_sequential_append(s->model, bn), 0));
    tg_tensor **params;
    int n;
    cr_assert(eq(int, tg_module_parameters(s->model, &params, &n), 0));
    /* options that differ with the seed, so that a load must restore them */
    tg_adam_opts o = TG_ADAM_OPTS_INIT;
    if (seed != 1) o.lr = 0.05, o.beta1 = 0.5, o.eps = 1e-3, o.weight_decay = 0.1;
    o.amsgrad = seed == 1;
    cr_assert(eq(int, tg_adam_new(&s->opt, n, params, &o), 0));
    free(params);
    uint8_t px[10 * 4];
    uint8_t lab[10];
    for (int i = 0; i < 40; i++) px[i] = (uint8_t)(i * 37 % 256);
    for (int i = 0; i < 10; i++) lab[i] = (uint8_t)(i % 3);
    tg_tensor *im, *lb;
    cr_assert(eq(int, tg_tensor_from_data(&im, TG_U8, 3, (int64_t[]){10, 2, 2}, px), 0));
    cr_assert(eq(int, tg_tensor_from_data(&lb, TG_U8, 1, (int64_t[]){10}, lab), 0));
    cr_assert(eq(int, tg_dataset_from_tensors(&s->ds, im, lb), 0));
    tg_tensor_release(im);
    tg_tensor_release(lb);
    tg_loader_options lo = {.batch_size = 4, .shuffle = true, .seed = 7, .drop_last = true};
    cr_assert(eq(int, tg_loader_new(&s->ld, s->ds, &lo), 0));
    cr_assert(eq(int, tg_tensor_full(&s->extra, TG_F32, 1, (int64_t[]){5}, (double)seed), 0));
    cr_assert(eq(int, tg_checkpoint_new(&s->ck), 0));
    cr_assert(eq(int, tg_checkpoint_add_module(s->ck, "model", s->model), 0));
    if (with_opt) cr_assert(eq(int, tg_checkpoint_add_optimizer(s->ck, "opt", s->opt), 0));
    cr_assert(eq(int, tg_checkpoint_add_loader(s->ck, "loader", s->ld), 0));
    cr_assert(eq(int, tg_checkpoint_add_rng(s->ck, "rng", &s->rng), 0));
    cr_assert(eq(int, tg_checkpoint_add_i64(s->ck, "step", &s->step), 0));
    cr_assert(eq(int, tg_checkpoint_add_tensor(s->ck, "extra", s->extra), 0));
    cr_assert(eq(int, tg_checkpoint_set_meta(s->ck, "arch", "lin4-3", true), 0));
}

void state_free(state *s)
{
    tg_checkpoint_free(s->ck);
    tg_optimizer_free(s->opt);
    tg_module_release(s->model);
    tg_loader_free(s->ld);
    tg_dataset_release(s->ds);
    tg_tensor_release(s->extra);
}

void state_step(state *s)
{
    tg_tensor *x, *y, *out, *target, *loss;
    int rc = tg_loader_next(s->ld, &x, &y);
    if (rc == 0) {
        int64_t e, i;
        tg_loader_position(s->ld, &e, &i);
        cr_assert(eq(int, tg_loader_reset(s->ld, e + 1), 0));
        rc = tg_loader_next(s->ld, &x, &y);
    }
    cr_assert(eq(int, rc, 1));
    cr_assert(eq(int, tg_module_forward(s->model, &out, x), 0));
    cr_assert(eq(int, tg_tensor_zeros(&target, TG_F32, 2, (int64_t[]){4, 3}), 0));
    cr_assert(eq(int, tg_tensor_rand_normal(target, &s->rng, 0, 1), 0));
    cr_assert(eq(int, tg_mse_loss(&loss, out, target, TG_REDUCTION_MEAN), 0));
    tg_optimizer_zero_grad(s->opt);
    cr_assert(eq(int, tg_backward(loss, NULL, NULL), 0));
    cr_assert(eq(int, tg_optimizer_step(s->opt), 0));
    s->step++;
    tg_tensor_fill(s->extra, (double)s->step);
    tg_tensor_release(x);
    tg_tensor_release(y);
    tg_tensor_release(out);
    tg_tensor_release(target);
    tg_tensor_release(loss);
}

void assert_same_files(const tg_st_file *a, const tg_st_file *b)
{
    cr_assert(eq(int, tg_st_count(a), tg_st_count(b)));
    for (int i = 0; i < tg_st_count(a); i++) {
        const char *name;
        tg_tensor *ta, *tb, *ca, *cb;
        cr_assert(eq(int, tg_st_at(a, i, &name, &ta), 0));
        tb = tg_st_get(b, name);
        cr_assert(tb != NULL, "key %s missing", name);
        cr_assert(eq(int, tg_tensor_dtype(ta), tg_tensor_dtype(tb)), "%s", name);
        cr_assert(tg_tensor_same_shape(ta, tb), "%s", name);
        cr_assert(eq(int, tg_tensor_contiguous(&ca, ta), 0));
        cr_assert(eq(int, tg_tensor_contiguous(&cb, tb), 0));
        size_t bytes = (size_t)tg_tensor_numel(ta) * tg_dtype_size(tg_tensor_dtype(ta));
        cr_assert(eq(int, memcmp(tg_tensor_cdata(ca), tg_tensor_cdata(cb), bytes), 0), "%s",
                  name);
        tg_tensor_release(ca);
        tg_tensor_release(cb);
    }
}

tg_st_file *snapshot(const state *s)
{
    char path[] = "/tmp/tg_ck_snapXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert(eq(int, tg_checkpoint_save(s->ck, path, NULL), 0), "%s", tg_error_message());
    tg_st_file *f;
    cr_assert(eq(int, tg_safetensors_load(&f, path), 0));
    unlink(path);
    return f;
}

char ck_path[128];

void checkpoint_setup(void)
{
    th_tmp_dir_make("tg_ck_");
    th_tmp_path(ck_path, sizeof ck_path, "checkpoint.safetensors");
}
