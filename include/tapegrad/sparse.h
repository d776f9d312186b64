/* tapegrad/sparse.h - sparse COO tensors, the layout of the gradient that
 * an Embedding with sparse=true (tg_embedding_opts.sparse) gives its weight,
 * as torch.sparse_coo_tensor with one sparse dim.
 *
 * A sparse tensor of shape (V, d1, ...) holds nnz rows: indices, an int64
 * tensor (1, nnz) of row numbers in [0, V), and values (nnz, d1, ...) of the
 * tensor's float dtype; row indices[k] of the dense tensor it stands for is
 * the sum of the values[k] whose index is that row (zeros where none is).
 * Rows may repeat (uncoalesced), as the gradient of an Embedding that looks
 * an index up twice keeps both rows; tg_sparse_coalesce sorts them and sums
 * the repeats.
 *
 * A sparse tensor is a tg_tensor handle (retain, release, dtype, ndim,
 * shape, numel, tg_tensor_clone and tg_tensor_set_grad take it), but it has
 * no dense elements: every op (tg_op_call, hence every function of ops.h,
 * nn.h, loss.h, ...) and every element access of tensor.h (get, set, fill,
 * copy_, contiguous, to_dtype, detach, data, print, ...) refuses it with
 * TG_EUNSUPPORTED and a message naming the argument; tg_tensor_data and
 * tg_tensor_cdata return NULL for it (with that message set), and
 * tg_tensor_item NaN.  tg_sparse_to_dense makes a dense copy.
 *
 * Gradients: the sparse gradients a leaf receives (over backward calls, or
 * from several uses in one backward) are summed as torch's add of two sparse
 * tensors does: one walk over both lists of rows as if each were sorted,
 * taking the first's row while its index is below the second's, the
 * second's while above, both summed when equal, the rest appended; so two
 * lookups [1, 1, 2] then [3] give rows [1, 1, 2, 3], and the layout of
 * unsorted lists is torch's too.  No rows (a zero_grad) plus a list is that
 * list.  A sparse gradient added to a dense one gives a dense tensor, each
 * row added in turn.  A sparse gradient may only go to a
 * leaf (or tg_grad's input): an op's backward handed one is refused
 * (TG_EUNSUPPORTED naming the op), where PyTorch runs the few ops that take
 * sparse gradients.  Optimizers: see tapegrad/optim.h (SparseAdam, SGD and
 * Adagrad take sparse gradients; the others refuse them as torch does).
 */
#ifndef TAPEGRAD_SPARSE_H
#define TAPEGRAD_SPARSE_H

#include <stdbool.h>
#include <stdint.h>

#include "tapegrad/export.h"
#include "tapegrad/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether t is a sparse COO tensor (torch's t.is_sparse); false for NULL. */
TG_API bool tg_tensor_is_sparse(const tg_tensor *t);
/* torch.sparse_coo_tensor(indices, values, shape): a new sparse tensor (new
 * reference in *out) holding copies of indices (integer dtype, shape
 * (1, nnz), each in [0, shape[0])) and values (a float dtype, shape (nnz,
 * shape[1], ..., shape[ndim-1])); ndim >= 1.  It is not coalesced, even
 * when its indices are sorted and unique.  TG_EINVAL / TG_ESHAPE /
 * TG_EDTYPE naming the argument otherwise; *out untouched. */
TG_API int tg_sparse_coo_new(tg_tensor **out, const tg_tensor *indices, const tg_tensor *values,
                             int ndim, const int64_t *shape);
/* The number of stored rows (torch's t._nnz()), or -1 (with a message) when
 * t is NULL or dense. */
TG_API int64_t tg_sparse_nnz(const tg_tensor *t);
/* Whether t is known to be coalesced (torch's t.is_coalesced()): made by
 * tg_sparse_coalesce.  False for a dense or NULL t. */
TG_API bool tg_sparse_is_coalesced(const tg_tensor *t);
/* t's indices (int64, (1, nnz)) and values ((nnz, ...), t's dtype) as new
 * references to the tensors t holds (torch's t._indices(), t._values()):
 * dense, contiguous, not requiring grad; a write into values (tg_tensor_data
 * plus tg_tensor_bump_version) changes t.  TG_EINVAL for a NULL or dense
 * t (the message names the argument); *out untouched. */
TG_API int tg_sparse_indices(tg_tensor **out, const tg_tensor *t);
TG_API int tg_sparse_values(tg_tensor **out, const tg_tensor *t);
/* torch's t.coalesce(): a new sparse tensor with the rows sorted by index,
 * each index once, the values of a repeated index summed (in double, in
 * the order they are stored, rounded once to the dtype: torch sums f32 in
 * f32, which can differ by an ulp when three or more rows repeat).  t
 * itself (a new reference) when it is coalesced already.  TG_EINVAL for a
 * NULL or dense t. */
TG_API int tg_sparse_coalesce(tg_tensor **out, const tg_tensor *t);
/* torch's t.to_dense(): a new dense contiguous tensor of t's shape and
 * dtype, each row the sum of its values (in double, rounded once: the bits
 * of the dense Embedding gradient), zeros where no row is stored.
 * TG_EINVAL for a NULL or dense t. */
TG_API int tg_sparse_to_dense(tg_tensor **out, const tg_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
