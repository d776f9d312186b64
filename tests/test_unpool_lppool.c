/* tests/test_unpool_lppool.c - tg_max_unpool and tg_lp_pool against
 * PyTorch's F.max_unpool1d/2d/3d (indices from F.max_pool with
 * return_indices, repeated ones included; output_size given or not) and
 * F.lp_pool1d/2d (norm types 1 to 4, ceil_mode): values and gradients in
 * f64 and f32; tg_max_pool_with_indices's indices as torch's; gradcheck
 * and gradgradcheck in f64; a round trip through tg_adaptive_max_pool's
 * indices; the MaxUnpoolNd and LPPoolNd modules, MaxPoolNd with
 * return_indices and a Sequential MaxPool -> MaxUnpool;
 * the refusals.  Goldens: scripts/make_pool_more_goldens.py. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The pooling parameters of golden case c (kernel, stride, padding). */
static tg_pool_params params_of(const tg_st_file *f, const char *c, bool padding)
{
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    th_ints_of(th_golden_meta(f, c, "kernel"), p.kernel);
    th_ints_of(th_golden_meta(f, c, "stride"), p.stride);
    if (padding) th_ints_of(th_golden_meta(f, c, "padding"), p.padding);
    return p;
}

/* Every case: unpool's values and gradients are copies, torch's to the
 * bit (an index named twice keeps the later element, and each element's
 * gradient is g at its index); lp_pool's within a few roundings. */
Test(unpool_lppool, every_case_matches_torch)
{
    tg_st_file *f = th_golden_load("pool/unpool_lppool.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int unpool = 0, lppool = 0, per_ns[4] = {0};
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        const int ns = atoi(th_golden_meta(f, c, "ns"));
        const bool up = strcmp(th_golden_meta(f, c, "op"), "unpool") == 0;
        const tg_tensor *x0 = th_golden_get(f, c, "x");
        const bool f32 = tg_tensor_dtype(x0) == TG_F32;
        tg_tensor *x = th_leaf_clone(x0), *y = NULL;
        tg_pool_params p = params_of(f, c, up);
        if (up) {
            int64_t osz[3] = {0};
            const char *os = th_golden_meta(f, c, "output_size");
            th_ints_of(os, osz);
            OK(tg_max_unpool(&y, x, (tg_tensor *)th_golden_get(f, c, "indices"), ns, &p,
                             os[0] ? osz : NULL));
            unpool++;
            /* the indices are tg_max_pool_with_indices's, its values tg_max_pool's */
            tg_tensor *px = (tg_tensor *)th_golden_get(f, c, "pool_x"), *py = NULL, *pi = NULL,
                      *pz = NULL;
            OK(tg_max_pool_with_indices(&py, &pi, px, ns, &p));
            OK(tg_max_pool(&pz, px, ns, &p));
            th_expect_same_bits(c, px, pi, th_golden_get(f, c, "indices"));
            th_expect_same_bits(c, px, py, pz);
            cr_assert(tg_tensor_requires_grad(pi) == false, "%s", c);
            th_release_all(3, (tg_tensor *[]){py, pi, pz});
        } else {
            p.ceil_mode = atoi(th_golden_meta(f, c, "ceil_mode")) != 0;
            OK(tg_lp_pool(&y, x, ns, atof(th_golden_meta(f, c, "norm_type")), &p));
            lppool++;
        }
        per_ns[ns]++;
        const double tol = up ? 0 : f32 ? 2e-6 : 1e-13;
        th_expect_close(c, y, th_golden_get(f, c, "y"), tol);
        th_backward_with(y, th_golden_get(f, c, "grad_y"));
        th_expect_close(c, tg_tensor_grad(x), th_golden_get(f, c, "grad_x"), up ? 0 : tol * 4);
        th_release_all(2, (tg_tensor *[]){x, y});
    }
    cr_assert(unpool >= 20 && lppool >= 16 && per_ns[3] >= 6, "golden has %d unpool, %d "
              "lppool, %d 3-d cases", unpool, lppool, per_ns[3]);
    tg_st_free(f);
}

