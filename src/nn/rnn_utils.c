/* src/nn/rnn_utils.c - torch.nn.utils.rnn.pad_sequence: sequences of
 * different lengths (L_i, *) padded to the longest and stacked, as the
 * forwards over sequences of different lengths (tg_nn_*_forward_packed,
 * with the lengths L_i) take them.
 *
 * Each sequence is padded at the end of its first dim with padding_value
 * (tg_pad, CONSTANT) to L = max L_i, then the n of them are stacked along
 * dim 0 (batch_first: (n, L, *)) or dim 1 ((L, n, *)).  Both ops are
 * differentiable to any order, so each sequence gets its slice of the
 * gradient and the padding none, as torch's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "nn/rnn_internal.h"
#include "tapegrad/ops.h"

int tg__rnn_check_sequences(const char *op, int n, tg_tensor *const *seqs, int64_t *longest)
{
    TG_CHECK(n >= 1 && seqs != NULL, TG_EINVAL,
             "%s: n=%d must be >= 1 and seqs not NULL (torch's max over no sequence fails too)",
             op, n);
    *longest = 0;
    for (int i = 0; i < n; i++) {
        const tg_tensor *s = seqs[i], *s0 = seqs[0];
        TG_CHECK(s != NULL, TG_EINVAL, "%s: seqs[%d] must not be NULL", op, i);
        TG_CHECK(s->ndim >= 1, TG_ESHAPE,
                 "%s: seqs[%d] is 0-d; a sequence needs a first dim, its length", op, i);
        bool same = s->ndim == s0->ndim;
        for (int d = 1; same && d < s->ndim; d++) same = s->shape[d] == s0->shape[d];
        if (!same) {
            char a[128], b[128];
            return tg__error(TG_ESHAPE, "%s: seqs[%d] has shape %s but seqs[0] %s: the dims "
                             "after the first must match", op, i,
                             tg_shape_str(a, sizeof a, s->ndim, s->shape),
                             tg_shape_str(b, sizeof b, s0->ndim, s0->shape));
        }
        if (s->shape[0] > *longest) *longest = s->shape[0];
    }
    return TG_OK;
}

/* The padded sequences stacked into *out (a new reference); run on the
 * library's behalf. */
static int pad_and_stack(tg_tensor **out, int n, tg_tensor *const *seqs, int64_t longest,
                         bool batch_first, double value)
{
    tg_tensor **padded = calloc((size_t)n, sizeof *padded);
    if (!padded) return tg__error(TG_ENOMEM, "pad_sequence: no memory for %d sequences", n);
    int rc = TG_OK;
    for (int i = 0; i < n && rc >= 0; i++) {
        tg_tensor *s = seqs[i], *cast = NULL;
        if (s->dtype != seqs[0]->dtype) {   /* torch copies into seqs[0]'s dtype */
            rc = tg_to_dtype(&cast, s, seqs[0]->dtype);
            s = cast;
        }
        /* (low, high) pairs from the last dim to the first: only dim 0 grows */
        int64_t pads[2 * TG_MAX_DIMS] = {0};
        const int np = 2 * seqs[i]->ndim;
        pads[np - 1] = longest - seqs[i]->shape[0];
        if (rc >= 0) rc = tg_pad(&padded[i], s, np, pads, TG_PAD_CONSTANT, value);
        tg_tensor_release(cast);
    }
    if (rc >= 0) rc = tg_stack(out, n, padded, batch_first ? 0 : 1);
    for (int i = 0; i < n; i++) tg_tensor_release(padded[i]);
    free(padded);
    return rc;
}

int tg_pad_sequence(tg_tensor **out, int n, tg_tensor *const *seqs, bool batch_first,
                    double padding_value)
{
    TG_CHECK(out != NULL, TG_EINVAL, "pad_sequence: out must not be NULL");
    int64_t longest;
    TG_TRY(tg__rnn_check_sequences("pad_sequence", n, seqs, &longest));
    tg_tensor *r = NULL;
    tg__lib_enter();
    const int rc = pad_and_stack(&r, n, seqs, longest, batch_first, padding_value);
    tg__lib_leave();
    if (rc < 0) return rc;
    *out = r;
    return tg__scope_capture(out, TG_OK);
}
