/* Refcounted, 64-byte aligned, zero-filled byte buffers shared by views. */
#include <string.h>

#include "internal.h"

#define TG__ALIGN 64u

tg_storage *tg__storage_new(size_t nbytes)
{
    /* aligned_alloc wants a size that is a multiple of the alignment; an
     * empty tensor still gets one line so data is never NULL. */
    if (nbytes > SIZE_MAX - TG__ALIGN) {
        tg__error(TG_ENOMEM, "storage: %zu bytes is too large", nbytes);
        return NULL;
    }
    size_t padded = nbytes == 0 ? TG__ALIGN : (nbytes + TG__ALIGN - 1) / TG__ALIGN * TG__ALIGN;
    tg_storage *s = tg__malloc(sizeof *s);
    if (!s) return NULL;
    s->data = aligned_alloc(TG__ALIGN, padded);
    if (!s->data) {
        free(s);
        tg__error(TG_ENOMEM, "storage: out of memory allocating %zu bytes", padded);
        return NULL;
    }
    memset(s->data, 0, padded);
    s->refcount = 1;
    s->nbytes = nbytes;
    s->version = 0;
    return s;
}

tg_storage *tg__storage_retain(tg_storage *s)
{
    if (s) {
        TG_ASSERT(s->refcount > 0);
        s->refcount++;
    }
    return s;
}

void tg__storage_release(tg_storage *s)
{
    if (!s) return;
    TG_ASSERT(s->refcount > 0);
    if (--s->refcount > 0) return;
    free(s->data);
    free(s);
}
