/* tests/fuzz/target_tape_ops.c - the "tape" program's instructions that make
 * tensors and compute new ones from them: elementwise, reduction, view,
 * matmul and the other products, einsum, attention, conv, batch_norm and loss
 * ops (target_tape.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target_tape.h"

int op_new(prog *g)
{
    int i = u8(g) % SLOTS, nd = u8(g) % 5;
    tg_dtype dt = DTYPES[u8(g) % N_DTYPES];
    int64_t shape[4];
    for (int d = 0; d < nd; d++) shape[d] = u8(g) % 5;
    uint8_t seed = u8(g), flags = u8(g);
    tg_tensor *t = NULL;
    int rc = tg_tensor_zeros(&t, dt, nd, shape);
    if (after(g, i, "tensor_zeros", rc, t) < 0) return -1;
    if (rc < 0) return 0;
    if (tg_dtype_is_float(dt)) {
        tg_rng rng;
        tg_rng_init(&rng, seed);
        rc = tg_tensor_rand_uniform(t, &rng, -2.0, 2.0);
    } else {
        rc = tg_tensor_fill(t, seed % 7);
    }
    if (checked(g, "fill", rc) < 0) return -1;
    if (flags & 1) rc = tg_tensor_set_requires_grad(t, true);
    return checked(g, "set_requires_grad", rc);
}

int op_unary(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *a = slot(g), *y = NULL;
    uint8_t k = u8(g) % 61;
    double s = value(u8(g));
    if (big(a)) return 0;
    int rc;
    switch (k) {
    case 0: rc = tg_neg(&y, a); break;
    case 1: rc = tg_exp(&y, a); break;
    case 2: rc = tg_log(&y, a); break;
    case 3: rc = tg_sqrt(&y, a); break;
    case 4: rc = tg_abs(&y, a); break;
    case 5: rc = tg_erf(&y, a); break;
    case 6: rc = tg_relu(&y, a); break;
    case 7: rc = tg_leaky_relu(&y, a, s); break;
    case 8: rc = tg_tanh(&y, a); break;
    case 9: rc = tg_sigmoid(&y, a); break;
    case 10: rc = tg_silu(&y, a); break;
    case 11: rc = tg_gelu(&y, a); break;
    case 12: rc = tg_sum(&y, a); break;
    case 13: rc = tg_mean(&y, a); break;
    case 14: rc = tg_add_scalar(&y, a, s); break;
    case 15: rc = tg_rsub_scalar(&y, a, s); break;
    case 16: rc = tg_mul_scalar(&y, a, s); break;
    case 17: rc = tg_div_scalar(&y, a, s); break;
    case 18: rc = tg_pow_scalar(&y, a, s); break;
    case 19: rc = tg_sin(&y, a); break;
    case 20: rc = tg_cos(&y, a); break;
    case 21: rc = tg_elu(&y, a, s); break;
    case 22: rc = tg_log1p(&y, a); break;
    case 23: rc = tg_expm1(&y, a); break;
    case 24: rc = tg_hardtanh(&y, a, -fabs(s), fabs(s)); break;
    case 25: rc = tg_relu6(&y, a); break;
    case 26: rc = tg_hardsigmoid(&y, a); break;
    case 27: rc = tg_hardswish(&y, a); break;
    case 28: rc = tg_mish(&y, a); break;
    case 29: rc = tg_sign(&y, a); break;
    case 30: rc = tg_floor(&y, a); break;
    case 31: rc = tg_ceil(&y, a); break;
    case 32: rc = tg_round(&y, a); break;
    case 33: rc = tg_trunc(&y, a); break;
    case 34: rc = tg_reciprocal(&y, a); break;
    case 35: rc = tg_rsqrt(&y, a); break;
    case 36: rc = tg_tan(&y, a); break;
    case 37: rc = tg_atan(&y, a); break;
    case 38: rc = tg_asin(&y, a); break;
    case 39: rc = tg_acos(&y, a); break;
    case 40: rc = tg_sinh(&y, a); break;
    case 41: rc = tg_cosh(&y, a); break;
    case 42: rc = tg_asinh(&y, a); break;
    case 43: rc = tg_acosh(&y, a); break;
    case 44: rc = tg_atanh(&y, a); break;
    case 45: rc = tg_log2(&y, a); break;
    case 46: rc = tg_log10(&y, a); break;
    case 47: rc = tg_exp2(&y, a); break;
    case 48: rc = tg_logsigmoid(&y, a); break;
    case 49: rc = tg_selu(&y, a); break;
    case 50: rc = tg_celu(&y, a, s); break;
    case 51: rc = tg_hardshrink(&y, a, s); break;
    case 52: rc = tg_softshrink(&y, a, s); break;
    case 53: rc = tg_threshold(&y, a, s, -s); break;
    case 54: rc = tg_softsign(&y, a); break;
    case 55: rc = tg_tanhshrink(&y, a); break;
    case 56: rc = tg_glu(&y, a, u8(g) % 4 - 2); break;
    case 57: rc = tg_softmin(&y, a, u8(g) % 4 - 2); break;
    case 58: rc = tg_rrelu(&y, a, s, fabs(s) + 0.25, s > 1); break;
    case 59: rc = tg_gelu_tanh(&y, a); break;
    default: rc = tg_contiguous(&y, a); break;
    }
    return after(g, i, "unary op", rc, y);
}

int op_binary(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *a = slot(g), *b = slot(g), *y = NULL;
    uint8_t k = u8(g) % 24;
    if (big(a) || big(b) || broadcast_numel(a, b) > MAX_ELEMS) return 0;
    /* the products: their work, and the outer products' results, bounded */
    const bool product = k == 5 || k == 6 || (k >= 15 && k <= 19) || k >= 22;
    if (product && too_much_work(a, b, a && tg_tensor_ndim(a) ? tg_tensor_dim(a, -1) : 1))
        return 0;
    if ((k == 19 || k == 22) && a && b &&
        (double)tg_tensor_numel(a) * (double)tg_tensor_numel(b) > MAX_ELEMS)
        return 0;
    int rc;
    switch (k) {
    case 0: rc = tg_add(&y, a, b); break;
    case 1: rc = tg_sub(&y, a, b); break;
    case 2: rc = tg_mul(&y, a, b); break;
    case 3: rc = tg_div(&y, a, b); break;
    case 4: rc = tg_pow(&y, a, b); break;
    case 5: rc = tg_matmul(&y, a, b); break;
    case 6: rc = tg_linear(&y, a, b, NULL); break;
    case 7: rc = tg_prelu(&y, a, b); break;
    case 8: rc = tg_masked_fill(&y, a, b, value(u8(g))); break;   /* x of any dtype */
    case 9: {   /* where(b, a, c): a and c of any dtype, c often converted to another */
        tg_tensor *c = slot(g), *cd = NULL;
        const uint8_t d = u8(g);
        if (big(c) || broadcast_numel(a, b) * (double)(c ? tg_tensor_numel(c) : 1) > MAX_ELEMS)
            return 0;
        if (c && d < 2 * N_DTYPES) {
            rc = tg_to_dtype(&cd, c, DTYPES[d % N_DTYPES]);
            if (checked(g, "to_dtype", rc) < 0) return -1;
            if (rc < 0) return 0;
            c = cd;
        }
        rc = tg_where(&y, b, a, c);
        tg_tensor_release(cd);
        break;
    }
    case 10: rc = tg_atan2(&y, a, b); break;
    case 11: {   /* lerp(a, b, w): w from a third slot */
        tg_tensor *w = slot(g);
        if (big(w) || broadcast_numel(a, b) * (double)(w ? tg_tensor_numel(w) : 1) > MAX_ELEMS)
            return 0;
        rc = tg_lerp(&y, a, b, w);
        break;
    }
    case 12: rc = tg_lerp_scalar(&y, a, b, (int)(u8(g) % 9) * 0.25 - 0.5); break;
    case 13: {   /* embedding_ex(a, b): padding_idx, scaling, max_norm (rescales a in place) */
        const uint8_t o = u8(g);
        tg_embedding_opts eo = TG_EMBEDDING_OPTS_INIT;
        if (o & 1) eo.padding_idx = (int64_t)(o >> 4) - 8;
        eo.scale_grad_by_freq = o & 2;
        if (o & 4) eo.max_norm = value(u8(g));
        if (o & 8) eo.norm_type = value(u8(g));
        rc = tg_embedding_ex(&y, a, b, &eo);
        break;
    }
    case 15: rc = tg_mm(&y, a, b); break;
    case 16: rc = tg_bmm(&y, a, b); break;
    case 17: rc = tg_mv(&y, a, b); break;
    case 18: rc = tg_dot(&y, a, b); break;
    case 19: rc = tg_outer(&y, a, b); break;
    case 20: {   /* tril or triu of a, diagonal from the program */
        const uint8_t d = u8(g);
        rc = (d & 1 ? tg_triu : tg_tril)(&y, a, (int64_t)(d >> 1) % 7 - 3);
        break;
    }
    case 21: {   /* addmm or baddbmm(a, b, c): c from a third slot */
        tg_tensor *c = slot(g);
        const uint8_t d = u8(g);
        if (big(c) || too_much_work(b, c, b && tg_tensor_ndim(b) ? tg_tensor_dim(b, -1) : 1))
            return 0;
        const double beta = value(u8(g)), alpha = value(u8(g));
        rc = (d & 1 ? tg_baddbmm : tg_addmm)(&y, a, b, c, beta, alpha);
        break;
    }
    case 22: {   /* einsum of a and b (or of a alone), good and bad equations */
        static const char *const eq[] = {
            "ij,jk->ik", "bij,bjk->bik", "ij,kj", "i,i->", "i,j->ij", "...ij,...jk",
            "ij->ji", "ii->i", "ii", "ij->", "bhqd,bhkd->bhqk", "ij,jk->il", "i->ii",
            "ij,jk,kl->il", "a b->ab", "", "ij,ij->ij", "...,..."};
        const uint8_t d = u8(g);
        const char *e = eq[d % (sizeof eq / sizeof *eq)];
        const int n = (d & 0x80) ? 3 - (strchr(e, ',') ? 2 : 1) : (strchr(e, ',') ? 2 : 1);
        tg_tensor *const ops[2] = {a, b};
        if (!(d & 0x40)) {
            rc = tg_einsum(&y, e, n, ops);
            break;
        }
        /* A plan: made by a strategy (a bad one too), then perhaps a step
         * or the operand count overwritten. */
        tg_einsum_plan plan = {0};
        const uint8_t p0 = u8(g), p1 = u8(g);
        if (tg_einsum_path(&plan, e, n, ops, (tg_einsum_strategy)(p0 % 5)) < 0) tg_error_clear();
        if (p1 & 1) plan.steps[p1 >> 5 & 3][p1 >> 4 & 1] = (int)(p1 >> 1 & 7) - 2;
        if (p1 & 0x80) plan.n_operands = p1 >> 1 & 3;
        rc = tg_einsum_planned(&y, e, n, ops, &plan);
        break;
    }
    case 23: {   /* scaled dot-product attention(a, b, c), a mask from a fourth slot */
        tg_tensor *c = slot(g), *mask = slot(g);
        const uint8_t d = u8(g);
        if (big(c) || big(mask) || too_much_work(b, c, 1)) return 0;
        tg_attention_opts ao = TG_ATTENTION_OPTS_INIT;
        ao.attn_mask = d & 1 ? mask : NULL;
        ao.dropout_p = d & 2 ? 0.25 : 0.0;
        ao.training = d & 4;
        tg_rng rng;
        tg_rng_init(&rng, d);
        ao.rng = d & 8 ? &rng : NULL;
        tg_tensor *w = NULL;
        rc = tg_scaled_dot_product_attention(&y, d & 16 ? &w : NULL, a, b, c, &ao);
        tg_tensor_release(w);
        break;
    }
    default: {
        tg_tensor *ts[2] = {a, b};
        rc = tg_cat(&y, 2, ts, (int)(u8(g) % 4) - 1);
    }
    }
    return after(g, i, "binary op", rc, y);
}

