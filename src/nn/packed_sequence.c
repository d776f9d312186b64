/* src/nn/packed_sequence.c - torch.nn.utils.rnn's PackedSequence:
 * pack_padded_sequence, pad_packed_sequence and pack_sequence.
 *
 * With the sequences ordered longest first (order[p] the batch row of the
 * p-th longest, rank its inverse), step t holds sizes[t] = #{p : len_p > t}
 * rows, those of p = 0 .. sizes[t] - 1, from row off[t] = sizes[0] + ... +
 * sizes[t - 1] of data on:
 *   data[off[t] + p] = x[t][order[p]]          x time first, (T, N, *)
 * So packing is one index_select of x flattened to (T N, *) at the rows
 * t N + order[p] (batch_first: order[p] T + t), and padding is one
 * index_select of data with a row of padding_value appended, picking
 * off[t] + rank[b] at the valid steps of row b and the appended row at the
 * others.  index_select's backward is an index_add, whose own backward is
 * an index_select: both directions are differentiable to any order, and
 * the padded steps get no gradient. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "nn/rnn_internal.h"
#include "tapegrad/ops.h"

void tg_packed_sequence_release(tg_packed_sequence *ps)
{
    if (!ps) return;
    tg_tensor_release(ps->data);
    tg_tensor_release(ps->batch_sizes);
    tg_tensor_release(ps->sorted_indices);
    tg_tensor_release(ps->unsorted_indices);
    *ps = (tg_packed_sequence)TG_PACKED_SEQUENCE_INIT;
}

void tg__packed_layout_free(tg__packed_layout *lay)
{
    free(lay->sizes);
    free(lay->off);
    free(lay->order);
    free(lay->rank);
    *lay = (tg__packed_layout){0};
}

static int layout_alloc(tg__packed_layout *lay, int64_t steps, int64_t batch)
{
    *lay = (tg__packed_layout){.steps = steps, .batch = batch};
    lay->sizes = tg__calloc((size_t)steps, sizeof *lay->sizes);
    lay->off = tg__calloc((size_t)steps, sizeof *lay->off);
    lay->order = tg__calloc((size_t)batch, sizeof *lay->order);
    lay->rank = tg__calloc((size_t)batch, sizeof *lay->rank);
    if (lay->sizes && lay->off && lay->order && lay->rank) return TG_OK;
    tg__packed_layout_free(lay);
    return tg__error(TG_ENOMEM, "packed sequence: no memory for %lld steps and %lld rows",
                     (long long)steps, (long long)batch);
}

/* lay->off and lay->rows from lay->sizes, lay->rank from lay->order. */
static void layout_finish(tg__packed_layout *lay)
{
    int64_t s = 0;
    for (int64_t t = 0; t < lay->steps; t++) {
        lay->off[t] = s;
        s += lay->sizes[t];
    }
    lay->rows = s;
    for (int64_t p = 0; p < lay->batch; p++) lay->rank[lay->order[p]] = p;
}

/* Fails unless t ("batch_sizes", ...) is a 1-d i64 tensor, of n entries
 * when n >= 0. */
static int check_i64_vector(const char *fn, const char *what, const tg_tensor *t, int64_t n)
{
    char got[96];
    TG_CHECK(tg_tensor_dtype(t) == TG_I64, TG_EINVAL, "%s: %s has dtype %s; it must be i64", fn,
             what, tg_dtype_name(tg_tensor_dtype(t)));
    const bool ok = tg_tensor_ndim(t) == 1 && (n < 0 || tg_tensor_dim(t, 0) == n);
    if (ok) return TG_OK;
    if (n < 0)
        return tg__error(TG_EINVAL, "%s: %s is %s; it must be 1-d", fn, what,
                         tg__rnn_shape(got, sizeof got, t));
    return tg__error(TG_EINVAL, "%s: %s is %s; it must be 1-d of N=batch_sizes[0]=%lld entries",
                     fn, what, tg__rnn_shape(got, sizeof got, t), (long long)n);
}