/* max_pool_with_indices: the output keeps max_pool's gradient; the
 * refusals of a NULL or shared indices place. */
Test(unpool_lppool, max_pool_with_indices)
{
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 0);
    tg_tensor *x = th_tensor_from(TG_F64, 3, (int64_t[]){1, 1, 6},
                                  (double[]){1, 4, 3, 2, 5, 5});
    tg_tensor *y = NULL, *idx = NULL, *s = NULL;
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_max_pool_with_indices(&y, &idx, x, 1, &p));
    const double wi[] = {1, 2, 4}, wg[] = {0, 1, 1, 0, 1, 0};
    for (int i = 0; i < 3; i++) cr_assert(eq(dbl, th_at(idx, i), wi[i]), "idx[%d]", i);
    OK(tg_sum(&s, y));
    OK(tg_backward(s, NULL, NULL));
    for (int i = 0; i < 6; i++) cr_assert(eq(dbl, th_at(tg_tensor_grad(x), i), wg[i]), "%d", i);
    th_expect_refused_clean(tg_max_pool_with_indices(out_, NULL, x, 1, &p), TG_EINVAL, "NULL");
    th_expect_refused_clean(tg_max_pool_with_indices(out_, out_, x, 1, &p), TG_EINVAL,
                            "two different");
    th_release_all(4, (tg_tensor *[]){x, y, idx, s});
}

/* max_unpool of adaptive max pooling's indices puts each maximum back
 * where it was, zeros elsewhere: the pooled values read again at the
 * indices, and the sum of the unpooled tensor is the sum of the maxima. */
Test(unpool_lppool, unpool_inverts_pooling_indices)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){2, 3, 6, 8}, 11);
    tg_tensor *y = NULL, *idx = NULL, *u = NULL, *s1 = NULL, *s2 = NULL;
    OK(tg_adaptive_max_pool(&y, &idx, x, 2, (int64_t[]){3, 4}));
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 0);
    OK(tg_max_unpool(&u, y, idx, 2, &p, NULL));
    th_expect_shape(u, 4, (int64_t[]){2, 3, 6, 8});
    int64_t nonzero = 0;
    for (int64_t e = 0; e < 2 * 3 * 6 * 8; e++) {
        if (th_at(u, e) == 0) continue;
        nonzero++;
        cr_assert(eq(dbl, th_at(u, e), th_at(x, e)), "element %lld", (long long)e);
    }
    cr_assert(eq(i64, nonzero, 2 * 3 * 3 * 4));
    OK(tg_sum(&s1, y));
    OK(tg_sum(&s2, u));
    cr_assert(epsilon_eq(dbl, th_at(s1, 0), th_at(s2, 0), 1e-4));
    th_release_all(6, (tg_tensor *[]){x, y, idx, u, s1, s2});
}

typedef struct ucall {
    int ns;
    int64_t shape[5];
    int nd;
    int64_t out[3];
    bool lp;
    double norm;
} ucall;

/* A fixed index pattern for unpool's gradchecks: element i of each plane
 * goes to i * floor(L_out / L_in), all distinct (an overwritten element
 * gets g too, as torch's, which finite differences do not see). */
static tg_tensor *pattern_indices(const ucall *c)
{
    tg_tensor *idx = NULL;
    int64_t lout = 1, lin = 1;
    for (int a = 0; a < c->ns; a++) {
        lout *= c->out[a];
        lin *= c->shape[c->nd - c->ns + a];
    }
    int64_t n = 1;
    for (int d = 0; d < c->nd; d++) n *= c->shape[d];
    int64_t *v = malloc((size_t)n * sizeof *v);
    for (int64_t e = 0; e < n; e++) v[e] = (e % lin) * (lout / lin);
    OK(tg_tensor_from_data(&idx, TG_I64, c->nd, c->shape, v));
    free(v);
    return idx;
}

