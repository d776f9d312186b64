/* src/data/idx.c - tg_idx_load: the IDX format of MNIST-style datasets.
 *
 * Layout: bytes 0-1 are zero, byte 2 names the element type, byte 3 is ndim,
 * then ndim big-endian u32 extents and prod(extents) big-endian elements.
 * A file may be plain or gzip-compressed (the datasets ship as .gz). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/core.h"
#include "tapegrad/data.h"

typedef struct idx_type {
    uint8_t code;
    int file_size;      /* bytes per element in the file */
    tg_dtype dtype;     /* what it becomes */
} idx_type;

static const idx_type idx_types[] = {
    {0x08, 1, TG_U8}, {0x09, 1, TG_I8}, {0x0B, 2, TG_I32},
    {0x0C, 4, TG_I32}, {0x0D, 4, TG_F32}, {0x0E, 8, TG_F64},
};

static const idx_type *find_type(uint8_t code)
{
    for (size_t i = 0; i < sizeof idx_types / sizeof idx_types[0]; i++)
        if (idx_types[i].code == code) return &idx_types[i];
    return NULL;
}

/* The file's bytes, inflated when it is gzip (RFC 1952, members one after
 * another as gzip writes them) and passed through when it is not.  zlib's
 * gzread is not used: when the input runs out exactly at the end of the
 * compressed data it reports a clean end of file, so a stream cut inside its
 * 8-byte trailer (CRC-32 and length) passed for whole and its CRC was never
 * checked.  Here every member must reach inflate's Z_STREAM_END, which
 * verifies both. */
typedef struct idx_reader {
    FILE *f;
    const char *path;
    bool gz;                /* a gzip file (else plain bytes) */
    bool member_done;       /* inflate reached the end of the current member */
    z_stream z;
    unsigned char in[1 << 16];
} idx_reader;

static int reader_io_error(const idx_reader *r)
{
    return tg__error(TG_EIO, "idx_load: reading '%s': %s", r->path, strerror(errno));
}

/* Refills r->z's input; returns the bytes now available (0 at end of file). */
static int refill(idx_reader *r, size_t *avail)
{
    if (r->z.avail_in == 0) {
        errno = 0;
        size_t got = fread(r->in, 1, sizeof r->in, r->f);
        if (got == 0 && ferror(r->f)) return reader_io_error(r);
        r->z.next_in = r->in;
        r->z.avail_in = (uInt)got;
    }
    *avail = r->z.avail_in;
    return 0;
}

/* After a member's end: 1 if another gzip member follows (inflate is reset
 * for it), 0 at the end of the file, an error for other trailing bytes. */
static int next_member(idx_reader *r)
{
    size_t avail = 0;
    TG_TRY(refill(r, &avail));
    if (avail == 0) return 0;
    if (r->z.next_in[0] != 0x1f)
        return tg__error(TG_EFORMAT, "idx_load: '%s': trailing bytes after the gzip stream",
                         r->path);
    if (inflateReset(&r->z) != Z_OK)
        return tg__error(TG_EFORMAT, "idx_load: '%s': corrupt gzip stream", r->path);
    r->member_done = false;
    return 1;
}

/* Inflates up to n bytes into dst; *got is how many came (fewer only at the
 * end of the last member). */
static int inflate_some(idx_reader *r, unsigned char *dst, size_t n, size_t *got)
{
    r->z.next_out = dst;
    r->z.avail_out = (uInt)n;
    while (r->z.avail_out > 0) {
        if (r->member_done) {
            int more = next_member(r);
            if (more <= 0) {
                *got = n - r->z.avail_out;
                return more;
            }
        }
        size_t avail = 0;
        TG_TRY(refill(r, &avail));
        if (avail == 0)
            return tg__error(TG_EFORMAT, "idx_load: '%s': truncated gzip stream (the file ends "
                             "inside the compressed data or its trailer)", r->path);
        int ret = inflate(&r->z, Z_NO_FLUSH);
        if (ret == Z_STREAM_END) {
            r->member_done = true;
        } else if (ret == Z_MEM_ERROR) {
            return tg__error(TG_ENOMEM, "idx_load: '%s': out of memory", r->path);
        } else if (ret != Z_OK && !(ret == Z_BUF_ERROR && r->z.avail_in == 0)) {
            return tg__error(TG_EFORMAT, "idx_load: '%s': corrupt gzip stream (%s)", r->path,
                             r->z.msg ? r->z.msg : "inflate failed");
        }
    }
    *got = n;
    return 0;
}

