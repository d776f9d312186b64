/* Tensors: creation, refcounting, metadata, copies and printing.  The
 * autograd attributes (requires_grad, .grad, the name) live in
 * tensor_grad.c, element access and strided copies in tensor_access.c. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "core/core.h"

_Atomic(tg__grad_fn_fn) tg__grad_fn_release;   /* set by the tape (core.h) */
_Atomic(tg__grad_fn_fn) tg__grad_fn_renamed;

/* ---- shapes ---------------------------------------------------------------- */

void tg__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    /* Row-major: stride[d] = prod(shape[d+1:]); a zero extent keeps later
     * strides meaningful by counting it as 1. */
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d] > 1 ? shape[d] : 1;
    }
}

int64_t tg__numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

bool tg__shape_bytes_fit(int ndim, const int64_t *shape, int64_t elem_bytes)
{
    /* Zero extents count as 1, as in the strides: (2^40, 0, 2^40) holds no
     * element but its first stride would not fit. */
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        const int64_t e = shape[d] > 1 ? shape[d] : 1;
        if (n > INT64_MAX / elem_bytes / e) return false;
        n *= e;
    }
    return true;
}

int tg__check_shape(const char *what, int ndim, const int64_t *shape)
{
    TG_CHECK(ndim >= 0 && ndim <= TG_MAX_DIMS, TG_EINVAL,
             "%s: ndim=%d must be in [0, %d]", what, ndim, TG_MAX_DIMS);
    TG_CHECK(ndim == 0 || shape != NULL, TG_EINVAL,
             "%s: shape must not be NULL when ndim=%d > 0", what, ndim);
    for (int d = 0; d < ndim; d++)
        TG_CHECK(shape[d] >= 0, TG_EINVAL, "%s: shape[%d]=%lld must be >= 0", what, d,
                 (long long)shape[d]);
    /* The byte count of the largest dtype (8 bytes) must fit in an int64. */
    if (!tg__shape_bytes_fit(ndim, shape, 8)) {
        char buf[160];
        return tg__error(TG_EINVAL, "%s: shape %s is too large: its extents (zeros counted as 1) overflow int64", what,
                         tg_shape_str(buf, sizeof buf, ndim, shape));
    }
    return TG_OK;
}

/* Appends printf output at buf[pos], truncating; returns the new end. */
__attribute__((format(printf, 4, 5)))
static size_t tg__append(char *buf, size_t n, size_t pos, const char *fmt, ...)
{
    if (pos + 1 >= n) return pos;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + pos, n - pos, fmt, ap);
    va_end(ap);
    if (w < 0) return pos;
    pos += (size_t)w;
    return pos < n ? pos : n - 1;
}

char *tg_shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    if (!buf || n == 0) return buf;
    buf[0] = '\0';
    size_t pos = tg__append(buf, n, 0, "(");
    for (int d = 0; d < ndim && shape; d++)
        pos = tg__append(buf, n, pos, d ? ", %lld" : "%lld", (long long)shape[d]);
    tg__append(buf, n, pos, ")");
    return buf;
}

/* ---- creation --------------------------------------------------------------- */

tg_tensor *tg__tensor_view_of(tg_storage *s, tg_dtype dt, int ndim, const int64_t *shape,
                              const int64_t *strides, int64_t offset)
{
    TG_ASSERT(s != NULL && ndim >= 0 && ndim <= TG_MAX_DIMS);
    tg_tensor *t = tg__calloc(1, sizeof *t);
    if (!t) return NULL;
    t->refcount = 1;
    t->dtype = dt;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    if (strides)
        for (int d = 0; d < ndim; d++) t->strides[d] = strides[d];
    else
        tg__contiguous_strides(ndim, shape, t->strides);
    t->offset = offset;
    t->storage = tg__storage_retain(s);
    return t;
}

/* Allocates a contiguous tensor; NULL with TG_ENOMEM set when out of memory,
 * or when its byte count would not fit in an int64 (an op's output shape
 * computed from huge parameters), which is checked before multiplying. */
