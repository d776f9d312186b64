/* tests/test_embedding.c - F.embedding's padding_idx, scale_grad_by_freq and
 * max_norm (tg_embedding_ex) against PyTorch 1.13
 * (tests/golden/embedding.safetensors, scripts/make_embedding_goldens.py),
 * their gradients of first and second order (gradcheck and gradgradcheck in
 * f64), nn.Embedding with those options and from_pretrained, and the errors
 * that name the argument. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* d sum(embedding_ex(weight, idx) * w) / dweight with options o. */
static tg_tensor *weight_grad(tg_st_file *f, const tg_embedding_opts *o)
{
    tg_tensor *t = NULL, *y = NULL;
    OK(tg_tensor_clone(&t, tg_st_get(f, "weight")));
    OK(tg_tensor_set_requires_grad(t, true));
    OK(tg_embedding_ex(&y, t, tg_st_get(f, "idx"), o));
    th_expect_near("y", y, tg_st_get(f, "y"), 0, 0);
    OK(tg_backward(y, tg_st_get(f, "w"), NULL));
    tg_tensor *g = tg_tensor_retain(tg_tensor_grad(t));
    th_release_all(2, (tg_tensor *[]){y, t});
    return g;
}

Test(embedding, padding_idx_and_scale_grad_by_freq_match_pytorch)
{
    tg_st_file *f = th_golden_load("embedding.safetensors");
    static const struct {
        const char *golden;
        int64_t padding_idx;
        bool freq;
    } cases[] = {
        {"gw.pad", 2, false},
        {"gw.pad", -5, false},
        {"gw.freq", TG_EMBEDDING_NO_PADDING, true},
        {"gw.pad_freq", 2, true},
        {"gw.pad_freq", -5, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
        o.padding_idx = cases[i].padding_idx;
        o.scale_grad_by_freq = cases[i].freq;
        tg_tensor *g = weight_grad(f, &o);
        th_expect_near(cases[i].golden, g, tg_st_get(f, cases[i].golden), 1e-15, 1e-15);
        tg_tensor_release(g);
    }
    tg_st_free(f);
}

/* torch's double backward with padding_idx: d <dweight, v> / dw is v's rows
 * at the indices, 0 where the index is padding_idx. */
Test(embedding, double_backward_with_padding_matches_pytorch)
{
    tg_st_file *f = th_golden_load("embedding.safetensors");
    tg_tensor *t = NULL, *u = NULL, *y = NULL, *gw = NULL, *gg = NULL;
    OK(tg_tensor_clone(&t, tg_st_get(f, "weight")));
    OK(tg_tensor_clone(&u, tg_st_get(f, "w")));
    OK(tg_tensor_set_requires_grad(t, true));
    OK(tg_tensor_set_requires_grad(u, true));
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
    o.padding_idx = 2;
    OK(tg_embedding_ex(&y, t, tg_st_get(f, "idx"), &o));
    tg_backward_opts bo = TG_BACKWARD_OPTS_INIT;
    bo.create_graph = true;
    OK(tg_grad(&gw, 1, &y, &u, 1, &t, &bo));
    tg_tensor *v = tg_st_get(f, "v");
    tg_backward_opts keep = TG_BACKWARD_OPTS_INIT;
    keep.retain_graph = true;
    OK(tg_grad(&gg, 1, &gw, &v, 1, &u, &keep));
    th_expect_near("gg.pad", gg, tg_st_get(f, "gg.pad"), 0, 0);
    /* a NaN in padding_idx's row of v stays out of it (torch masks, 0) */
    tg_tensor *vn = NULL, *ggn = NULL;
    OK(tg_tensor_clone(&vn, v));
    OK(tg_tensor_set_flat(vn, 2 * 4 + 1, NAN));
    OK(tg_grad(&ggn, 1, &gw, &vn, 1, &u, NULL));
    th_expect_near("gg.pad with NaN", ggn, tg_st_get(f, "gg.pad"), 0, 0);
    th_release_all(2, (tg_tensor *[]){vn, ggn});
    th_release_all(5, (tg_tensor *[]){t, u, y, gw, gg});
    tg_st_free(f);
}

typedef struct emb_case {
    tg_tensor *idx;
    tg_embedding_opts o;
} emb_case;

static int g_embedding(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const emb_case *c = user;
    tg_tensor *e = NULL;
    TG_TRY(tg_embedding_ex(&e, in[0], c->idx, &c->o));
    int rc = tg_mul(out, e, e);   /* nonlinear, so gradgradcheck sees the second order */
    tg_tensor_release(e);
    return rc;
}

/* The embedding alone: its first-order rule is linear in the upstream
 * gradient, and gradgradcheck differentiates it along that gradient, so it
 * checks embedding_backward against its adjoint with the options' masks
 * and scalings. */
static int g_embedding_linear(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const emb_case *c = user;
    return tg_embedding_ex(out, in[0], c->idx, &c->o);
}

Test(embedding, gradients_pass_gradcheck_and_the_adjoint_pair_gradgradcheck_in_f64)
{
    tg_tensor *w = th_rand_uniform(TG_F64, 2, (int64_t[]){5, 3}, 8);
    OK(tg_tensor_set_requires_grad(w, true));
    tg_tensor *idx =
        th_tensor_from(TG_I32, 2, (int64_t[]){2, 3}, (double[]){4, 0, 4, 2, 4, 1});
    for (int k = 0; k < 4; k++) {
        emb_case c = {.idx = idx, .o = TG_EMBEDDING_OPTS_INIT};
        if (k & 1) c.o.padding_idx = 4;
        if (k & 2) c.o.scale_grad_by_freq = true;
        /* with padding_idx or the scaling the first-order "gradient" is by
         * definition not the derivative (the goldens check it), so neither
         * is the second order of a function that passes the rows through
         * the forward twice */
        if (k == 0) {
            OK(tg_gradcheck(g_embedding, &c, 1, &w, NULL));
            OK(tg_gradgradcheck(g_embedding, &c, 1, &w, NULL));
        } else {
            cr_assert(eq(int, tg_gradcheck(g_embedding, &c, 1, &w, NULL), TG_EGRADCHECK));
        }
        OK(tg_gradgradcheck(g_embedding_linear, &c, 1, &w, NULL));
    }
    th_release_all(2, (tg_tensor *[]){w, idx});
}

/* The scaled gradient's own gradient: the scaling applies at second order
 * too (torch 1.13's double backward drops it). */
Test(embedding, scale_grad_by_freq_scales_the_double_backward)
{
    tg_tensor *t = th_rand_uniform(TG_F64, 2, (int64_t[]){3, 2}, 3);
    tg_tensor *u = th_rand_uniform(TG_F64, 2, (int64_t[]){4, 2}, 4);
    tg_tensor *v = th_rand_uniform(TG_F64, 2, (int64_t[]){3, 2}, 5);
    tg_tensor *idx = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){1, 0, 1, 1});
    OK(tg_tensor_set_requires_grad(t, true));
    OK(tg_tensor_set_requires_grad(u, true));
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
    o.scale_grad_by_freq = true;
    tg_tensor *y = NULL, *gw = NULL, *gg = NULL;
    OK(tg_embedding_ex(&y, t, idx, &o));
    tg_backward_opts bo = TG_BACKWARD_OPTS_INIT;
    bo.create_graph = true;
    OK(tg_grad(&gw, 1, &y, &u, 1, &t, &bo));
    for (int j = 0; j < 2; j++) {   /* row 1 picked three times: a third of each */
        double want = (th_at(u, j) + th_at(u, 4 + j) + th_at(u, 6 + j)) / 3;
        cr_assert(ieee_ulp_eq(dbl, th_at(gw, 2 + j), want, 4));
        cr_assert(eq(dbl, th_at(gw, 4 + j), 0.0));
    }
    OK(tg_grad(&gg, 1, &gw, &v, 1, &u, NULL));
    for (int j = 0; j < 2; j++) {
        cr_assert(ieee_ulp_eq(dbl, th_at(gg, j), th_at(v, 2 + j) / 3, 4));
        cr_assert(ieee_ulp_eq(dbl, th_at(gg, 2 + j), th_at(v, j), 4));
    }
    th_release_all(7, (tg_tensor *[]){t, u, v, idx, y, gw, gg});
}

