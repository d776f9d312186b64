/* tests/test_sparse_grad.c - sparse COO gradients (tapegrad/sparse.h): an
 * Embedding with sparse=true against PyTorch 1.13
 * (tests/golden/sparse_grad.safetensors, scripts/make_sparse_goldens.py),
 * coalesce and to_dense, accumulation over backward calls, SparseAdam, SGD
 * and Adagrad with sparse gradients, their state saved and loaded, and the
 * refusals of everything that takes dense tensors only. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static tg_st_file *golden(void) { return th_golden_load("sparse_grad.safetensors"); }

static const tg_tensor *get(const tg_st_file *f, const char *fmt, const char *a,
                            const char *b)
{
    char name[128];
    snprintf(name, sizeof name, fmt, a, b);
    const tg_tensor *t = tg_st_get(f, name);
    cr_assert(t != NULL, "golden %s missing", name);
    return t;
}

/* Fails unless the call failed with status and a message holding each of
 * the words. */
static void expect_refused(int rc, int status, const char *w1, const char *w2)
{
    const char *m = tg_error_message();
    cr_assert(eq(int, rc, status), "rc %d, message: %s", rc, m);
    cr_assert(strstr(m, w1) != NULL, "message '%s' lacks '%s'", m, w1);
    cr_assert(w2 == NULL || strstr(m, w2) != NULL, "message '%s' lacks '%s'", m, w2);
}

/* The weight's gradient after F.embedding(idx, weight, opts) backward(w),
 * and a second call with idx2 and w2 when idx2 is given. */
static tg_tensor *emb_grad(const tg_tensor *weight, const tg_embedding_opts *o,
                           const tg_tensor *idx, const tg_tensor *w, const tg_tensor *idx2,
                           const tg_tensor *w2)
{
    tg_tensor *t = th_leaf_clone(weight), *y = NULL;
    OK(tg_embedding_ex(&y, t, (tg_tensor *)idx, o));
    OK(tg_backward(y, (tg_tensor *)w, NULL));
    tg_tensor_release(y);
    if (idx2) {
        OK(tg_embedding_ex(&y, t, (tg_tensor *)idx2, o));
        OK(tg_backward(y, (tg_tensor *)w2, NULL));
        tg_tensor_release(y);
    }
    tg_tensor *g = tg_tensor_retain(tg_tensor_grad(t));
    tg_tensor_release(t);
    return g;
}

Test(sparse_grad, embedding_gradient_matches_pytorch)
{
    tg_st_file *f = golden();
    const char *dts[] = {"f64", "f32"}, *cases[] = {"plain", "pad", "accum"};
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 3; c++) {
            const char *dt = dts[d], *cs = cases[c];
            tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT, dense_o = TG_EMBEDDING_OPTS_INIT;
            o.sparse = true;
            if (c == 1) o.padding_idx = dense_o.padding_idx = 2;
            const bool two = c == 2;
            const tg_tensor *weight = get(f, "emb.%s.weight", dt, NULL);
            const tg_tensor *idx = tg_st_get(f, "emb.idx"), *idx2 = tg_st_get(f, "emb.idx2");
            const tg_tensor *w = get(f, "emb.%s.w", dt, NULL), *w2 = get(f, "emb.%s.w2", dt, NULL);
            tg_tensor *g = emb_grad(weight, &o, idx, w, two ? idx2 : NULL, w2);
            cr_assert(tg_tensor_is_sparse(g), "%s %s: the gradient is dense", dt, cs);
            tg_tensor *ix = NULL, *v = NULL, *co = NULL, *cix = NULL, *cv = NULL, *dn = NULL;
            OK(tg_sparse_indices(&ix, g));
            OK(tg_sparse_values(&v, g));
            th_expect_same_tensor_bytes("indices", ix, get(f, "emb.%s.%s.indices", dt, cs));
            th_expect_same_tensor_bytes("values", v, get(f, "emb.%s.%s.values", dt, cs));
            cr_assert(eq(i64, tg_sparse_nnz(g), tg_tensor_dim(ix, 1)));
            OK(tg_sparse_coalesce(&co, g));
            cr_assert(tg_sparse_is_coalesced(co), "coalesce gave an uncoalesced tensor");
            OK(tg_sparse_indices(&cix, co));
            OK(tg_sparse_values(&cv, co));
            th_expect_same_tensor_bytes("cindices", cix, get(f, "emb.%s.%s.cindices", dt, cs));
            th_expect_near("cvalues", cv, get(f, "emb.%s.%s.cvalues", dt, cs),
                           d == 0 ? 1e-15 : 1e-6, d == 0 ? 1e-15 : 1e-6);
            /* to_dense is the dense Embedding's gradient bit for bit */
            tg_tensor *dg = emb_grad(weight, &dense_o, idx, w, two ? idx2 : NULL, w2);
            OK(tg_sparse_to_dense(&dn, g));
            th_expect_same_bits("to_dense", weight, dn, dg);
            th_expect_near("dense", dn, get(f, "emb.%s.%s.dense", dt, cs),
                           d == 0 ? 1e-15 : 1e-6, d == 0 ? 1e-15 : 1e-6);
            th_release_all(9, (tg_tensor *[]){g, ix, v, co, cix, cv, dn, dg, NULL});
        }
    tg_st_free(f);
}