/* t's n integer values (any integer dtype, any layout) into v as i64. */
static int read_i64(int64_t *v, int64_t n, const tg_tensor *t)
{
    tg_tensor *c = NULL;
    TG_TRY(tg_tensor_to_dtype(&c, t, TG_I64));
    if (n > 0) memcpy(v, tg_tensor_cdata(c), (size_t)n * sizeof *v);
    tg_tensor_release(c);
    return TG_OK;
}

/* lay->order from ps's sorted_indices (the identity without), checked as
 * a permutation whose inverse is unsorted_indices. */
static int read_order(tg__packed_layout *lay, const char *fn, const tg_packed_sequence *ps)
{
    const int64_t n = lay->batch;
    TG_CHECK((ps->sorted_indices == NULL) == (ps->unsorted_indices == NULL), TG_EINVAL,
             "%s: sorted_indices and unsorted_indices must be both NULL or both given", fn);
    if (!ps->sorted_indices) {
        for (int64_t p = 0; p < n; p++) lay->order[p] = p;
        return TG_OK;
    }
    TG_TRY(check_i64_vector(fn, "sorted_indices", ps->sorted_indices, n));
    TG_TRY(check_i64_vector(fn, "unsorted_indices", ps->unsorted_indices, n));
    /* un: unsorted_indices, compared with rank, sorted_indices' inverse */
    int64_t *un = tg__calloc((size_t)n, sizeof *un);
    if (!un) return tg__error(TG_ENOMEM, "%s: no memory for the indices", fn);
    int rc;
    TG_TRY_GOTO(read_i64(lay->order, n, ps->sorted_indices));
    TG_TRY_GOTO(read_i64(un, n, ps->unsorted_indices));
    for (int64_t p = 0; p < n; p++) lay->rank[p] = -1;
    for (int64_t p = 0; p < n && rc >= 0; p++) {
        const int64_t b = lay->order[p];
        if (b >= 0 && b < n && lay->rank[b] < 0) lay->rank[b] = p;
        else rc = tg__error(TG_EINVAL, "%s: sorted_indices[%lld]=%lld: sorted_indices must "
                            "be a permutation of 0 .. N-1 = %lld", fn, (long long)p,
                            (long long)b, (long long)(n - 1));
    }
    for (int64_t b = 0; b < n && rc >= 0; b++)
        if (un[b] != lay->rank[b])
            rc = tg__error(TG_EINVAL, "%s: unsorted_indices[%lld]=%lld must be %lld: "
                           "unsorted_indices must be the inverse of sorted_indices", fn,
                           (long long)b, (long long)un[b], (long long)lay->rank[b]);
done:
    free(un);
    return rc;
}

static int read_layout(tg__packed_layout *lay, const char *fn, const tg_packed_sequence *ps)
{
    char got[96];
    const tg_tensor *bs = ps->batch_sizes;
    TG_TRY(check_i64_vector(fn, "batch_sizes", bs, -1));
    const int64_t steps = tg_tensor_dim(bs, 0);
    TG_CHECK(steps >= 1, TG_EINVAL, "%s: batch_sizes is (0); a packed sequence has a step",
             fn);
    int64_t batch = 0;
    TG_TRY(read_i64(&batch, 1, bs));
    TG_CHECK(batch >= 1, TG_EINVAL, "%s: batch_sizes[0]=%lld must be >= 1", fn,
             (long long)batch);
    TG_TRY(layout_alloc(lay, steps, batch));
    TG_TRY(read_i64(lay->sizes, steps, bs));
    for (int64_t t = 0; t < steps; t++) {
        const int64_t v = lay->sizes[t];
        TG_CHECK(v >= 1 && v <= (t ? lay->sizes[t - 1] : batch), TG_EINVAL,
                 "%s: batch_sizes[%lld]=%lld must be in [1, batch_sizes[%lld]=%lld]: batch "
                 "sizes are positive and non-increasing", fn, (long long)t, (long long)v,
                 (long long)(t ? t - 1 : 0), (long long)(t ? lay->sizes[t - 1] : batch));
    }
    TG_TRY(read_order(lay, fn, ps));
    layout_finish(lay);
    TG_CHECK(tg_tensor_dim(ps->data, 0) == lay->rows, TG_EINVAL,
             "%s: data is %s; its first extent must be the sum of batch_sizes, %lld", fn,
             tg__rnn_shape(got, sizeof got, ps->data), (long long)lay->rows);
    return TG_OK;
}