Test(embedding, max_norm_renormalises_the_picked_rows_as_pytorch)
{
    tg_st_file *f = th_golden_load("embedding.safetensors");
    static const struct {
        const char *name;
        double p;
    } norms[] = {{"2", 2}, {"1", 1}, {"3", 3}, {"inf", INFINITY}};
    tg_tensor *idx = tg_st_get(f, "renorm.idx");
    for (size_t i = 0; i < sizeof norms / sizeof *norms; i++) {
        tg_tensor *t = NULL, *y = NULL;
        OK(tg_tensor_clone(&t, tg_st_get(f, "renorm.weight")));
        const uint64_t v0 = tg_tensor_version(t);
        tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
        o.max_norm = 1.0;
        o.norm_type = norms[i].p;
        OK(tg_embedding_ex(&y, t, idx, &o));
        cr_assert(tg_tensor_version(t) > v0, "the rescaled weight's version is bumped");
        char name[64];
        snprintf(name, sizeof name, "renorm.%s.weight", norms[i].name);
        /* within an ulp or two: torch takes an f32 row's norm in f32, summed
         * in its own order, where tapegrad sums in double */
        th_expect_near(name, t, tg_st_get(f, name), 2e-7, 0);
        snprintf(name, sizeof name, "renorm.%s.y", norms[i].name);
        th_expect_near(name, y, tg_st_get(f, name), 2e-7, 0);
        th_release_all(2, (tg_tensor *[]){t, y});
    }
    tg_tensor *t = NULL, *y = NULL;
    OK(tg_tensor_clone(&t, tg_st_get(f, "renorm.f64.weight_in")));
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
    o.max_norm = 1.0;
    OK(tg_embedding_ex(&y, t, idx, &o));
    th_expect_near("renorm.f64.weight", t, tg_st_get(f, "renorm.f64.weight"), 1e-15, 0);
    th_expect_near("renorm.f64.y", y, tg_st_get(f, "renorm.f64.y"), 1e-15, 0);
    th_release_all(2, (tg_tensor *[]){t, y});
    tg_st_free(f);
}

