/* src/ops/affine_grid.c - F.affine_grid(theta, size, align_corners) of
 * torch 1.13 (its affine_grid_generator), composed of recorded ops.
 *
 * For size (N, C, H, W) the base grid B is (H*W, 3) with row h*W + w =
 * (x_w, y_h, 1); for (N, C, D, H, W) it is (D*H*W, 4) with rows
 * (x_w, y_h, z_d, 1).  Along an axis of extent S the positions are torch's
 *   linspace(-1, 1, S):  i < S/2: -1 + step*i,  else 1 - step*(S-1-i),
 *                        step = 2/(S-1)
 * times (S-1)/S without align_corners (the pixel centres), and 0 for S = 1,
 * each step rounded to theta's dtype.  The grid is B theta^T, (N, points,
 * ns), viewed as (N, D.., H, W, ns): one tg_matmul, so its gradient in theta
 * is B^T g summed as matmul's, to any order. */
#include <string.h>

#include "core/core.h"
#include "tapegrad/ops.h"
#include "tapegrad/pool.h"

/* Position i of S along an axis, as torch computes it in dtype dt. */
static double base_pos(tg_dtype dt, int64_t i, int64_t S, bool align)
{
    if (S <= 1) return 0;
    const double step = tg__round_to(dt, 2.0 / (double)(S - 1));
    double v = i < S / 2 ? tg__round_to(dt, -1 + tg__round_to(dt, step * (double)i))
                         : tg__round_to(dt, 1 - tg__round_to(dt, step * (double)(S - 1 - i)));
    if (!align) {
        v = tg__round_to(dt, v * (double)(S - 1));
        v = tg__round_to(dt, v / (double)S);
    }
    return v;
}

/* The (points, ns + 1) base grid of spatial extents sp[0..ns) (outermost
 * first) in dtype dt; NULL with TG_ENOMEM set. */
static tg_tensor *base_grid(tg_dtype dt, int ns, const int64_t *sp, bool align)
{
    int64_t P = 1;
    for (int a = 0; a < ns; a++) P *= sp[a];
    const int64_t shape[2] = {P, ns + 1};
    tg_tensor *b = tg__tensor_uninit(dt, 2, shape);
    if (!b) return NULL;
    void *d = tg_tensor_data(b);
    for (int64_t p = 0; p < P; p++) {
        int64_t rest = p;
        for (int a = ns - 1; a >= 0; a--) {   /* column ns-1-a holds axis a */
            const int64_t i = rest % sp[a];
            rest /= sp[a];
            tg_dtype_store(dt, d, p * (ns + 1) + (ns - 1 - a), base_pos(dt, i, sp[a], align));
        }
        tg_dtype_store(dt, d, p * (ns + 1) + ns, 1);
    }
    return b;
}

static int affine_grid(tg_tensor **out, tg_tensor *theta, int n, const int64_t *size,
                       bool align_corners)
{
    const int ns = n - 2;
    tg_tensor *b = base_grid(theta->dtype, ns, size + 2, align_corners), *tt = NULL, *g = NULL;
    if (!b) return TG_ENOMEM;
    int rc = TG_OK;
    TG_TRY_GOTO(tg_transpose(&tt, theta, 1, 2));   /* (N, ns + 1, ns) */
    TG_TRY_GOTO(tg_matmul(&g, b, tt));              /* (N, points, ns) */
    int64_t shape[5];
    shape[0] = size[0];
    memcpy(shape + 1, size + 2, sizeof(int64_t) * (size_t)ns);
    shape[ns + 1] = ns;
    rc = tg_reshape(out, g, ns + 2, shape);
done:
    tg_tensor_release(b);
    tg_tensor_release(tt);
    tg_tensor_release(g);
    return rc;
}

/* The ops run on the library's behalf; only the result goes to the
 * caller's scope (tapegrad/scope.h). */
int tg_affine_grid(tg_tensor **out, tg_tensor *theta, int n, const int64_t *size,
                   bool align_corners)
{
    char s1[96], s2[96];
    TG_CHECK(out != NULL, TG_EINVAL, "affine_grid: out must not be NULL");
    TG_CHECK(theta != NULL, TG_EINVAL, "affine_grid: theta must not be NULL");
    TG_CHECK(size != NULL, TG_EINVAL, "affine_grid: size must not be NULL");
    TG_CHECK(n == 4 || n == 5, TG_EINVAL,
             "affine_grid: n=%d; affine_grid only supports 4D and 5D sizes, for 2D and 3D "
             "affine transforms, respectively", n);
    TG_CHECK(tg_dtype_is_float(theta->dtype), TG_EDTYPE,
             "affine_grid: expected theta to have floating point type, but got %s",
             tg_dtype_name(theta->dtype));
    tg_shape_str(s1, sizeof s1, n, size);
    tg_shape_str(s2, sizeof s2, theta->ndim, theta->shape);
    const int r = n == 4 ? 2 : 3;
    TG_CHECK(theta->ndim == 3 && theta->shape[1] == r && theta->shape[2] == r + 1, TG_ESHAPE,
             "affine_grid: expected a batch of %dD affine matrices of shape Nx%dx%d for size %s, "
             "got theta with sizes %s", r, r, r + 1, s1, s2);
    for (int i = 0; i < n; i++)
        TG_CHECK(size[i] > 0, TG_ESHAPE,
                 "affine_grid: expected non-zero, positive output size, got size %s", s1);
    TG_CHECK(theta->shape[0] == size[0], TG_ESHAPE,
             "affine_grid: theta has sizes %s; for size %s it must hold N=%lld matrices", s2, s1,
             (long long)size[0]);
    TG_CHECK(tg__shape_bytes_fit(n, size, (int64_t)tg_dtype_size(theta->dtype)), TG_EINVAL,
             "affine_grid: size %s is too large", s1);
    tg__lib_enter();
    int rc = affine_grid(out, theta, n, size, align_corners);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}