Test(sparse_grad, max_norm_with_sparse_matches_pytorch)
{
    tg_st_file *f = golden();
    tg_tensor *t = th_leaf_clone(tg_st_get(f, "emb.f32.maxnorm.weight_in")), *y = NULL, *s = NULL;
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
    o.sparse = true;
    o.max_norm = 1.0;
    OK(tg_embedding_ex(&y, t, tg_st_get(f, "emb.idx"), &o));
    OK(tg_sum(&s, y));
    OK(tg_backward(s, NULL, NULL));
    th_expect_near("weight", t, tg_st_get(f, "emb.f32.maxnorm.weight"), 1e-6, 1e-7);
    tg_tensor *ix = NULL, *v = NULL;
    OK(tg_sparse_indices(&ix, tg_tensor_grad(t)));
    OK(tg_sparse_values(&v, tg_tensor_grad(t)));
    th_expect_same_tensor_bytes("indices", ix, tg_st_get(f, "emb.f32.maxnorm.indices"));
    th_expect_same_tensor_bytes("values", v, tg_st_get(f, "emb.f32.maxnorm.values"));
    th_release_all(5, (tg_tensor *[]){t, y, s, ix, v});
    tg_st_free(f);
}

/* The leaf gets the sum of a sparse and a dense gradient as a dense tensor:
 * in one backward (a weight used by the sparse Embedding and by sum), and
 * over two (a dense .grad first, then a sparse one added into it). */
Test(sparse_grad, sparse_and_dense_gradients_sum_to_dense)
{
    tg_st_file *f = golden();
    const tg_tensor *weight = tg_st_get(f, "emb.f64.weight"), *idx = tg_st_get(f, "emb.idx");
    const tg_tensor *w = tg_st_get(f, "emb.f64.w");
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
    o.sparse = true;
    tg_tensor *t = th_leaf_clone(weight), *y = NULL, *s = NULL, *dg = NULL, *want = NULL;
    OK(tg_embedding_ex(&y, t, (tg_tensor *)idx, &o));
    OK(tg_sum(&s, t));
    OK(tg_backward(y, (tg_tensor *)w, &(tg_backward_opts){.retain_graph = true}));
    OK(tg_backward(s, NULL, NULL));   /* dense ones into the sparse .grad */
    cr_assert(tg_tensor_is_sparse(tg_tensor_grad(t)) == false, "sparse + dense stayed sparse");
    dg = emb_grad(weight, NULL, idx, w, NULL, NULL);
    OK(tg_add_scalar(&want, dg, 1.0));
    /* each stored row added in turn, rounded per addition, as torch's dense += sparse */
    th_expect_near("sparse then dense", tg_tensor_grad(t), want, 1e-15, 1e-15);
    /* a dense .grad of its own takes the sparse sum in place */
    tg_tensor *own = tg_tensor_grad(t), *y2 = NULL, *want2 = NULL;
    OK(tg_embedding_ex(&y2, t, (tg_tensor *)idx, &o));
    OK(tg_backward(y2, (tg_tensor *)w, NULL));
    cr_assert(tg_tensor_grad(t) == own, "the own dense .grad was replaced");
    OK(tg_add(&want2, want, dg));
    th_expect_near("dense then sparse", tg_tensor_grad(t), want2, 1e-15, 1e-15);
    th_release_all(8, (tg_tensor *[]){t, y, s, dg, want, y2, want2, NULL});
    tg_st_free(f);
}

