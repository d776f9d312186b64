/* tests/rnn_fixtures.c - see rnn_fixtures.h. */
#include "rnn_fixtures.h"

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>

#include "helpers.h"

tg_tensor *th_weighted_sum(int n, tg_tensor *const *r, tg_tensor *const *g)
{
    tg_tensor *loss = NULL;
    for (int i = 0; i < n; i++) {
        if (!r[i]) continue;
        tg_tensor *p = NULL, *s = NULL, *t = NULL;
        cr_assert(eq(int, tg_mul(&p, r[i], g[i]), TG_OK), "%s", tg_error_message());
        cr_assert(eq(int, tg_sum(&s, p), TG_OK));
        if (loss) {
            cr_assert(eq(int, tg_add(&t, loss, s), TG_OK));
            th_release_all(2, (tg_tensor *[]){loss, s});
            loss = t;
        } else {
            loss = s;
        }
        tg_tensor_release(p);
    }
    return loss;
}

void th_expect_golden_in(const char *key, const tg_tensor *got, const tg_tensor *want,
                         double tol)
{
    tg_tensor *conv = NULL;
    if (tg_tensor_dtype(want) != tg_tensor_dtype(got))
        cr_assert(eq(int, tg_tensor_to_dtype(&conv, (tg_tensor *)got, tg_tensor_dtype(want)),
                     TG_OK));
    th_expect_close_scaled(key, conv ? conv : got, want, tol);
    tg_tensor_release(conv);
}

void th_expect_golden_grads(const tg_st_file *f, const char *pre, const tg_module *m,
                            tg_tensor *const leaves[3], double tol)
{
    char key[TG_MODULE_NAME_MAX + 64];
    static const char *const ln[3] = {"grad.x", "grad.h0", "grad.c0"};
    for (int i = 0; i < 3; i++) {
        if (!leaves[i]) continue;
        snprintf(key, sizeof key, "%s %s", pre, ln[i]);
        th_expect_golden_in(key, tg_tensor_grad(leaves[i]), th_golden_get(f, pre, ln[i]), tol);
    }
    const int n = tg_module_state_count(m);
    for (int i = 0; i < n; i++) {
        char name[TG_MODULE_NAME_MAX], gk[TG_MODULE_NAME_MAX + 8];
        tg_tensor *p = NULL;
        cr_assert(eq(int, tg_module_state_at(m, i, name, sizeof name, &p, NULL), TG_OK));
        snprintf(gk, sizeof gk, "grad.%s", name);
        snprintf(key, sizeof key, "%s %s", pre, gk);
        cr_assert(tg_tensor_grad(p) != NULL, "%s has no gradient", key);
        th_expect_golden_in(key, tg_tensor_grad(p), th_golden_get(f, pre, gk), tol);
    }
}
