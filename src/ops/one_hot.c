/* src/ops/one_hot.c - one_hot(labels, num_classes): (..., num_classes) with
 * 1 at each label and 0 elsewhere (torch.nn.functional.one_hot), in the
 * float or integer dtype asked for (torch always gives int64: ask for TG_I64
 * to match it, or for TG_F32 to feed a loss).  Labels are integers in
 * [0, num_classes); not differentiable. */
#include <assert.h>
#include <stdlib.h>

#include "ops/families.h"
#include "ops/pointwise_internal.h"
#include "tapegrad/ops.h"

typedef struct one_hot_params {
    int64_t num_classes;
    tg_dtype dt;
} one_hot_params;

static int one_hot_forward(tg_ctx *ctx, tg_tensor **out, int n, tg_tensor *const *in,
                           const void *params)
{
    const one_hot_params *p = params;
    tg_tensor *lab = in[0];
    TG_CHECK(lab != NULL, TG_EINVAL, "one_hot: labels must not be NULL");
    TG_CHECK(!tg_dtype_is_float(lab->dtype), TG_EDTYPE,
             "one_hot: labels have dtype %s; an integer dtype is needed",
             tg_dtype_name(lab->dtype));
    TG_CHECK(lab->ndim < TG_MAX_DIMS, TG_ESHAPE, "one_hot: labels have %d dims; at most %d",
             lab->ndim, TG_MAX_DIMS - 1);
    int64_t shape[TG_MAX_DIMS], m = tg_tensor_numel(lab);
    for (int i = 0; i < lab->ndim; i++) shape[i] = lab->shape[i];
    shape[lab->ndim] = p->num_classes;
    TG_CHECK(tg__shape_bytes_fit(lab->ndim + 1, shape, (int64_t)tg_dtype_size(p->dt)), TG_EINVAL,
             "one_hot: num_classes=%lld makes the result too large", (long long)p->num_classes);
    int64_t *v = tg__malloc((size_t)(m > 0 ? m : 1) * sizeof *v);
    if (!v) return TG_ENOMEM;
    tg__gather(lab, TG_I64, v);
    for (int64_t i = 0; i < m; i++) {
        if (v[i] < 0 || v[i] >= p->num_classes) {
            int64_t bad = v[i];
            free(v);
            return tg__error(TG_EINVAL, "one_hot: labels[%lld]=%lld must be in [0, %lld)",
                             (long long)i, (long long)bad, (long long)p->num_classes);
        }
    }
    tg_tensor *r = tg__tensor_empty(p->dt, lab->ndim + 1, shape);   /* zeros */
    if (!r) {
        free(v);
        return TG_ENOMEM;
    }
    for (int64_t i = 0; i < m; i++) tg__set_flat_rounded(r, i * p->num_classes + v[i], 1.0);
    free(v);
    *out = r;
    return TG_OK;
}

static const tg_op_schema one_hot_op = {.name = "one_hot", .arity = 1, .amp = TG_AMP_KEEP,
                                  .forward = one_hot_forward, .backward = NULL,
                                  .vjp = "no gradient: the labels are integers"};

/* The family's schemas, registered by src/ops/families.c. */
const tg_op_schema *const tg__one_hot_ops[] = {&one_hot_op};
static_assert(sizeof tg__one_hot_ops / sizeof tg__one_hot_ops[0] == TG__one_hot_N,
              "src/ops/families.h must count the one_hot ops");

int tg_one_hot(tg_tensor **out, tg_tensor *labels, int64_t num_classes, tg_dtype dt)
{
    TG_CHECK(num_classes >= 1, TG_EINVAL, "one_hot: num_classes=%lld must be >= 1",
             (long long)num_classes);
    TG_CHECK(tg_dtype_get_traits(dt) != NULL, TG_EINVAL, "one_hot: dt=%d is not a dtype",
             (int)dt);
    one_hot_params prm = {.num_classes = num_classes, .dt = dt};
    tg_tensor *in[1] = {labels};
    return tg_op_call(&one_hot_op, out, 1, in, &prm, sizeof prm);
}