/* A bf16 weight: the same gradient as f64's, rounded once. */
Test(embedding, bf16_gradient_is_the_f64_one_rounded)
{
    tg_st_file *f = th_golden_load("embedding.safetensors");
    tg_tensor *t = NULL, *y = NULL, *w = NULL;
    OK(tg_tensor_to_dtype(&t, tg_st_get(f, "weight"), TG_BF16));
    OK(tg_tensor_to_dtype(&w, tg_st_get(f, "w"), TG_BF16));
    OK(tg_tensor_set_requires_grad(t, true));
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
    o.padding_idx = 2;
    o.scale_grad_by_freq = true;
    OK(tg_embedding_ex(&y, t, tg_st_get(f, "idx"), &o));
    OK(tg_backward(y, w, NULL));
    cr_assert(eq(int, tg_tensor_dtype(tg_tensor_grad(t)), TG_BF16));
    /* w rounded to bf16 (2^-9 relative) and the sum rounded once more */
    th_expect_near("gw.pad_freq", tg_tensor_grad(t), tg_st_get(f, "gw.pad_freq"), 1e-2, 1e-2);
    for (int j = 0; j < 4; j++) cr_assert(eq(dbl, th_at(tg_tensor_grad(t), 2 * 4 + j), 0.0));
    th_release_all(3, (tg_tensor *[]){t, y, w});
    tg_st_free(f);
}