/* One of gather, scatter_add, index_select, index_add (which % 4) of a
 * along dim, with an i64 index read from the program: 1-d for the index_
 * ops, else a's ndim with a's extents or one less; values in [-1, 7), so
 * some fall outside a's extent.  The adding ops add back the picked
 * values (src = the picking op's result, of a's dtype). */
static int gather_family(prog *g, tg_tensor *a, int dim, int which, tg_tensor **y)
{
    const int and_ = a ? tg_tensor_ndim(a) : 0, select = which & 2;
    const int nd = select ? 1 : and_;
    int64_t ishape[TG_MAX_DIMS], m = 1;
    for (int d = 0; d < nd; d++) {
        const int64_t ext = select || !a ? 3 : tg_tensor_shape(a)[d];
        ishape[d] = select ? u8(g) % 5 : ext - (ext > 0 && (u8(g) & 1));
        m *= ishape[d];
    }
    int64_t *v = malloc((size_t)(m > 0 ? m : 1) * sizeof *v);   /* m <= a's numel or 4 */
    if (!v) return TG_ENOMEM;
    for (int64_t k = 0; k < m; k++) v[k] = (int64_t)(u8(g) % 8) - 1;
    tg_tensor *idx = NULL, *src = NULL;
    int rc = tg_tensor_from_data(&idx, TG_I64, nd, ishape, v);
    free(v);
    if (rc < 0) return rc;
    rc = select ? tg_index_select(&src, a, dim, idx) : tg_gather(&src, a, dim, idx);
    if (rc >= 0 && (which & 1)) {
        rc = select ? tg_index_add(y, a, dim, idx, src) : tg_scatter_add(y, a, dim, idx, src);
    } else if (rc >= 0) {
        *y = src;
        src = NULL;
    }
    tg_tensor_release(idx);
    tg_tensor_release(src);
    return rc;
}