static tg_tensor *tensor_alloc(tg_dtype dt, int ndim, const int64_t *shape, bool zero)
{
    const int64_t esize = (int64_t)tg_dtype_size(dt);
    if (!tg__shape_bytes_fit(ndim, shape, esize)) {
        char buf[160];
        tg__error(TG_ENOMEM, "tensor: a %s tensor of shape %s is too large: its extents "
                  "(zeros counted as 1) times %lld bytes exceed INT64_MAX", tg_dtype_name(dt),
                  tg_shape_str(buf, sizeof buf, ndim, shape), (long long)esize);
        return NULL;
    }
    size_t nbytes = (size_t)tg__numel(ndim, shape) * (size_t)esize;
    tg_storage *s = zero ? tg__storage_new(nbytes) : tg__storage_new_uninit(nbytes);
    if (!s) return NULL;
    tg_tensor *t = tg__tensor_view_of(s, dt, ndim, shape, NULL, 0);
    tg__storage_release(s);   /* the view holds it now (or it is freed) */
    return t;
}

tg_tensor *tg__tensor_empty(tg_dtype dt, int ndim, const int64_t *shape)
{
    return tensor_alloc(dt, ndim, shape, true);
}

tg_tensor *tg__tensor_uninit(tg_dtype dt, int ndim, const int64_t *shape)
{
    return tensor_alloc(dt, ndim, shape, false);
}

static int tg__check_dtype(const char *what, tg_dtype dt)
{
    TG_CHECK(tg_dtype_get_traits(dt) != NULL, TG_EINVAL,
             "%s: dtype=%d is not a valid tg_dtype", what, (int)dt);
    return TG_OK;
}

/* Validates the common arguments and makes a zeroed tensor in *t. */
static int tg__create(const char *what, tg_tensor **out, tg_dtype dt, int ndim,
                      const int64_t *shape, tg_tensor **t)
{
    TG_CHECK(out != NULL, TG_EINVAL, "%s: out must not be NULL", what);
    TG_TRY(tg__check_dtype(what, dt));
    TG_TRY(tg__check_shape(what, ndim, shape));
    *t = tg__tensor_empty(dt, ndim, shape);
    return *t ? TG_OK : TG_ENOMEM;
}

int tg_tensor_zeros(tg_tensor **out, tg_dtype dt, int ndim, const int64_t *shape)
{
    tg_tensor *t = NULL;
    TG_TRY(tg__create("tensor_zeros", out, dt, ndim, shape, &t));
    *out = t;
    return TG_OK;
}

int tg_tensor_full(tg_tensor **out, tg_dtype dt, int ndim, const int64_t *shape, double v)
{
    tg_tensor *t = NULL;
    TG_TRY(tg__check_value("tensor_full", dt, v));
    TG_TRY(tg__create("tensor_full", out, dt, ndim, shape, &t));
    TG_ASSERT(tg_tensor_fill(t, v) == TG_OK);
    t->storage->version = 0;   /* a fresh tensor has not been written in place */
    *out = t;
    return TG_OK;
}

int tg_tensor_eye(tg_tensor **out, tg_dtype dt, int64_t n, int64_t m)
{
    tg_tensor *t = NULL;
    TG_CHECK(n >= 0 && m >= 0, TG_EINVAL, "tensor_eye: n=%lld and m=%lld must be >= 0",
             (long long)n, (long long)m);
    TG_TRY(tg__create("tensor_eye", out, dt, 2, (int64_t[]){n, m}, &t));
    for (int64_t i = 0; i < n && i < m; i++) tg_dtype_store(dt, t->storage->data, i * m + i, 1);
    *out = t;
    return TG_OK;
}

int tg_tensor_scalar(tg_tensor **out, tg_dtype dt, double v)
{
    tg_tensor *t = NULL;
    TG_TRY(tg__check_value("tensor_scalar", dt, v));
    TG_TRY(tg__create("tensor_scalar", out, dt, 0, NULL, &t));
    tg_dtype_store(dt, t->storage->data, 0, v);
    *out = t;
    return TG_OK;
}

