/* tests/test_packed_sequence_refusals.c - what tg_pack_padded_sequence,
 * tg_pad_packed_sequence, tg_pack_sequence and the recurrent forwards over
 * a packed sequence (nn.h) refuse: NULL arguments, lengths of the wrong
 * dtype, shape, value or order, packed sequences that break the rules,
 * a short total_length, modules of another kind and data of another
 * shape; each with a message naming the argument and the rule, nothing
 * written and no tensor memory left behind. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

static tg_tensor *lengths_of(int n, const int64_t *v)
{
    tg_tensor *t = NULL;
    OK(tg_tensor_from_data(&t, TG_I64, 1, (int64_t[]){n}, v));
    return t;
}

/* call (writing through ps_) is refused with status and words, leaves
 * *ps_ empty and no tensor memory behind. */
#define expect_refused_packed(call, status, words)                                         \
    do {                                                                                   \
        tg_packed_sequence out_ps_ = TG_PACKED_SEQUENCE_INIT, *ps_ = &out_ps_;             \
        int64_t before_, after_;                                                           \
        tg_memory_stats(&before_, NULL);                                                   \
        int rc_ = (call);                                                                  \
        tg_memory_stats(&after_, NULL);                                                    \
        th_expect_refused(rc_, status, words, out_ps_.data);                               \
        cr_assert(out_ps_.batch_sizes == NULL && out_ps_.sorted_indices == NULL);          \
        cr_assert(eq(i64, after_, before_), "%s leaves %lld bytes", #call,                 \
                  (long long)(after_ - before_));                                          \
    } while (0)

Test(packed_sequence_refusals, pack_refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){3, 2, 2}, 1);
    tg_tensor *v = th_rand_uniform(TG_F32, 1, (int64_t[]){3}, 1), *fl = NULL, *l2 = NULL;
    tg_tensor *ok = lengths_of(2, (int64_t[]){2, 3}), *zero = lengths_of(2, (int64_t[]){0, 3});
    tg_tensor *big = lengths_of(2, (int64_t[]){4, 3}), *three = lengths_of(3, (int64_t[]){1, 1, 1});
    tg_tensor *e = NULL;
    OK(tg_tensor_zeros(&fl, TG_F32, 1, (int64_t[]){2}));
    OK(tg_tensor_zeros(&l2, TG_I64, 2, (int64_t[]){1, 2}));
    OK(tg_tensor_zeros(&e, TG_F32, 3, (int64_t[]){3, 0, 2}));
    expect_refused_packed(tg_pack_padded_sequence(ps_, x, zero, false, false), TG_EINVAL,
                          "lengths[0]=0 must be in [1, T=3]");
    expect_refused_packed(tg_pack_padded_sequence(ps_, x, big, false, false), TG_EINVAL,
                          "lengths[0]=4 must be in [1, T=3]");
    expect_refused_packed(tg_pack_padded_sequence(ps_, x, ok, false, true), TG_EINVAL,
                          "with enforce_sorted the lengths must be sorted in decreasing order");
    expect_refused_packed(tg_pack_padded_sequence(ps_, x, fl, false, false), TG_EINVAL,
                          "lengths has dtype f32; it must be i64 (or i32)");
    expect_refused_packed(tg_pack_padded_sequence(ps_, x, l2, false, false), TG_EINVAL,
                          "lengths is (1, 2); it must be 1-d with one length per batch row");
    expect_refused_packed(tg_pack_padded_sequence(ps_, x, three, false, false), TG_EINVAL,
                          "(N) = (2)");
    expect_refused_packed(tg_pack_padded_sequence(ps_, v, ok, false, false), TG_ESHAPE,
                          "input is (3); it must be at least 2-d");
    expect_refused_packed(tg_pack_padded_sequence(ps_, e, ok, false, false), TG_ESHAPE,
                          "its batch N must be >= 1");
    expect_refused_packed(tg_pack_padded_sequence(ps_, NULL, ok, false, false), TG_EINVAL,
                          "must not be NULL");
    expect_refused_packed(tg_pack_padded_sequence(ps_, x, NULL, false, false), TG_EINVAL,
                          "must not be NULL");
    cr_assert(eq(int, tg_pack_padded_sequence(NULL, x, ok, false, false), TG_EINVAL));
    tg_tensor *s0 = th_rand_uniform(TG_F32, 2, (int64_t[]){2, 3}, 1);
    tg_tensor *s1 = th_rand_uniform(TG_F32, 2, (int64_t[]){0, 3}, 1);
    tg_tensor *s2 = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 3}, 1);
    tg_tensor *s3 = th_rand_uniform(TG_F32, 2, (int64_t[]){3, 2}, 1);
    expect_refused_packed(tg_pack_sequence(ps_, 2, (tg_tensor *[]){s0, s1}, false), TG_EINVAL,
                          "pack_sequence: seqs[1] has length 0");
    expect_refused_packed(tg_pack_sequence(ps_, 2, (tg_tensor *[]){s0, s2}, true), TG_EINVAL,
                          "seqs[1] has length 3 > seqs[0]'s 2: with enforce_sorted");
    expect_refused_packed(tg_pack_sequence(ps_, 2, (tg_tensor *[]){s2, s3}, false), TG_ESHAPE,
                          "pack_sequence: seqs[1] has shape (3, 2) but seqs[0] (3, 3)");
    expect_refused_packed(tg_pack_sequence(ps_, 0, (tg_tensor *[]){s0}, false), TG_EINVAL,
                          "n=0 must be >= 1");
    expect_refused_packed(tg_pack_sequence(ps_, 2, (tg_tensor *[]){s0, NULL}, false),
                          TG_EINVAL, "seqs[1] must not be NULL");
    cr_assert(eq(int, tg_pack_sequence(NULL, 1, &s0, false), TG_EINVAL));
    th_release_all(4, (tg_tensor *[]){s0, s1, s2, s3});
    th_release_all(9, (tg_tensor *[]){x, v, fl, l2, ok, zero, big, three, e});
}

