/* src/io/safetensors.c - the tg_st_file container and the safetensors reader
 * and writer.
 *
 * File layout: u64 little-endian N, N bytes of JSON header, then the data
 * buffer; each tensor's bytes are data[begin, end) in row-major order,
 * little-endian (the host order of every platform we build on). */
#include "tapegrad/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "io/json.h"

#define ST_MAX_HEADER (100u * 1000u * 1000u)   /* 100 MB */
#define ST_META_KEY "__metadata__"

/* ---- the container ---------------------------------------------------------- */

typedef struct st_entry {
    char *name;          /* owned */
    tg_tensor *t;        /* owned reference */
    char *value;         /* metadata entries: owned value; tensors: NULL */
    UT_hash_handle hh;
} st_entry;

/* An insertion-ordered array of separately allocated entries (so the uthash
 * handles never move) plus a uthash index by name. */
typedef struct st_list {
    st_entry **items;
    int n;
    int cap;
    st_entry *index;
} st_list;

struct tg_st_file {
    st_list tensors;
    st_list meta;
    st_list skipped;   /* entries of a dtype tapegrad has no tensors of: name, dtype */
};

static void list_clear(st_list *l)
{
    HASH_CLEAR(hh, l->index);
    for (int i = 0; i < l->n; i++) {
        tg_tensor_release(l->items[i]->t);
        free(l->items[i]->name);
        free(l->items[i]->value);
        free(l->items[i]);
    }
    free(l->items);
}

static st_entry *list_find(const st_list *l, const char *name)
{
    st_entry *e = NULL;
    HASH_FIND(hh, l->index, name, strlen(name), e);
    return e;
}

/* Appends a new entry called name (copied) and returns it in *out.  On
 * TG_ENOMEM the list holds what it held (its array may have grown). */
static int list_add(st_list *l, const char *name, st_entry **out)
{
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 8;
        st_entry **q = realloc(l->items, (size_t)nc * sizeof *q);
        if (!q) return tg__error(TG_ENOMEM, "safetensors: out of memory");
        l->items = q;
        l->cap = nc;
    }
    st_entry *e = tg__calloc(1, sizeof *e);
    char *nm = e ? strdup(name) : NULL;
    if (!nm) {
        free(e);
        return tg__error(TG_ENOMEM, "safetensors: out of memory");
    }
    e->name = nm;
    HASH_ADD_KEYPTR(hh, l->index, e->name, strlen(e->name), e);
    if (TG_HASH_ADD_FAILED(e)) {
        free(nm);
        free(e);
        return tg__error(TG_ENOMEM, "safetensors: out of memory indexing the name \"%.64s\"",
                         name);
    }
    l->items[l->n++] = e;
    *out = e;
    return 0;
}

int tg_st_new(tg_st_file **out)
{
    TG_CHECK(out, TG_EINVAL, "st_new: out must not be NULL");
    tg_st_file *f = tg__calloc(1, sizeof *f);
    if (!f) return TG_ENOMEM;
    *out = f;
    return 0;
}

void tg_st_free(tg_st_file *f)
{
    if (!f) return;
    list_clear(&f->tensors);
    list_clear(&f->meta);
    list_clear(&f->skipped);
    free(f);
}

static int check_text(const char *fn, const char *arg, const char *s)
{
    TG_CHECK(s, TG_EINVAL, "%s: %s must not be NULL", fn, arg);
    TG_CHECK(tg__json_valid_utf8(s, strlen(s)), TG_EINVAL, "%s: %s must be valid UTF-8", fn, arg);
    return 0;
}

int tg_st_set(tg_st_file *f, const char *name, tg_tensor *t)
{
    TG_CHECK(f && t, TG_EINVAL, "st_set: f and t must not be NULL");
    TG_TRY(check_text("st_set", "name", name));
    TG_CHECK(strcmp(name, ST_META_KEY) != 0, TG_EINVAL,
             "st_set: name \"" ST_META_KEY "\" is reserved for metadata");
    st_entry *e = list_find(&f->tensors, name);
    if (!e) TG_TRY(list_add(&f->tensors, name, &e));
    tg_tensor_retain(t);
    tg_tensor_release(e->t);
    e->t = t;
    return 0;
}

tg_tensor *tg_st_get(const tg_st_file *f, const char *name)
{
    if (!f || !name) return NULL;
    st_entry *e = list_find(&f->tensors, name);
    return e ? e->t : NULL;
}

int tg_st_count(const tg_st_file *f) { return f ? f->tensors.n : 0; }

