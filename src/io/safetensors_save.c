/* src/io/safetensors_save.c - tg_safetensors_save: header JSON, data buffer,
 * and an atomic replace of the destination (src/io/atomic.c: temporary file,
 * fsync, rename). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "io/atomic.h"
#include "io/json.h"
#include "tapegrad/safetensors.h"

static uint64_t tensor_nbytes(const tg_tensor *t)
{
    return (uint64_t)tg_tensor_numel(t) * tg_dtype_size(tg_tensor_dtype(t));
}

/* The JSON header, __metadata__ first, then tensors in insertion order with
 * contiguous data_offsets, padded with spaces so that its length (and so the
 * data buffer's start, 8 + N) is a multiple of 8. */
static int build_header(const tg_st_file *f, tg__buf *b)
{
    const char *key, *val;
    tg_tensor *t;
    TG_TRY(tg__buf_append(b, "{", 1));
    if (tg_st_meta_count(f) > 0) {
        TG_TRY(tg__buf_printf(b, "\"__metadata__\":{"));
        for (int i = 0; i < tg_st_meta_count(f); i++) {
            tg_st_meta_at(f, i, &key, &val);
            if (i) TG_TRY(tg__buf_append(b, ",", 1));
            TG_TRY(tg__json_write_string(b, key));
            TG_TRY(tg__buf_append(b, ":", 1));
            TG_TRY(tg__json_write_string(b, val));
        }
        TG_TRY(tg__buf_append(b, tg_st_count(f) ? "}," : "}", tg_st_count(f) ? 2 : 1));
    }
    uint64_t off = 0;
    for (int i = 0; i < tg_st_count(f); i++) {
        tg_st_at(f, i, &key, &t);
        if (i) TG_TRY(tg__buf_append(b, ",", 1));
        TG_TRY(tg__json_write_string(b, key));
        TG_TRY(tg__buf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[",
                              tg_dtype_get_traits(tg_tensor_dtype(t))->st_name));
        for (int d = 0; d < tg_tensor_ndim(t); d++)
            TG_TRY(tg__buf_printf(b, d ? ",%lld" : "%lld", (long long)tg_tensor_dim(t, d)));
        uint64_t n = tensor_nbytes(t);
        TG_TRY(tg__buf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                              (unsigned long long)(off + n)));
        off += n;
    }
    TG_TRY(tg__buf_append(b, "}", 1));
    while (b->len % 8) TG_TRY(tg__buf_append(b, " ", 1));
    return 0;
}

static int write_all(int fd, const void *p, size_t n, const char *path)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return tg__error(TG_EIO, "safetensors: writing '%s': %s", path, strerror(errno));
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes t's elements in row-major order; a non-contiguous view is gathered
 * into a temporary contiguous buffer first. */
static int write_tensor(int fd, const tg_tensor *t, const char *path)
{
    uint64_t n = tensor_nbytes(t);
    if (n == 0) return 0;
    if (tg_tensor_is_contiguous(t)) return write_all(fd, tg_tensor_cdata(t), n, path);
    void *tmp = tg__malloc(n);
    if (!tmp) return TG_ENOMEM;
    tg__gather(t, tg_tensor_dtype(t), tmp);
    int rc = write_all(fd, tmp, n, path);
    free(tmp);
    return rc;
}

static int write_file(int fd, const tg_st_file *f, const tg__buf *hdr, const char *path)
{
    unsigned char size[8];
    for (int i = 0; i < 8; i++) size[i] = (unsigned char)((uint64_t)hdr->len >> (8 * i));
    TG_TRY(write_all(fd, size, 8, path));
    TG_TRY(write_all(fd, hdr->data, hdr->len, path));
    for (int i = 0; i < tg_st_count(f); i++) {
        tg_tensor *t;
        tg_st_at(f, i, NULL, &t);
        TG_TRY(write_tensor(fd, t, path));
    }
    return 0;
}

int tg_safetensors_save(const tg_st_file *f, const char *path)
{
    TG_CHECK(f && path, TG_EINVAL, "safetensors_save: f and path must not be NULL");
    TG_CHECK(path[0], TG_EINVAL, "safetensors_save: path must not be empty");
    tg__buf hdr = {0};
    FILE *fp = NULL;
    char *tmp = NULL;
    int rc = build_header(f, &hdr);
    if (rc < 0) goto out_hdr;
    rc = tg__atomic_open(&fp, &tmp, "safetensors_save", path);
    if (rc < 0) goto out_hdr;
    rc = write_file(fileno(fp), f, &hdr, tmp);
    int frc = tg__atomic_finish(fp, &tmp, rc == 0, "safetensors_save", path);
    if (rc == 0) rc = frc;
out_hdr:
    tg__buf_free(&hdr);
    return rc;
}
