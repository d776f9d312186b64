/* src/dist/zero_state.c - the whole state of a ZeroRedundancyOptimizer:
 * consolidated on one rank (torch's consolidate_state_dict(to) and
 * state_dict()), and loaded back with each rank keeping its part.
 *
 * Each rank's optimizer saves its state (tg_optimizer_state_save) under
 * TG__ZERO_PREFIX; the entries of its parameter k ("zero.<k>.<name>") are
 * renamed to the index i of that parameter in tg_zero_new's list
 * ("<i>.<name>") and travel to the root packed in one buffer per rank
 * (MPI_Gatherv).  The rest, the step and the param groups'
 * hyperparameters, the root takes from z->all (torch's zero.param_groups)
 * and z->steps.  Loading goes the other way: z->all takes the
 * hyperparameters, and the local optimizer its parameters' state and the
 * rows of its own groups.
 *
 * A packed entry: 'T', u32 name length, name, i32 dtype, i32 ndim, i64
 * shape[ndim], the elements. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/zero_internal.h"

/* A growing byte buffer. */
typedef struct buf {
    char *p;
    size_t n, cap;
    bool oom;
} buf;

static void put(buf *b, const void *src, size_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_str(buf *b, const char *s)
{
    const uint32_t len = (uint32_t)strlen(s);
    put(b, &len, sizeof len);
    put(b, s, len);
}

/* The parameter index that begins name ("<digits>.<rest>"), with *rest
 * after the dot; -1 when name has none. */
static long index_of(const char *name, const char **rest)
{
    if (!isdigit((unsigned char)name[0])) return -1;
    char *end = NULL;
    const long i = strtol(name, &end, 10);
    if (*end != '.' || i > INT_MAX) return -1;
    *rest = end + 1;
    return i;
}

/* This rank's state packed into b, its parameters renumbered as the
 * list's. */
static int pack(const tg_zero *z, buf *b)
{
    if (!z->opt) return TG_OK;
    int *global = tg__calloc((size_t)z->n_local, sizeof *global);
    tg_st_file *f = NULL;
    int rc = global ? tg_st_new(&f) : TG_ENOMEM;
    for (int i = 0; i < z->n; i++)
        if (global && z->local_index[i] >= 0) global[z->local_index[i]] = i;
    if (rc >= 0) rc = tg_optimizer_state_save(z->opt, f, TG__ZERO_PREFIX);
    const size_t skip = strlen(TG__ZERO_PREFIX ".");
    char name[512];
    for (int e = 0; rc >= 0 && e < tg_st_count(f); e++) {
        const char *key = NULL, *rest = NULL;
        tg_tensor *t = NULL, *c = NULL;
        tg_st_at(f, e, &key, &t);
        const long k = index_of(key + skip, &rest);
        if (k < 0) continue;   /* the step and hyperparameters: the root's z->all */
        snprintf(name, sizeof name, "%d.%s", global[k], rest);
        rc = tg_tensor_contiguous(&c, t);
        if (rc < 0) break;
        const int32_t dt = (int32_t)tg_tensor_dtype(c), nd = tg_tensor_ndim(c);
        put(b, "T", 1);
        put_str(b, name);
        put(b, &dt, sizeof dt);
        put(b, &nd, sizeof nd);
        put(b, tg_tensor_shape(c), sizeof(int64_t) * (size_t)nd);
        put(b, tg_tensor_cdata(c), (size_t)tg_tensor_numel(c) * tg_dtype_size(dt));
        tg_tensor_release(c);
    }
    if (rc >= 0 && b->oom) rc = TG_ENOMEM;
    tg_st_free(f);
    free(global);
    return rc;
}

/* Reading a packed buffer. */
typedef struct reader {
    const char *p, *end;
} reader;

static bool take(reader *r, void *dst, size_t n)
{
    if ((size_t)(r->end - r->p) < n) return false;
    memcpy(dst, r->p, n);
    r->p += n;
    return true;
}

/* The next string into s (NUL-terminated, at most cap - 1 bytes). */
static bool take_str(reader *r, char *s, size_t cap)
{
    uint32_t len = 0;
    if (!take(r, &len, sizeof len) || len >= cap || !take(r, s, len)) return false;
    s[len] = '\0';
    return true;
}

/* Adds a rank's entries from its packed bytes (its parameters' state) to
 * f under prefix. */
static int unpack(tg_st_file *f, const char *prefix, const char *p, size_t n)
{
    reader r = {p, p + n};
    char name[512], key[1024];
    while (r.p < r.end) {
        char tag = 0;
        if (!take(&r, &tag, 1) || tag != 'T' || !take_str(&r, name, sizeof name))
            return TG_EFORMAT;
        snprintf(key, sizeof key, "%s.%s", prefix, name);
        int32_t dt = 0, nd = 0;
        int64_t shape[TG_MAX_DIMS] = {0};
        if (!take(&r, &dt, sizeof dt) || !take(&r, &nd, sizeof nd) || nd < 0 ||
            nd > TG_MAX_DIMS || !take(&r, shape, sizeof(int64_t) * (size_t)nd))
            return TG_EFORMAT;
        int64_t numel = 1;
        for (int i = 0; i < nd; i++) numel *= shape[i];
        const size_t bytes = (size_t)numel * tg_dtype_size((tg_dtype)dt);
        if ((size_t)(r.end - r.p) < bytes) return TG_EFORMAT;
        tg_tensor *t = NULL;
        TG_TRY(tg_tensor_from_data(&t, (tg_dtype)dt, nd, shape, r.p));
        const int rc = tg_st_set(f, key, t);
        tg_tensor_release(t);
        TG_TRY(rc);
        r.p += bytes;
    }
    return TG_OK;
}

/* The root's part: z->all's hyperparameters, z's step, and every rank's
 * packed state (all, at offsets off[0..size]) into f under prefix. */
static int merge(const tg_zero *z, tg_st_file *f, const char *prefix, const char *all,
                 const int *off)
{
    TG_TRY(tg_optimizer_state_save(z->all, f, prefix));
    char key[512];
    snprintf(key, sizeof key, "%s.step", prefix);
    tg_tensor *step = NULL;
    TG_TRY(tg_tensor_scalar(&step, TG_I64, (double)z->steps));
    const int rc = tg_st_set(f, key, step);
    tg_tensor_release(step);
    TG_TRY(rc);
    for (int r = 0; r < z->d->size; r++)
        TG_TRY(unpack(f, prefix, all + off[r], (size_t)(off[r + 1] - off[r])));
    return TG_OK;
}

int tg_zero_consolidate_state_dict(tg_zero *z, int to, tg_st_file *f, const char *prefix)
{
    static const char fn[] = "zero_consolidate_state_dict";
    TG_CHECK(z != NULL, TG_EINVAL, "%s: z must not be NULL", fn);
    TG_CHECK(!z->broken, TG_EINVAL, "%s: z ran out of memory in zero_add_param_group; it can "
             "only be freed", fn);
    tg_dist *d = z->d;
    int rc = TG_OK;
    if (to < 0 || to >= d->size)
        rc = tg__error(TG_EINVAL, "%s: to=%d must be in [0, %d)", fn, to, d->size);
    else if (d->rank == to && (!f || !prefix))
        rc = tg__error(TG_EINVAL, "%s: f and prefix must not be NULL on rank to=%d", fn, to);
    buf b = {0};
    if (rc >= 0) rc = pack(z, &b);
    /* every rank learns every size, so that all agree on the total */
    int64_t *sizes = tg__calloc((size_t)d->size, sizeof *sizes);
    int *off = tg__calloc((size_t)d->size + 1, sizeof *off);
    if (rc >= 0 && (!sizes || !off)) rc = TG_ENOMEM;
    int64_t mine = (int64_t)b.n, sig[1] = {to}, total = 0;
    int differs = -1;
    rc = tg__dist_agree_sig(d, rc, 1, sig, &differs);
    if (rc >= 0 && differs >= 0) rc = tg__error(TG_EINVAL, "%s: the ranks passed different to",
                                                fn);
    if (rc >= 0)
        rc = tg__mpi_check(MPI_Allgather(&mine, 1, MPI_INT64_T, sizes, 1, MPI_INT64_T, d->comm),
                           fn);
    for (int r = 0; rc >= 0 && r < d->size; r++) total += sizes[r];
    if (rc >= 0 && total > INT_MAX)
        rc = tg__error(TG_EINVAL, "%s: %lld bytes of state; at most 2 GiB", fn,
                       (long long)total);
    int *counts = tg__calloc((size_t)d->size, sizeof *counts);
    char *all = d->rank == to && rc >= 0 ? malloc((size_t)total + 1) : NULL;
    int status = rc >= 0 && (!counts || (d->rank == to && !all)) ? TG_ENOMEM : rc;
    if (rc >= 0) rc = tg_dist_agree(d, status);
    for (int r = 0; rc >= 0 && r < d->size; r++) {
        counts[r] = (int)sizes[r];
        off[r + 1] = off[r] + counts[r];
    }
    if (rc >= 0)
        rc = tg__mpi_check(MPI_Gatherv(b.p, (int)b.n, MPI_BYTE, all, counts, off, MPI_BYTE, to,
                                       d->comm), fn);
    if (rc >= 0 && d->rank == to) rc = merge(z, f, prefix, all, off);
    if (rc == TG_EFORMAT) rc = tg__error(TG_EFORMAT, "%s: a rank's packed state is corrupt", fn);
    if (rc >= 0) rc = tg_dist_agree(d, rc);
    free(b.p);
    free(sizes);
    free(off);
    free(counts);
    free(all);
    return rc;
}

/* Whether name is under prefix ("prefix.<rest>"); *rest after the dot. */
static bool under(const char *name, const char *prefix, const char **rest)
{
    const size_t np = strlen(prefix);
    if (strncmp(name, prefix, np) != 0 || name[np] != '.') return false;
    *rest = name + np + 1;
    return true;
}

/* The entries of f under prefix without a parameter index (the step, the
 * hyperparameters, the metadata) into ga under TG__ZERO_PREFIX, for z->all;
 * and this rank's parameters' entries into g, renumbered as its
 * optimizer's. */
static int split(const tg_zero *z, tg_st_file *ga, tg_st_file *g, const tg_st_file *f,
                 const char *prefix)
{
    static const char fn[] = "zero_state_load";
    char key[1024];
    for (int e = 0; e < tg_st_count(f); e++) {
        const char *name = NULL, *rest = NULL, *tail = NULL;
        tg_tensor *t = NULL;
        tg_st_at(f, e, &name, &t);
        if (!under(name, prefix, &rest)) continue;
        const long i = index_of(rest, &tail);
        TG_CHECK(i < z->n, TG_EINVAL, "%s: '%s' is the state of parameter %ld; there are %d",
                 fn, name, i, z->n);
        if (i < 0) {
            snprintf(key, sizeof key, TG__ZERO_PREFIX ".%s", rest);
            TG_TRY(tg_st_set(ga, key, t));
        } else if (z->local_index[i] >= 0) {
            snprintf(key, sizeof key, TG__ZERO_PREFIX ".%d.%s", z->local_index[i], tail);
            TG_TRY(tg_st_set(g, key, t));
        }
    }
    for (int e = 0; e < tg_st_meta_count(f); e++) {
        const char *name = NULL, *value = NULL, *rest = NULL;
        tg_st_meta_at(f, e, &name, &value);
        if (!under(name, prefix, &rest)) continue;
        snprintf(key, sizeof key, TG__ZERO_PREFIX ".%s", rest);
        TG_TRY(tg_st_meta_set(ga, key, value));
        TG_TRY(tg_st_meta_set(g, key, value));
    }
    return TG_OK;
}

/* t, a saved hyperparameter of one row per group of z's (G, rest), into
 * g as the local optimizer's: the rows rows[0..gl), shape (gl, rest), or
 * (rest) for one local group. */
static int take_rows(tg_st_file *g, const char *name, tg_tensor *t, const int *rows,
                     int gl)
{
    tg_tensor *c = NULL, *u = NULL;
    TG_TRY(tg_tensor_contiguous(&c, t));
    const int nd = tg_tensor_ndim(c);
    const int64_t *shape = tg_tensor_shape(c);
    TG_ASSERT(nd >= 1 && shape[0] >= 1);
    int64_t out_shape[TG_MAX_DIMS];
    int ond = 0;
    if (gl > 1) out_shape[ond++] = gl;
    for (int d = 1; d < nd; d++) out_shape[ond++] = shape[d];
    const size_t row = (size_t)(tg_tensor_numel(c) / shape[0]) * tg_dtype_size(tg_tensor_dtype(c));
    char *data = tg__calloc((size_t)gl, row + 1);
    int rc = data ? TG_OK : TG_ENOMEM;
    for (int r = 0; rc >= 0 && r < gl; r++)
        memcpy(data + (size_t)r * row, (const char *)tg_tensor_cdata(c) + rows[r] * row, row);
    if (rc >= 0) rc = tg_tensor_from_data(&u, tg_tensor_dtype(c), ond, out_shape, data);
    if (rc >= 0) rc = tg_st_set(g, name, u);
    tg_tensor_release(u);
    tg_tensor_release(c);
    free(data);
    return rc;
}

/* Into g, the local optimizer's rows of z->all's saved hyperparameters
 * (sa, one row per group of z's when it has more than one; each local
 * group is the row of its group of z's), and its groups' sizes. */
static int local_rows(const tg_zero *z, tg_st_file *g, const tg_st_file *sa)
{
    const int gl = tg_optimizer_param_group_count(z->opt), skip = (int)strlen(TG__ZERO_PREFIX);
    int *rows = tg__calloc((size_t)gl, sizeof *rows);
    int64_t *sizes = tg__calloc((size_t)gl, sizeof *sizes);
    int rc = rows && sizes ? TG_OK : TG_ENOMEM;
    for (int k = 0; rc >= 0 && k < z->n_groups; k++)
        if (z->local_group[k] >= 0) rows[z->local_group[k]] = k;
    for (int i = 0, k = 0; rc >= 0 && i < z->n; i++) {
        while (i >= z->group_end[k]) k++;
        if (z->local_index[i] >= 0) sizes[z->local_group[k]]++;
    }
    for (int e = 0; rc >= 0 && e < tg_st_count(sa); e++) {
        const char *name = NULL;
        tg_tensor *t = NULL;
        tg_st_at(sa, e, &name, &t);
        if (!strcmp(name + skip, ".step") || !strcmp(name + skip, ".param_groups")) continue;
        rc = z->n_groups == 1 ? tg_st_set(g, name, t) : take_rows(g, name, t, rows, gl);
    }
    tg_tensor *pg = NULL;
    if (rc >= 0 && gl > 1) rc = tg_tensor_from_data(&pg, TG_I64, 1, (int64_t[]){gl}, sizes);
    if (rc >= 0 && gl > 1) rc = tg_st_set(g, TG__ZERO_PREFIX ".param_groups", pg);
    tg_tensor_release(pg);
    free(rows);
    free(sizes);
    return rc;
}

/* Loads ga into z->all, then g (with the step and z->all's rows) into the
 * local optimizer. */
static int load(tg_zero *z, tg_st_file *ga, tg_st_file *g)
{
    TG_TRY(tg_optimizer_state_load(z->all, ga, TG__ZERO_PREFIX));
    if (!z->opt) return TG_OK;
    tg_st_file *sa = NULL;
    TG_TRY(tg_st_new(&sa));
    int rc = tg_optimizer_state_save(z->all, sa, TG__ZERO_PREFIX);
    if (rc >= 0) rc = local_rows(z, g, sa);
    if (rc >= 0) rc = tg_st_set(g, TG__ZERO_PREFIX ".step", tg_st_get(ga, TG__ZERO_PREFIX ".step"));
    if (rc >= 0) rc = tg_optimizer_state_load(z->opt, g, TG__ZERO_PREFIX);
    tg_st_free(sa);
    return rc;
}

int tg_zero_state_load(tg_zero *z, const tg_st_file *f, const char *prefix)
{
    TG_CHECK(z != NULL, TG_EINVAL, "zero_state_load: z must not be NULL");
    tg_st_file *ga = NULL, *g = NULL, *back_all = NULL, *back = NULL;
    int rc = f && prefix ? TG_OK
                         : tg__error(TG_EINVAL, "zero_state_load: f and prefix must not be NULL");
    if (rc >= 0 && z->broken)
        rc = tg__error(TG_EINVAL, "zero_state_load: z ran out of memory in "
                                  "zero_add_param_group; it can only be freed");
    const tg_tensor *step = NULL;
    char key[512];
    if (rc >= 0) {
        snprintf(key, sizeof key, "%s.step", prefix);
        step = tg_st_get(f, key);
        if (!step) rc = tg__error(TG_ENOTFOUND, "zero_state_load: '%s' is missing", key);
    }
    if (rc >= 0) rc = tg_st_new(&ga);
    if (rc >= 0) rc = tg_st_new(&g);
    if (rc >= 0) rc = tg_st_new(&back_all);
    if (rc >= 0) rc = tg_st_new(&back);
    if (rc >= 0) rc = split(z, ga, g, f, prefix);
    /* copies of the state now, to put back when this or another rank fails */
    if (rc >= 0) rc = tg_optimizer_state_save(z->all, back_all, TG__ZERO_PREFIX);
    if (rc >= 0 && z->opt) rc = tg_optimizer_state_save(z->opt, back, TG__ZERO_PREFIX);
    const bool saved = rc >= 0;
    if (rc >= 0) rc = load(z, ga, g);
    rc = tg_dist_agree(z->d, rc);
    if (rc < 0 && saved) {
        /* the backups are these optimizers' own states: they load */
        int back_rc = tg_optimizer_state_load(z->all, back_all, TG__ZERO_PREFIX);
        TG_ASSERT(back_rc == TG_OK);
        back_rc = z->opt ? tg_optimizer_state_load(z->opt, back, TG__ZERO_PREFIX) : TG_OK;
        TG_ASSERT(back_rc == TG_OK);
    }
    if (rc >= 0) z->steps = (int64_t)tg_tensor_item(step);
    tg_st_free(ga);
    tg_st_free(g);
    tg_st_free(back_all);
    tg_st_free(back);
    return rc;
}