/* Reads up to n bytes; *got < n only at the end of the data. */
static int read_some(idx_reader *r, void *dst, size_t n, size_t *got)
{
    if (r->gz) {
        unsigned char *p = dst;
        size_t total = 0;
        while (total < n) {   /* avail_out is 32 bits */
            size_t chunk = n - total > (1u << 30) ? (1u << 30) : n - total, part = 0;
            TG_TRY(inflate_some(r, p + total, chunk, &part));
            total += part;
            if (part < chunk) break;
        }
        *got = total;
        return 0;
    }
    /* plain bytes: first those the gzip sniffing read, then the file's */
    size_t have = r->z.avail_in < n ? r->z.avail_in : n;
    memcpy(dst, r->z.next_in, have);
    r->z.next_in += have;
    r->z.avail_in -= (uInt)have;
    errno = 0;
    *got = have + (have < n ? fread((unsigned char *)dst + have, 1, n - have, r->f) : 0);
    if (*got < n && ferror(r->f)) return reader_io_error(r);
    return 0;
}

/* Reads exactly n bytes; a short read is an error describing `what` was cut
 * off. */
static int read_exact(idx_reader *r, void *dst, size_t n, const char *what)
{
    size_t got = 0;
    TG_TRY(read_some(r, dst, n, &got));
    if (got < n) return tg__error(TG_EFORMAT, "idx_load: '%s': truncated %s", r->path, what);
    return 0;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Parses the header into *type, ndim and shape. */
static int read_header(idx_reader *r, const idx_type **type, int *ndim, int64_t *shape,
                       size_t *nbytes)
{
    const char *path = r->path;
    unsigned char h[4], d[4 * TG_MAX_DIMS];
    TG_TRY(read_exact(r, h, 4, "header"));
    TG_CHECK(h[0] == 0 && h[1] == 0, TG_EFORMAT,
             "idx_load: '%s': bad magic %02x%02x (must be 0000)", path, h[0], h[1]);
    *type = find_type(h[2]);
    TG_CHECK(*type != NULL, TG_EFORMAT, "idx_load: '%s': unknown type byte 0x%02x", path, h[2]);
    TG_CHECK(h[3] >= 1 && h[3] <= TG_MAX_DIMS, TG_EFORMAT,
             "idx_load: '%s': ndim=%d must be in 1..%d", path, h[3], TG_MAX_DIMS);
    *ndim = h[3];
    TG_TRY(read_exact(r, d, 4 * (size_t)*ndim, "dimensions"));
    for (int i = 0; i < *ndim; i++) shape[i] = be32(d + 4 * i);
    /* The tensor's own rule (its bytes and strides fit in an int64); the
     * file's bytes, file_size <= the tensor's element size each, fit then. */
    if (!tg__shape_bytes_fit(*ndim, shape, (int64_t)tg_dtype_size((*type)->dtype))) {
        char buf[160];
        return tg__error(TG_EFORMAT, "idx_load: '%s': dimensions %s overflow", path,
                         tg_shape_str(buf, sizeof buf, *ndim, shape));
    }
    *nbytes = (size_t)tg__numel(*ndim, shape) * (size_t)(*type)->file_size;
    return 0;
}

/* Reads the nbytes of data into a malloc'd buffer grown as bytes arrive, so a
 * header that claims terabytes fails as truncated instead of allocating them. */
static int read_data(idx_reader *r, size_t nbytes, unsigned char **buf)
{
    size_t cap = nbytes < (1u << 20) ? nbytes : (1u << 20), have = 0;
    unsigned char *b = tg__malloc(cap ? cap : 1);
    if (!b) return TG_ENOMEM;
    while (have < nbytes) {
        if (have == cap) {
            size_t ncap = cap > nbytes / 2 ? nbytes : cap * 2;
            unsigned char *nb = realloc(b, ncap);
            if (!nb) {
                free(b);
                return tg__error(TG_ENOMEM, "idx_load: '%s': out of memory", r->path);
            }
            b = nb;
            cap = ncap;
        }
        int rc = read_exact(r, b + have, cap - have, "data (fewer bytes than the dimensions say)");
        if (rc < 0) {
            free(b);
            return rc;
        }
        have = cap;
    }
    *buf = b;
    return 0;
}

/* Converts big-endian file elements to the tensor's native elements. */
static void decode(const idx_type *ty, const unsigned char *src, void *dst, int64_t n)
{
    if (ty->file_size == 1) {
        memcpy(dst, src, (size_t)n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *s = src + i * ty->file_size;
        if (ty->code == 0x0B) {
            ((int32_t *)dst)[i] = (int16_t)((uint16_t)s[0] << 8 | s[1]);
        } else if (ty->file_size == 4) {
            uint32_t u = be32(s);
            memcpy((char *)dst + 4 * i, &u, 4);
        } else {
            uint64_t u = (uint64_t)be32(s) << 32 | be32(s + 4);
            memcpy((char *)dst + 8 * i, &u, 8);
        }
    }
}

static int load_open(tg_tensor **out, idx_reader *r)
{
    const idx_type *ty = NULL;
    int ndim = 0;
    int64_t shape[TG_MAX_DIMS];
    size_t nbytes = 0, extra = 0;
    unsigned char *buf = NULL, byte;
    TG_TRY(read_header(r, &ty, &ndim, shape, &nbytes));
    TG_TRY(read_data(r, nbytes, &buf));
    /* The data must end exactly here, and a gzip stream with it (reading on
     * inflates up to the end of the last member, checking its CRC). */
    int rc = read_some(r, &byte, 1, &extra);
    if (rc == 0 && extra)
        rc = tg__error(TG_EFORMAT, "idx_load: '%s': trailing bytes after the data", r->path);
    tg_tensor *t = NULL;
    if (rc == 0 && !(t = tg__tensor_empty(ty->dtype, ndim, shape))) rc = TG_ENOMEM;
    if (rc == 0) decode(ty, buf, tg_tensor_data(t), (int64_t)(nbytes / (size_t)ty->file_size));
    free(buf);
    if (rc == 0) *out = t;
    return rc;
}

int tg_idx_load(tg_tensor **out, const char *path)
{
    TG_CHECK(out != NULL, TG_EINVAL, "idx_load: out must not be NULL");
    TG_CHECK(path != NULL, TG_EINVAL, "idx_load: path must not be NULL");
    idx_reader *r = calloc(1, sizeof *r);
    if (!r) return tg__error(TG_ENOMEM, "idx_load: out of memory");
    r->path = path;
    errno = 0;
    r->f = fopen(path, "rb");
    if (!r->f) {
        int rc = tg__error(errno == ENOMEM ? TG_ENOMEM : TG_EIO, "idx_load: cannot open '%s': %s",
                           path, errno ? strerror(errno) : "fopen failed");
        free(r);
        return rc;
    }
    /* gzip's magic 1f 8b; inflate with a gzip wrapper (16 + window bits). */
    size_t avail = 0;
    int rc = refill(r, &avail);
    r->gz = rc == 0 && avail >= 2 && r->in[0] == 0x1f && r->in[1] == 0x8b;
    if (rc == 0 && r->gz && inflateInit2(&r->z, 16 + MAX_WBITS) != Z_OK)
        rc = tg__error(TG_ENOMEM, "idx_load: '%s': cannot start zlib", path);
    if (rc == 0) rc = load_open(out, r);
    if (r->gz) inflateEnd(&r->z);
    fclose(r->f);
    free(r);
    return rc;
}
