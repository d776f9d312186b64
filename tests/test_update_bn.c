/* tests/test_update_bn.c - tg_update_bn and tg_update_bn_loader (optim.h)
 * against PyTorch's torch.optim.swa_utils.update_bn
 * (tests/golden/update_bn.safetensors, from scripts/make_update_bn_goldens.py),
 * and their rules: each BatchNorm once, momenta and modes put back, nothing
 * changed on an error, the loader's position kept. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/autograd.h"
#include "tapegrad/data.h"
#include "tapegrad/nn.h"
#include "tapegrad/optim.h"
#include "tapegrad/scope.h"

static void append(tg_module *seq, int rc, tg_module **m)
{
    cr_assert(eq(int, rc, TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_nn_sequential_append(seq, *m), TG_OK));
}

/* The golden's generator in dtype dt. */
static tg_module *generator(tg_dtype dt)
{
    tg_module *seq = NULL, *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.stride[0] = p.stride[1] = 2;
    p.padding[0][0] = p.padding[0][1] = p.padding[1][0] = p.padding[1][1] = 1;
    const int64_t k[2] = {4, 4}, unflat[3] = {4, 2, 2};
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    append(seq, tg_nn_linear_new(&m, 6, 16, true, &rng), &m);
    append(seq, tg_nn_batchnorm_new(&m, 1, 16, 1e-5, 0.1, true, true), &m);
    append(seq, tg_nn_unflatten_new(&m, 1, 3, unflat), &m);
    append(seq, tg_nn_conv_transpose_new(&m, 2, 4, 3, k, &p, true, &rng), &m);
    append(seq, tg_nn_batchnorm_new(&m, 2, 3, 1e-5, 0.3, true, true), &m);
    append(seq, tg_nn_activation_new(&m, TG_ACT_RELU, 0), &m);
    append(seq, tg_nn_conv_transpose_new(&m, 2, 3, 2, k, &p, true, &rng), &m);
    append(seq, tg_nn_activation_new(&m, TG_ACT_TANH, 0), &m);
    cr_assert(eq(int, tg_module_to_dtype(seq, dt), TG_OK));
    return seq;
}

/* Hands out the golden's batches "<d>.batch<k>" as new tensors. */
typedef struct golden_batches {
    const tg_st_file *f;
    const char *d;
    int k, n, fail_at, fail_rc;   /* fail_at >= 0: return fail_rc there */
    bool fail_message;
} golden_batches;

static int next_golden(void *user, tg_tensor **x)
{
    golden_batches *b = user;
    if (b->k == b->fail_at) {
        b->k++;
        if (b->fail_message) return tg_error_set(b->fail_rc, "no batch %d today", b->k - 1);
        return b->fail_rc;
    }
    if (b->k == b->n) return 0;
    char key[64];
    snprintf(key, sizeof key, "%s.batch%d", b->d, b->k++);
    const tg_tensor *t = tg_st_get(b->f, key);
    cr_assert(t != NULL, "the golden lacks %s", key);
    return tg_tensor_clone(x, t) < 0 ? -1 : 1;
}

static int n_batches(const tg_st_file *f)
{
    return atoi(tg_st_meta_get(f, "batches"));
}

static void expect_momenta(const tg_module *seq, double m1, double m2)
{
    double mom = 0;
    cr_assert(eq(int, tg_nn_batchnorm_params(tg_module_child_at(seq, 1), NULL, NULL, &mom, NULL,
                                             NULL), TG_OK));
    cr_assert(eq(dbl, mom, m1));
    cr_assert(eq(int, tg_nn_batchnorm_params(tg_module_child_at(seq, 4), NULL, NULL, &mom, NULL,
                                             NULL), TG_OK));
    cr_assert(eq(dbl, mom, m2));
}