Test(sparse_grad, zero_grad_and_create_graph_as_torch)
{
    tg_st_file *f = golden();
    tg_module *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT, back = TG_EMBEDDING_OPTS_INIT;
    o.sparse = true;
    OK(tg_nn_embedding_new_ex(&m, 7, 3, &o, &rng));
    OK(tg_nn_embedding_options(m, &back));
    cr_assert(back.sparse, "the module lost its sparse option");
    tg_tensor *w = tg_module_find(m, "weight"), *y = NULL, *s = NULL;
    OK(tg_module_forward(m, &y, tg_st_get(f, "emb.idx2")));
    OK(tg_sum(&s, y));
    OK(tg_backward(s, NULL, NULL));
    cr_assert(eq(i64, tg_sparse_nnz(tg_tensor_grad(w)), 4));
    tg_optimizer *opt = NULL;
    tg_sparse_adam_opts so = TG_SPARSE_ADAM_OPTS_INIT;
    OK(tg_sparse_adam_from_module(&opt, m, &so));
    OK(tg_optimizer_zero_grad_ex(opt, false));   /* torch 1.13: a sparse grad with no rows */
    cr_assert(tg_tensor_is_sparse(tg_tensor_grad(w)), "zero_grad made the grad dense");
    cr_assert(eq(i64, tg_sparse_nnz(tg_tensor_grad(w)), 0));
    tg_optimizer_zero_grad(opt);
    cr_assert(tg_tensor_grad(w) == NULL, "set_to_none kept the grad");
    /* create_graph: the same sparse gradient, which requires no grad */
    tg_tensor *g = NULL, *y2 = NULL;
    OK(tg_module_forward(m, &y2, tg_st_get(f, "emb.idx2")));
    tg_backward_opts cg = {.create_graph = true};
    OK(tg_grad(&g, 1, &y2, (tg_tensor *[]){tg_st_get(f, "emb.f32.w2")}, 1, &w, &cg));
    cr_assert(tg_tensor_is_sparse(g), "create_graph gave a dense gradient");
    cr_assert(tg_tensor_requires_grad(g) == false, "the sparse gradient requires grad");
    th_release_all(5, (tg_tensor *[]){y, s, g, y2, NULL});
    tg_optimizer_free(opt);
    tg_module_release(m);
    tg_st_free(f);
}