int tg__packed_layout_of(tg__packed_layout *lay, const char *fn, const tg_packed_sequence *ps)
{
    *lay = (tg__packed_layout){0};
    TG_CHECK(ps->data != NULL && ps->batch_sizes != NULL, TG_EINVAL,
             "%s: the packed sequence's data and batch_sizes must not be NULL", fn);
    TG_CHECK(tg_tensor_ndim(ps->data) >= 1, TG_EINVAL,
             "%s: data is 0-d; it must be (sum of lengths, *)", fn);
    const int rc = read_layout(lay, fn, ps);
    if (rc < 0) tg__packed_layout_free(lay);
    return rc;
}

/* x (a0, a1, *) as (a0 a1, *). */
static int merge_first_two(tg_tensor **out, tg_tensor *x)
{
    int64_t shape[TG_MAX_DIMS];
    const int nd = tg_tensor_ndim(x);
    shape[0] = tg_tensor_dim(x, 0) * tg_tensor_dim(x, 1);
    for (int d = 2; d < nd; d++) shape[d - 1] = tg_tensor_dim(x, d);
    return tg_reshape(out, x, nd - 1, shape);
}

static int index_of(tg_tensor **out, int64_t n, const int64_t *v)
{
    return tg_tensor_from_data(out, TG_I64, 1, (int64_t[]){n}, v);
}

int tg__packed_gather(tg_tensor **data, tg_tensor *padded, const tg__packed_layout *lay,
                      bool batch_first)
{
    const int64_t steps = tg_tensor_dim(padded, batch_first ? 1 : 0), n = lay->batch;
    int64_t *rows = tg__calloc((size_t)lay->rows + 1, sizeof *rows);
    if (!rows) return tg__error(TG_ENOMEM, "packed sequence: no memory for its rows");
    for (int64_t t = 0; t < lay->steps; t++)
        for (int64_t p = 0; p < lay->sizes[t]; p++)
            rows[lay->off[t] + p] = batch_first ? lay->order[p] * steps + t
                                                : t * n + lay->order[p];
    tg_tensor *flat = NULL, *idx = NULL;
    int rc;
    TG_TRY_GOTO(index_of(&idx, lay->rows, rows));
    TG_TRY_GOTO(merge_first_two(&flat, padded));
    TG_TRY_GOTO(tg_index_select(data, flat, 0, idx));
done:
    free(rows);
    tg_tensor_release(flat);
    tg_tensor_release(idx);
    return rc;
}

/* The valid rows of each step and a row of value after them, (S + 1, *). */
static int with_fill_row(tg_tensor **out, tg_tensor *data, double value)
{
    int64_t shape[TG_MAX_DIMS];
    const int nd = tg_tensor_ndim(data);
    memcpy(shape, tg_tensor_shape(data), (size_t)nd * sizeof *shape);
    shape[0] = 1;
    tg_tensor *fill = NULL;
    TG_TRY(tg_tensor_full(&fill, tg_tensor_dtype(data), nd, shape, value));
    const int rc = tg_cat(out, 2, (tg_tensor *[]){data, fill}, 0);
    tg_tensor_release(fill);
    return rc;
}