static void matches_torch(tg_dtype dt, const char *d, double rtol)
{
    tg_st_file *f = th_golden_load("update_bn.safetensors");
    tg_module *g = generator(dt);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s.init", d);
    cr_assert(eq(int, tg_module_load_state_dict(g, f, prefix, true), TG_OK), "%s",
              tg_error_message());
    tg_module_train(g, false);
    golden_batches b = {f, d, 0, n_batches(f), -1, 0, false};
    cr_assert(eq(int, tg_update_bn(g, next_golden, &b), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, b.k, b.n));
    snprintf(prefix, sizeof prefix, "%s.after", d);
    th_expect_state(g, f, prefix, rtol);
    expect_momenta(g, 0.1, 0.3);
    cr_assert(eq(int, tg_module_is_training(g), 0));
    cr_assert(eq(int, tg_module_is_training(tg_module_child_at(g, 4)), 0));
    char key[32];
    snprintf(key, sizeof key, "%s.z", d);
    tg_tensor *y = NULL;
    cr_assert(eq(int, tg_module_forward(g, &y, tg_st_get(f, key)), TG_OK));
    snprintf(key, sizeof key, "%s.out", d);
    th_expect_close_scaled(key, y, tg_st_get(f, key), rtol);
    tg_tensor_release(y);
    tg_module_release(g);
    tg_st_free(f);
}

Test(update_bn, matches_torch_f64) { matches_torch(TG_F64, "f64", 1e-12); }
Test(update_bn, matches_torch_f32) { matches_torch(TG_F32, "f32", 2e-5); }

/* A model in training mode stays in it; every BatchNorm's statistics are
 * the cumulative average over the batches, whatever they were. */
Test(update_bn, keeps_training_mode_and_forgets_old_statistics)
{
    tg_st_file *f = th_golden_load("update_bn.safetensors");
    tg_module *g = generator(TG_F64);
    cr_assert(eq(int, tg_module_load_state_dict(g, f, "f64.init", true), TG_OK));
    /* other statistics before: the result must not depend on them */
    cr_assert(eq(int, tg_tensor_fill(tg_module_find(g, "1.running_mean"), 7.0), TG_OK));
    cr_assert(eq(int, tg_tensor_fill(tg_module_find(g, "4.num_batches_tracked"), 40.0), TG_OK));
    tg_module_train(g, true);
    golden_batches b = {f, "f64", 0, n_batches(f), -1, 0, false};
    cr_assert(eq(int, tg_update_bn(g, next_golden, &b), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_module_is_training(g), 1));
    cr_assert(eq(int, tg_module_is_training(tg_module_child_at(g, 1)), 1));
    th_expect_state(g, f, "f64.after", 1e-12);
    tg_module_release(g);
    tg_st_free(f);
}

/* A failing batch function: its status comes back and nothing changed. */
static void restores_on_error(bool with_message, bool training)
{
    tg_st_file *f = th_golden_load("update_bn.safetensors");
    tg_module *g = generator(TG_F32);
    cr_assert(eq(int, tg_module_load_state_dict(g, f, "f32.init", true), TG_OK));
    tg_module_train(g, training);
    golden_batches b = {f, "f32", 0, n_batches(f), 2, TG_EIO, with_message};
    cr_assert(eq(int, tg_update_bn(g, next_golden, &b), TG_EIO));
    th_expect_in(tg_error_message(), with_message ? "no batch 2 today" : "the batch function");
    cr_assert(eq(int, b.k, 3));
    th_expect_state(g, f, "f32.init", 0);
    expect_momenta(g, 0.1, 0.3);
    cr_assert(eq(int, tg_module_is_training(g), training));
    cr_assert(eq(int, tg_module_is_training(tg_module_child_at(g, 4)), training));
    tg_module_release(g);
    tg_st_free(f);
}

Test(update_bn, restores_everything_on_error) { restores_on_error(true, false); }
Test(update_bn, names_a_silent_batch_function) { restores_on_error(false, true); }