int tg_tensor_from_data(tg_tensor **out, tg_dtype dt, int ndim, const int64_t *shape,
                        const void *data)
{
    TG_CHECK(out != NULL, TG_EINVAL, "tensor_from_data: out must not be NULL");
    TG_TRY(tg__check_dtype("tensor_from_data", dt));
    TG_TRY(tg__check_shape("tensor_from_data", ndim, shape));
    int64_t n = tg__numel(ndim, shape);
    TG_CHECK(data != NULL || n == 0, TG_EINVAL,
             "tensor_from_data: data must not be NULL for %lld elements", (long long)n);
    tg_tensor *t = tg__tensor_empty(dt, ndim, shape);
    if (!t) return TG_ENOMEM;
    if (n > 0) memcpy(t->storage->data, data, (size_t)n * tg_dtype_size(dt));
    *out = t;
    return TG_OK;
}

int tg_tensor_zeros_like(tg_tensor **out, const tg_tensor *t)
{
    TG_CHECK(out != NULL, TG_EINVAL, "tensor_zeros_like: out must not be NULL");
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_zeros_like: t must not be NULL");
    return tg_tensor_zeros(out, t->dtype, t->ndim, t->shape);
}

int tg_tensor_full_like(tg_tensor **out, const tg_tensor *t, double v)
{
    TG_CHECK(out != NULL, TG_EINVAL, "tensor_full_like: out must not be NULL");
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_full_like: t must not be NULL");
    return tg_tensor_full(out, t->dtype, t->ndim, t->shape, v);
}

int tg_tensor_to_dtype(tg_tensor **out, const tg_tensor *t, tg_dtype dt)
{
    TG_CHECK(out != NULL, TG_EINVAL, "tensor_to_dtype: out must not be NULL");
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_to_dtype: t must not be NULL");
    TG_TRY(tg__check_dtype("tensor_to_dtype", dt));
    TG_TRY(tg__refuse_sparse("tensor_to_dtype", "t", t));
    tg_tensor *c = tg__tensor_uninit(dt, t->ndim, t->shape);   /* tg__gather writes all */
    if (!c) return TG_ENOMEM;
    tg__gather(t, dt, c->storage->data);
    *out = c;
    return TG_OK;
}

int tg__expanded_dim(const tg_tensor *t)
{
    for (int d = 0; d < t->ndim; d++)
        if (t->strides[d] == 0 && t->shape[d] > 1) return d;
    return -1;
}

const char *tg__name_note(const tg_tensor *t, bool paren, char *buf)
{
    if (!t || !t->name[0]) return "";
    snprintf(buf, 48, paren ? " ('%s')" : " '%s'", t->name);
    return buf;
}

void tg__tensor_assign(tg_tensor *t, const tg_tensor *data)
{
    TG_ASSERT(t->grad_fn == NULL);
    tg_storage *old = t->storage;
    if (data->storage->version <= old->version) data->storage->version = old->version + 1;
    t->storage = tg__storage_retain(data->storage);
    t->dtype = data->dtype;
    t->ndim = data->ndim;
    memcpy(t->shape, data->shape, sizeof t->shape);
    memcpy(t->strides, data->strides, sizeof t->strides);
    t->offset = data->offset;
    tg__storage_release(old);
    tg_tensor_release(t->grad);
    t->grad = NULL;
}

int tg_tensor_clone(tg_tensor **out, const tg_tensor *t)
{
    TG_CHECK(out != NULL, TG_EINVAL, "tensor_clone: out must not be NULL");
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_clone: t must not be NULL");
    if (t->sparse) return tg__sparse_clone(out, t);
    return tg_tensor_to_dtype(out, t, t->dtype);
}

int tg_tensor_contiguous(tg_tensor **out, tg_tensor *t)
{
    TG_CHECK(out != NULL, TG_EINVAL, "tensor_contiguous: out must not be NULL");
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_contiguous: t must not be NULL");
    TG_TRY(tg__refuse_sparse("tensor_contiguous", "t", t));
    if (tg_tensor_is_contiguous(t)) {
        *out = tg_tensor_retain(t);
        return TG_OK;
    }
    return tg_tensor_to_dtype(out, t, t->dtype);
}

