/* src/ops/families.h - the built-in op families: each file that defines ops
 * exports its schemas as one const table, tg__<family>_ops, of
 * TG__<family>_N entries (checked by a static_assert beside the table).
 * src/ops/families.c registers them all through tg_op_register. */
#ifndef TAPEGRAD_OPS_FAMILIES_H
#define TAPEGRAD_OPS_FAMILIES_H

#include "tapegrad/op.h"

/* X(family, count, file: ops) */
#define TG__OP_FAMILIES(X)                                                    \
    X(binary, 10)        /* binary.c: add sub mul div pow, scalar variants */ \
    X(unary, 16)         /* unary.c: neg exp log sqrt abs pow_scalar erf sin cos log1p expm1 \
                            sign floor ceil round trunc */                   \
    X(unary_math, 15)    /* unary_math.c: reciprocal rsqrt tan atan asin acos sinh cosh asinh \
                            acosh atanh log2 log10 exp2 logsigmoid */        \
    X(atan2, 3)          /* atan2_lerp.c: atan2 lerp_scalar lerp */           \
    X(activation, 7)     /* activation.c: relu leaky_relu tanh sigmoid silu gelu elu */ \
    X(cast, 1)           /* cast.c: to_dtype */                               \
    X(reduce, 5)         /* reduce.c: sum mean sum_dims mean_dims sum_to_shape */ \
    X(shape, 7)          /* shape.c: reshape permute transpose expand unsqueeze squeeze contiguous */ \
    X(slice_cat, 3)      /* shape_cat.c: slice slice_backward cat */          \
    X(matmul, 1)         /* matmul.c: matmul */                               \
    X(linalg, 1)         /* linalg.c: linear */                               \
    X(conv, 3)           /* conv.c: conv conv_transpose conv_weight_grad */   \
    X(norm, 1)           /* norm.c: batch_norm */                             \
    X(layer_norm, 2)     /* layer_norm.c: layer_norm group_norm */            \
    X(loss, 1)           /* loss.c: bce_logits */                             \
    X(fake_quantize, 2)  /* fake_quantize.c: fake_quantize fake_quantize_per_channel */ \
    X(softplus, 1)       /* softplus.c: softplus */                           \
    X(clamp, 1)          /* clamp.c: clamp */                                 \
    X(where, 1)          /* where.c: where */                                 \
    X(one_hot, 1)        /* one_hot.c: one_hot */                             \
    X(embedding, 2)      /* embedding.c: embedding embedding_backward */     \
    X(pad, 2)            /* pad.c: pad pad_backward */                        \
    X(upsample, 2)       /* upsample.c: upsample_nearest upsample_nearest_backward */ \
    X(interpolate, 4)    /* interpolate.c: upsample_linear, upsample_bicubic, their _backward */ \
    X(interpolate_aa, 4) /* interpolate_aa.c: upsample_bilinear2d_aa, upsample_bicubic2d_aa, their _backward */ \
    X(avg_pool, 2)       /* avg_pool.c: avg_pool avg_pool_backward */         \
    X(max_pool, 4)       /* max_pool.c: max_pool _backward _gather _indices */ \
    X(adaptive_pool, 2)  /* adaptive_pool.c: adaptive_avg_pool adaptive_avg_pool_backward */ \
    X(adaptive_max_pool, 4) /* adaptive_max_pool.c: adaptive_max_pool _indices _backward _gather */\
    X(softmax, 2)        /* softmax.c: softmax log_softmax */                 \
    X(nll_loss, 2)       /* nll_loss.c: nll_loss nll_loss_backward */ \
    X(bce_loss, 1)       /* bce_loss.c: bce_loss */                           \
    X(smooth_l1, 3)      /* smooth_l1.c: smooth_l1_loss huber_loss smooth_l1_backward */ \
    X(diff_loss, 4)      /* diff_loss.c: mse_loss mse_backward l1_loss l1_backward */ \
    X(argmax, 4)         /* argmax.c: argmax argmin pick_along_dim pick_along_dim_backward */ \
    X(amax, 4)           /* amax.c: amax amin max min */                      \
    X(var, 2)            /* var.c: var std */                                 \
    X(vector_norm, 1)    /* vector_norm.c: vector_norm */                     \
    X(logsumexp, 1)      /* logsumexp.c: logsumexp */                         \
    X(maximum, 2)        /* maximum.c: maximum minimum */                     \
    X(prelu, 1)          /* prelu.c: prelu */                                 \
    X(flip, 1)           /* flip.c: flip */                                   \
    X(hardact, 4)        /* hardact.c: hardtanh hardsigmoid hardswish mish */ \
    X(selu, 2)           /* selu.c: selu celu */                              \
    X(gelu_tanh, 1)      /* gelu_tanh.c: gelu_tanh */                         \
    X(shrink, 3)         /* shrink.c: hardshrink softshrink threshold */      \
    X(glu, 1)            /* glu.c: glu */                                     \
    X(cumsum, 1)         /* cumsum.c: cumsum */                               \
    X(roll, 1)           /* roll.c: roll */                                   \
    X(gather, 4)         /* gather.c: gather scatter_add index_select index_add */ \
    X(compare, 12)       /* compare.c: eq ne lt le gt ge, each also _scalar */ \
    X(fold, 2)           /* fold.c: unfold fold */                            \
    X(tril, 2)           /* tril.c: tril triu */                              \
    X(sort, 1)           /* sort.c: sort_indices */                           \
    X(diagonal, 2)       /* diagonal.c: diagonal diagonal_embed */            \
    X(cumprod, 3)        /* cumprod.c: cumprod prod_dim linear_scan */        \
    X(cummax, 2)         /* cummax.c: cummax_indices logcumsumexp */          \
    X(predicates, 8)     /* predicates.c: isnan isinf isposinf isneginf isfinite all any \
                            nan_to_num */                                    \
    X(remainder, 3)      /* remainder.c: fmod remainder floor_divide */      \
    X(addcmul, 2)        /* addcmul.c: addcmul addcdiv */ \
    X(ce_rows, 1)        /* cross_entropy_rows.c: cross_entropy */ \
    X(ce_soft, 1)        /* cross_entropy_soft.c: cross_entropy_soft */ \
    X(linalg_lu, 2)      /* linalg_lu.c: linalg_inv linalg_solve */ \
    X(linalg_det, 2)     /* linalg_det.c: linalg_det linalg_slogdet */ \
    X(linalg_tri, 2)     /* linalg_tri.c: linalg_cholesky linalg_solve_triangular */ \
    X(linalg_eig, 1)     /* linalg_eig.c: linalg_eigh */ \
    X(linalg_svd, 1)     /* linalg_svd.c: linalg_svd */ \
    X(linalg_compose, 1) /* linalg_compose.c: linalg_pinv */ \
    X(linalg_qr, 1)      /* linalg_qr.c: linalg_qr */ \
    X(linalg_lufact, 1)  /* linalg_lufact.c: linalg_lu_factor */ \
    X(linalg_chol, 2)    /* linalg_chol.c: cholesky_solve cholesky_inverse */ \
    X(linalg_exp, 1)     /* linalg_exp.c: linalg_matrix_exp */ \
    X(emb_sparse, 1)     /* embedding_sparse.c: embedding_sparse */ \
    X(ctc_loss, 1)       /* ctc_loss.c: ctc_loss */ \
    X(scatter, 2)        /* scatter.c: scatter scatter_value */ \
    X(scatter_reduce, 1) /* scatter_reduce.c: scatter_reduce */ \
    X(logaddexp, 2)      /* logaddexp.c: logaddexp logaddexp2 */ \
    X(xlogy, 3)          /* xlogy_hypot.c: xlogy xlog1py hypot */ \
    X(special_math, 4)   /* special_math.c: erfc erfinv logit sinc */ \
    X(gamma, 3)          /* gamma.c: lgamma digamma polygamma */ \
    X(frac, 3)           /* frac_copysign.c: frac copysign heaviside */ \
    X(fractional_max_pool, 1) /* fractional_max_pool.c: fractional_max_pool_indices */ \
    X(grid_sample, 2)    /* grid_sample.c: grid_sample grid_sample_backward */

/* Declares tg__binary_ops ... the tables. */
#define TG__FAMILY_DECLARE(fam, count) extern const tg_op_schema *const tg__##fam##_ops[];
TG__OP_FAMILIES(TG__FAMILY_DECLARE)
#undef TG__FAMILY_DECLARE

/* TG__binary_N ...: the number of schemas in each table. */
#define TG__FAMILY_COUNT(fam, count) TG__##fam##_N = count,
enum { TG__OP_FAMILIES(TG__FAMILY_COUNT) };
#undef TG__FAMILY_COUNT

#endif