static int ufn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    (void)n;
    const ucall *c = user;
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 0);
    if (c->lp) {
        p.ceil_mode = true;
        return tg_lp_pool(out, in[0], c->ns, c->norm, &p);
    }
    tg_tensor *idx = pattern_indices(c);
    const int rc = tg_max_unpool(out, in[0], idx, c->ns, &p, c->out);
    tg_tensor_release(idx);
    return rc;
}

/* Gradients to second order by finite differences (f64). */
Test(unpool_lppool, gradcheck_and_gradgradcheck)
{
    const ucall calls[] = {
        {1, {2, 2, 3}, 3, {6}, false, 0},
        {2, {1, 2, 2, 3}, 4, {4, 6}, false, 0},
        {3, {2, 2, 1, 2}, 4, {3, 3, 3}, false, 0},
        {1, {2, 2, 5}, 3, {0}, true, 2},
        {1, {2, 7}, 2, {0}, true, 3},
        {2, {1, 2, 5, 4}, 4, {0}, true, 2},
        {2, {2, 3, 5}, 3, {0}, true, 1.5},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        /* lp_pool away from 0, where the root's slope is infinite */
        tg_tensor *x = th_seq(TG_F64, calls[i].nd, calls[i].shape, 0.3, 2.1);
        OK(tg_tensor_set_requires_grad(x, true));
        th_expect_gradchecks(ufn, (void *)&calls[i], 1, &x, "call %zu", i);
        tg_tensor_release(x);
    }
}

/* The modules: type names, parameters, forward as the functions. */
Test(unpool_lppool, modules)
{
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 0);
    tg_module *m = NULL;
    OK(tg_nn_max_unpool_new(&m, 2, &p));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "MaxUnpool2d"));
    tg_pool_params q;
    int ns = 0;
    OK(tg_nn_max_unpool_params(m, &ns, &q));
    cr_assert(eq(int, ns, 2));
    cr_assert(eq(i64, q.stride[1], 2));
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){1, 2, 4, 4}, 3);
    tg_tensor *y = NULL, *idx = NULL, *u = NULL, *v = NULL;
    OK(tg_adaptive_max_pool(&y, &idx, x, 2, (int64_t[]){2, 2}));
    OK(tg_module_forward_n(m, &u, 2, (tg_tensor *[]){y, idx}));
    OK(tg_max_unpool(&v, y, idx, 2, &p, NULL));
    cr_assert(th_same_bits(u, v), "module and function differ");
    cr_assert(eq(int, tg_module_forward(m, &u, y), TG_EINVAL), "one input is refused");
    th_release_all(2, (tg_tensor *[]){u, v});
    tg_module_release(m);

    OK(tg_nn_lp_pool_new(&m, 1, 2.0, &p));
    cr_assert(eq(str, (char *)tg_module_type_name(m), "LPPool1d"));
    double nt = 0;
    OK(tg_nn_lp_pool_params(m, &ns, &nt, &q));
    cr_assert(eq(dbl, nt, 2.0));
    tg_tensor *z = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 3, 8}, 4);
    u = v = NULL;
    OK(tg_module_forward(m, &u, z));
    OK(tg_lp_pool(&v, z, 1, 2.0, &p));
    cr_assert(th_same_bits(u, v), "module and function differ");
    cr_assert(eq(int, tg_nn_max_unpool_params(m, &ns, &q), TG_EINVAL));
    tg_module_release(m);
    th_release_all(6, (tg_tensor *[]){x, y, idx, u, v, z});
    cr_assert(eq(int, tg_nn_lp_pool_new(&m, 3, 2.0, &p), TG_EINVAL));
    cr_assert(eq(int, tg_nn_lp_pool_new(&m, 2, 0.0, &p), TG_EINVAL));
    cr_assert(eq(int, tg_nn_max_unpool_new(&m, 4, &p), TG_EINVAL));
    cr_assert(eq(int, tg_nn_max_unpool_new(&m, 2, NULL), TG_EINVAL));
}

/* MaxPoolNd(return_indices=True): two outputs, torch's values and indices
 * to the bit on every unpool case's pool_x (unbatched, padded, overlapping
 * windows); tg_module_forward gives the values; a Sequential hands both to
 * a MaxUnpool after it and the values alone to a module of one input. */
