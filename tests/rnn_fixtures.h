/* tests/rnn_fixtures.h - what the recurrent layers' golden tests share
 * (test_rnn.c, test_rnn_packed.c, test_packed_sequence.c;
 * rnn_fixtures.c): the loss whose gradients the goldens hold, and the
 * comparison of the gradients with them. */
#ifndef TG_TESTS_RNN_FIXTURES_H
#define TG_TESTS_RNN_FIXTURES_H

#include "tapegrad/tapegrad.h"

/* sum over i < n of sum(r[i] * g[i]), the r[i] that are NULL left out: a
 * loss whose gradient with respect to r[i] is g[i]; a new tensor. */
tg_tensor *th_weighted_sum(int n, tg_tensor *const *r, tg_tensor *const *g);

/* got against want within tol of want's largest |value|
 * (th_expect_close_scaled), got first converted to want's dtype when
 * they differ. */
void th_expect_golden_in(const char *key, const tg_tensor *got, const tg_tensor *want,
                         double tol);

/* After the backward of th_weighted_sum: the gradients of the leaves x,
 * h0 and c0 (those not NULL; golden keys grad.x, grad.h0, grad.c0) and of
 * every parameter of m (grad.<name>; each must have one) against case pre
 * of f, by th_expect_golden_in. */
void th_expect_golden_grads(const tg_st_file *f, const char *pre, const tg_module *m,
                            tg_tensor *const leaves[3], double tol);

#endif
