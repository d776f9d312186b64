/* tools/case_run.c - running a parsed conv case (see case.h): the float op
 * forward and backward on fresh leaves, or the quantized op. */
#include "case.h"

#include "tapegrad/autograd.h"
#include "tapegrad/status.h"

/* A fresh leaf sharing t's storage (so that requires_grad and .grad never
 * touch the file's tensor), or NULL for NULL. */
static int make_leaf(tg_tensor **out, tg_tensor *t, bool requires_grad)
{
    *out = NULL;
    if (!t)
        return TG_OK;
    int rc = tg_tensor_detach(out, t);
    if (rc >= 0 && requires_grad)
        rc = tg_tensor_set_requires_grad(*out, true);
    return rc;
}

static int lib_fail(char *err, size_t n, int rc, const char *op, const char *what)
{
    return tg_case_fail(err, n, rc, "%s: %s failed: %s (%s)", op, what, tg_error_message(),
                        tg_status_name(rc));
}

static int store(tg_st_file *res, const char *name, tg_tensor *t, const char *op, char *err,
                 size_t n)
{
    if (!t)
        return tg_case_fail(err, n, TG_EGRAD, "%s: backward produced no %s", op, name);
    tg_tensor *d = NULL;
    int rc = tg_tensor_detach(&d, t);
    if (rc >= 0)
        rc = tg_st_set(res, name, d);
    tg_tensor_release(d);
    return rc < 0 ? lib_fail(err, n, rc, op, "storing a result") : TG_OK;
}

static int check_grad_y(const tg_case *c, const tg_tensor *y, char *err, size_t n)
{
    if (tg_tensor_same_shape(y, c->grad_y))
        return TG_OK;
    char a[128], b[128];
    tg_shape_str(a, sizeof a, tg_tensor_ndim(c->grad_y), tg_tensor_shape(c->grad_y));
    tg_shape_str(b, sizeof b, tg_tensor_ndim(y), tg_tensor_shape(y));
    return tg_case_fail(err, n, TG_ESHAPE, "%s: grad_y has shape %s but y has shape %s", c->op,
                        a, b);
}

static int run_forward_backward(tg_st_file *res, const tg_case *c, tg_tensor *const leaf[3],
                                const tg_conv_params *p, char *err, size_t n)
{
    tg_tensor *y = NULL;
    int rc = c->transpose ? tg_conv_transpose(&y, leaf[0], leaf[1], leaf[2], p)
                          : tg_conv(&y, leaf[0], leaf[1], leaf[2], p);
    if (rc < 0)
        return lib_fail(err, n, rc, c->op, "forward");
    rc = store(res, "y", y, c->op, err, n);
    if (rc >= 0 && c->grad_y) {
        rc = check_grad_y(c, y, err, n);
        if (rc >= 0) {
            rc = tg_backward(y, c->grad_y, NULL);
            if (rc < 0)
                rc = lib_fail(err, n, rc, c->op, "backward");
        }
        static const char *const names[] = {"grad_x", "grad_weight", "grad_bias"};
        for (int i = 0; i < 3 && rc >= 0; i++)
            if (leaf[i])
                rc = store(res, names[i], tg_tensor_grad(leaf[i]), c->op, err, n);
    }
    tg_tensor_release(y);
    return rc;
}

/* A quantized case: the integer op on the file's tensors (not modified). */
static int run_quantized(tg_st_file **result, const tg_case *c, char *err, size_t n)
{
    tg_qscales q = c->q;
    q.weight_scales = c->weight_scales;
    tg_tensor *y = NULL;
    tg_st_file *res = NULL;
    int rc = c->transpose
                 ? tg_quantized_conv_transpose(&y, c->x, c->weight, c->bias, &c->params, &q)
                 : tg_quantized_conv(&y, c->x, c->weight, c->bias, &c->params, &q);
    if (rc < 0)
        return lib_fail(err, n, rc, c->op, "forward");
    rc = tg_st_new(&res);
    if (rc >= 0)
        rc = tg_st_set(res, "y", y);
    tg_tensor_release(y);
    if (rc < 0) {
        tg_st_free(res);
        return lib_fail(err, n, rc, c->op, "storing a result");
    }
    *result = res;
    return TG_OK;
}

int tg_case_run(tg_st_file **result, const tg_case *c, tg_conv_algo algo, char *err,
                size_t errlen)
{
    if (!result || !c || !c->x || !c->weight)
        return tg_case_fail(err, errlen, TG_EINVAL, "case: NULL argument");
    if (c->quantized)
        return run_quantized(result, c, err, errlen);
    bool grad = c->grad_y != NULL;
    tg_conv_params p = c->params;
    p.algo = algo;
    tg_tensor *leaf[3] = {NULL, NULL, NULL};
    tg_st_file *res = NULL;
    int rc = make_leaf(&leaf[0], c->x, grad);
    if (rc >= 0)
        rc = make_leaf(&leaf[1], c->weight, grad);
    if (rc >= 0)
        rc = make_leaf(&leaf[2], c->bias, grad);
    if (rc >= 0)
        rc = tg_st_new(&res);
    if (rc < 0)
        rc = lib_fail(err, errlen, rc, c->op, "setting up inputs");
    else
        rc = run_forward_backward(res, c, leaf, &p, err, errlen);
    for (int i = 0; i < 3; i++)
        tg_tensor_release(leaf[i]);
    if (rc < 0) {
        tg_st_free(res);
        return rc;
    }
    *result = res;
    return TG_OK;
}