int tg_st_at(const tg_st_file *f, int i, const char **name, tg_tensor **t)
{
    TG_CHECK(f, TG_EINVAL, "st_at: f must not be NULL");
    TG_CHECK(i >= 0 && i < f->tensors.n, TG_EINVAL, "st_at: i=%d must be in [0, %d)", i,
             f->tensors.n);
    if (name) *name = f->tensors.items[i]->name;
    if (t) *t = f->tensors.items[i]->t;
    return 0;
}

int tg_st_meta_set(tg_st_file *f, const char *key, const char *value)
{
    TG_CHECK(f, TG_EINVAL, "st_meta_set: f must not be NULL");
    TG_TRY(check_text("st_meta_set", "key", key));
    TG_TRY(check_text("st_meta_set", "value", value));
    char *v = strdup(value);
    if (!v) return tg__error(TG_ENOMEM, "st_meta_set: out of memory");
    st_entry *e = list_find(&f->meta, key);
    if (!e) {
        int rc = list_add(&f->meta, key, &e);
        if (rc < 0) {
            free(v);
            return rc;
        }
    }
    free(e->value);
    e->value = v;
    return 0;
}

const char *tg_st_meta_get(const tg_st_file *f, const char *key)
{
    if (!f || !key) return NULL;
    st_entry *e = list_find(&f->meta, key);
    return e ? e->value : NULL;
}

int tg_st_meta_count(const tg_st_file *f) { return f ? f->meta.n : 0; }

int tg_st_meta_at(const tg_st_file *f, int i, const char **key, const char **value)
{
    TG_CHECK(f, TG_EINVAL, "st_meta_at: f must not be NULL");
    TG_CHECK(i >= 0 && i < f->meta.n, TG_EINVAL, "st_meta_at: i=%d must be in [0, %d)", i,
             f->meta.n);
    if (key) *key = f->meta.items[i]->name;
    if (value) *value = f->meta.items[i]->value;
    return 0;
}

int tg_st_skipped_count(const tg_st_file *f) { return f ? f->skipped.n : 0; }

int tg_st_skipped_at(const tg_st_file *f, int i, const char **name, const char **dtype)
{
    TG_CHECK(f, TG_EINVAL, "st_skipped_at: f must not be NULL");
    TG_CHECK(i >= 0 && i < f->skipped.n, TG_EINVAL, "st_skipped_at: i=%d must be in [0, %d)",
             i, f->skipped.n);
    if (name) *name = f->skipped.items[i]->name;
    if (dtype) *dtype = f->skipped.items[i]->value;
    return 0;
}

const char *tg_st_skipped_dtype(const tg_st_file *f, const char *name)
{
    if (!f || !name) return NULL;
    st_entry *e = list_find(&f->skipped, name);
    return e ? e->value : NULL;
}

/* ---- parsing ------------------------------------------------------------------ */

/* One tensor's header entry, validated against the data buffer. */
typedef struct st_info {
    const char *name;    /* borrowed from the JSON tree */
    tg_dtype dtype;
    const char *other;   /* a format dtype tapegrad does not load, or NULL */
    int other_size;      /* its element size */
    int ndim;
    int64_t shape[TG_MAX_DIMS];
    uint64_t begin, end;
} st_info;

#define FERR(at, ...) st_format_error((at), __VA_ARGS__)

__attribute__((format(printf, 2, 3)))
static int st_format_error(size_t at, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tg__error(TG_EFORMAT, "safetensors: %s at header byte %zu", msg, at);
}

static int dtype_from_st_name(const char *s, tg_dtype *out)
{
    for (int d = 0; d < TG_DTYPE_COUNT; d++) {
        const tg_dtype_traits *tr = tg_dtype_get_traits((tg_dtype)d);
        if (tr && strcmp(tr->st_name, s) == 0) {
            *out = (tg_dtype)d;
            return 0;
        }
    }
    return -1;
}

/* The format's dtypes that tapegrad has no tensors of, with their element
 * sizes: a file holding them is valid, and their entries are skipped. */
static const struct {
    const char *name;
    int size;
} other_dtypes[] = {{"BOOL", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2},
                    {"U32", 4}, {"U64", 8}};

static int read_dtype(const tg__json *v, const char *name, st_info *info)
{
    if (!v) return FERR(0, "tensor \"%.64s\": missing \"dtype\"", name);
    if (v->type != TG__JSON_STRING)
        return FERR(v->offset, "tensor \"%.64s\": dtype must be a string", name);
    if (dtype_from_st_name(v->u.str.s, &info->dtype) == 0) return 0;
    for (size_t i = 0; i < sizeof other_dtypes / sizeof other_dtypes[0]; i++)
        if (strcmp(v->u.str.s, other_dtypes[i].name) == 0) {
            info->other = other_dtypes[i].name;
            info->other_size = other_dtypes[i].size;
            return 0;
        }
    return FERR(v->offset, "tensor \"%.64s\": dtype \"%.32s\" is not a safetensors dtype "
                "(F64 F32 F16 BF16 I8 U8 I32 I64 load; BOOL F8_E5M2 F8_E4M3 I16 U16 U32 U64 "
                "are skipped)", name, v->u.str.s);
}