Test(embedding, errors_name_the_argument_and_leave_the_weight_unchanged)
{
    tg_tensor *w = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 2}, 2), *y = NULL, *c = NULL;
    tg_tensor *bad = th_tensor_from(TG_I64, 1, (int64_t[]){3}, (double[]){0, 3, 1});
    tg_tensor *idx = th_tensor_from(TG_I64, 1, (int64_t[]){2}, (double[]){0, 1});
    OK(tg_tensor_clone(&c, w));
    const uint64_t v0 = tg_tensor_version(w);
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
    o.max_norm = 1e-3;
    cr_assert(eq(int, tg_embedding_ex(&y, w, bad, &o), TG_EINVAL));
    th_expect_in(tg_error_message(), "embedding: indices[1]=3 must be in [0, 3)");
    cr_assert(eq(int, tg_tensor_version(w), v0));
    th_expect_near("weight", w, c, 0, 0);
    o.norm_type = 0;
    cr_assert(eq(int, tg_embedding_ex(&y, w, idx, &o), TG_EINVAL));
    th_expect_in(tg_error_message(), "norm_type=0 must be > 0");
    o = (tg_embedding_opts)TG_EMBEDDING_OPTS_INIT;
    o.max_norm = -1;
    cr_assert(eq(int, tg_embedding_ex(&y, w, idx, &o), TG_EINVAL));
    th_expect_in(tg_error_message(), "max_norm=-1 must be >= 0");
    o.max_norm = NAN;
    cr_assert(eq(int, tg_embedding_ex(&y, w, idx, &o), TG_EINVAL));
    o = (tg_embedding_opts)TG_EMBEDDING_OPTS_INIT;
    o.padding_idx = 3;
    cr_assert(eq(int, tg_embedding_ex(&y, w, idx, &o), TG_EINVAL));
    th_expect_in(tg_error_message(), "padding_idx=3 must be within num_embeddings (in [-3, 3))");
    o.padding_idx = -4;
    cr_assert(eq(int, tg_embedding_ex(&y, w, idx, &o), TG_EINVAL));
    cr_assert(eq(int, tg_embedding_ex(&y, NULL, idx, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_embedding_ex(&y, idx, idx, NULL), TG_ESHAPE));
    cr_assert(eq(int, tg_embedding_ex(&y, w, w, NULL), TG_EDTYPE));
    cr_assert(y == NULL, "an error left a result");
    th_expect_near("weight", w, c, 0, 0);
    th_release_all(4, (tg_tensor *[]){w, bad, idx, c});
}

Test(embedding, module_options_padding_row_and_gradient)
{
    tg_rng rng;
    tg_rng_init(&rng, 4);
    tg_module *m = NULL;
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT, got;
    o.padding_idx = -2;
    o.scale_grad_by_freq = true;
    OK(tg_nn_embedding_new_ex(&m, 6, 3, &o, &rng));
    OK(tg_nn_embedding_options(m, &got));
    cr_assert(eq(i64, got.padding_idx, 4));
    cr_assert(got.scale_grad_by_freq);
    tg_tensor *w = tg_module_find(m, "weight"), *y = NULL, *s = NULL;
    for (int j = 0; j < 3; j++) {
        cr_assert(eq(dbl, th_at(w, 4 * 3 + j), 0.0), "padding_idx's row starts at 0");
        cr_assert(th_at(w, 3 * 3 + j) != 0.0);
    }
    tg_tensor *idx = th_tensor_from(TG_I64, 1, (int64_t[]){4}, (double[]){4, 1, 1, 0});
    OK(tg_module_forward(m, &y, idx));
    OK(tg_sum(&s, y));
    OK(tg_backward(s, NULL, NULL));
    for (int j = 0; j < 3; j++) {
        cr_assert(eq(dbl, th_at(tg_tensor_grad(w), 4 * 3 + j), 0.0));
        cr_assert(eq(dbl, th_at(tg_tensor_grad(w), 1 * 3 + j), 1.0), "two picks, halved");
        cr_assert(eq(dbl, th_at(tg_tensor_grad(w), 0 * 3 + j), 1.0));
    }
    /* a copy keeps the options */
    tg_module *cp = NULL;
    OK(tg_module_copy(&cp, m));
    OK(tg_nn_embedding_options(cp, &got));
    cr_assert(eq(i64, got.padding_idx, 4));
    cr_assert(eq(int, tg_module_state_count(m), 1));
    o.padding_idx = 6;
    tg_module *bad = NULL;
    cr_assert(eq(int, tg_nn_embedding_new_ex(&bad, 6, 3, &o, &rng), TG_EINVAL));
    th_expect_in(tg_error_message(), "nn_embedding_new: padding_idx=6 must be within");
    o = (tg_embedding_opts)TG_EMBEDDING_OPTS_INIT;
    o.max_norm = 1;
    o.norm_type = -1;
    cr_assert(eq(int, tg_nn_embedding_new_ex(&bad, 6, 3, &o, &rng), TG_EINVAL));
    cr_assert(bad == NULL);
    tg_module *lin = NULL;
    OK(tg_nn_linear_new(&lin, 2, 2, true, &rng));
    cr_assert(eq(int, tg_nn_embedding_options(lin, &got), TG_EINVAL));
    th_expect_in(tg_error_message(), "m is a Linear module, not an Embedding");
    th_release_all(3, (tg_tensor *[]){y, s, idx});
    tg_module_release(m);
    tg_module_release(cp);
    tg_module_release(lin);
}

