/* src/ops/embedding_bag.c - embedding_bag (F.embedding_bag, nn.EmbeddingBag):
 * the rows of weight (V, D) that the indices pick, reduced over bags.
 *
 * The bags are read first (plain integer work, no gradient): bag b holds
 * the positions [offsets[b], offsets[b + 1]) of the flat input (the last
 * bag runs to its end, or with include_last_offset to the last offset); a
 * 2-d input (B, L) has offsets 0, L, 2L, ... as torch builds them (with
 * include_last_offset refused: torch 1.13 mishandles it).  The
 * positions whose index is padding_idx are dropped: they add nothing, are
 * not counted by mean and never win max (torch 1.13).  Of the K kept
 * positions, kept[k] is the index, bag[k] its bag, pos[k] its position.
 * Then, with differentiable ops only, so every order of gradient is theirs:
 *   sum:   E = embedding(weight, kept) (K, D), times psw[pos] (K, 1) when
 *          per_sample_weights are given; y = index_add(zeros(B, D), 0,
 *          bag, E), each bag's rows added in input order as torch's CPU
 *          kernel adds them
 *   mean:  the sum divided by max(count, 1) per bag, as torch divides it
 *   max:   y = gather(weight, 0, arg) for arg (B, D) the row of each bag's
 *          largest element per column (torch's scan: the bag's first row,
 *          then a row whose element is greater), 0 where a bag is empty
 *          (masked_fill)
 * so weight's gradient is torch's: g (over count) added into the picked
 * rows, or into the max rows, and psw's is the dot product of g's bag row
 * with each picked row.  sparse and scale_grad_by_freq pass to the
 * embedding (sum and mean): its sparse gradient has one row per kept
 * position, torch's.  max_norm renormalises the rows that the whole input
 * picks first, as torch's F.embedding_bag, through F.embedding's renorm. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ops/embedding_internal.h"
#include "tapegrad/ops.h"

static const char *const op = "embedding_bag";

/* The bags of a call. */
typedef struct bags {
    int64_t nb, K;
    int64_t *kept, *bag, *pos, *count;   /* K, K, K, nb */
} bags;

static void bags_free(bags *b)
{
    free(b->kept);
    free(b->bag);
    free(b->pos);
    free(b->count);
}

/* The integer tensor t's values as int64 into a new malloc'd *out. */
static int read_ints(const tg_tensor *t, int64_t **out)
{
    const int64_t n = tg_tensor_numel(t);
    *out = tg__malloc((size_t)(n > 0 ? n : 1) * sizeof **out);
    if (!*out) return TG_ENOMEM;
    tg__gather(t, TG_I64, *out);
    return TG_OK;
}

/* Checks the offsets off[0..n_off) for n_in positions: off[0] = 0,
 * non-decreasing, off[n_off - 1] <= n_in. */
static int check_offsets(const int64_t *off, int64_t n_off, int64_t n_in)
{
    if (n_off == 0) return TG_OK;
    TG_CHECK(off[0] == 0, TG_EINVAL, "%s: offsets[0]=%lld must be 0 (the first bag starts at "
             "position 0)", op, (long long)off[0]);
    for (int64_t b = 1; b < n_off; b++)
        TG_CHECK(off[b] >= off[b - 1], TG_EINVAL, "%s: offsets[%lld]=%lld is below offsets[%lld]"
                 "=%lld; offsets must not decrease", op, (long long)b, (long long)off[b],
                 (long long)(b - 1), (long long)off[b - 1]);
    TG_CHECK(off[n_off - 1] <= n_in, TG_EINVAL, "%s: offsets[-1]=%lld can not be greater than "
             "input's length %lld", op, (long long)off[n_off - 1], (long long)n_in);
    return TG_OK;
}

/* The bags of input iv[0..n_in) with offsets off[0..n_off) (pad: the
 * padding row, or -1). */
static int make_bags(bags *r, const int64_t *iv, int64_t n_in, const int64_t *off, int64_t n_off,
                     bool last, int64_t pad)
{
    r->nb = last ? n_off - 1 : n_off;
    r->K = 0;
    const size_t cap = (size_t)(n_in > 0 ? n_in : 1);
    r->kept = tg__malloc(cap * sizeof(int64_t));
    r->bag = tg__malloc(cap * sizeof(int64_t));
    r->pos = tg__malloc(cap * sizeof(int64_t));
    r->count = tg__calloc((size_t)(r->nb > 0 ? r->nb : 1), sizeof(int64_t));
    if (!r->kept || !r->bag || !r->pos || !r->count) return TG_ENOMEM;
    for (int64_t b = 0; b < r->nb; b++) {
        const int64_t end = b + 1 < n_off ? off[b + 1] : n_in;
        for (int64_t p = off[b]; p < end; p++) {
            if (iv[p] == pad) continue;
            r->kept[r->K] = iv[p];
            r->bag[r->K] = b;
            r->pos[r->K++] = p;
            r->count[b]++;
        }
    }
    return TG_OK;
}