/* A forward that fails (a batch of the wrong width) restores too. */
Test(update_bn, restores_after_a_failing_forward)
{
    tg_st_file *f = th_golden_load("update_bn.safetensors");
    tg_module *g = generator(TG_F32);
    cr_assert(eq(int, tg_module_load_state_dict(g, f, "f32.init", true), TG_OK));
    tg_st_file *bad = NULL;
    cr_assert(eq(int, tg_st_new(&bad), TG_OK));
    tg_tensor *ok = NULL, *wide = NULL;
    cr_assert(eq(int, tg_tensor_clone(&ok, tg_st_get(f, "f32.batch0")), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&wide, TG_F32, 2, (int64_t[]){3, 7}), TG_OK));
    cr_assert(eq(int, tg_st_set(bad, "x.batch0", ok), TG_OK));
    cr_assert(eq(int, tg_st_set(bad, "x.batch1", wide), TG_OK));
    golden_batches b = {bad, "x", 0, 2, -1, 0, false};
    cr_assert(lt(int, tg_update_bn(g, next_golden, &b), 0));
    th_expect_state(g, f, "f32.init", 0);
    expect_momenta(g, 0.1, 0.3);
    tg_tensor_release(ok);
    tg_tensor_release(wide);
    tg_st_free(bad);
    tg_module_release(g);
    tg_st_free(f);
}

static int count_calls(void *user, tg_tensor **x)
{
    (void)x;
    ++*(int *)user;
    return 0;
}

/* torch returns before reading a batch when there is no BatchNorm; one
 * without running statistics is not counted. */
Test(update_bn, reads_nothing_without_batchnorm)
{
    tg_module *seq = NULL, *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    append(seq, tg_nn_linear_new(&m, 3, 4, true, &rng), &m);
    append(seq, tg_nn_batchnorm_new(&m, 1, 4, 1e-5, 0.1, true, false), &m);
    int calls = 0;
    tg_module_train(seq, false);
    cr_assert(eq(int, tg_update_bn(seq, count_calls, &calls), TG_OK));
    cr_assert(eq(int, calls, 0));
    cr_assert(eq(int, tg_module_is_training(seq), 0));
    tg_module_release(seq);
}

/* One batch of x (4, 3) through the same BatchNorm twice. */
static int one_batch(void *user, tg_tensor **x)
{
    int *k = user;
    if ((*k)++) return 0;
    *x = th_seq(TG_F64, 2, (int64_t[]){4, 3}, -2, 5);
    return 1;
}

/* A module that appears twice is reset and switched once: its momentum
 * comes back, and the statistics are those of the two forwards. */
Test(update_bn, shared_batchnorm_once)
{
    tg_module *seq = NULL, *bn = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    cr_assert(eq(int, tg_nn_batchnorm_new(&bn, 1, 3, 1e-5, 0.25, false, true), TG_OK));
    cr_assert(eq(int, tg_module_to_dtype(bn, TG_F64), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, tg_module_retain(bn)), TG_OK));
    cr_assert(eq(int, tg_nn_sequential_append(seq, bn), TG_OK));
    int k = 0;
    cr_assert(eq(int, tg_update_bn(seq, one_batch, &k), TG_OK), "%s", tg_error_message());
    double mom = 0;
    cr_assert(eq(int, tg_nn_batchnorm_params(bn, NULL, NULL, &mom, NULL, NULL), TG_OK));
    cr_assert(eq(dbl, mom, 0.25));
    cr_assert(eq(dbl, tg_tensor_item(tg_module_find(bn, "num_batches_tracked")), 2));
    /* the expected statistics: the cumulative average of x's and of bn(x)'s,
     * by hand with the same module (momentum None) */
    tg_module *ref = NULL;
    cr_assert(eq(int, tg_nn_batchnorm_new(&ref, 1, 3, 1e-5, -1, false, true), TG_OK));
    cr_assert(eq(int, tg_module_to_dtype(ref, TG_F64), TG_OK));
    tg_tensor *x = th_seq(TG_F64, 2, (int64_t[]){4, 3}, -2, 5), *y = NULL, *z = NULL;
    tg_no_grad_begin();
    cr_assert(eq(int, tg_module_forward(ref, &y, x), TG_OK));
    cr_assert(eq(int, tg_module_forward(ref, &z, y), TG_OK));
    tg_no_grad_end();
    th_expect_same_bits("running_mean", NULL, tg_module_find(bn, "running_mean"),
                        tg_module_find(ref, "running_mean"));
    th_expect_same_bits("running_var", NULL, tg_module_find(bn, "running_var"),
                        tg_module_find(ref, "running_var"));
    th_release_all(3, (tg_tensor *[]){x, y, z});
    tg_module_release(ref);
    tg_module_release(seq);
}

