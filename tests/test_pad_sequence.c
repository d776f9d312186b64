/* tests/test_pad_sequence.c - tg_pad_sequence against PyTorch 1.13's
 * torch.nn.utils.rnn.pad_sequence (values and each sequence's gradient;
 * goldens: scripts/make_pad_sequence_goldens.py), gradients of any order in
 * f64, the padded batch through an LSTM's forward over different lengths,
 * the scope's ownership and the refusals. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

enum { MAX_SEQS = 4 };

Test(pad_sequence, matches_torch_with_gradients)
{
    tg_st_file *f = th_golden_load("pad_sequence.safetensors");
    const int cases = atoi(tg_st_meta_get(f, "cases"));
    int graded = 0;
    for (int i = 0; i < cases; i++) {
        char c[16], key[16];
        snprintf(c, sizeof c, "case%d", i);
        const int n = atoi(th_golden_meta(f, c, "n"));
        const bool bf = atoi(th_golden_meta(f, c, "batch_first")) != 0;
        const double value = strtod(th_golden_meta(f, c, "value"), NULL);
        cr_assert(n >= 1 && n <= MAX_SEQS);
        tg_tensor *s[MAX_SEQS], *y = NULL;
        for (int j = 0; j < n; j++) {
            snprintf(key, sizeof key, "s%d", j);
            const tg_tensor *g = th_golden_get(f, c, key);   /* integers: no gradient */
            s[j] = tg_dtype_is_float(tg_tensor_dtype(g)) ? th_leaf_clone(g)
                                                         : tg_tensor_retain((tg_tensor *)g);
        }
        OK(tg_pad_sequence(&y, n, s, bf, value));
        th_expect_same_bits(c, y, y, th_golden_get(f, c, "y"));
        if (tg_dtype_is_float(tg_tensor_dtype(y))) {
            tg_tensor *d[MAX_SEQS] = {NULL}, *g = (tg_tensor *)th_golden_get(f, c, "g");
            OK(tg_grad(d, 1, &y, &g, n, s, NULL));
            for (int j = 0; j < n; j++) {
                snprintf(key, sizeof key, "d%d", j);
                th_expect_same_bits(c, d[j], d[j], th_golden_get(f, c, key));
            }
            th_release_all(n, d);
            graded++;
        }
        th_release_all(n, s);
        tg_tensor_release(y);
    }
    cr_assert(cases >= 10 && graded >= 9, "%d cases, %d with gradients", cases, graded);
    tg_st_free(f);
}

static int pad_fn(tg_tensor **out, int n, tg_tensor *const *in, void *user)
{
    const bool *bf = user;
    return tg_pad_sequence(out, n, in, *bf, -0.75);
}

Test(pad_sequence, gradcheck_and_gradgradcheck_in_f64)
{
    const int64_t lens[3] = {2, 4, 1};
    for (int bf = 0; bf < 2; bf++) {
        tg_tensor *s[3];
        for (int j = 0; j < 3; j++) {
            s[j] = th_rand_uniform(TG_F64, 2, (int64_t[]){lens[j], 3}, 11 + (uint64_t)j);
            OK(tg_tensor_set_requires_grad(s[j], true));
        }
        bool b = bf != 0;
        th_expect_gradchecks(pad_fn, &b, 3, s, "batch_first %d", bf);
        th_release_all(3, s);
    }
}

/* The padded batch with its lengths is the input of the forwards over
 * sequences of different lengths: each row's output at its valid steps is
 * the LSTM's output on that sequence alone. */
Test(pad_sequence, feeds_the_forward_over_different_lengths)
{
    tg_rng rng;
    tg_rng_init(&rng, 3);
    tg_rnn_opts o = TG_RNN_OPTS_INIT;
    o.batch_first = true;
    tg_module *lstm = NULL;
    OK(tg_nn_lstm_new(&lstm, 3, 5, &o, &rng));
    const int64_t lens[3] = {4, 2, 3};
    tg_tensor *s[3], *x = NULL, *y = NULL, *len = NULL;
    for (int j = 0; j < 3; j++)
        s[j] = th_rand_uniform(TG_F32, 2, (int64_t[]){lens[j], 3}, 21 + (uint64_t)j);
    OK(tg_pad_sequence(&x, 3, s, true, 0));
    OK(tg_tensor_from_data(&len, TG_I64, 1, (int64_t[]){3}, lens));
    OK(tg_nn_lstm_forward_packed(lstm, &y, NULL, NULL, x, len, NULL, NULL));
    for (int j = 0; j < 3; j++) {
        tg_tensor *one = NULL, *b = NULL, *yj = NULL, *row = NULL;
        OK(tg_unsqueeze(&b, s[j], 0));
        OK(tg_nn_lstm_forward(lstm, &one, NULL, NULL, b, NULL, NULL));   /* (1, L_j, 5) */
        OK(tg_narrow(&row, y, 0, j, 1));
        OK(tg_narrow(&yj, row, 1, 0, lens[j]));
        th_expect_close("lstm row", yj, one, 1e-6);
        th_release_all(4, (tg_tensor *[]){one, b, yj, row});
    }
    th_release_all(3, s);
    th_release_all(3, (tg_tensor *[]){x, y, len});
    tg_module_release(lstm);
}

Test(pad_sequence, a_scope_owns_the_result)
{
    tg_tensor *s[2] = {th_rand_uniform(TG_F32, 1, (int64_t[]){2}, 1),
                       th_rand_uniform(TG_F32, 1, (int64_t[]){3}, 2)};
    OK(tg_scope_begin());
    tg_tensor *y = NULL;
    OK(tg_pad_sequence(&y, 2, s, false, 0));
    cr_assert(eq(int, tg_scope_size(), 1));
    th_expect_shape(y, 2, (int64_t[]){3, 2});
    OK(tg_scope_end());
    th_release_all(2, s);
}

Test(pad_sequence, refusals_name_the_rule)
{
    tg_tensor *a = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1);
    tg_tensor *b = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 4}, 2), *z = NULL;
    OK(tg_tensor_scalar(&z, TG_F32, 1));
    th_expect_refused_clean(tg_pad_sequence(out_, 0, (tg_tensor *[]){a}, false, 0), TG_EINVAL,
                            "n=0 must be >= 1");
    th_expect_refused_clean(tg_pad_sequence(out_, 2, NULL, false, 0), TG_EINVAL,
                            "seqs not NULL");
    th_expect_refused_clean(tg_pad_sequence(out_, 2, (tg_tensor *[]){a, NULL}, false, 0),
                            TG_EINVAL, "seqs[1] must not be NULL");
    th_expect_refused_clean(tg_pad_sequence(out_, 2, (tg_tensor *[]){a, z}, false, 0),
                            TG_ESHAPE, "seqs[1] is 0-d");
    th_expect_refused_clean(tg_pad_sequence(out_, 2, (tg_tensor *[]){a, b}, true, 0),
                            TG_ESHAPE, "seqs[1] has shape (2, 4) but seqs[0] (2, 3)");
    cr_assert(eq(int, tg_pad_sequence(NULL, 1, &a, false, 0), TG_EINVAL));
    th_release_all(3, (tg_tensor *[]){a, b, z});
}