/* A new 1-d i64 tensor of v[0..n). */
static int i64_tensor(tg_tensor **t, const int64_t *v, int64_t n)
{
    return tg_tensor_from_data(t, TG_I64, 1, (int64_t[]){n}, v);
}

/* sum and mean: index_add of the picked rows (times psw) into the bags. */
static int reduce_sum(tg_tensor **y, tg_tensor *w, const bags *bg, tg_tensor *psw, bool mean,
                      const tg_embedding_bag_opts *o)
{
    const int64_t D = w->shape[1];
    tg_tensor *kt = NULL, *bt = NULL, *E = NULL, *pt = NULL, *ps = NULL, *ps2 = NULL,
              *ES = NULL, *z = NULL, *s = NULL, *ct = NULL;
    double *cnt = NULL;
    int rc;
    tg_embedding_opts eo = TG_EMBEDDING_OPTS_INIT;
    eo.sparse = o->sparse;
    eo.scale_grad_by_freq = o->scale_grad_by_freq;
    TG_TRY_GOTO(i64_tensor(&kt, bg->kept, bg->K));
    TG_TRY_GOTO(i64_tensor(&bt, bg->bag, bg->K));
    TG_TRY_GOTO(tg_embedding_ex(&E, w, kt, &eo));
    if (psw) {
        TG_TRY_GOTO(i64_tensor(&pt, bg->pos, bg->K));
        TG_TRY_GOTO(tg_reshape(&ps, psw, 1, (int64_t[]){tg_tensor_numel(psw)}));
        TG_TRY_GOTO(tg_index_select(&ps2, ps, 0, pt));
        tg_tensor_release(ps);
        ps = NULL;
        TG_TRY_GOTO(tg_reshape(&ps, ps2, 2, (int64_t[]){bg->K, 1}));
        TG_TRY_GOTO(tg_mul(&ES, E, ps));
    } else {
        ES = tg_tensor_retain(E);
    }
    TG_TRY_GOTO(tg_tensor_zeros(&z, w->dtype, 2, (int64_t[]){bg->nb, D}));
    if (!mean) {
        TG_TRY_GOTO(tg_index_add(y, z, 0, bt, ES));
        goto done;
    }
    TG_TRY_GOTO(tg_index_add(&s, z, 0, bt, ES));
    cnt = tg__malloc((size_t)(bg->nb > 0 ? bg->nb : 1) * sizeof *cnt);
    rc = cnt ? TG_OK : TG_ENOMEM;
    if (rc < 0) goto done;
    for (int64_t b = 0; b < bg->nb; b++) cnt[b] = (double)(bg->count[b] > 0 ? bg->count[b] : 1);
    TG_TRY_GOTO(tg_tensor_from_data(&ct, TG_F64, 2, (int64_t[]){bg->nb, 1}, cnt));
    tg_tensor_release(z);
    z = NULL;
    TG_TRY_GOTO(tg_to_dtype(&z, ct, w->dtype));
    TG_TRY_GOTO(tg_div(y, s, z));
done:
    free(cnt);
    tg_tensor_release(kt);
    tg_tensor_release(bt);
    tg_tensor_release(E);
    tg_tensor_release(pt);
    tg_tensor_release(ps);
    tg_tensor_release(ps2);
    tg_tensor_release(ES);
    tg_tensor_release(z);
    tg_tensor_release(s);
    tg_tensor_release(ct);
    return rc;
}

/* arg (nb x D): each bag's max row per column by torch's scan; the bag's
 * flag in empty (nb) when it has no kept row. */
