/* tests/test_scope.c - scopes own the tensors ops hand out and release them
 * at their end (tensor bytes and live tape nodes return to where they were),
 * keep/add, nesting and callbacks; tg_tensor_item, the optimizers made from
 * a module and modules with several inputs. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "helpers.h"
#include "autograd/tape.h"
#include "tapegrad/tapegrad.h"

static int64_t bytes_now(void)
{
    int64_t cur = 0;
    tg_memory_stats(&cur, NULL);
    return cur;
}

/* Linear(4, 3) -> relu -> Linear(3, 2). */
static tg_module *small_mlp(void)
{
    tg_module *seq, *l;
    tg_rng rng;
    tg_rng_init(&rng, 3);
    cr_assert(eq(int, tg_nn_sequential_new(&seq), 0));
    cr_assert(eq(int, tg_nn_linear_new(&l, 4, 3, true, &rng), 0));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), 0));
    cr_assert(eq(int, tg_nn_activation_new(&l, TG_ACT_RELU, 0), 0));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), 0));
    cr_assert(eq(int, tg_nn_linear_new(&l, 3, 2, true, &rng), 0));
    cr_assert(eq(int, tg_nn_sequential_append(seq, l), 0));
    return seq;
}

/* One training step written without a single release: everything the ops,
 * the loss, the model and backward hand out belongs to the scope. */
static double scoped_step(tg_module *m, tg_optimizer *opt, tg_tensor *x, tg_tensor *t)
{
    cr_assert(eq(int, tg_scope_begin(), 0));
    tg_tensor *y, *y2, *loss;
    tg_optimizer_zero_grad(opt);
    cr_assert(eq(int, tg_module_forward(m, &y, x), 0));
    cr_assert(eq(int, tg_mul_scalar(&y2, y, 2.0), 0));
    cr_assert(eq(int, tg_mse_loss(&loss, y2, t, TG_REDUCTION_MEAN), 0));
    cr_assert(eq(int, tg_scope_size(), 3));
    cr_assert(eq(int, tg_backward(loss, NULL, NULL), 0));
    cr_assert(eq(int, tg_scope_size(), 3), "backward's own tensors are not the scope's");
    cr_assert(eq(int, tg_optimizer_step(opt), 0));
    double l = tg_tensor_item(loss);
    cr_assert(eq(int, tg_scope_end(), 0));
    return l;
}

Test(scope, a_training_step_releases_everything_it_made)
{
    const int64_t before = bytes_now();
    const long nodes_before = tg__node_live_count();
    tg_module *m = small_mlp();
    tg_optimizer *opt;
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    cr_assert(eq(int, tg_adam_from_module(&opt, m, &ao), 0));
    tg_tensor *x, *t;
    tg_rng rng;
    tg_rng_init(&rng, 9);
    cr_assert(eq(int, tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){5, 4}), 0));
    cr_assert(eq(int, tg_tensor_zeros(&t, TG_F32, 2, (int64_t[]){5, 2}), 0));
    cr_assert(eq(int, tg_tensor_rand_normal(x, &rng, 0, 1), 0));
    cr_assert(eq(int, tg_tensor_rand_normal(t, &rng, 0, 1), 0));
    double first = scoped_step(m, opt, x, t);   /* creates Adam's state */
    const int64_t steady = bytes_now();
    double last = first;
    for (int i = 0; i < 20; i++) {
        last = scoped_step(m, opt, x, t);
        cr_assert(eq(i64, bytes_now(), steady), "step %d left %lld bytes behind", i,
                  (long long)(bytes_now() - steady));
        cr_assert(eq(long, tg__node_live_count(), nodes_before), "tape nodes left alive");
    }
    cr_assert(last < first, "Adam did not lower the loss: %g -> %g", first, last);
    tg_optimizer_free(opt);
    tg_module_release(m);
    tg_tensor_release(x);
    tg_tensor_release(t);
    cr_assert(eq(i64, bytes_now(), before));
    cr_assert(eq(int, tg_scope_depth(), 0));
}