Test(packed_sequence_refusals, pad_refusals_name_the_rule)
{
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){3, 2, 2}, 1);
    tg_tensor *len = lengths_of(2, (int64_t[]){2, 3}), *bad_bs = lengths_of(2, (int64_t[]){2, 3});
    tg_tensor *perm = lengths_of(2, (int64_t[]){1, 1}), *same = lengths_of(2, (int64_t[]){0, 1});
    tg_packed_sequence ps = TG_PACKED_SEQUENCE_INIT;
    OK(tg_pack_padded_sequence(&ps, x, len, false, false));
    th_expect_refused_clean(tg_pad_packed_sequence(out_, NULL, &ps, false, 0, 2), TG_EINVAL,
                            "total_length=2 must be at least the longest length 3");
    th_expect_refused_clean(tg_pad_packed_sequence(out_, NULL, &ps, false, 0, 0), TG_EINVAL,
                            "total_length=0 must be at least");
    th_expect_refused_clean(tg_pad_packed_sequence(out_, NULL, &ps, false, 1e300, -1),
                            TG_EINVAL, "padding_value=1e+300 cannot be converted to data's "
                                       "dtype f32");
    th_expect_refused_clean(tg_pad_packed_sequence(out_, NULL, NULL, false, 0, -1), TG_EINVAL,
                            "out and packed must not be NULL");
    tg_packed_sequence b = ps;
    b.batch_sizes = bad_bs;
    th_expect_refused_clean(tg_pad_packed_sequence(out_, NULL, &b, false, 0, -1), TG_EINVAL,
                            "batch_sizes[1]=3 must be in [1, batch_sizes[0]=2]");
    b = ps;
    b.sorted_indices = NULL;
    th_expect_refused_clean(tg_pad_packed_sequence(out_, NULL, &b, false, 0, -1), TG_EINVAL,
                            "must be both NULL or both given");
    b = ps;
    b.sorted_indices = perm;
    th_expect_refused_clean(tg_pad_packed_sequence(out_, NULL, &b, false, 0, -1), TG_EINVAL,
                            "sorted_indices[1]=1: sorted_indices must be a permutation");
    b = ps;
    b.unsorted_indices = same;
    th_expect_refused_clean(tg_pad_packed_sequence(out_, NULL, &b, false, 0, -1), TG_EINVAL,
                            "unsorted_indices must be the inverse of sorted_indices");
    b = ps;
    b.data = x;
    th_expect_refused_clean(tg_pad_packed_sequence(out_, NULL, &b, false, 0, -1), TG_EINVAL,
                            "its first extent must be the sum of batch_sizes, 5");
    b = ps;
    b.batch_sizes = NULL;
    th_expect_refused_clean(tg_pad_packed_sequence(out_, NULL, &b, false, 0, -1), TG_EINVAL,
                            "data and batch_sizes must not be NULL");
    b = ps;
    b.batch_sizes = x;
    th_expect_refused_clean(tg_pad_packed_sequence(out_, NULL, &b, false, 0, -1), TG_EINVAL,
                            "batch_sizes has dtype f32; it must be i64");
    tg_tensor *y = NULL;
    cr_assert(eq(int, tg_pad_packed_sequence(&y, &y, &ps, false, 0, -1), TG_EINVAL));
    cr_assert(y == NULL);
    tg_packed_sequence_release(&ps);
    th_release_all(5, (tg_tensor *[]){x, len, bad_bs, perm, same});
}