int tg_tensor_detach(tg_tensor **out, tg_tensor *t)
{
    TG_CHECK(out != NULL, TG_EINVAL, "tensor_detach: out must not be NULL");
    TG_CHECK(t != NULL, TG_EINVAL, "tensor_detach: t must not be NULL");
    TG_TRY(tg__refuse_sparse("tensor_detach", "t", t));
    tg_tensor *d = tg__tensor_view_of(t->storage, t->dtype, t->ndim, t->shape, t->strides,
                                      t->offset);
    if (!d) return TG_ENOMEM;
    *out = d;
    return TG_OK;
}

/* ---- refcount ----------------------------------------------------------------- */

tg_tensor *tg_tensor_retain(tg_tensor *t)
{
    if (t) {
        TG_ASSERT(t->refcount > 0);
        t->refcount++;
    }
    return t;
}

void tg_tensor_release(tg_tensor *t)
{
    if (!t) return;
    TG_ASSERT(t->refcount > 0);
    if (--t->refcount > 0) return;
    tg_tensor_release(t->grad);
    if (t->grad_fn)
        atomic_load_explicit(&tg__grad_fn_release, memory_order_acquire)(t->grad_fn, t);
    for (tg_hook *h = t->hooks, *next; h; h = next) {
        next = h->next;
        free(h);
    }
    for (tg_post_hook *h = t->post_hooks, *next; h; h = next) {
        next = h->next;
        free(h);
    }
    if (t->sparse) {
        tg_tensor_release(t->sparse->indices);
        tg_tensor_release(t->sparse->values);
        free(t->sparse);
    }
    tg__storage_release(t->storage);
    free(t);
}

int tg_tensor_refcount(const tg_tensor *t) { return t ? t->refcount : 0; }

/* ---- metadata ------------------------------------------------------------------ */

tg_dtype tg_tensor_dtype(const tg_tensor *t) { return t ? t->dtype : TG_DTYPE_COUNT; }
int tg_tensor_ndim(const tg_tensor *t) { return t ? t->ndim : 0; }
const int64_t *tg_tensor_shape(const tg_tensor *t) { return t ? t->shape : NULL; }
const int64_t *tg_tensor_strides(const tg_tensor *t) { return t ? t->strides : NULL; }
int64_t tg_tensor_offset(const tg_tensor *t) { return t ? t->offset : 0; }
int64_t tg_tensor_numel(const tg_tensor *t) { return t ? tg__numel(t->ndim, t->shape) : 0; }

int64_t tg_tensor_dim(const tg_tensor *t, int dim)
{
    if (!t) return -1;
    if (dim < 0) dim += t->ndim;
    return dim >= 0 && dim < t->ndim ? t->shape[dim] : -1;
}

bool tg_tensor_is_contiguous(const tg_tensor *t)
{
    if (!t || t->sparse) return false;
    /* Row-major: walking from the last dim, each stride equals the product
     * of the extents after it; dims of extent 1 are never stepped over, so
     * their strides do not matter, and an empty tensor is trivially so. */
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 0) return true;
        if (t->shape[d] == 1) continue;
        if (t->strides[d] != expect) return false;
        expect *= t->shape[d];
    }
    return true;
}