Test(scope, keep_hands_a_tensor_to_the_caller_and_add_takes_one)
{
    const int64_t before = bytes_now();
    tg_tensor *a, *b, *c, *kept;
    cr_assert(eq(int, tg_scope_begin(), 0));
    cr_assert(eq(int, tg_tensor_full(&a, TG_F64, 1, (int64_t[]){3}, 2.0), 0));
    cr_assert(tg_scope_add(a) == a);
    cr_assert(eq(int, tg_scope_size(), 1));
    cr_assert(eq(int, tg_mul(&b, a, a), 0));
    cr_assert(eq(int, tg_sum(&c, b), 0));
    cr_assert(eq(int, tg_scope_size(), 3));
    kept = tg_scope_keep(c);
    cr_assert(kept == c);
    cr_assert(eq(int, tg_scope_size(), 2));
    cr_assert(tg_scope_keep(c) == NULL, "kept twice");
    cr_assert(strstr(tg_error_message(), "not owned by the innermost scope") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_scope_end(), 0));
    cr_assert(eq(dbl, tg_tensor_item(kept), 12.0));
    tg_tensor_release(kept);
    cr_assert(eq(i64, bytes_now(), before));
}

Test(scope, misuse_is_reported_not_crashed)
{
    cr_assert(eq(int, tg_scope_end(), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "no scope is open") != NULL);
    tg_tensor *a;
    cr_assert(eq(int, tg_tensor_zeros(&a, TG_F32, 0, NULL), 0));
    cr_assert(tg_scope_keep(a) == NULL);
    cr_assert(tg_scope_add(a) == NULL, "no scope: add releases a and says so");
    cr_assert(strstr(tg_error_message(), "t was released") != NULL);
    cr_assert(tg_scope_add(NULL) == NULL);
}

/* Without a scope nothing changes: results are the caller's to release. */
Test(scope, no_scope_no_capture)
{
    const int64_t before = bytes_now();
    tg_tensor *a, *b;
    cr_assert(eq(int, tg_tensor_full(&a, TG_F32, 1, (int64_t[]){4}, 1.0), 0));
    cr_assert(eq(int, tg_add(&b, a, a), 0));
    cr_assert(eq(int, tg_scope_size(), 0));
    tg_tensor_release(b);
    tg_tensor_release(a);
    cr_assert(eq(i64, bytes_now(), before));
}

/* Public ops that are several ops inside (conv with its activation split
 * off for autograd, conv of an unbatched input, cat of more tensors than a
 * node takes) hand the scope their result alone: the scope releases each
 * tensor once, and the bytes return to where they were. */
Test(scope, composite_ops_hand_the_scope_their_result_only)
{
    const int64_t before = bytes_now();
    tg_tensor *x, *xu, *w, *wt, *parts[40];
    x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 5, 5}, 1);
    xu = th_rand_uniform(TG_F32, 3, (int64_t[]){3, 5, 5}, 2);
    w = th_rand_uniform(TG_F32, 4, (int64_t[]){4, 3, 3, 3}, 3);
    wt = th_rand_uniform(TG_F32, 4, (int64_t[]){3, 4, 3, 3}, 4);
    tg_tensor_set_requires_grad(w, true);
    for (int i = 0; i < 40; i++)
        cr_assert(eq(int, tg_tensor_full(&parts[i], TG_F32, 1, (int64_t[]){2}, i), 0));
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    p.act = TG_ACT_TANH;
    cr_assert(eq(int, tg_scope_begin(), 0));
    tg_tensor *y;
    cr_assert(eq(int, tg_conv(&y, x, w, NULL, &p), 0));   /* w requires grad: split */
    cr_assert(eq(int, tg_scope_size(), 1));
    cr_assert(eq(int, tg_conv(&y, xu, w, NULL, NULL), 0));   /* unbatched */
    cr_assert(eq(int, tg_scope_size(), 2));
    cr_assert(eq(int, tg_conv_transpose(&y, xu, wt, NULL, &p), 0));
    cr_assert(eq(int, tg_scope_size(), 3));
    cr_assert(eq(int, tg_cat(&y, 40, parts, 0), 0));
    cr_assert(eq(int, tg_scope_size(), 4));
    cr_assert(eq(i64, tg_tensor_numel(y), 80));
    cr_assert(eq(int, tg_scope_end(), 0));
    for (int i = 0; i < 40; i++) tg_tensor_release(parts[i]);
    tg_tensor *all[] = {x, xu, w, wt};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tg_tensor_release(all[i]);
    cr_assert(eq(i64, bytes_now(), before));
}

