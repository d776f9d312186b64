/* What the views of a tape (DOT, TG_TRACE=2, the HTML page) say about a node
 * beyond its op name: the vector-Jacobian product its backward applies, its
 * scalar operand, and a few values of a tensor as text.
 *
 * In the formulas g is the gradient of the op's output (dL/dout), a, b, ...
 * are the inputs in order, y is the output, and "da" is what the backward
 * sends to input a: the product of g with the Jacobian d out / d a. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "autograd/tape.h"

typedef struct op_note {
    const char *op;
    const char *vjp;
    /* The name of the op's scalar operand: the op's params then begin with
     * that double (scalar_params, pow_params, slope_params in src/ops). */
    const char *scalar;
} op_note;

static const op_note notes[] = {
    {"add", "da = g, db = g (each summed back to its input's shape)", NULL},
    {"sub", "da = g, db = -g (each summed back to its input's shape)", NULL},
    {"mul", "da = g * b, db = g * a", NULL},
    {"div", "da = g / b, db = -g * a / b^2", NULL},
    {"pow", "da = g * b * a^(b-1), db = g * a^b * log(a)", NULL},
    {"add_scalar", "da = g", "s"},
    {"sub_scalar", "da = g", "s"},
    {"rsub_scalar", "da = -g", "s"},
    {"mul_scalar", "da = g * s", "s"},
    {"div_scalar", "da = g / s", "s"},
    {"pow_scalar", "da = g * p * a^(p-1)", "p"},
    {"neg", "da = -g", NULL},
    {"exp", "da = g * exp(a) = g * y", NULL},
    {"log", "da = g / a", NULL},
    {"sqrt", "da = g / (2 sqrt(a)) = g / (2 y)", NULL},
    {"abs", "da = g * sign(a)", NULL},
    {"erf", "da = g * 2/sqrt(pi) * exp(-a^2)", NULL},
    {"relu", "da = g * (a > 0)", NULL},
    {"leaky_relu", "da = g * (a > 0 ? 1 : slope)", "slope"},
    {"tanh", "da = g * (1 - y^2)", NULL},
    {"sigmoid", "da = g * y * (1 - y)", NULL},
    {"silu", "da = g * (s + a s (1 - s)), s = sigmoid(a)", NULL},
    {"gelu", "da = g * (Phi(a) + a phi(a))", NULL},
    {"to_dtype", "da = g cast back to a's dtype", NULL},
    {"matmul", "da = g b^T, db = a^T g", NULL},
    {"linear", "dx = g W, dW = g^T x, db = g summed over the batch", NULL},
    {"conv", "dx = conv_transpose(g, w), dw = conv_weight_grad(x, g), "
             "db = g summed over batch and positions", NULL},
    {"conv_transpose", "dx = conv(g, w), dw = conv_weight_grad(g, x), "
                       "db = g summed over batch and positions", NULL},
    {"conv_weight_grad", "the adjoint convolutions of g with the other input", NULL},
    {"batch_norm", "training: dx = (g - mean(g) - xhat mean(g xhat)) gamma / sigma, "
                   "dgamma = sum(g xhat), dbeta = sum(g) (per channel); eval: dx = g gamma / "
                   "sqrt(running_var + eps)", NULL},
    {"layer_norm", "dx = (gw - mean(gw) - xhat mean(gw xhat)) / sigma with gw = g weight, "
                   "means over the normalised dims; dweight = sum(g xhat), dbias = sum(g) "
                   "over the other dims", NULL},
    {"group_norm", "dx = (gw - mean(gw) - xhat mean(gw xhat)) / sigma with gw = g weight[c], "
                   "means over each group; dweight = sum(g xhat), dbias = sum(g) per channel",
     NULL},
    {"softplus", "da = g * sigmoid(beta a), = g above the threshold", NULL},
    {"clamp", "da = g where lo <= a <= hi, 0 outside", NULL},
    {"where", "da = g where cond, db = g elsewhere (each summed back to its input's shape); "
              "cond gets none", NULL},
    {"embedding", "dweight = g's rows added into the rows they were picked from "
                  "(embedding_backward); the indices get none", NULL},
    {"embedding_backward", "dg = the rows of its gradient at the indices (embedding)", NULL},
    {"softmax", "da = y * (g - sum(g * y)), sums along the dim", NULL},
    {"log_softmax", "da = g - softmax(a) * sum(g), sums along the dim", NULL},
    {"nll_loss", "dlogp = nll_loss_backward(g): -w[t] * g at each target's class (divided by "
                 "the sum of the weights for mean), 0 elsewhere; target and weight get none",
     NULL},
    {"nll_loss_backward", "dg = nll_loss(g') with the same target, weight and reduction",
     NULL},
    {"one_hot", "no gradient: the labels are integers", NULL},
    {"pad", "da = pad_backward(g): each g element added into the element it was read from",
     NULL},
    {"pad_backward", "dg = pad(g', same mode, value 0)", NULL},
    {"upsample_nearest", "da = upsample_nearest_backward(g): each s-block of g summed into "
                         "the element it copies", NULL},
    {"upsample_nearest_backward", "dg = upsample_nearest(g')", NULL},
    {"upsample_linear", "da = upsample_linear_backward(g): each g element added into the 2^N "
                        "inputs it read, times their weights", NULL},
    {"upsample_linear_backward", "dg = upsample_linear(g'), same size", NULL},
    {"upsample_bicubic", "da = upsample_bicubic_backward(g): each g element added into the "
                         "16 inputs it read, times their weights", NULL},
    {"upsample_bicubic_backward", "dg = upsample_bicubic(g'), same size", NULL},
    {"upsample_bilinear2d_aa", "da = upsample_bilinear2d_aa_backward(g): each g element added "
                               "into the inputs its filter read, times their weights", NULL},
    {"upsample_bilinear2d_aa_backward", "dg = upsample_bilinear2d_aa(g'), same size", NULL},
    {"upsample_bicubic2d_aa", "da = upsample_bicubic2d_aa_backward(g): each g element added "
                              "into the inputs its filter read, times their weights", NULL},
    {"upsample_bicubic2d_aa_backward", "dg = upsample_bicubic2d_aa(g'), same size", NULL},
    {"avg_pool", "da = avg_pool_backward(g): each g element / its window's count added into "
                 "the window", NULL},
    {"avg_pool_backward", "dg = avg_pool(g'), same parameters", NULL},
    {"max_pool", "da = max_pool_backward(g, indices): each g element added into its window's "
                 "maximum", NULL},
    {"max_pool_backward", "dg = max_pool_gather(g', indices): g' at each window's maximum; "
                          "the indices get none", NULL},
    {"max_pool_gather", "da = max_pool_backward(g, indices); the indices get none", NULL},
    {"sum", "da = g copied to every element of a", NULL},
    {"mean", "da = g / n copied to every element of a", NULL},
    {"sum_dims", "da = g copied along the reduced dims", NULL},
    {"mean_dims", "da = g / n copied along the reduced dims", NULL},
    {"sum_to_shape", "da = g expanded back to a's shape", NULL},
    {"argmax", "no gradient: the result is indices", NULL},
    {"argmin", "no gradient: the result is indices", NULL},
    {"pick_along_dim", "da = pick_along_dim_backward(g, indices): each g element put where "
                       "its index points; the indices get none", NULL},
    {"pick_along_dim_backward", "dg = pick_along_dim(g', indices); the indices get none",
     NULL},
    {"amax", "da = g / count at the elements equal to their row's maximum, 0 elsewhere", NULL},
    {"amin", "da = g / count at the elements equal to their row's minimum, 0 elsewhere", NULL},
    {"max", "da = g / count at the elements equal to the maximum (its NaNs when it is NaN)",
     NULL},
    {"min", "da = g / count at the elements equal to the minimum (its NaNs when it is NaN)",
     NULL},
    {"var", "da = (2 / (N - correction)) g (a - mean(a)), g copied along the reduced dims",
     NULL},
    {"std", "da = var's da for g / (2 y), 0 where y = 0", NULL},
    {"maximum", "da = g where a > b, g / 2 where a = b, 0 where a < b (g where either is "
                "NaN); db the same with a and b swapped (each summed back to its shape)", NULL},
    {"minimum", "da = g where a < b, g / 2 where a = b, 0 where a > b (g where either is "
                "NaN); db the same with a and b swapped (each summed back to its shape)", NULL},
    {"eq", "no gradient: the result is 0 and 1 (u8)", NULL},
    {"eq_scalar", "no gradient: the result is 0 and 1 (u8)", "s"},
    {"ne", "no gradient: the result is 0 and 1 (u8)", NULL},
    {"ne_scalar", "no gradient: the result is 0 and 1 (u8)", "s"},
    {"lt", "no gradient: the result is 0 and 1 (u8)", NULL},
    {"lt_scalar", "no gradient: the result is 0 and 1 (u8)", "s"},
    {"le", "no gradient: the result is 0 and 1 (u8)", NULL},
    {"le_scalar", "no gradient: the result is 0 and 1 (u8)", "s"},
    {"gt", "no gradient: the result is 0 and 1 (u8)", NULL},
    {"gt_scalar", "no gradient: the result is 0 and 1 (u8)", "s"},
    {"ge", "no gradient: the result is 0 and 1 (u8)", NULL},
    {"ge_scalar", "no gradient: the result is 0 and 1 (u8)", "s"},
    {"reshape", "da = reshape(g, shape of a)", NULL},
    {"permute", "da = permute(g, inverse permutation)", NULL},
    {"transpose", "da = transpose(g) over the same two dims", NULL},
    {"expand", "da = g summed over the expanded dims", NULL},
    {"unsqueeze", "da = squeeze(g)", NULL},
    {"squeeze", "da = unsqueeze(g)", NULL},
    {"contiguous", "da = g", NULL},
    {"slice", "da = zeros of a's shape with g in the slice", NULL},
    {"slice_backward", "da = the slice of g", NULL},
    {"cat", "each input gets the slice of g where it was placed", NULL},
    {"fake_quantize", "da = g inside the clamp range, 0 outside (straight-through)", NULL},
    {"fake_quantize_per_channel", "da = g inside the clamp range, 0 outside (straight-through)",
     NULL},
    {"bce_logits", "dz = g * (sigmoid(z) - t), scaled as the reduction", NULL},
    {"bce_loss", "dx = g * (x - t) / max((1 - x) * x, 1e-12), dt = g * (log(1 - x) - log(x))",
     NULL},
    {"smooth_l1_loss", "dx = smooth_l1_backward(g, x - t): g * clamp((x - t) / beta, -1, 1); "
     "dt = smooth_l1_backward(g, t - x)", "beta"},
    {"huber_loss", "dx = smooth_l1_backward(g, x - t): g * clamp(x - t, -delta, delta); "
     "dt = smooth_l1_backward(g, t - x)", "delta"},
    {"smooth_l1_backward", "dg = smooth_l1_backward(g', d), dd = g' * g * [|d| < beta] "
     "(divided by beta for smooth_l1_loss)", NULL},
    {"recompute", "da, db, ... = the gradients of the block run again on a, b, ... with grad "
     "on (its parameters' gradients go into .grad)", NULL},
};

static const op_note *find_note(const char *op)
{
    for (size_t i = 0; i < sizeof notes / sizeof *notes; i++)
        if (!strcmp(notes[i].op, op)) return &notes[i];
    return NULL;
}

const char *tg__vjp_formula(const char *op)
{
    const op_note *n = find_note(op);
    return n ? n->vjp : "the op's own backward";
}

bool tg__node_scalar(const tg_node *n, double *value, const char **symbol)
{
    const op_note *note = find_note(n->op->name);
    if (!note || !note->scalar || !n->params || n->params_size < sizeof(double)) return false;
    memcpy(value, n->params, sizeof *value);
    *symbol = note->scalar;
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
