/* src/ops/pool_internal.h - what avg_pool.c, max_pool.c, upsample.c and the
 * pooling modules (src/nn/pool_modules.c) share: parameter checks, the
 * output shape and the geometry of a call. */
#ifndef TAPEGRAD_OPS_POOL_INTERNAL_H
#define TAPEGRAD_OPS_POOL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "tapegrad/pool.h"

typedef enum tg__pool_kind { TG__AVG_POOL, TG__MAX_POOL, TG__UPSAMPLE } tg__pool_kind;

/* "avg_pool2d", "max_pool1d", "upsample_nearest3d" ("avg_pool" ... when
 * n_spatial is not 1..3): the name messages give the call. */
const char *tg__pool_opname(tg__pool_kind kind, int n_spatial);

/* Checks n_spatial and p for a pooling of that kind (messages name op) and
 * writes into *r (may be NULL) p with its strides resolved (0: the kernel). */
int tg__pool_check_params(const char *op, tg__pool_kind kind, int n_spatial,
                          const tg_pool_params *p, tg_pool_params *r);
/* Checks scale[0..n_spatial) (each in [1, TG_POOL_MAX_PARAM]). */
int tg__upsample_check_scale(const char *op, int n_spatial, const int64_t *scale);

/* The parameters of a recorded call, copied into its node: n_spatial, the
 * resolved pooling parameters or scale factors, and x's shape (the
 * backward's result). */
typedef struct tg__pool_call {
    int ns;
    tg_pool_params p;                  /* pooling */
    int64_t scale[TG_POOL_MAX_SPATIAL];   /* upsampling */
    int ndim;
    int64_t shape[TG_MAX_DIMS];
} tg__pool_call;

/* Checks call c of that kind on an input of rank c->ndim and shape
 * c->shape (dtype: x's, for the message) and gives the output shape:
 * n_spatial and the parameters (a pooling's strides are resolved in c->p),
 * the input's rank (n_spatial + 1 or + 2), its extents (every dim but the
 * batch >= 1, a float dtype), each output extent >= 1 and the result's
 * size.  Messages name op. */
int tg__pool_prepare(const char *op, tg__pool_kind kind, tg_dtype dtype, tg__pool_call *c,
                     int64_t *out);
/* The call of a forward op of that kind on x: params' n_spatial and
 * parameters with x's rank and shape, checked by tg__pool_prepare (messages
 * name the op); os gets the output shape. */
int tg__pool_prepare_x(tg__pool_kind kind, const tg__pool_call *params, const tg_tensor *x,
                       tg__pool_call *c, int64_t *os);
/* The shape rule of the forward ops (upsample_nearest, avg_pool, max_pool):
 * x's dtype and the output shape of the call of that kind on x = in[0]. */
int tg__pool_forward_shape(tg__pool_kind kind, tg_tensor *const *in, const void *params,
                           tg_dtype *dtype, int *ndim, int64_t *shape);
/* Checks a backward op's input g (gradient of a call's output, or of its
 * gradient) against the shape `want` that call c gives or takes. */
int tg__pool_check_grad(const char *op, const tg_tensor *g, const tg__pool_call *c,
                        const int64_t *want);

/* A call's geometry with its N spatial axes placed last of three, the axes
 * before them of extent 1, kernel 1, stride 1, no padding, so that one loop
 * nest serves N = 1, 2, 3.  planes is the product of the dims before the
 * spatial ones (B*C, or C unbatched). */
typedef struct tg__pool_geom {
    int64_t planes;
    int64_t in[3], out[3];             /* spatial extents */
    int64_t k[3], s[3], p[3], dil[3];
    int64_t in_plane, out_plane;       /* elements of one plane */
} tg__pool_geom;

/* The geometry of call c of that kind whose output has shape out_shape.
 * An upsampling's k holds its scale factors (s 1, p 0, dil 1). */
void tg__pool_geom_of(tg__pool_kind kind, const tg__pool_call *c, const int64_t *out_shape,
                      tg__pool_geom *g);

#endif
