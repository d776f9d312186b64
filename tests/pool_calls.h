/* tests/pool_calls.h - one call of tg_avg_pool, tg_max_pool,
 * tg_upsample_nearest, tg_upsample_linear, tg_upsample_bicubic or
 * tg_upsample_antialias (bilinear AAL, bicubic AAC) as data,
 * for the pool test files (test_pool.c, test_pool_invariants.c). */
#ifndef TG_TESTS_POOL_CALLS_H
#define TG_TESTS_POOL_CALLS_H

#include "tapegrad/tapegrad.h"

typedef enum kind { AVG, MAX, UP, LIN, CUB, AAL, AAC } kind;

/* One call of an op: which, over how many spatial dims, with what. */
typedef struct call {
    kind k;
    int ns;
    tg_pool_params p;
    int64_t scale[3];
    int64_t size[3];   /* LIN, CUB, AAL, AAC: the output extents */
    bool align;        /* LIN, CUB, AAL, AAC: align_corners */
} call;

static inline int run(const call *c, tg_tensor **y, tg_tensor *x)
{
    switch (c->k) {
    case AVG: return tg_avg_pool(y, x, c->ns, &c->p);
    case MAX: return tg_max_pool(y, x, c->ns, &c->p);
    case UP: return tg_upsample_nearest(y, x, c->ns, c->scale);
    case LIN: return tg_upsample_linear(y, x, c->ns, c->size, c->align);
    case CUB: return tg_upsample_bicubic(y, x, c->size, c->align);
    case AAL: return tg_upsample_antialias(y, x, TG_UPSAMPLE_LINEAR, c->size, c->align);
    case AAC: return tg_upsample_antialias(y, x, TG_UPSAMPLE_BICUBIC, c->size, c->align);
    }
    return TG_EINVAL;
}

#endif