static int max_rows(const tg_tensor *w, const bags *bg, int64_t *arg, uint8_t *empty)
{
    const int64_t V = w->shape[0], D = w->shape[1];
    double *wv = tg__malloc((size_t)(V * D) * sizeof *wv);
    double *best = tg__malloc((size_t)(bg->nb * D > 0 ? bg->nb * D : 1) * sizeof *best);
    if (!wv || !best) {
        free(wv);
        free(best);
        return TG_ENOMEM;
    }
    tg__gather(w, TG_F64, wv);
    memset(arg, 0, (size_t)(bg->nb * D) * sizeof *arg);
    for (int64_t b = 0; b < bg->nb; b++) empty[b] = 1;
    for (int64_t k = 0; k < bg->K; k++) {
        const int64_t b = bg->bag[k], row = bg->kept[k];
        for (int64_t d = 0; d < D; d++) {
            const double v = wv[row * D + d];
            if (empty[b] || v > best[b * D + d]) {
                best[b * D + d] = v;
                arg[b * D + d] = row;
            }
        }
        empty[b] = 0;
    }
    free(wv);
    free(best);
    return TG_OK;
}

/* max: gather(weight, 0, arg), 0 in the empty bags. */
static int reduce_max(tg_tensor **y, tg_tensor *w, const bags *bg)
{
    const int64_t D = w->shape[1], nb = bg->nb;
    int64_t *arg = tg__malloc((size_t)(nb * D > 0 ? nb * D : 1) * sizeof *arg);
    uint8_t *empty = tg__malloc((size_t)(nb > 0 ? nb : 1));
    tg_tensor *at = NULL, *mt = NULL, *g = NULL;
    int rc = arg && empty ? TG_OK : TG_ENOMEM;
    if (rc < 0) goto done;
    TG_TRY_GOTO(max_rows(w, bg, arg, empty));
    TG_TRY_GOTO(tg_tensor_from_data(&at, TG_I64, 2, (int64_t[]){nb, D}, arg));
    TG_TRY_GOTO(tg_gather(&g, w, 0, at));
    bool any_empty = false;
    for (int64_t b = 0; b < nb; b++) any_empty |= empty[b];
    if (!any_empty) {
        *y = g;
        g = NULL;
        goto done;
    }
    TG_TRY_GOTO(tg_tensor_from_data(&mt, TG_U8, 2, (int64_t[]){nb, 1}, empty));
    TG_TRY_GOTO(tg_masked_fill(y, g, mt, 0.0));
done:
    free(arg);
    free(empty);
    tg_tensor_release(at);
    tg_tensor_release(mt);
    tg_tensor_release(g);
    return rc;
}

/* The argument checks of tg_embedding_bag. */
static int check_args(tg_tensor *w, tg_tensor *in, tg_tensor *offsets, tg_tensor *psw,
                      const tg_embedding_bag_opts *o)
{
    TG_CHECK(w != NULL && in != NULL, TG_EINVAL, "%s: weight and input must not be NULL", op);
    TG_CHECK(w->ndim == 2, TG_ESHAPE, "%s: weight has %d dims; must be (V, D)", op, w->ndim);
    TG_CHECK(tg_dtype_is_float(w->dtype), TG_EDTYPE, "%s: weight has dtype %s; float dtypes "
             "only", op, tg_dtype_name(w->dtype));
    TG_CHECK(in->dtype == TG_I64 || in->dtype == TG_I32, TG_EDTYPE,
             "%s: input has dtype %s; must be i64 or i32", op, tg_dtype_name(in->dtype));
    TG_CHECK(o->mode == TG_EMBEDDING_BAG_SUM || o->mode == TG_EMBEDDING_BAG_MEAN ||
                 o->mode == TG_EMBEDDING_BAG_MAX, TG_EINVAL,
             "%s: mode=%d must be sum, mean or max", op, (int)o->mode);
    TG_CHECK(in->ndim == 1 || in->ndim == 2, TG_ESHAPE,
             "%s: input has to be a 1-d or 2-d tensor, but has %d dims", op, in->ndim);
    if (in->ndim == 2) {
        TG_CHECK(offsets == NULL, TG_EINVAL, "%s: if input is 2-d, offsets has to be NULL, as "
                 "input is treated as a mini-batch of fixed length sequences", op);
        TG_CHECK(!o->include_last_offset, TG_EINVAL, "%s: include_last_offset with a 2-d "
                 "input is refused (torch 1.13 drops its last row, and its f64 backward "
                 "corrupts memory)", op);
        TG_CHECK(in->shape[1] >= 1, TG_ESHAPE, "%s: a 2-d input (%lld, 0) has no bags' length",
                 op, (long long)in->shape[0]);
    } else {
        TG_CHECK(offsets != NULL, TG_EINVAL, "%s: offsets has to be a 1-d tensor but is NULL", op);
        TG_CHECK(offsets->ndim == 1, TG_ESHAPE, "%s: offsets has to be a 1-d tensor (has %d "
                 "dims)", op, offsets->ndim);
        TG_CHECK(offsets->dtype == in->dtype, TG_EDTYPE, "%s: offsets has dtype %s; must be "
                 "input's, %s", op, tg_dtype_name(offsets->dtype), tg_dtype_name(in->dtype));
        TG_CHECK(!o->include_last_offset || offsets->shape[0] >= 1, TG_EINVAL,
                 "%s: include_last_offset: the number of offsets should be at least 1", op);
    }
    if (psw) {
        bool same = psw->ndim == in->ndim;
        for (int d = 0; same && d < in->ndim; d++) same = psw->shape[d] == in->shape[d];
        TG_CHECK(same, TG_ESHAPE, "%s: per_sample_weights must have input's shape", op);
        TG_CHECK(psw->dtype == w->dtype, TG_EDTYPE, "%s: per_sample_weights has dtype %s; must "
                 "be weight's, %s", op, tg_dtype_name(psw->dtype), tg_dtype_name(w->dtype));
        TG_CHECK(o->mode == TG_EMBEDDING_BAG_SUM, TG_EINVAL, "%s: per_sample_weights is only "
                 "supported for mode sum", op);
    }
    TG_CHECK(o->mode != TG_EMBEDDING_BAG_MAX || !o->scale_grad_by_freq, TG_EINVAL,
             "%s: max mode does not support scaling the gradient by the frequency", op);
    TG_CHECK(o->mode != TG_EMBEDDING_BAG_MAX || !o->sparse, TG_EINVAL,
             "%s: max mode does not support sparse weights", op);
    return TG_OK;
}