int op_view(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *a = slot(g), *y = NULL;
    uint8_t k = u8(g) % 21;
    int nd = u8(g) % 5, d0 = (int)(u8(g) % 7) - 3, d1 = (int)(u8(g) % 7) - 3;
    int64_t shape[4];
    int dims[TG_MAX_DIMS];   /* permute reads one per dim of a */
    for (int d = 0; d < 4; d++) shape[d] = (int64_t)(u8(g) % 6) - 1;   /* -1: infer or keep */
    for (int d = 0; d < TG_MAX_DIMS; d++) dims[d] = (int)(u8(g) % 9) - 4;
    if (big(a)) return 0;
    int rc;
    switch (k) {
    case 0: rc = tg_reshape(&y, a, nd, shape); break;
    case 1: rc = tg_permute(&y, a, dims); break;
    case 2: rc = tg_transpose(&y, a, d0, d1); break;
    case 3: rc = tg_slice(&y, a, d0, shape[0], shape[1] + 1, d1); break;
    case 4: rc = tg_expand(&y, a, nd, shape); break;
    case 5: rc = tg_unsqueeze(&y, a, d0); break;
    case 6: rc = tg_squeeze(&y, a, d0); break;
    case 7: rc = tg_sum_dims(&y, a, nd % 3, dims, d1 & 1); break;
    case 8: rc = tg_mean_dims(&y, a, nd % 3, dims, d1 & 1); break;
    case 9: rc = tg_flip(&y, a, nd % 4, dims); break;
    case 10: {
        static const double ords[] = {2, 1, INFINITY, -INFINITY, 0, 3, 0.5, -1};
        rc = tg_vector_norm(&y, a, ords[(unsigned)d0 % 8], nd % 3, dims, d1 & 1);
        break;
    }
    case 11: rc = gather_family(g, a, d0, d1 & 3, &y); break;
    case 12: {   /* chunk a into up to 6 pieces; keep piece d1 (mod the count) */
        tg_tensor *p[6] = {0};
        int n = 0;
        rc = tg_chunk(p, 6, &n, a, (int)(u8(g) % 6), d0);
        if (rc >= 0 && n > 0) y = tg_tensor_retain(p[(unsigned)d1 % (unsigned)n]);
        for (int c = 0; c < n; c++) tg_tensor_release(p[c]);
        break;
    }
    case 13: rc = tg_logsumexp(&y, a, nd % 3, dims, d1 & 1); break;
    case 14: rc = tg_cumsum(&y, a, d0); break;
    case 15: {   /* flattened (nd 0) or along up to 3 dims, shifts of either sign */
        const int64_t shifts[3] = {d0 * 5, d1, shape[0] - 2};
        rc = tg_roll(&y, a, nd % 4, shifts, nd % 4 ? dims : NULL);
        break;
    }
    case 16: {   /* repeats in [-1, 2] (-1 refused), as many as a's dims or up to 2 more */
        int64_t reps[TG_MAX_DIMS];
        for (int d = 0; d < TG_MAX_DIMS; d++) reps[d] = (dims[d] + 4) % 4 - 1;
        rc = tg_repeat(&y, a, tg_tensor_ndim(a) + nd % 3, reps);
        break;
    }
    case 17: rc = tg_adaptive_avg_pool(&y, a, nd % 3 + 1, shape); break;   /* -1: refused */
    case 18: {   /* with or without the indices; -1 in shape refused */
        tg_tensor *idx = NULL;
        rc = tg_adaptive_max_pool(&y, d1 & 1 ? &idx : NULL, a, nd % 3 + 1, shape);
        tg_tensor_release(idx);
        break;
    }
    case 19: {   /* unfold, or fold into (shape[0], shape[1]): parameters from dims */
        tg_fold_params p = TG_FOLD_PARAMS_INIT;
        for (int d = 0; d < 2; d++) {
            p.kernel_size[d] = dims[d] + 2;           /* -2 .. 6: < 1 refused */
            p.dilation[d] = dims[2 + d] % 3 + 1;      /* -1 .. 3 */
            p.padding[d] = dims[4 + d] % 3;           /* -2 .. 2 */
            p.stride[d] = (dims[6 + d] + 4) % 4;      /* 0 .. 3 */
        }
        if (d1 & 1) rc = tg_fold(&y, a, shape, &p);
        else rc = tg_unfold(&y, a, &p);
        if (rc >= 0 && big(y)) {   /* blocks of a large kernel over a small image */
            tg_tensor_release(y);
            return 0;
        }
        break;
    }
    default: rc = tg_sum_to_shape(&y, a, nd, shape); break;
    }
    return after(g, i, "view or reduction", rc, y);
}