/* Each row's length, in batch order. */
static int lengths_of(tg_tensor **out, const tg__packed_layout *lay)
{
    int64_t *v = tg__calloc((size_t)lay->batch, sizeof *v);
    if (!v) return tg__error(TG_ENOMEM, "packed sequence: no memory for the lengths");
    for (int64_t t = 0; t < lay->steps; t++)
        for (int64_t p = 0; p < lay->sizes[t]; p++) v[lay->order[p]]++;
    const int rc = index_of(out, lay->batch, v);
    free(v);
    return rc;
}

int tg__packed_scatter(tg_tensor **padded, tg_tensor **lengths, tg_tensor *data,
                       const tg__packed_layout *lay, bool batch_first, double value,
                       int64_t total)
{
    const int64_t n = lay->batch, cells = total * n;
    int64_t *rows = tg__calloc((size_t)cells, sizeof *rows);
    if (!rows) return tg__error(TG_ENOMEM, "packed sequence: no memory for the padded rows");
    for (int64_t t = 0; t < total; t++)
        for (int64_t b = 0; b < n; b++) {
            const int64_t p = lay->rank[b];
            rows[batch_first ? b * total + t : t * n + b] =
                t < lay->steps && p < lay->sizes[t] ? lay->off[t] + p : lay->rows;
        }
    int64_t shape[TG_MAX_DIMS];
    const int nd = tg_tensor_ndim(data);
    memcpy(shape + 1, tg_tensor_shape(data), (size_t)nd * sizeof *shape);
    shape[0] = batch_first ? n : total;
    shape[1] = batch_first ? total : n;
    tg_tensor *full = NULL, *idx = NULL, *picked = NULL, *len = NULL;
    int rc;
    TG_TRY_GOTO(with_fill_row(&full, data, value));
    TG_TRY_GOTO(index_of(&idx, cells, rows));
    TG_TRY_GOTO(tg_index_select(&picked, full, 0, idx));
    if (lengths) TG_TRY_GOTO(lengths_of(&len, lay));
    TG_TRY_GOTO(tg_reshape(padded, picked, nd + 1, shape));
    if (lengths) {
        *lengths = len;
        len = NULL;
    }
done:
    free(rows);
    tg_tensor_release(full);
    tg_tensor_release(idx);
    tg_tensor_release(picked);
    tg_tensor_release(len);
    return rc;
}

/* ---- pack_padded_sequence ---- */

typedef struct keyed {
    int64_t len, row;
} keyed;

/* Longest first; equal lengths in batch order (torch's sort keeps that
 * order for small batches). */
static int longest_first(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    return (x->row > y->row) - (x->row < y->row);
}

/* lay from the lengths len[0..n) of the batch rows. */
static int layout_of_lengths(tg__packed_layout *lay, const int64_t *len, int64_t n)
{
    keyed *k = tg__calloc((size_t)n, sizeof *k);
    if (!k) return TG_ENOMEM;
    for (int64_t b = 0; b < n; b++) k[b] = (keyed){len[b], b};
    qsort(k, (size_t)n, sizeof *k, longest_first);
    const int rc = layout_alloc(lay, k[0].len, n);
    if (rc >= 0) {
        for (int64_t p = 0; p < n; p++) {
            lay->order[p] = k[p].row;
            for (int64_t t = 0; t < k[p].len; t++) lay->sizes[t]++;
        }
        layout_finish(lay);
    }
    free(k);
    return rc;
}

/* The packed sequence of input by lay into *out (new references). */
static int pack_run(tg_packed_sequence *out, tg_tensor *input, const tg__packed_layout *lay,
                    bool batch_first, bool with_indices)
{
    tg_packed_sequence r = TG_PACKED_SEQUENCE_INIT;
    int rc;
    TG_TRY_GOTO(tg__packed_gather(&r.data, input, lay, batch_first));
    TG_TRY_GOTO(index_of(&r.batch_sizes, lay->steps, lay->sizes));
    if (with_indices) {
        TG_TRY_GOTO(index_of(&r.sorted_indices, lay->batch, lay->order));
        TG_TRY_GOTO(index_of(&r.unsorted_indices, lay->batch, lay->rank));
    }
    *out = r;
    return TG_OK;
done:
    tg_packed_sequence_release(&r);
    return rc;
}