/* More public calls that run several ops inside, in a scope: pixel_shuffle
 * and pixel_unshuffle (reshape, permute, reshape), prelu with a weight of
 * another dtype (a cast, then the op) hand the scope their result alone;
 * the ONNX export and the FID features run a model's forwards, and spectral
 * norm's set-up a power iteration, and hand the scope nothing.  Each tensor
 * is released once (ASan), and the bytes return to where they were. */
Test(scope, composite_calls_release_their_own_tensors_once)
{
    const int64_t before = bytes_now();
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 4, 2, 2}, 5), *w = NULL;
    tg_tensor *img = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 1, 28, 28}, 6);
    cr_assert(eq(int, tg_tensor_full(&w, TG_F64, 1, (int64_t[]){4}, 0.25), 0));
    tg_module *seq = NULL, *m = NULL, *fid = NULL;
    cr_assert(eq(int, tg_nn_sequential_new(&seq), 0));
    cr_assert(eq(int, tg_nn_prelu_new(&m, 4, 0.25), 0));
    cr_assert(eq(int, tg_nn_sequential_append(seq, m), 0));
    cr_assert(eq(int, tg_nn_elu_new(&m, 0.5), 0));
    cr_assert(eq(int, tg_nn_sequential_append(seq, m), 0));
    tg_rng rng;
    tg_rng_init(&rng, 3);
    cr_assert(eq(int, tg_fid_net_new(&fid, &rng), 0));
    cr_assert(eq(int, tg_scope_begin(), 0));
    tg_tensor *y, *feat = NULL;
    cr_assert(eq(int, tg_pixel_shuffle(&y, x, 2), 0));
    cr_assert(eq(int, tg_pixel_unshuffle(&y, y, 2), 0));
    cr_assert(eq(int, tg_prelu(&y, x, w), 0));
    cr_assert(eq(int, tg_scope_size(), 3));
    cr_assert(eq(int, tg_fid_features(&feat, NULL, fid, img), 0));
    cr_assert(eq(int, tg_scope_size(), 3));
    if (tg_onnx_available()) {
        char path[256];
        th_tmp_dir_make("tg_scope_");
        cr_assert(eq(int, tg_onnx_export(seq, x, th_tmp_path(path, sizeof path, "m.onnx"), NULL),
                     0), "%s", tg_error_message());
        th_tmp_dir_remove();
        cr_assert(eq(int, tg_scope_size(), 3));
    }
    /* spectral norm set up inside the scope: u, v and the weight's value
     * are the module's, and a forward after the scope reads them */
    tg_module *lin = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&lin, 4, 3, true, &rng), 0));
    cr_assert(eq(int, tg_nn_spectral_norm(lin, "weight", 1, 1e-12, -1, &rng), 0));
    cr_assert(eq(int, tg_scope_size(), 3));
    cr_assert(eq(int, tg_scope_end(), 0));
    tg_tensor *row = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 4}, 7), *out = NULL;
    cr_assert(eq(int, tg_module_forward(lin, &out, row), 0), "%s", tg_error_message());
    th_release_all(3, (tg_tensor *[]){row, out, feat});
    tg_module_release(lin);
    tg_module_release(seq);
    tg_module_release(fid);
    th_release_all(3, (tg_tensor *[]){x, w, img});
    cr_assert(eq(i64, bytes_now(), before));
}

/* A forward written with its own scope (keeping its result) and one written
 * with releases both work inside the caller's scope. */
static int scoped_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    TG_TRY(tg_scope_begin());
    tg_tensor *h, *r;
    int rc = tg_mul_scalar(&h, x, 3.0);
    if (rc >= 0) rc = tg_add_scalar(&r, h, 1.0);
    if (rc >= 0) *y = tg_scope_keep(r);
    tg_scope_end();
    return rc;
}

