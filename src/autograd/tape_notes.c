/* What the views of a tape (DOT, TG_TRACE=2, the HTML page) say about a node
 * beyond its op name: the vector-Jacobian product its backward applies and
 * its scalar operand, both from the op's schema (tapegrad/op.h), and a few
 * values of a tensor as text. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"

const char *tg__vjp_given(const tg_op_schema *op)
{
    return op->vjp && op->vjp[0] ? op->vjp : NULL;
}

const char *tg__vjp_formula(const tg_op_schema *op)
{
    const char *vjp = tg__vjp_given(op);
    return vjp ? vjp : "the op's own backward";
}

bool tg__node_scalar(const tg_node *n, double *value, const char **symbol)
{
    if (!n->op->scalar || !n->params || n->params_size < sizeof(double)) return false;
    memcpy(value, n->params, sizeof *value);
    *symbol = n->op->scalar;
    return true;
}

/* One value in as few characters as shows it: integers plainly, others %.4g. */
static int format_one(char *buf, size_t size, double v)
{
    if (isfinite(v) && v == nearbyint(v) && fabs(v) < 1e6) return snprintf(buf, size, "%.0f", v);
    return snprintf(buf, size, "%.4g", v);
}

char *tg__values_str(char *buf, size_t size, const tg_tensor *t, int max_elems)
{
    TG_ASSERT(size >= 8);
    if (t->sparse) {   /* no dense elements to show */
        snprintf(buf, size, "[sparse, nnz %lld]", (long long)t->sparse->indices->shape[1]);
        return buf;
    }
    int64_t n = tg_tensor_numel(t);
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int64_t i = 0; i < n && i < max_elems && len + 32 < size; i++) {
        double v = 0;
        char one[32];
        if (tg_tensor_get_flat(t, i, &v) < 0) break;
        format_one(one, sizeof one, v);
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "", one);
    }
    if (n > max_elems && len + 8 < size)
        len += (size_t)snprintf(buf + len, size - len, "%s...", len > 1 ? ", " : "");
    snprintf(buf + len, size - len, "]");
    return buf;
}