Test(packed_sequence_refusals, layer_refusals_name_the_rule)
{
    tg_rng rng;
    tg_rng_init(&rng, 2);
    tg_module *gru = NULL, *lstm = NULL, *lin = NULL;
    OK(tg_nn_gru_new(&gru, 2, 3, NULL, &rng));
    OK(tg_nn_lstm_new(&lstm, 2, 3, NULL, &rng));
    OK(tg_nn_linear_new(&lin, 2, 3, true, &rng));
    tg_tensor *x = th_rand_uniform(TG_F32, 3, (int64_t[]){3, 2, 2}, 1);
    tg_tensor *x3 = th_rand_uniform(TG_F32, 4, (int64_t[]){3, 2, 1, 2}, 1);
    tg_tensor *len = lengths_of(2, (int64_t[]){2, 3}), *hn = NULL;
    tg_packed_sequence ps = TG_PACKED_SEQUENCE_INIT, p3 = TG_PACKED_SEQUENCE_INIT;
    OK(tg_pack_padded_sequence(&ps, x, len, false, false));
    OK(tg_pack_padded_sequence(&p3, x3, len, false, false));
    expect_refused_packed(tg_nn_rnn_forward_packed_sequence(lstm, ps_, NULL, &ps, NULL),
                          TG_EINVAL, "m is a LSTM module, not an RNN or GRU");
    expect_refused_packed(tg_nn_lstm_forward_packed_sequence(gru, ps_, NULL, NULL, &ps, NULL,
                                                             NULL),
                          TG_EINVAL, "m is a GRU module, not an LSTM");
    expect_refused_packed(tg_nn_rnn_forward_packed_sequence(lin, ps_, NULL, &ps, NULL),
                          TG_EINVAL, "not an RNN or GRU");
    expect_refused_packed(tg_nn_rnn_forward_packed_sequence(gru, ps_, NULL, &p3, NULL),
                          TG_ESHAPE, "input's data is (5, 1, 2); it must be (sum of lengths, "
                                     "input_size=2)");
    expect_refused_packed(tg_nn_rnn_forward_packed_sequence(gru, ps_, NULL, NULL, NULL),
                          TG_EINVAL, "m, output and input must not be NULL");
    cr_assert(eq(int, tg_nn_rnn_forward_packed_sequence(gru, &ps, NULL, &ps, NULL),
                 TG_EINVAL));
    tg_tensor *h0 = th_rand_uniform(TG_F32, 3, (int64_t[]){1, 3, 3}, 1);
    expect_refused_packed(tg_nn_rnn_forward_packed_sequence(gru, ps_, &hn, &ps, h0),
                          TG_ESHAPE, "h_0 is (1, 3, 3)");
    cr_assert(hn == NULL);
    tg_packed_sequence_release(&ps);
    tg_packed_sequence_release(&p3);
    th_release_all(4, (tg_tensor *[]){x, x3, len, h0});
    tg_module_release(gru);
    tg_module_release(lstm);
    tg_module_release(lin);
}