static int releasing_forward(tg_module *m, tg_tensor **y, tg_tensor *x)
{
    (void)m;
    tg_tensor *h;
    TG_TRY(tg_mul_scalar(&h, x, 3.0));
    int rc = tg_add_scalar(y, h, 1.0);
    tg_tensor_release(h);
    return rc;
}

static const tg_module_vtable scoped_vt = {.type_name = "Scoped", .forward = scoped_forward};
static const tg_module_vtable releasing_vt = {.type_name = "Releasing",
                                              .forward = releasing_forward};

Test(scope, module_forwards_with_and_without_their_own_scope)
{
    const int64_t before = bytes_now();
    const tg_module_vtable *vts[2] = {&scoped_vt, &releasing_vt};
    for (int k = 0; k < 2; k++) {
        tg_module *m;
        tg_tensor *x, *y, *s;
        cr_assert(eq(int, tg_module_new(&m, vts[k], NULL), 0));
        cr_assert(eq(int, tg_tensor_full(&x, TG_F64, 1, (int64_t[]){2}, 1.0), 0));
        cr_assert(eq(int, tg_tensor_set_requires_grad(x, true), 0));
        cr_assert(eq(int, tg_scope_begin(), 0));
        cr_assert(eq(int, tg_module_forward(m, &y, x), 0));
        cr_assert(eq(int, tg_sum(&s, y), 0));
        cr_assert(eq(int, tg_scope_size(), 2), "%s", vts[k]->type_name);
        cr_assert(eq(int, tg_backward(s, NULL, NULL), 0));
        cr_assert(eq(dbl, tg_tensor_item(s), 8.0));
        cr_assert(eq(int, tg_scope_end(), 0));
        double g;
        cr_assert(eq(int, tg_tensor_get_flat(tg_tensor_grad(x), 1, &g), 0));
        cr_assert(eq(dbl, g, 3.0));
        tg_tensor_release(x);
        tg_module_release(m);
    }
    cr_assert(eq(i64, bytes_now(), before));
}

Test(scope, item_reads_one_element_and_refuses_more)
{
    tg_tensor *a, *b;
    cr_assert(eq(int, tg_tensor_full(&a, TG_BF16, 3, (int64_t[]){1, 1, 1}, 1.5), 0));
    cr_assert(eq(dbl, tg_tensor_item(a), 1.5));
    cr_assert(eq(int, tg_tensor_zeros(&b, TG_F32, 1, (int64_t[]){2}), 0));
    tg_error_clear();
    cr_assert(isnan(tg_tensor_item(b)));
    cr_assert(strstr(tg_error_message(), "tensor_item: t has 2 elements") != NULL, "%s",
              tg_error_message());
    cr_assert(isnan(tg_tensor_item(NULL)));
    tg_tensor_release(a);
    tg_tensor_release(b);
}

Test(scope, optimizers_from_a_module_take_its_parameters_once)
{
    tg_module *m = small_mlp(), *empty;
    tg_optimizer *o;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    tg_adam_opts ao = TG_ADAMW_OPTS_INIT;
    cr_assert(eq(int, tg_sgd_from_module(&o, m, &so), 0));
    tg_optimizer_free(o);
    cr_assert(eq(int, tg_adamw_from_module(&o, m, &ao), 0));
    tg_optimizer_free(o);
    cr_assert(eq(int, tg_nn_sequential_new(&empty), 0));
    cr_assert(eq(int, tg_adam_from_module(&o, empty, &ao), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "has no parameters") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_adam_from_module(&o, NULL, &ao), TG_EINVAL));
    tg_module_release(empty);
    tg_module_release(m);
}

/* y = a * b + c: a module of three inputs. */
static int fma_forward(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    (void)m;
    if (n != 3) return tg_error_set(TG_EINVAL, "Fma: n=%d must be 3", n);
    tg_tensor *p;
    TG_TRY(tg_mul(&p, xs[0], xs[1]));
    int rc = tg_add(y, p, xs[2]);
    tg_tensor_release(p);
    return rc;
}