/* Inside an open scope nothing update_bn runs is captured. */
Test(update_bn, captures_nothing_in_a_scope)
{
    tg_st_file *f = th_golden_load("update_bn.safetensors");
    tg_module *g = generator(TG_F64);
    cr_assert(eq(int, tg_module_load_state_dict(g, f, "f64.init", true), TG_OK));
    cr_assert(eq(int, tg_scope_begin(), TG_OK));
    golden_batches b = {f, "f64", 0, n_batches(f), -1, 0, false};
    cr_assert(eq(int, tg_update_bn(g, next_golden, &b), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_scope_size(), 0));
    cr_assert(eq(int, tg_scope_end(), TG_OK));
    th_expect_state(g, f, "f64.after", 1e-12);
    tg_module_release(g);
    tg_st_free(f);
}

/* A small conv model on images, for the loader form. */
static tg_module *image_model(void)
{
    tg_module *seq = NULL, *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 9);
    const int64_t k[2] = {3, 3};
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), TG_OK));
    append(seq, tg_nn_conv_new(&m, 2, 1, 2, k, &p, true, &rng), &m);
    append(seq, tg_nn_batchnorm_new(&m, 2, 2, 1e-5, 0.1, true, true), &m);
    return seq;
}

static tg_dataset *image_dataset(void)
{
    const int64_t shape[4] = {10, 1, 5, 5};
    tg_tensor *images = NULL, *labels = NULL;
    cr_assert(eq(int, tg_tensor_zeros(&images, TG_U8, 4, shape), TG_OK));
    cr_assert(eq(int, tg_tensor_zeros(&labels, TG_I64, 1, shape), TG_OK));
    uint8_t *px = tg_tensor_data(images);
    for (int64_t i = 0; i < tg_tensor_numel(images); i++) px[i] = (uint8_t)(i * 37 % 251);
    tg_dataset *ds = NULL;
    cr_assert(eq(int, tg_dataset_from_tensors(&ds, images, labels), TG_OK), "%s",
              tg_error_message());
    th_release_all(2, (tg_tensor *[]){images, labels});
    return ds;
}

typedef struct loader_ctx {
    tg_loader *ld;
} loader_ctx;

static int from_loader(void *user, tg_tensor **x)
{
    tg_tensor *labels = NULL;
    int rc = tg_loader_next(((loader_ctx *)user)->ld, x, &labels);
    tg_tensor_release(labels);
    return rc;
}

/* The loader form runs the whole current epoch from its first batch, gives
 * what the callback form gives on those batches, and leaves the loader
 * where it was. */