int op_conv(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *x = slot(g), *w = slot(g), *b = NULL, *y = NULL;
    uint8_t f = u8(g);
    if (f & 1) b = slot(g);
    tg_conv_params p = TG_CONV_PARAMS_INIT;
    for (int d = 0; d < 3; d++) {
        p.stride[d] = 1 + u8(g) % 3;
        p.dilation[d] = 1 + u8(g) % 2;
        p.padding[d][0] = u8(g) % 3;
        p.padding[d][1] = u8(g) % 3;
        p.output_padding[d] = u8(g) % 2;
    }
    p.groups = 1 + u8(g) % 2;
    p.act = (tg_activation)(u8(g) % (TG_ACT_COUNT + 1));   /* one past the end too */
    if (big(x) || big(w) || big(b)) return 0;
    /* per output element of conv: C_in/groups * prod(K) = numel(w) / C_out;
     * per input element of conv_transpose: numel(w) / C_in, as for conv's
     * output: numel(x) * numel(w) / (its channels) bounds both, with stride 1 */
    if (x && w && tg_tensor_ndim(x) >= 2 && too_much_work(x, w, tg_tensor_dim(x, 1))) return 0;
    if (g->trace && x && w) {
        char xs[96], ws[96];
        tg_shape_str(xs, sizeof xs, tg_tensor_ndim(x), tg_tensor_shape(x));
        tg_shape_str(ws, sizeof ws, tg_tensor_ndim(w), tg_tensor_shape(w));
        fprintf(stderr, "  x %s %s weight %s %s\n", xs, tg_dtype_name(tg_tensor_dtype(x)), ws,
                tg_dtype_name(tg_tensor_dtype(w)));
    }
    if (g->trace)
        fprintf(stderr, "  stride %lld %lld dilation %lld %lld padding %lld,%lld %lld,%lld "
                        "output_padding %lld %lld groups %lld act %d\n",
                (long long)p.stride[0], (long long)p.stride[1], (long long)p.dilation[0],
                (long long)p.dilation[1], (long long)p.padding[0][0], (long long)p.padding[0][1],
                (long long)p.padding[1][0], (long long)p.padding[1][1],
                (long long)p.output_padding[0], (long long)p.output_padding[1],
                (long long)p.groups, (int)p.act);
    int rc = f & 2 ? tg_conv_transpose(&y, x, w, b, &p) : tg_conv(&y, x, w, b, &p);
    return after(g, i, f & 2 ? "conv_transpose" : "conv", rc, y);
}