/* Checks len[0..n) for a padded input of steps steps: each in [1, steps],
 * non-increasing with enforce_sorted. */
static int check_lengths(const char *fn, const int64_t *len, int64_t n, int64_t steps,
                         bool enforce_sorted)
{
    const char *what = "lengths";
    for (int64_t b = 0; b < n; b++)
        TG_CHECK(len[b] >= 1 && len[b] <= steps, TG_EINVAL,
                 "%s: %s[%lld]=%lld must be in [1, T=%lld] (torch refuses a length <= 0; T "
                 "the input's sequence length)", fn, what, (long long)b, (long long)len[b],
                 (long long)steps);
    for (int64_t b = 1; enforce_sorted && b < n; b++)
        TG_CHECK(len[b] <= len[b - 1], TG_EINVAL,
                 "%s: %s[%lld]=%lld > %s[%lld]=%lld: with enforce_sorted the lengths must be "
                 "sorted in decreasing order (enforce_sorted=false takes any order)", fn, what,
                 (long long)b, (long long)len[b], what, (long long)(b - 1),
                 (long long)len[b - 1]);
    return TG_OK;
}

/* Packs input by the checked lengths len[0..n) on the library's behalf. */
static int pack_lengths(tg_packed_sequence *out, tg_tensor *input, const int64_t *len,
                        int64_t n, bool batch_first, bool enforce_sorted)
{
    tg__packed_layout lay;
    TG_TRY(layout_of_lengths(&lay, len, n));
    tg__lib_enter();
    const int rc = pack_run(out, input, &lay, batch_first, !enforce_sorted);
    tg__lib_leave();
    tg__packed_layout_free(&lay);
    return rc;
}

int tg_pack_padded_sequence(tg_packed_sequence *out, tg_tensor *input,
                            const tg_tensor *lengths, bool batch_first, bool enforce_sorted)
{
    const char *fn = "pack_padded_sequence";
    char got[96];
    TG_CHECK(out != NULL && input != NULL && lengths != NULL, TG_EINVAL,
             "%s: out, input and lengths must not be NULL", fn);
    TG_CHECK(tg_tensor_ndim(input) >= 2, TG_ESHAPE,
             "%s: input is %s; it must be at least 2-d, %s", fn,
             tg__rnn_shape(got, sizeof got, input), batch_first ? "(N, T, *)" : "(T, N, *)");
    const int64_t steps = tg_tensor_dim(input, batch_first ? 1 : 0);
    const int64_t n = tg_tensor_dim(input, batch_first ? 0 : 1);
    TG_CHECK(n >= 1, TG_ESHAPE, "%s: input is %s; its batch N must be >= 1", fn,
             tg__rnn_shape(got, sizeof got, input));
    const tg_dtype dt = tg_tensor_dtype(lengths);
    TG_CHECK(dt == TG_I64 || dt == TG_I32, TG_EINVAL,
             "%s: lengths has dtype %s; it must be i64 (or i32)", fn, tg_dtype_name(dt));
    TG_CHECK(tg_tensor_ndim(lengths) == 1 && tg_tensor_dim(lengths, 0) == n, TG_EINVAL,
             "%s: lengths is %s; it must be 1-d with one length per batch row, (N) = (%lld)",
             fn, tg__rnn_shape(got, sizeof got, lengths), (long long)n);
    int64_t *len = tg__calloc((size_t)n, sizeof *len);
    if (!len) return TG_ENOMEM;
    int rc;
    TG_TRY_GOTO(read_i64(len, n, lengths));
    TG_TRY_GOTO(check_lengths(fn, len, n, steps, enforce_sorted));
    rc = pack_lengths(out, input, len, n, batch_first, enforce_sorted);
done:
    free(len);
    return rc;
}

/* ---- pad_packed_sequence ---- */