static int read_shape(const tg__json *v, const char *name, st_info *info)
{
    if (!v) return FERR(0, "tensor \"%.64s\": missing \"shape\"", name);
    if (v->type != TG__JSON_ARRAY)
        return FERR(v->offset, "tensor \"%.64s\": shape must be an array", name);
    if (v->u.arr.n > TG_MAX_DIMS)
        return FERR(v->offset, "tensor \"%.64s\": rank %zu exceeds %d", name, v->u.arr.n,
                    TG_MAX_DIMS);
    info->ndim = (int)v->u.arr.n;
    for (int d = 0; d < info->ndim; d++) {
        const tg__json *x = v->u.arr.items[d];
        if (x->type != TG__JSON_INT || x->u.i < 0)
            return FERR(x->offset, "tensor \"%.64s\": shape[%d] must be a non-negative integer",
                        name, d);
        info->shape[d] = x->u.i;
    }
    /* Tensor extents must have int64 strides, zero extents counted as 1:
     * (2^40, 0, 2^40) is empty but cannot be a tensor. */
    if (!tg__shape_bytes_fit(info->ndim, info->shape, 8)) {
        char buf[160];
        return FERR(v->offset, "tensor \"%.64s\": shape %s is too large (its extents, zeros "
                    "counted as 1, overflow int64)", name,
                    tg_shape_str(buf, sizeof buf, info->ndim, info->shape));
    }
    return 0;
}

static int read_offsets(const tg__json *v, const char *name, uint64_t dlen, st_info *info)
{
    if (!v) return FERR(0, "tensor \"%.64s\": missing \"data_offsets\"", name);
    if (v->type != TG__JSON_ARRAY || v->u.arr.n != 2 || v->u.arr.items[0]->type != TG__JSON_INT ||
        v->u.arr.items[1]->type != TG__JSON_INT)
        return FERR(v->offset, "tensor \"%.64s\": data_offsets must be [begin, end] integers",
                    name);
    int64_t b = v->u.arr.items[0]->u.i, e = v->u.arr.items[1]->u.i;
    if (b < 0 || b > e || (uint64_t)e > dlen)
        return FERR(v->offset, "tensor \"%.64s\": data_offsets [%lld, %lld] must satisfy "
                    "0 <= begin <= end <= data size %llu%s", name, (long long)b, (long long)e,
                    (unsigned long long)dlen,
                    b >= 0 && b <= e && (uint64_t)e > dlen ? " (a truncated file?)" : "");
    info->begin = (uint64_t)b;
    info->end = (uint64_t)e;
    return 0;
}

/* Bytes the shape needs (read_shape has checked that they fit in an int64). */
static uint64_t shape_nbytes(const st_info *info)
{
    uint64_t n = info->other ? (uint64_t)info->other_size : tg_dtype_size(info->dtype);
    for (int d = 0; d < info->ndim; d++) n *= (uint64_t)info->shape[d];
    return n;
}

static int read_info(const tg__json_member *m, uint64_t dlen, st_info *info)
{
    const tg__json *v = m->value;
    info->name = m->key;
    if (v->type != TG__JSON_OBJECT)
        return FERR(v->offset, "tensor \"%.64s\": entry must be an object", m->key);
    TG_TRY(read_dtype(tg__json_get(v, "dtype"), m->key, info));
    TG_TRY(read_shape(tg__json_get(v, "shape"), m->key, info));
    TG_TRY(read_offsets(tg__json_get(v, "data_offsets"), m->key, dlen, info));
    const uint64_t need = shape_nbytes(info);
    if (need != info->end - info->begin)
        return FERR(v->offset, "tensor \"%.64s\": data_offsets span %llu bytes but the "
                    "shape and dtype need %llu", m->key,
                    (unsigned long long)(info->end - info->begin), (unsigned long long)need);
    return 0;
}