/* One optimizer over an Embedding (6, 4) with sparse gradients, 4 steps. */
typedef int (*make_opt)(tg_optimizer **out, tg_tensor *w);
static int make_sparse_adam(tg_optimizer **o, tg_tensor *w)
{
    tg_sparse_adam_opts so = TG_SPARSE_ADAM_OPTS_INIT;
    so.lr = 0.01;
    return tg_sparse_adam_new(o, 1, &w, &so);
}
static int make_sparse_adam_max(tg_optimizer **o, tg_tensor *w)
{
    tg_sparse_adam_opts so = {.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6,
                              .maximize = true};
    return tg_sparse_adam_new(o, 1, &w, &so);
}
static int make_sgd(tg_optimizer **o, tg_tensor *w)
{
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.1;
    return tg_sgd_new(o, 1, &w, &so);
}
static int make_sgd_max(tg_optimizer **o, tg_tensor *w)
{
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.1;
    so.maximize = true;
    return tg_sgd_new(o, 1, &w, &so);
}
static int make_adagrad(tg_optimizer **o, tg_tensor *w)
{
    tg_adagrad_opts so = TG_ADAGRAD_OPTS_INIT;
    so.lr = 0.1;
    so.lr_decay = 0.01;
    so.initial_accumulator_value = 0.1;
    return tg_adagrad_new(o, 1, &w, &so);
}
static int make_adagrad_max(tg_optimizer **o, tg_tensor *w)
{
    tg_adagrad_opts so = TG_ADAGRAD_OPTS_INIT;
    so.lr = 0.05;
    so.maximize = true;
    return tg_adagrad_new(o, 1, &w, &so);
}

/* Step t of the golden sequence: zero_grad (torch 1.13's default), the
 * sparse Embedding's backward of the step's gradient, the step. */
static void run_step(const tg_st_file *f, const char *dt, tg_optimizer *opt, tg_tensor *w, int t)
{
    char a[16], b[32];
    snprintf(a, sizeof a, "%d", t);
    snprintf(b, sizeof b, "opt.idx.%d", t);
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
    o.sparse = true;
    tg_tensor *y = NULL;
    OK(tg_optimizer_zero_grad_ex(opt, false));
    OK(tg_embedding_ex(&y, w, tg_st_get(f, b), &o));
    OK(tg_backward(y, (tg_tensor *)get(f, "opt.%s.g.%s", dt, a), NULL));
    OK(tg_optimizer_step(opt));
    tg_tensor_release(y);
}

/* Each weight after each step, and the state after the last, bit for bit
 * in f64 and f32 (torch's dense += alpha * sparse is one fused multiply-add
 * per element here, BLAS axpy). */
Test(sparse_grad, optimizers_match_pytorch)
{
    tg_st_file *f = golden();
    static const struct {
        const char *name;
        make_opt make;
    } opts[] = {{"sparse_adam", make_sparse_adam}, {"sparse_adam_max", make_sparse_adam_max},
                {"sgd", make_sgd},                 {"sgd_max", make_sgd_max},
                {"adagrad", make_adagrad},         {"adagrad_max", make_adagrad_max}};
    const char *dts[] = {"f64", "f32"};
    for (size_t k = 0; k < sizeof opts / sizeof *opts; k++)
        for (int d = 0; d < 2; d++) {
            char p[64], what[96];
            snprintf(p, sizeof p, "opt.%s.%s", opts[k].name, dts[d]);
            tg_tensor *w = th_leaf_clone(get(f, "opt.%s.w0", dts[d], NULL));
            tg_optimizer *opt = NULL;
            OK(opts[k].make(&opt, w));
            for (int t = 0; t < 4; t++) {
                run_step(f, dts[d], opt, w, t);
                snprintf(what, sizeof what, "%s.w.%d", p, t);
                th_expect_close(what, w, tg_st_get(f, what), 0);   /* bit for bit */
            }
            tg_st_file *st = NULL;
            OK(tg_st_new(&st));
            OK(tg_optimizer_state_save(opt, st, "o"));
            const char *bufs[] = {"exp_avg", "exp_avg_sq", "sum"};
            for (int j = 0; j < 3; j++) {
                snprintf(what, sizeof what, "%s.%s", p, bufs[j]);
                const tg_tensor *want = tg_st_get(f, what);
                char key[32];
                snprintf(key, sizeof key, "o.0.%s", bufs[j]);
                const bool has = tg_st_get(st, key) != NULL;
                cr_assert(has == (want != NULL), "%s: state %s", p, bufs[j]);
                if (want) th_expect_close(what, tg_st_get(st, key), want, 0);
            }
            snprintf(what, sizeof what, "%s.step", p);
            if (tg_st_get(f, what))
                cr_assert(eq(dbl, tg_tensor_item(tg_st_get(st, "o.0.step")),
                             tg_tensor_item(tg_st_get(f, what))));
            tg_st_free(st);
            tg_optimizer_free(opt);
            tg_tensor_release(w);
        }
    tg_st_free(f);
}