static int embedding_bag(tg_tensor **y, tg_tensor *w, tg_tensor *in, tg_tensor *offsets,
                         tg_tensor *psw, const tg_embedding_bag_opts *o,
                         const tg_embedding_opts *eo)
{
    const int64_t n_in = tg_tensor_numel(in);
    int64_t *iv = NULL, *off = NULL, n_off;
    bags bg = {0};
    tg_tensor *renormed = NULL;
    int rc;
    if (eo->max_norm > 0) {
        /* F.embedding's renorm of the rows the input picks; its result is
         * not needed */
        TG_TRY_GOTO(tg_embedding_ex(&renormed, w, in, eo));
    }
    TG_TRY_GOTO(tg__embedding_read_indices(op, in, w->shape[0], &iv));
    if (in->ndim == 2) {
        n_off = in->shape[0];
        off = tg__malloc((size_t)(n_off > 0 ? n_off : 1) * sizeof *off);
        rc = off ? TG_OK : TG_ENOMEM;
        if (rc < 0) goto done;
        for (int64_t b = 0; b < n_off; b++) off[b] = b * in->shape[1];
    } else {
        n_off = offsets->shape[0];
        TG_TRY_GOTO(read_ints(offsets, &off));
    }
    TG_TRY_GOTO(check_offsets(off, n_off, n_in));
    const int64_t pad = eo->padding_idx == TG_EMBEDDING_NO_PADDING ? -1 : eo->padding_idx;
    TG_TRY_GOTO(make_bags(&bg, iv, n_in, off, n_off, o->include_last_offset, pad));
    if (o->mode == TG_EMBEDDING_BAG_MAX) TG_TRY_GOTO(reduce_max(y, w, &bg));
    else TG_TRY_GOTO(reduce_sum(y, w, &bg, psw, o->mode == TG_EMBEDDING_BAG_MEAN, o));
done:
    tg_tensor_release(renormed);
    free(iv);
    free(off);
    bags_free(&bg);
    return rc;
}

int tg_embedding_bag(tg_tensor **out, tg_tensor *weight, tg_tensor *input, tg_tensor *offsets,
                     tg_tensor *per_sample_weights, const tg_embedding_bag_opts *opts)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", op);
    const tg_embedding_bag_opts o =
        opts ? *opts : (tg_embedding_bag_opts)TG_EMBEDDING_BAG_OPTS_INIT;
    TG_TRY(check_args(weight, input, offsets, per_sample_weights, &o));
    tg_embedding_opts e = TG_EMBEDDING_OPTS_INIT, eo;
    e.padding_idx = o.padding_idx;
    e.max_norm = o.max_norm;
    e.norm_type = o.norm_type;
    TG_TRY(tg__embedding_opts(&eo, &e, weight->shape[0], op));
    tg__lib_enter();
    const int rc = embedding_bag(out, weight, input, offsets, per_sample_weights, &o, &eo);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