Test(unpool_lppool, max_pool_module_returns_torch_indices)
{
    tg_st_file *f = th_golden_load("pool/unpool_lppool.safetensors");
    const int n = atoi(tg_st_meta_get(f, "cases"));
    int count = 0;
    for (int i = 0; i < n; i++) {
        char c[16];
        snprintf(c, sizeof c, "case%d", i);
        if (strcmp(th_golden_meta(f, c, "op"), "unpool") != 0) continue;
        const int ns = atoi(th_golden_meta(f, c, "ns"));
        tg_pool_params p = params_of(f, c, true);
        tg_module *pool = NULL, *unpool = NULL, *seq = NULL;
        OK(tg_nn_max_pool_new(&pool, ns, &p));
        cr_assert(eq(int, tg_module_output_count(pool), 1));
        OK(tg_nn_max_pool_set_return_indices(pool, true));
        cr_assert(eq(int, tg_module_output_count(pool), 2));
        tg_tensor *x = (tg_tensor *)th_golden_get(f, c, "pool_x"), *ys[2] = {NULL, NULL};
        tg_tensor *y = NULL, *want = NULL, *u = NULL, *v = NULL;
        OK(tg_module_forward_outputs(pool, ys, 1, &x));
        OK(tg_max_pool(&want, x, ns, &p));
        th_expect_same_bits(c, x, ys[0], want);
        th_expect_same_bits(c, x, ys[1], th_golden_get(f, c, "indices"));
        OK(tg_module_forward(pool, &y, x));
        th_expect_same_bits(c, x, y, want);
        /* the chain where the default output size holds the indices (the
         * module takes no output_size) */
        OK(tg_nn_max_unpool_new(&unpool, ns, &p));
        OK(tg_nn_sequential_new(&seq));
        OK(tg_nn_sequential_append(seq, tg_module_retain(pool)));
        OK(tg_nn_sequential_append(seq, unpool));
        if (th_golden_meta(f, c, "output_size")[0] == 0) {
            OK(tg_module_forward(seq, &u, x));
            OK(tg_max_unpool(&v, ys[0], ys[1], ns, &p, NULL));
            th_expect_same_bits(c, x, u, v);
        }
        th_release_all(6, (tg_tensor *[]){ys[0], ys[1], y, want, u, v});
        tg_module_release(seq);
        tg_module_release(pool);
        count++;
    }
    cr_assert(count >= 20, "%d unpool cases", count);
    tg_st_free(f);

    /* the values alone to a module of one input; one input only */
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 0);
    tg_module *seq = NULL, *pool = NULL, *relu = NULL;
    OK(tg_nn_sequential_new(&seq));
    OK(tg_nn_max_pool_new(&pool, 1, &p));
    OK(tg_nn_max_pool_set_return_indices(pool, true));
    OK(tg_nn_activation_new(&relu, TG_ACT_RELU, 0));
    OK(tg_nn_sequential_append(seq, tg_module_retain(pool)));
    OK(tg_nn_sequential_append(seq, relu));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){2, 3, 8}, 9), *y = NULL, *z = NULL,
              *w = NULL, *ys[2] = {NULL, NULL};
    OK(tg_module_forward(seq, &y, x));
    OK(tg_max_pool(&z, x, 1, &p));
    OK(tg_relu(&w, z));
    cr_assert(th_same_bits(y, w), "Sequential(MaxPool, ReLU)");
    cr_assert(eq(int, tg_module_forward_outputs(pool, ys, 2, (tg_tensor *[]){x, x}),
                 TG_EINVAL));
    th_expect_in(tg_error_message(), "MaxPool1d takes 1 inputs, got n=2");
    cr_assert(ys[0] == NULL && ys[1] == NULL);
    /* a module of one output gives it alone */
    OK(tg_module_forward_outputs(relu, ys, 1, &z));
    cr_assert(th_same_bits(ys[0], w) && ys[1] == NULL);
    th_release_all(5, (tg_tensor *[]){x, y, z, w, ys[0]});
    tg_module_release(pool);
    tg_module_release(seq);
}