bool tg_tensor_same_shape(const tg_tensor *a, const tg_tensor *b)
{
    if (!a || !b || a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

void *tg_tensor_data(tg_tensor *t)
{
    if (!t || tg__refuse_sparse("tensor_data", "t", t) < 0) return NULL;
    atomic_fetch_add_explicit(&t->storage->handed, 1, memory_order_relaxed);
    return (char *)t->storage->data + t->offset * (int64_t)tg_dtype_size(t->dtype);
}

const void *tg_tensor_cdata(const tg_tensor *t)
{
    if (!t || tg__refuse_sparse("tensor_cdata", "t", t) < 0) return NULL;
    return (const char *)t->storage->data + t->offset * (int64_t)tg_dtype_size(t->dtype);
}

bool tg_tensor_shares_storage(const tg_tensor *a, const tg_tensor *b)
{
    return a && b && a->storage == b->storage;
}

uint64_t tg_tensor_version(const tg_tensor *t) { return t ? t->storage->version : 0; }

void tg_tensor_bump_version(tg_tensor *t)
{
    if (t) tg__bump_version(t);
}

/* ---- copy_ ----------------------------------------------------------------------- */

int tg_tensor_copy_(tg_tensor *dst, const tg_tensor *src)
{
    TG_CHECK(dst != NULL && src != NULL, TG_EINVAL, "tensor_copy_: dst and src must not be NULL");
    TG_TRY(tg__refuse_sparse("tensor_copy_", "dst", dst));
    TG_TRY(tg__refuse_sparse("tensor_copy_", "src", src));
    char sb[160], db[160];
    const int wide = tg__expanded_dim(dst);   /* as torch: it would keep one value */
    TG_CHECK(wide < 0, TG_EINVAL,
             "tensor_copy_: dst (shape %s) has stride 0 on dim %d: more than one of its "
             "elements is one memory location (copy into a contiguous tensor)",
             tg_shape_str(db, sizeof db, dst->ndim, dst->shape), wide);
    TG_CHECK(src->ndim <= dst->ndim, TG_ESHAPE,
             "tensor_copy_: src shape %s has more dims than dst shape %s",
             tg_shape_str(sb, sizeof sb, src->ndim, src->shape),
             tg_shape_str(db, sizeof db, dst->ndim, dst->shape));
    /* Broadcast src to dst's shape, aligning trailing dims: a src extent of 1
     * (or a missing leading dim) repeats with stride 0. */
    int64_t strides[TG_MAX_DIMS];
    int lead = dst->ndim - src->ndim;
    for (int d = 0; d < dst->ndim; d++) {
        if (d < lead) {
            strides[d] = 0;
            continue;
        }
        int64_t se = src->shape[d - lead];
        TG_CHECK(se == dst->shape[d] || se == 1, TG_ESHAPE,
                 "tensor_copy_: src shape %s does not broadcast to dst shape %s (dim %d: %lld vs %lld)",
                 tg_shape_str(sb, sizeof sb, src->ndim, src->shape),
                 tg_shape_str(db, sizeof db, dst->ndim, dst->shape), d, (long long)se,
                 (long long)dst->shape[d]);
        strides[d] = se == 1 ? 0 : src->strides[d - lead];
    }
    int64_t n = tg__numel(dst->ndim, dst->shape);
    /* Through a temporary buffer so that overlapping src/dst read old values. */
    void *buf = tg__malloc((size_t)n * tg_dtype_size(dst->dtype));
    if (!buf) return TG_ENOMEM;
    tg_tensor view = *src;
    view.ndim = dst->ndim;
    for (int d = 0; d < dst->ndim; d++) {
        view.shape[d] = dst->shape[d];
        view.strides[d] = strides[d];
    }
    tg__gather(&view, dst->dtype, buf);
    tg__scatter(dst, dst->dtype, buf);
    free(buf);
    tg__bump_version(dst);
    return TG_OK;
}

/* ---- printing ------------------------------------------------------------------------ */

int tg_tensor_print(FILE *f, const tg_tensor *t, int64_t max_elems)
{
    TG_CHECK(f != NULL && t != NULL, TG_EINVAL, "tensor_print: f and t must not be NULL");
    TG_TRY(tg__refuse_sparse("tensor_print", "t", t));
    char sb[160];
    int64_t n = tg__numel(t->ndim, t->shape);
    int64_t shown = max_elems < 0 ? 0 : (n < max_elems ? n : max_elems);
    int rc = fprintf(f, "tensor %s %s%s%s [", tg_dtype_name(t->dtype),
                     tg_shape_str(sb, sizeof sb, t->ndim, t->shape), t->name[0] ? " " : "",
                     t->name);
    for (int64_t i = 0; i < shown && rc >= 0; i++) {
        double v;
        TG_ASSERT(tg_tensor_get_flat(t, i, &v) == TG_OK);
        rc = fprintf(f, i ? ", %.6g" : "%.6g", v);
    }
    if (rc >= 0) rc = fprintf(f, "%s]\n", shown < n ? (shown ? ", ..." : "...") : "");
    TG_CHECK(rc >= 0, TG_EIO, "tensor_print: write failed");
    return TG_OK;
}