/* SparseAdam's state saved after two steps and loaded into a new optimizer:
 * both go on to the same bits. */
Test(sparse_grad, sparse_adam_state_round_trips_bit_for_bit)
{
    tg_st_file *f = golden();
    tg_tensor *w = th_leaf_clone(tg_st_get(f, "opt.f32.w0"));
    tg_optimizer *opt = NULL, *opt2 = NULL;
    OK(make_sparse_adam(&opt, w));
    run_step(f, "f32", opt, w, 0);
    run_step(f, "f32", opt, w, 1);
    tg_st_file *st = NULL;
    OK(tg_st_new(&st));
    OK(tg_optimizer_state_save(opt, st, "o"));
    cr_assert(eq(str, (char *)tg_st_meta_get(st, "o.kind"), "sparse_adam"));
    tg_tensor *w2 = th_leaf_clone(w);
    OK(make_sparse_adam(&opt2, w2));
    OK(tg_optimizer_state_load(opt2, st, "o"));
    for (int t = 2; t < 4; t++) {
        run_step(f, "f32", opt, w, t);
        run_step(f, "f32", opt2, w2, t);
    }
    th_expect_same_bits("resumed", w, w2, w);
    th_expect_close("weight", w, tg_st_get(f, "opt.sparse_adam.f32.w.3"), 0);
    tg_st_free(st);
    tg_optimizer_free(opt);
    tg_optimizer_free(opt2);
    th_release_all(2, (tg_tensor *[]){w, w2});
    tg_st_free(f);
}

/* A sparse gradient of a (3, 2) weight: rows 2, 0, 2. */
static tg_tensor *small_sparse(void)
{
    tg_tensor *ix = NULL, *v = NULL, *s = NULL;
    OK(tg_tensor_from_data(&ix, TG_I64, 2, (int64_t[]){1, 3}, (int64_t[]){2, 0, 2}));
    OK(tg_tensor_from_data(&v, TG_F32, 2, (int64_t[]){3, 2}, (float[]){1, 2, 3, 4, 5, 6}));
    OK(tg_sparse_coo_new(&s, ix, v, 2, (int64_t[]){3, 2}));
    th_release_all(2, (tg_tensor *[]){ix, v});
    return s;
}

Test(sparse_grad, coo_new_coalesce_and_to_dense)
{
    tg_tensor *s = small_sparse(), *c = NULL, *d = NULL, *cv = NULL, *ix = NULL;
    cr_assert(tg_sparse_is_coalesced(s) == false, "a new tensor claims to be coalesced");
    OK(tg_sparse_coalesce(&c, s));
    OK(tg_sparse_values(&cv, c));
    OK(tg_sparse_indices(&ix, c));
    const double want_v[] = {3, 4, 6, 8}, want_i[] = {0, 2};
    for (int i = 0; i < 4; i++) cr_assert(eq(dbl, th_at(cv, i), want_v[i]));
    for (int i = 0; i < 2; i++) cr_assert(eq(dbl, th_at(ix, i), want_i[i]));
    OK(tg_sparse_to_dense(&d, s));
    const double want_d[] = {3, 4, 0, 0, 6, 8};
    for (int i = 0; i < 6; i++) cr_assert(eq(dbl, th_at(d, i), want_d[i]));
    tg_tensor *again = NULL;
    OK(tg_sparse_coalesce(&again, c));
    cr_assert(again == c, "coalescing a coalesced tensor copied it");
    th_release_all(6, (tg_tensor *[]){s, c, d, cv, ix, again});
}