int op_batch_norm(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *x = slot(g), *rm = slot(g), *rv = slot(g), *y = NULL;
    uint8_t f = u8(g);
    if (big(x)) return 0;
    int rc = tg_batch_norm(&y, x, f & 1 ? rm : NULL, f & 1 ? rv : NULL, f & 2 ? rm : NULL,
                           f & 4 ? rv : NULL, f & 8, 0.1, 1e-5);
    return after(g, i, "batch_norm", rc, y);
}

int op_loss(prog *g)
{
    int i = u8(g) % SLOTS;
    tg_tensor *a = slot(g), *b = slot(g), *c = slot(g), *y = NULL;
    uint8_t k = u8(g) % 17;
    tg_reduction red = (tg_reduction)(u8(g) % 4);   /* one past the end too */
    const uint8_t o = u8(g);
    const double s = value(u8(g)), e = value(u8(g));   /* a margin, p or eps; dims from o */
    if (big(a) || big(b) || big(c)) return 0;
    /* multilabel_margin's (N, C, C) grid of pairs, C the last extent */
    const int64_t last = a && tg_tensor_ndim(a) ? tg_tensor_dim(a, -1) : 1;
    if (k == 15 && (double)tg_tensor_numel(a) * (double)last > MAX_ELEMS) return 0;
    int rc;
    switch (k) {
    case 0: rc = tg_mse_loss(&y, a, b, red); break;
    case 1: rc = tg_l1_loss(&y, a, b, red); break;
    case 2: rc = tg_bce_with_logits(&y, a, b, red); break;
    case 3: rc = tg_cross_entropy(&y, a, b, red); break;
    case 4: rc = tg_cosine_similarity(&y, a, b, (int)(o % 7) - 3, e); break;
    case 5: rc = tg_pairwise_distance(&y, a, b, s, e, o & 1); break;
    case 6: rc = tg_margin_ranking_loss(&y, a, b, c, s, red); break;
    case 7: rc = tg_hinge_embedding_loss(&y, a, b, s, red); break;
    case 8: rc = tg_soft_margin_loss(&y, a, b, red); break;
    case 9: rc = tg_cosine_embedding_loss(&y, a, b, c, s, red); break;
    case 10: rc = tg_triplet_margin_loss(&y, a, b, c, s, e, value(o), o & 1, red); break;
    case 11: rc = tg_gaussian_nll_loss(&y, a, b, c, o & 1, e, red); break;
    case 12: rc = tg_poisson_nll_loss(&y, a, b, o & 1, o & 2, e, red); break;
    case 13: rc = tg_multi_margin_loss(&y, a, b, (int)(o % 4), s, o & 4 ? c : NULL, red); break;
    case 14: rc = tg_multilabel_soft_margin_loss(&y, a, b, o & 1 ? c : NULL, red); break;
    case 15: rc = tg_multilabel_margin_loss(&y, a, b, red); break;
    default: rc = tg_weight_norm(&y, a, b, (int)(o % 7) - 3); break;
    }
    return after(g, i, "loss", rc, y);
}
