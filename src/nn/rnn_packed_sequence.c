/* src/nn/rnn_packed_sequence.c - nn.RNN, nn.LSTM and nn.GRU called with a
 * PackedSequence, as torch's modules are.
 *
 * The packed input is padded (tg__packed_scatter, in the module's
 * batch_first layout, zero at the padded steps) and run through the
 * forwards over lengths (rnn.c), which keep each row's state past its last
 * valid step and give h_n and c_n in batch order; the output's valid steps
 * are then packed by the input's own layout (tg__packed_gather), so the
 * output shares the input's batch_sizes and indices, as torch's.  Every
 * step is a recorded op, so gradients of every order flow through. */
#include <stdio.h>

#include "core/core.h"
#include "nn/rnn_internal.h"
#include "tapegrad/ops.h"

/* The forward on the library's behalf: out (new references), res[0] h_n,
 * res[1] c_n (LSTM). */
static int run(tg_module *m, bool lstm, tg_packed_sequence *out, tg_tensor **res,
               const tg_packed_sequence *in, const tg__packed_layout *lay, tg_tensor *h0,
               tg_tensor *c0)
{
    const bool bf = tg__rnn_state_of(m)->o.batch_first;
    tg_tensor *x = NULL, *len = NULL, *y = NULL;
    tg_packed_sequence r = TG_PACKED_SEQUENCE_INIT;
    int rc;
    TG_TRY_GOTO(tg__packed_scatter(&x, &len, in->data, lay, bf, 0, lay->steps));
    if (lstm) TG_TRY_GOTO(tg_nn_lstm_forward_packed(m, &y, &res[0], &res[1], x, len, h0, c0));
    else TG_TRY_GOTO(tg_nn_rnn_forward_packed(m, &y, &res[0], x, len, h0));
    TG_TRY_GOTO(tg__packed_gather(&r.data, y, lay, bf));
    r.batch_sizes = tg_tensor_retain(in->batch_sizes);
    r.sorted_indices = in->sorted_indices ? tg_tensor_retain(in->sorted_indices) : NULL;
    r.unsorted_indices = in->unsorted_indices ? tg_tensor_retain(in->unsorted_indices) : NULL;
    *out = r;
done:
    if (rc < 0) {
        tg_tensor_release(res[0]);
        tg_tensor_release(res[1]);
        res[0] = res[1] = NULL;
    }
    tg_tensor_release(x);
    tg_tensor_release(len);
    tg_tensor_release(y);
    return rc;
}

/* Checks the arguments, runs, hands h_n and c_n to the caller. */
static int forward(const char *fn, bool lstm, tg_module *m, tg_packed_sequence *output,
                   tg_tensor **h_n, tg_tensor **c_n, const tg_packed_sequence *input,
                   tg_tensor *h0, tg_tensor *c0)
{
    char got[96];
    TG_CHECK(m != NULL && output != NULL && input != NULL, TG_EINVAL,
             "%s: m, output and input must not be NULL", fn);
    TG_CHECK(output != input, TG_EINVAL,
             "%s: output and input must be two packed sequences (writing the output over "
             "the input would lose its references)", fn);
    const tg__rnn_state *s = tg__rnn_state_of(m);
    const bool ok = s && m->vt == &tg__nn_rnn_layer_vts[tg__rnn_vt_index(s->kind)] &&
                    (s->kind == TG__RNN_LSTM) == lstm;
    TG_CHECK(ok, TG_EINVAL, "%s: m is a %s module, not %s", fn, tg_module_type_name(m),
             lstm ? "an LSTM" : "an RNN or GRU");
    TG_TRY(tg__rnn_check_outputs(fn, 2, (tg_tensor **const[]){h_n, c_n}));
    tg__packed_layout lay;
    TG_TRY(tg__packed_layout_of(&lay, fn, input));
    const tg_tensor *d = input->data;
    int rc = TG_OK;
    if (tg_tensor_ndim(d) != 2 || tg_tensor_dim(d, 1) != s->input_size)
        rc = tg__error(TG_ESHAPE, "%s: input's data is %s; it must be (sum of lengths, "
                       "input_size=%lld)", fn, tg__rnn_shape(got, sizeof got, d),
                       (long long)s->input_size);
    tg_packed_sequence r = TG_PACKED_SEQUENCE_INIT;
    tg_tensor *res[2] = {NULL, NULL};
    if (rc >= 0) {
        tg__lib_enter();
        rc = run(m, lstm, &r, res, input, &lay, h0, c0);
        tg__lib_leave();
    }
    tg__packed_layout_free(&lay);
    if (rc < 0) return rc;
    rc = tg__rnn_hand_out(2, (tg_tensor **const[]){h_n, c_n}, res);
    if (rc < 0) {
        tg_packed_sequence_release(&r);
        return rc;
    }
    *output = r;
    return TG_OK;
}

int tg_nn_rnn_forward_packed_sequence(tg_module *m, tg_packed_sequence *output,
                                      tg_tensor **h_n, const tg_packed_sequence *input,
                                      tg_tensor *h_0)
{
    return forward("nn_rnn_forward_packed_sequence", false, m, output, h_n, NULL, input, h_0,
                   NULL);
}

int tg_nn_lstm_forward_packed_sequence(tg_module *m, tg_packed_sequence *output,
                                       tg_tensor **h_n, tg_tensor **c_n,
                                       const tg_packed_sequence *input, tg_tensor *h_0,
                                       tg_tensor *c_0)
{
    return forward("nn_lstm_forward_packed_sequence", true, m, output, h_n, c_n, input, h_0,
                   c_0);
}