Test(sparse_grad, dense_functions_refuse_a_sparse_tensor)
{
    tg_tensor *s = small_sparse(), *out = NULL, *x = NULL;
    double v;
    OK(tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){3, 2}));
    expect_refused(tg_add(&out, s, x), TG_EUNSUPPORTED, "add: input 0", "sparse");
    expect_refused(tg_mul(&out, x, s), TG_EUNSUPPORTED, "input 1", "sparse");
    expect_refused(tg_sum(&out, s), TG_EUNSUPPORTED, "input 0", "sparse");
    expect_refused(tg_tensor_get_flat(s, 0, &v), TG_EUNSUPPORTED, "tensor_get_flat: t", NULL);
    expect_refused(tg_tensor_fill(s, 1.0), TG_EUNSUPPORTED, "tensor_fill: t", NULL);
    expect_refused(tg_tensor_copy_(x, s), TG_EUNSUPPORTED, "tensor_copy_: src", NULL);
    expect_refused(tg_tensor_to_dtype(&out, s, TG_F64), TG_EUNSUPPORTED, "to_dtype: t", NULL);
    cr_assert(tg_tensor_data(s) == NULL, "tensor_data gave a pointer into nothing");
    cr_assert(isnan(tg_tensor_item(s)), "tensor_item read a sparse tensor");
    cr_assert(tg_tensor_is_contiguous(s) == false, "a sparse tensor claims to be contiguous");
    expect_refused(tg_sparse_values(&out, x), TG_EINVAL, "sparse_values: t is a dense", NULL);
    cr_assert(eq(i64, tg_sparse_nnz(x), -1));
    cr_assert(out == NULL, "a refused call wrote out");
    tg_tensor *c = NULL;
    OK(tg_tensor_clone(&c, s));
    cr_assert(tg_tensor_is_sparse(c) && tg_sparse_nnz(c) == 3, "clone lost the sparse rows");
    th_release_all(3, (tg_tensor *[]){s, x, c});
}

Test(sparse_grad, coo_new_refuses_bad_arguments)
{
    tg_tensor *ix = NULL, *v = NULL, *out = NULL;
    OK(tg_tensor_from_data(&ix, TG_I64, 2, (int64_t[]){1, 2}, (int64_t[]){0, 3}));
    OK(tg_tensor_zeros(&v, TG_F32, 2, (int64_t[]){2, 2}));
    expect_refused(tg_sparse_coo_new(&out, ix, v, 2, (int64_t[]){3, 2}), TG_EINVAL,
                   "indices[0][1]=3", "[0, 3)");
    expect_refused(tg_sparse_coo_new(&out, ix, v, 2, (int64_t[]){4, 3}), TG_ESHAPE,
                   "values have shape (2, 2)", "(2, 3)");
    expect_refused(tg_sparse_coo_new(&out, v, v, 2, (int64_t[]){4, 2}), TG_EDTYPE,
                   "indices have dtype", NULL);
    cr_assert(out == NULL, "a refused call wrote out");
    th_release_all(2, (tg_tensor *[]){ix, v});
}