/* torch's rules: indices of x's shape and i64, each inside the output
 * plane; output_size strictly within a stride of the default; lp_pool's
 * norm_type, dims and parameters. */
Test(unpool_lppool, refusals)
{
    tg_pool_params p = TG_POOL_PARAMS_INIT;
    tg_pool_params_set(&p, 2, 0, 0);
    tg_tensor *x = th_rand_uniform(TG_F32, 4, (int64_t[]){1, 2, 2, 2}, 5);
    tg_tensor *idx = NULL, *i32 = NULL, *bad = NULL, *small = NULL;
    OK(tg_tensor_zeros(&idx, TG_I64, 4, (int64_t[]){1, 2, 2, 2}));
    OK(tg_tensor_zeros(&i32, TG_I32, 4, (int64_t[]){1, 2, 2, 2}));
    OK(tg_tensor_zeros(&small, TG_I64, 4, (int64_t[]){1, 2, 2, 1}));
    OK(tg_tensor_clone(&bad, idx));
    OK(tg_tensor_set_flat(bad, 3, 16));
    th_expect_refused_clean(tg_max_unpool(out_, x, bad, 2, &p, NULL), TG_EINVAL,
                            "invalid max index");
    OK(tg_tensor_set_flat(bad, 3, -1));
    th_expect_refused_clean(tg_max_unpool(out_, x, bad, 2, &p, NULL), TG_EINVAL,
                            "invalid max index");
    th_expect_refused_clean(tg_max_unpool(out_, x, i32, 2, &p, NULL), TG_EDTYPE, "i64");
    th_expect_refused_clean(tg_max_unpool(out_, x, small, 2, &p, NULL), TG_ESHAPE, "x's shape");
    th_expect_refused_clean(tg_max_unpool(out_, x, idx, 2, &p, (int64_t[]){6, 4}), TG_EINVAL,
                            "output_size[0]=6");
    th_expect_refused_clean(tg_max_unpool(out_, x, idx, 2, &p, (int64_t[]){4, 2}), TG_EINVAL,
                            "output_size[1]=2");
    th_expect_refused_clean(tg_max_unpool(out_, x, idx, 1, &p, NULL), TG_ESHAPE, "dims");
    th_expect_refused_clean(tg_max_unpool(out_, x, idx, 0, &p, NULL), TG_EINVAL, "n_spatial");
    th_expect_refused_clean(tg_max_unpool(out_, NULL, idx, 2, &p, NULL), TG_EINVAL, "NULL");
    tg_pool_params z = TG_POOL_PARAMS_INIT;
    th_expect_refused_clean(tg_max_unpool(out_, x, idx, 2, &z, NULL), TG_EINVAL, "kernel[0]=0");
    /* allowed: 3 and 5 are within a stride of 4 */
    tg_tensor *y = NULL;
    OK(tg_max_unpool(&y, x, idx, 2, &p, (int64_t[]){3, 5}));
    th_expect_shape(y, 4, (int64_t[]){1, 2, 3, 5});
    tg_tensor_release(y);

    th_expect_refused_clean(tg_lp_pool(out_, x, 3, 2.0, &p), TG_EINVAL, "1 or 2");
    th_expect_refused_clean(tg_lp_pool(out_, x, 2, 0.0, &p), TG_EINVAL, "norm_type");
    th_expect_refused_clean(tg_lp_pool(out_, x, 2, NAN, &p), TG_EINVAL, "norm_type");
    tg_pool_params padded = p;
    padded.padding[0] = 1;
    th_expect_refused_clean(tg_lp_pool(out_, x, 2, 2.0, &padded), TG_EINVAL, "padding[0]");
    th_expect_refused_clean(tg_lp_pool(out_, x, 2, 2.0, &z), TG_EINVAL, "kernel");
    th_expect_refused_clean(tg_lp_pool(out_, i32, 2, 2.0, &p), TG_EDTYPE, "");
    th_release_all(5, (tg_tensor *[]){x, idx, i32, bad, small});
}