Test(update_bn, loader_runs_the_epoch_and_keeps_the_position)
{
    tg_dataset *ds = image_dataset();
    tg_loader_options o = {.batch_size = 4, .shuffle = true, .seed = 5, .drop_last = false};
    tg_loader *ld = NULL, *ref_ld = NULL;
    cr_assert(eq(int, tg_loader_new(&ld, ds, &o), TG_OK));
    cr_assert(eq(int, tg_loader_new(&ref_ld, ds, &o), TG_OK));
    cr_assert(eq(int, tg_loader_reset(ld, 2), TG_OK));
    cr_assert(eq(int, tg_loader_reset(ref_ld, 2), TG_OK));
    tg_tensor *x = NULL, *l = NULL, *x2 = NULL, *l2 = NULL;
    cr_assert(eq(int, tg_loader_next(ld, &x, &l), 1));   /* the position is (2, 4) */
    th_release_all(2, (tg_tensor *[]){x, l});
    tg_module *a = image_model(), *b = image_model();
    cr_assert(eq(int, tg_update_bn_loader(a, ld), TG_OK), "%s", tg_error_message());
    loader_ctx c = {ref_ld};
    cr_assert(eq(int, tg_update_bn(b, from_loader, &c), TG_OK), "%s", tg_error_message());
    cr_assert(eq(dbl, tg_tensor_item(tg_module_find(a, "1.num_batches_tracked")), 3));
    th_expect_same_bits("running_mean", NULL, tg_module_find(a, "1.running_mean"),
                        tg_module_find(b, "1.running_mean"));
    th_expect_same_bits("running_var", NULL, tg_module_find(a, "1.running_var"),
                        tg_module_find(b, "1.running_var"));
    int64_t epoch = -1, index = -1;
    tg_loader_position(ld, &epoch, &index);
    cr_assert(eq(i64, epoch, 2));
    cr_assert(eq(i64, index, 4));
    /* the next batch is the epoch's second, as from a fresh loader */
    cr_assert(eq(int, tg_loader_reset(ref_ld, 2), TG_OK));
    cr_assert(eq(int, tg_loader_next(ref_ld, &x, &l), 1));
    th_release_all(2, (tg_tensor *[]){x, l});
    cr_assert(eq(int, tg_loader_next(ref_ld, &x, &l), 1));
    cr_assert(eq(int, tg_loader_next(ld, &x2, &l2), 1));
    th_expect_same_bits("second batch", NULL, x2, x);
    th_release_all(4, (tg_tensor *[]){x, l, x2, l2});
    tg_module_release(a);
    tg_module_release(b);
    tg_loader_free(ld);
    tg_loader_free(ref_ld);
    tg_dataset_release(ds);
}

static int null_batch(void *user, tg_tensor **x)
{
    (void)user, (void)x;
    return 1;
}

Test(update_bn, refusals)
{
    tg_module *g = generator(TG_F32);
    int calls = 0;
    cr_assert(eq(int, tg_update_bn(NULL, count_calls, &calls), TG_EINVAL));
    th_expect_in(tg_error_message(), "model and next must not be NULL");
    cr_assert(eq(int, tg_update_bn(g, NULL, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_update_bn_loader(g, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "update_bn_loader");
    cr_assert(eq(int, tg_update_bn_loader(NULL, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_update_bn(g, null_batch, NULL), TG_EINVAL));
    th_expect_in(tg_error_message(), "NULL tensor");
    expect_momenta(g, 0.1, 0.3);
    cr_assert(eq(int, tg_tensor_fill(tg_module_find(g, "4.running_mean"), 2.0), TG_OK));
    cr_assert(eq(int, tg_tensor_fill(tg_module_find(g, "4.running_var"), 3.0), TG_OK));
    cr_assert(eq(int, tg_update_bn(g, count_calls, &calls), TG_OK));
    cr_assert(eq(int, calls, 1));
    /* no batch at all: torch's statistics are then the reset ones */
    cr_assert(eq(dbl, tg_tensor_item(tg_module_find(g, "4.num_batches_tracked")), 0));
    for (int i = 0; i < 3; i++) {
        cr_assert(eq(dbl, th_at(tg_module_find(g, "4.running_mean"), i), 0));
        cr_assert(eq(dbl, th_at(tg_module_find(g, "4.running_var"), i), 1));
    }
    tg_module_release(g);
}