/* The optimizers' and utilities' refusals of sparse gradients, torch's. */
Test(sparse_grad, optimizers_refuse_what_torch_refuses)
{
    tg_tensor *w = NULL, *x = NULL;
    OK(tg_tensor_zeros(&w, TG_F32, 2, (int64_t[]){3, 2}));
    OK(tg_tensor_set_requires_grad(w, true));
    OK(tg_tensor_set_grad(w, small_sparse()));
    tg_optimizer *o = NULL;
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    OK(tg_adam_new(&o, 1, &w, &ao));
    expect_refused(tg_optimizer_step(o), TG_EUNSUPPORTED, "params[0].grad is sparse",
                   "Adam does not support sparse gradients, please consider SparseAdam");
    tg_optimizer_free(o);
    tg_rmsprop_opts ro = TG_RMSPROP_OPTS_INIT;
    OK(tg_rmsprop_new(&o, 1, &w, &ro));
    expect_refused(tg_optimizer_step(o), TG_EUNSUPPORTED, "RMSprop does not support sparse",
                   NULL);
    tg_optimizer_free(o);
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.weight_decay = 0.1;
    OK(tg_sgd_new(&o, 1, &w, &so));
    expect_refused(tg_optimizer_step(o), TG_EUNSUPPORTED, "weight_decay=0.1",
                   "add(sparse, dense) is not supported");
    tg_optimizer_free(o);
    so = (tg_sgd_opts)TG_SGD_OPTS_INIT;
    so.momentum = 0.9;
    OK(tg_sgd_new(&o, 1, &w, &so));
    expect_refused(tg_optimizer_step(o), TG_EUNSUPPORTED, "momentum=0.9", NULL);
    tg_optimizer_free(o);
    tg_adagrad_opts go = TG_ADAGRAD_OPTS_INIT;
    go.weight_decay = 0.5;
    OK(tg_adagrad_new(&o, 1, &w, &go));
    expect_refused(tg_optimizer_step(o), TG_EUNSUPPORTED,
                   "weight_decay option is not compatible with sparse gradients", NULL);
    tg_optimizer_free(o);
    double norm = 0;
    expect_refused(tg_clip_grad_norm(&norm, 1, &w, 1.0, 2.0, false), TG_EUNSUPPORTED,
                   "params[0]'s gradient is sparse", NULL);
    /* nothing was written by the refused steps */
    OK(tg_tensor_zeros(&x, TG_F32, 2, (int64_t[]){3, 2}));
    th_expect_same_bits("weight", w, w, x);
    /* SparseAdam refuses a dense gradient */
    tg_sparse_adam_opts sa = TG_SPARSE_ADAM_OPTS_INIT;
    OK(tg_sparse_adam_new(&o, 1, &w, &sa));
    tg_tensor *dense = NULL;
    OK(tg_tensor_zeros(&dense, TG_F32, 2, (int64_t[]){3, 2}));
    OK(tg_tensor_set_grad(w, dense));
    expect_refused(tg_optimizer_step(o), TG_EUNSUPPORTED,
                   "SparseAdam does not support dense gradients, please consider Adam", NULL);
    tg_optimizer_free(o);
    sa.eps = 0;
    expect_refused(tg_sparse_adam_new(&o, 1, &w, &sa), TG_EINVAL, "eps=0 must be > 0", NULL);
    th_release_all(2, (tg_tensor *[]){w, x});
}

Test(sparse_grad, embedding_refusals_name_the_rule)
{
    tg_tensor *w = NULL, *idx = NULL, *y = NULL, *w2 = NULL;
    OK(tg_tensor_zeros(&w, TG_F32, 2, (int64_t[]){4, 2}));
    OK(tg_tensor_set_requires_grad(w, true));
    OK(tg_tensor_from_data(&idx, TG_I64, 1, (int64_t[]){3}, (int64_t[]){1, 3, 1}));
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
    o.sparse = true;
    o.scale_grad_by_freq = true;
    expect_refused(tg_embedding_ex(&y, w, idx, &o), TG_EINVAL,
                   "scale_grad_by_freq is not supported with sparse gradients", NULL);
    tg_module *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    expect_refused(tg_nn_embedding_new_ex(&m, 4, 2, &o, &rng), TG_EINVAL,
                   "scale_grad_by_freq", "sparse");
    /* a sparse gradient may not go on into an op's backward */
    o.scale_grad_by_freq = false;
    OK(tg_mul_scalar(&w2, w, 2.0));
    OK(tg_embedding_ex(&y, w2, idx, &o));
    tg_tensor *s = NULL;
    OK(tg_sum(&s, y));
    expect_refused(tg_backward(s, NULL, NULL), TG_EUNSUPPORTED, "mul_scalar",
                   "may only go to a leaf");
    cr_assert(tg_tensor_grad(w) == NULL, "a refused backward wrote a gradient");
    th_release_all(5, (tg_tensor *[]){w, idx, y, w2, s});
}