Test(embedding, from_pretrained_copies_and_freezes)
{
    tg_tensor *e = th_tensor_from(TG_F64, 2, (int64_t[]){3, 2}, (double[]){1, 2, 3, 4, 5, 6});
    tg_embedding_opts o = TG_EMBEDDING_OPTS_INIT;
    o.padding_idx = 1;
    for (int freeze = 0; freeze < 2; freeze++) {
        tg_module *m = NULL;
        OK(tg_nn_embedding_from_pretrained(&m, e, freeze, &o));
        tg_tensor *w = tg_module_find(m, "weight"), *y = NULL, *s = NULL;
        cr_assert(w != e);
        cr_assert(eq(int, tg_tensor_dtype(w), TG_F64));
        th_expect_near("weight", w, e, 0, 0);   /* padding_idx's row as given */
        cr_assert(eq(int, tg_tensor_requires_grad(w), !freeze));
        tg_optimizer *opt = NULL;
        tg_sgd_opts so = TG_SGD_OPTS_INIT;
        so.lr = 0.5;
        OK(tg_sgd_from_module(&opt, m, &so));
        tg_tensor *idx = th_tensor_from(TG_I32, 1, (int64_t[]){2}, (double[]){2, 1});
        OK(tg_module_forward(m, &y, idx));
        OK(tg_sum(&s, y));
        if (!freeze) OK(tg_backward(s, NULL, NULL));
        OK(tg_optimizer_step(opt));
        cr_assert(eq(dbl, th_at(w, 2), 3.0), "padding_idx's row never moves");
        cr_assert(eq(dbl, th_at(w, 4), freeze ? 5.0 : 4.5));
        cr_assert(eq(dbl, th_at(e, 4), 5.0), "the given tensor is not the weight");
        th_release_all(3, (tg_tensor *[]){y, s, idx});
        tg_optimizer_free(opt);
        tg_module_release(m);
    }
    tg_module *m = NULL;
    tg_tensor *i = th_tensor_from(TG_I64, 2, (int64_t[]){1, 2}, (double[]){0, 1});
    cr_assert(eq(int, tg_nn_embedding_from_pretrained(&m, i, false, NULL), TG_EDTYPE));
    th_expect_in(tg_error_message(), "embeddings has dtype i64; a float dtype is needed");
    tg_tensor *v = th_tensor_from(TG_F32, 1, (int64_t[]){2}, (double[]){0, 1});
    cr_assert(eq(int, tg_nn_embedding_from_pretrained(&m, v, false, NULL), TG_ESHAPE));
    o.padding_idx = 3;
    cr_assert(eq(int, tg_nn_embedding_from_pretrained(&m, e, false, &o), TG_EINVAL));
    cr_assert(eq(int, tg_nn_embedding_from_pretrained(&m, NULL, false, NULL), TG_EINVAL));
    cr_assert(m == NULL);
    th_release_all(3, (tg_tensor *[]){e, i, v});
}