int tg_pad_packed_sequence(tg_tensor **out, tg_tensor **out_lengths,
                           const tg_packed_sequence *packed, bool batch_first,
                           double padding_value, int64_t total_length)
{
    const char *fn = "pad_packed_sequence";
    TG_CHECK(out != NULL && packed != NULL, TG_EINVAL, "%s: out and packed must not be NULL",
             fn);
    TG_CHECK(out != out_lengths, TG_EINVAL, "%s: out and out_lengths must be two places", fn);
    tg__packed_layout lay;
    TG_TRY(tg__packed_layout_of(&lay, fn, packed));
    int rc = TG_OK;
    if (tg_tensor_ndim(packed->data) >= TG_MAX_DIMS)
        rc = tg__error(TG_ESHAPE, "%s: data has %d dims; padded it would have more than %d",
                       fn, tg_tensor_ndim(packed->data), TG_MAX_DIMS);
    else if (total_length > INT64_MAX / lay.batch)
        rc = tg__error(TG_EINVAL, "%s: total_length=%lld times N=%lld overflows", fn,
                       (long long)total_length, (long long)lay.batch);
    else if (total_length != -1 && total_length < lay.steps)
        rc = tg__error(TG_EINVAL, "%s: total_length=%lld must be at least the longest "
                       "length %lld (or -1 for torch's None)", fn, (long long)total_length,
                       (long long)lay.steps);
    tg_tensor *y = NULL, *len = NULL;
    const tg_dtype dt = tg_tensor_dtype(packed->data);
    if (rc >= 0 && tg_tensor_scalar(&y, dt, padding_value) < 0)
        rc = tg__error(TG_EINVAL, "%s: padding_value=%g cannot be converted to data's dtype "
                       "%s", fn, padding_value, tg_dtype_name(dt));
    tg_tensor_release(y);
    y = NULL;
    if (rc >= 0) {
        tg__lib_enter();
        rc = tg__packed_scatter(&y, out_lengths ? &len : NULL, packed->data, &lay, batch_first,
                                padding_value, total_length == -1 ? lay.steps : total_length);
        tg__lib_leave();
    }
    tg__packed_layout_free(&lay);
    return tg__scope_capture_pair(out, y, out_lengths, len, rc);
}

/* ---- pack_sequence ---- */

int tg_pack_sequence(tg_packed_sequence *out, int n, tg_tensor *const *seqs,
                     bool enforce_sorted)
{
    const char *fn = "pack_sequence";
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", fn);
    int64_t longest;   /* pad_sequence's T */
    TG_TRY(tg__rnn_check_sequences(fn, n, seqs, &longest));
    int64_t *len = tg__calloc((size_t)n, sizeof *len);
    if (!len) return TG_ENOMEM;
    for (int i = 0; i < n; i++) len[i] = tg_tensor_dim(seqs[i], 0);
    tg_tensor *padded = NULL;
    int rc = TG_OK;
    for (int i = 0; i < n && rc >= 0; i++)
        if (len[i] < 1)
            rc = tg__error(TG_EINVAL, "%s: seqs[%d] has length 0; every sequence must have "
                           "length >= 1 (torch refuses a length <= 0)", fn, i);
        else if (enforce_sorted && i > 0 && len[i] > len[i - 1])
            rc = tg__error(TG_EINVAL, "%s: seqs[%d] has length %lld > seqs[%d]'s %lld: with "
                           "enforce_sorted the lengths must be sorted in decreasing order "
                           "(enforce_sorted=false takes any order)", fn, i,
                           (long long)len[i], i - 1, (long long)len[i - 1]);
    if (rc < 0) goto done;
    tg__lib_enter();
    rc = tg_pad_sequence(&padded, n, seqs, false, 0);
    tg__lib_leave();
    if (rc >= 0) rc = pack_lengths(out, padded, len, n, false, enforce_sorted);
done:
    tg_tensor_release(padded);
    free(len);
    return rc;
}