static int read_meta(const tg__json *v, tg_st_file *f)
{
    if (v->type != TG__JSON_OBJECT) return FERR(v->offset, ST_META_KEY " must be an object");
    for (size_t i = 0; i < v->u.obj.n; i++) {
        const tg__json_member *m = v->u.obj.members[i];
        if (m->value->type != TG__JSON_STRING)
            return FERR(m->value->offset, ST_META_KEY " value of \"%.64s\" must be a string, "
                        "not %s", m->key, tg__json_type_name(m->value->type));
        TG_TRY(tg_st_meta_set(f, m->key, m->value->u.str.s));
    }
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const st_info *x = *(const st_info *const *)a, *y = *(const st_info *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Sorted by begin, non-empty ranges may not start before the furthest end
 * seen so far.  Empty ranges occupy no bytes and overlap nothing. */
static int check_overlaps(st_info *infos, size_t n)
{
    st_info **order = tg__malloc(n * sizeof *order);
    if (!order) return TG_ENOMEM;
    for (size_t i = 0; i < n; i++) order[i] = &infos[i];
    qsort(order, n, sizeof *order, cmp_begin);
    int rc = 0;
    const st_info *last = NULL;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (order[i]->begin == order[i]->end) continue;
        if (last && order[i]->begin < last->end)
            rc = FERR(0, "tensors \"%.64s\" and \"%.64s\" overlap in the data buffer",
                      last->name, order[i]->name);
        if (!last || order[i]->end > last->end) last = order[i];
    }
    free(order);
    return rc;
}

static int add_tensors(tg_st_file *f, const st_info *infos, size_t n, const unsigned char *data)
{
    for (size_t i = 0; i < n; i++) {
        if (infos[i].other) {
            st_entry *e = NULL;
            TG_TRY(list_add(&f->skipped, infos[i].name, &e));
            if (!(e->value = strdup(infos[i].other))) return TG_ENOMEM;
            continue;
        }
        tg_tensor *t = NULL;
        TG_TRY(tg_tensor_from_data(&t, infos[i].dtype, infos[i].ndim, infos[i].shape,
                                   data + infos[i].begin));
        int rc = tg_st_set(f, infos[i].name, t);
        tg_tensor_release(t);
        TG_TRY(rc);
    }
    return 0;
}

/* Fills f from the parsed header root. */
static int build(tg_st_file *f, const tg__json *root, const unsigned char *data, uint64_t dlen)
{
    if (root->type != TG__JSON_OBJECT)
        return FERR(root->offset, "header must be a JSON object, not %s",
                    tg__json_type_name(root->type));
    size_t n = 0;
    st_info *infos = tg__calloc(root->u.obj.n, sizeof *infos);
    if (!infos) return TG_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < root->u.obj.n && rc == 0; i++) {
        const tg__json_member *m = root->u.obj.members[i];
        if (strcmp(m->key, ST_META_KEY) == 0) rc = read_meta(m->value, f);
        else rc = read_info(m, dlen, &infos[n++]);
    }
    if (rc == 0) rc = check_overlaps(infos, n);
    if (rc == 0) rc = add_tensors(f, infos, n, data);
    free(infos);
    return rc;
}

int tg_safetensors_parse(tg_st_file **out, const void *buf, size_t len)
{
    TG_CHECK(out, TG_EINVAL, "safetensors_parse: out must not be NULL");
    TG_CHECK(buf || len == 0, TG_EINVAL, "safetensors_parse: buf must not be NULL");
    const unsigned char *b = buf;
    if (len < 8)
        return tg__error(TG_EFORMAT, "safetensors: file is %zu bytes, too short for the 8-byte "
                         "header size", len);
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = hn << 8 | b[i];   /* little-endian u64 */
    if (hn < 2 || hn > ST_MAX_HEADER || hn > len - 8)
        return tg__error(TG_EFORMAT, "safetensors: header size %llu must be in [2, %u] and fit "
                         "in the %zu bytes after the size field", (unsigned long long)hn,
                         ST_MAX_HEADER, len - 8);
    tg__json *root = NULL;
    TG_TRY(tg__json_parse(&root, (const char *)b + 8, (size_t)hn, "safetensors: header JSON"));
    tg_st_file *f = NULL;
    int rc = tg_st_new(&f);
    if (rc == 0) rc = build(f, root, b + 8 + hn, len - 8 - hn);
    tg__json_free(root);
    if (rc < 0) {
        tg_st_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

int tg_safetensors_load(tg_st_file **out, const char *path)
{
    TG_CHECK(out && path, TG_EINVAL, "safetensors_load: out and path must not be NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg__error(TG_EIO, "safetensors: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return tg__error(TG_EIO, "safetensors: cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tg__error(TG_EIO, "safetensors: '%s' is not a regular file", path);
    }
    size_t len = (size_t)st.st_size;
    void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    int e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return tg__error(TG_EIO, "safetensors: cannot map '%s': %s", path, strerror(e));
    int rc = tg_safetensors_parse(out, map ? map : "", len);
    if (map) munmap(map, len);
    if (rc < 0) {   /* the parser's message, with the file it was about */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tg_error_message());
        tg__error(rc, "%s (file '%s', %llu bytes)", msg, path, (unsigned long long)len);
    }
    return rc;
}