static const tg_module_vtable fma_vt = {.type_name = "Fma", .forward_n = fma_forward};

Test(scope, a_module_with_several_inputs)
{
    tg_module *m;
    tg_tensor *x[3], *y;
    cr_assert(eq(int, tg_module_new(&m, &fma_vt, NULL), 0));
    for (int i = 0; i < 3; i++)
        cr_assert(eq(int, tg_tensor_full(&x[i], TG_F32, 0, NULL, i + 2.0), 0));
    cr_assert(eq(int, tg_module_forward_n(m, &y, 3, x), 0));
    cr_assert(eq(dbl, tg_tensor_item(y), 2.0 * 3.0 + 4.0));
    tg_tensor_release(y);
    cr_assert(eq(int, tg_module_forward_n(m, &y, 2, x), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "Fma: n=2 must be 3") != NULL, "%s", tg_error_message());
    cr_assert(eq(int, tg_module_forward_n(m, &y, 0, x), TG_EINVAL));
    /* with n_inputs in the vtable the count is checked before forward_n
     * runs, tg_module_forward's one included (forward_n would read xs[1]) */
    static const tg_module_vtable fma3_vt = {.type_name = "Fma3", .forward_n = fma_forward,
                                             .n_inputs = 3};
    tg_module *m3;
    cr_assert(eq(int, tg_module_new(&m3, &fma3_vt, NULL), 0));
    cr_assert(eq(int, tg_module_forward(m3, &y, x[0]), TG_EINVAL));
    th_expect_in(tg_error_message(), "module_forward: Fma3 takes 3 inputs; give them to "
                                     "tg_module_forward_n");
    cr_assert(eq(int, tg_module_forward_n(m3, &y, 2, x), TG_EINVAL));
    th_expect_in(tg_error_message(), "module_forward_n: Fma3 takes 3 inputs, got n=2");
    cr_assert(eq(int, tg_module_forward_n(m3, &y, 3, x), 0));
    cr_assert(eq(dbl, tg_tensor_item(y), 2.0 * 3.0 + 4.0));
    tg_tensor_release(y);
    tg_module_release(m3);
    tg_module *lin;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    cr_assert(eq(int, tg_nn_linear_new(&lin, 1, 1, false, &rng), 0));
    cr_assert(eq(int, tg_module_forward_n(lin, &y, 2, x), TG_EUNSUPPORTED));
    cr_assert(strstr(tg_error_message(), "Linear has no forward for 2 inputs") != NULL);
    tg_module_release(lin);
    for (int i = 0; i < 3; i++) tg_tensor_release(x[i]);
    tg_module_release(m);
}

/* Library calls that run a model themselves (calibration) leave nothing in
 * the caller's scope, and the quantized model's forward is captured like any
 * other. */
Test(scope, a_model_quantized_inside_a_scope)
{
    const int64_t before = bytes_now();
    tg_module *m = small_mlp(), *q = NULL;
    tg_tensor *x, *y;
    tg_rng rng;
    tg_rng_init(&rng, 4);
    cr_assert(eq(int, tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){8, 4}), 0));
    cr_assert(eq(int, tg_tensor_rand_normal(x, &rng, 0, 1), 0));
    tg_quantize_options qo = TG_QUANTIZE_OPTIONS_INIT;
    cr_assert(eq(int, tg_scope_begin(), 0));
    cr_assert(eq(int, tg_quantize_model(&q, m, 1, &x, &qo), 0), "%s", tg_error_message());
    cr_assert(eq(int, tg_scope_size(), 0), "calibration's outputs went to the scope");
    cr_assert(eq(int, tg_module_forward(q, &y, x), 0), "%s", tg_error_message());
    cr_assert(eq(int, tg_scope_size(), 1));
    cr_assert(eq(int, tg_scope_end(), 0));
    tg_module_release(q);
    tg_module_release(m);
    tg_tensor_release(x);
    cr_assert(eq(i64, bytes_now(), before));
}
