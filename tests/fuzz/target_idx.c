/* tests/fuzz/target_idx.c - the "idx" fuzz target. */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tapegrad/tapegrad.h"
#include "targets.h"

int tg_fuzz_idx(const uint8_t *data, size_t size)
{
    /* The bytes as a file without touching the disk: a memfd, opened by its
     * /proc name (tg_idx_load takes a path). */
    int fd = memfd_create("idx", 0);
    if (fd < 0)
        return tg_fuzz_broken("idx", "memfd_create failed");
    if (size > 0 && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return tg_fuzz_broken("idx", "writing the memfd failed");
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    tg_tensor *t = NULL;
    int rc = tg_idx_load(&t, path);
    close(fd);
    if (rc < 0)
        return t ? tg_fuzz_broken("idx", "a refused load set *out") : tg_fuzz_refused("idx", "tg_idx_load", rc);
    int bad = 0;
    /* A plain (not gzip) file: its header is the bytes themselves. */
    if (size >= 4 && data[0] == 0 && data[1] == 0) {
        const int ndim = data[3];
        int64_t numel = 1;
        for (int d = 0; d < ndim; d++) {
            const uint8_t *b = data + 4 + 4 * d;
            numel *= (int64_t)b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3];
        }
        if (tg_tensor_ndim(t) != ndim || tg_tensor_numel(t) != numel)
            bad = tg_fuzz_broken("idx", "header says %d dims, %lld elements; tensor has %d, %lld", ndim,
                         (long long)numel, tg_tensor_ndim(t), (long long)tg_tensor_numel(t));
    }
    tg_tensor_release(t);
    return bad;
}
