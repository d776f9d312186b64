/* tests/test_optim_groups.c - param groups and the options an optimizer
 * refuses: add_param_group's refusals (nothing changed), per-group learning
 * rates, bad constructor options, RMSprop's options over groups and
 * modules, and wrong-shaped gradients refused while step skips parameters
 * without one. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "core/core.h"
#include "tapegrad/tapegrad.h"
#include "tapegrad/autograd.h"
#include "tapegrad/loss.h"
#include "tapegrad/ops.h"
#include "tapegrad/optim.h"
#include "tapegrad/safetensors.h"

/* ---- param groups ---------------------------------------------------------------- */

/* call fails with status and a message holding words */
#define REFUSED(call, status, words) th_expect_status(call, status, words)

/* Adding a group is refused, with nothing changed, for a NULL optimizer,
 * the other family's call, a parameter already in a group or given twice,
 * no parameters, a non-float or non-leaf one, and bad options; NULL opts
 * take the constructor's. */
Test(optim_groups, add_param_group_refuses_bad_groups_and_changes_nothing)
{
    tg_tensor *p[4] = {NULL}, *iq = NULL, *nl = NULL;
    for (int j = 0; j < 4; j++) {
        tg_tensor_zeros(&p[j], TG_F32, 1, (int64_t[]){3});
        tg_tensor_set_requires_grad(p[j], true);
    }
    tg_tensor_zeros(&iq, TG_I32, 1, (int64_t[]){3});
    tg_mul_scalar(&nl, p[3], 2.0);
    tg_optimizer *o = NULL, *s = NULL;
    tg_adam_opts a = TG_ADAMW_OPTS_INIT;
    a.lr = 0.25;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    cr_assert(eq(int, tg_adamw_new(&o, 2, p, &a), TG_OK));
    cr_assert(eq(int, tg_sgd_new(&s, 1, &p[3], &so), TG_OK));
    tg_adam_opts bad = a;
    bad.beta1 = 2;
    tg_sgd_opts bad_sgd = so;
    bad_sgd.nesterov = true;
    REFUSED(tg_adam_add_param_group(NULL, 1, &p[2], &a), TG_EINVAL,
            "adam_add_param_group: opt must not be NULL");
    REFUSED(tg_sgd_add_param_group(o, 1, &p[2], &so), TG_EINVAL,
            "sgd_add_param_group: opt is 'adamw'");
    REFUSED(tg_adam_add_param_group(s, 1, &p[2], &a), TG_EINVAL,
            "adam_add_param_group: opt is 'sgd'");
    REFUSED(tg_adam_add_param_group(o, 1, &p[0], &a), TG_EINVAL,
            "params[0] is already in param group 0 (each parameter in one group)");
    REFUSED(tg_adam_add_param_group(o, 2, (tg_tensor *[]){p[2], p[2]}, &a), TG_EINVAL,
            "params[1] is params[0] again");
    REFUSED(tg_adam_add_param_group(o, -1, &p[2], &a), TG_EINVAL, "n_params=-1 must be >= 0");
    REFUSED(tg_adam_add_param_group(o, 1, NULL, &a), TG_EINVAL, "params must not be NULL");
    REFUSED(tg_adam_add_param_group(o, 1, &iq, &a), TG_EDTYPE,
            "params[0] has dtype i32; float dtypes only");
    REFUSED(tg_adam_add_param_group(o, 1, &nl, &a), TG_EINVAL, "params[0] is not a leaf");
    REFUSED(tg_adam_add_param_group(o, 1, &p[2], &bad), TG_EINVAL,
            "adam_add_param_group: beta1=2 must be in [0, 1)");
    REFUSED(tg_sgd_add_param_group(s, 1, &p[2], &bad_sgd), TG_EINVAL,
            "sgd_add_param_group: nesterov requires momentum > 0");
    cr_assert(eq(int, tg_optimizer_param_group_count(o), 1));
    cr_assert(eq(int, tg_optimizer_param_group_count(s), 1));
    cr_assert(eq(int, tg_tensor_refcount(p[2]), 1), "nothing retained");
    /* NULL options: the constructor's, lr 0.25 */
    cr_assert(eq(int, tg_adam_add_param_group(o, 1, &p[2], NULL), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(int, tg_optimizer_param_group_count(o), 2));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(o, 1), 0.25));
    cr_assert(eq(int, tg_tensor_refcount(p[2]), 2));
    tg_optimizer_free(o);
    tg_optimizer_free(s);
    cr_assert(eq(int, tg_tensor_refcount(p[2]), 1));
    tg_tensor_release(iq);
    tg_tensor_release(nl);
    th_release_all(4, p);
}

/* Each group's lr is its own; tg_optimizer_set_lr sets every group's and
 * tg_optimizer_get_lr reads group 0's.  A group out of range is refused. */
Test(optim_groups, group_learning_rates)
{
    tg_tensor *p[3] = {NULL};
    for (int j = 0; j < 3; j++) tg_tensor_zeros(&p[j], TG_F64, 1, (int64_t[]){2});
    tg_optimizer *o = NULL;
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    so.lr = 0.1;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p[0], &so), TG_OK));
    so.lr = 0.2;
    cr_assert(eq(int, tg_sgd_add_param_group(o, 1, &p[1], &so), TG_OK));
    so.lr = 0.3;
    cr_assert(eq(int, tg_sgd_add_param_group(o, 1, &p[2], &so), TG_OK));
    cr_assert(eq(int, tg_optimizer_param_group_count(o), 3));
    const double lrs[3] = {0.1, 0.2, 0.3};
    for (int g = 0; g < 3; g++) cr_assert(eq(dbl, tg_optimizer_get_group_lr(o, g), lrs[g]));
    cr_assert(eq(int, tg_optimizer_set_group_lr(o, 2, 0.05), TG_OK));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(o, 2), 0.05));
    cr_assert(eq(dbl, tg_optimizer_get_lr(o), 0.1));
    cr_assert(eq(int, tg_optimizer_set_group_lr(o, 3, 0.05), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "group=3 must be in [0, 3)") != NULL, "%s",
              tg_error_message());
    cr_assert(eq(int, tg_optimizer_set_group_lr(o, -1, 0.05), TG_EINVAL));
    cr_assert(eq(int, tg_optimizer_set_group_lr(o, 1, NAN), TG_EINVAL));
    cr_assert(eq(int, tg_optimizer_set_group_lr(NULL, 0, 0.1), TG_EINVAL));
    cr_assert(isnan(tg_optimizer_get_group_lr(o, 3)));
    cr_assert(isnan(tg_optimizer_get_group_lr(NULL, 0)));
    cr_assert(eq(int, tg_optimizer_param_group_count(NULL), 0));
    cr_assert(eq(int, tg_optimizer_set_lr(o, 0.5), TG_OK));
    for (int g = 0; g < 3; g++) cr_assert(eq(dbl, tg_optimizer_get_group_lr(o, g), 0.5));
    tg_optimizer_free(o);
    th_release_all(3, p);
}

/* Empty groups (torch's {"params": []}, which ZeroRedundancyOptimizer's
 * local optimizers have): group 0 and group 2 empty, the steps those of an
 * optimizer without them, the state saved and loaded with them; L-BFGS
 * keeps refusing no parameters. */
Test(optim_groups, empty_groups_step_nothing_and_keep_their_place)
{
    tg_tensor *p[2] = {NULL}, *q[2] = {NULL}, *g = NULL;
    for (int j = 0; j < 2; j++) {
        tg_tensor_full(&p[j], TG_F32, 1, (int64_t[]){3}, 0.5 + j);
        tg_tensor_full(&q[j], TG_F32, 1, (int64_t[]){3}, 0.5 + j);
    }
    tg_adam_opts a = TG_ADAM_OPTS_INIT, b = TG_ADAM_OPTS_INIT;
    a.lr = 0.1, b.lr = 0.02, b.amsgrad = true;
    tg_optimizer *o = NULL, *ref = NULL, *back = NULL;
    cr_assert(eq(int, tg_adam_new(&o, 0, NULL, &b), TG_OK));
    cr_assert(eq(int, tg_adam_add_param_group(o, 1, &p[0], &a), TG_OK));
    cr_assert(eq(int, tg_adam_add_param_group(o, 0, NULL, &a), TG_OK));
    cr_assert(eq(int, tg_adam_add_param_group(o, 1, &p[1], &b), TG_OK));
    cr_assert(eq(int, tg_optimizer_param_group_count(o), 4));
    cr_assert(eq(int, tg_adam_new(&ref, 1, &q[0], &a), TG_OK));
    cr_assert(eq(int, tg_adam_add_param_group(ref, 1, &q[1], &b), TG_OK));
    for (int step = 0; step < 3; step++) {
        for (int j = 0; j < 2; j++) {
            tg_tensor_full(&g, TG_F32, 1, (int64_t[]){3}, 0.25 * (step + 1) - j);
            tg_tensor_set_grad(p[j], g);
            tg_tensor_full(&g, TG_F32, 1, (int64_t[]){3}, 0.25 * (step + 1) - j);
            tg_tensor_set_grad(q[j], g);
        }
        cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
        cr_assert(eq(int, tg_optimizer_step(ref), TG_OK));
    }
    for (int j = 0; j < 2; j++)
        cr_assert(memcmp(tg_tensor_cdata(p[j]), tg_tensor_cdata(q[j]), 3 * sizeof(float)) == 0,
                  "parameter %d differs from the optimizer without empty groups", j);
    tg_st_file *f = NULL;
    cr_assert(eq(int, tg_st_new(&f), TG_OK));
    cr_assert(eq(int, tg_optimizer_state_save(o, f, "o"), TG_OK));
    const tg_tensor *sizes = tg_st_get(f, "o.param_groups");
    cr_assert(sizes != NULL && tg_tensor_numel(sizes) == 4);
    const int64_t want[4] = {0, 1, 0, 1};
    cr_assert(memcmp(tg_tensor_cdata(sizes), want, sizeof want) == 0);
    cr_assert(eq(int, tg_adam_new(&back, 0, NULL, &a), TG_OK));
    cr_assert(eq(int, tg_adam_add_param_group(back, 1, &q[0], &a), TG_OK));
    cr_assert(eq(int, tg_adam_add_param_group(back, 0, NULL, &a), TG_OK));
    cr_assert(eq(int, tg_adam_add_param_group(back, 1, &q[1], &a), TG_OK));
    cr_assert(eq(int, tg_optimizer_state_load(back, f, "o"), TG_OK));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(back, 0), b.lr));
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(back, 3), b.lr));
    tg_optimizer *l = NULL;
    tg_lbfgs_opts lo = TG_LBFGS_OPTS_INIT;
    REFUSED(tg_lbfgs_new(&l, 0, NULL, &lo), TG_EINVAL, "n_params=0 must be >= 1");
    REFUSED(tg_adam_new(&l, 1, NULL, &a), TG_EINVAL, "params must not be NULL");
    cr_assert(l == NULL);
    tg_st_free(f);
    tg_optimizer_free(o);
    tg_optimizer_free(ref);
    tg_optimizer_free(back);
    th_release_all(2, p);
    th_release_all(2, q);
}

/* ---- construction and step errors -------------------------------------------- */

Test(optim_groups, bad_options_are_rejected)
{
    tg_tensor *p = NULL, *q = NULL, *iq = NULL, *nl = NULL;
    tg_tensor_zeros(&p, TG_F32, 1, (int64_t[]){3});
    tg_tensor_zeros(&q, TG_F32, 1, (int64_t[]){3});
    tg_tensor_zeros(&iq, TG_I32, 1, (int64_t[]){3});
    tg_tensor_set_requires_grad(q, true);
    tg_mul_scalar(&nl, q, 2.0);   /* not a leaf */
    tg_optimizer *o = NULL;
    tg_sgd_opts s = TG_SGD_OPTS_INIT;
    s.lr = -0.1;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "lr=-0.1") != NULL, "%s", tg_error_message());
    s.lr = INFINITY;   /* would make every weight NaN at the first step */
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));
    cr_assert(strstr(tg_error_message(), "lr=inf must be finite") != NULL, "%s", tg_error_message());
    s.lr = 0.1;
    s.nesterov = true;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));   /* momentum 0 */
    s.momentum = 0.9;
    s.dampening = 0.1;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));   /* dampening != 0 */
    s = (tg_sgd_opts)TG_SGD_OPTS_INIT;
    s.momentum = -1;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));
    s.momentum = 0;
    s.weight_decay = NAN;
    cr_assert(eq(int, tg_sgd_new(&o, 1, &p, &s), TG_EINVAL));

    tg_adam_opts a = TG_ADAM_OPTS_INIT;
    double bad_betas[4][2] = {{1.0, 0.999}, {-0.1, 0.999}, {0.9, 1.0}, {0.9, -1e-3}};
    for (int i = 0; i < 4; i++) {
        a.beta1 = bad_betas[i][0];
        a.beta2 = bad_betas[i][1];
        cr_assert(eq(int, tg_adam_new(&o, 1, &p, &a), TG_EINVAL), "betas %d", i);
        cr_assert(eq(int, tg_adamw_new(&o, 1, &p, &a), TG_EINVAL), "betas %d", i);
    }
    a = (tg_adam_opts)TG_ADAM_OPTS_INIT;
    a.lr = -1;
    cr_assert(eq(int, tg_adam_new(&o, 1, &p, &a), TG_EINVAL));
    a.lr = INFINITY;
    cr_assert(eq(int, tg_adamw_new(&o, 1, &p, &a), TG_EINVAL));
    a.lr = 1e-3;
    a.eps = -1;
    cr_assert(eq(int, tg_adamw_new(&o, 1, &p, &a), TG_EINVAL));
    a.eps = 1e-8;
    cr_assert(eq(int, tg_adam_new(&o, 1, &p, NULL), TG_EINVAL));
    cr_assert(eq(int, tg_adam_new(&o, -1, &p, &a), TG_EINVAL));
    cr_assert(eq(int, tg_adam_new(&o, 2, (tg_tensor *[]){p, p}, &a), TG_EINVAL));
    cr_assert(eq(int, tg_adam_new(&o, 2, (tg_tensor *[]){p, NULL}, &a), TG_EINVAL));
    cr_assert(eq(int, tg_adam_new(&o, 1, &iq, &a), TG_EDTYPE));
    cr_assert(eq(int, tg_adam_new(&o, 1, &nl, &a), TG_EINVAL));
    cr_assert(eq(int, tg_adam_new(NULL, 1, &p, &a), TG_EINVAL));
    cr_assert(o == NULL);
    cr_assert(eq(int, tg_tensor_refcount(p), 1));   /* nothing retained */
    tg_tensor_release(nl);
    tg_tensor_release(iq);
    tg_tensor_release(q);
    tg_tensor_release(p);
}

/* RMSprop refuses what torch's constructor refuses (lr, eps, momentum,
 * weight_decay, alpha < 0; NaN too) and, as tapegrad's others, an infinite
 * lr and NULL options, naming the option; alpha > 1, which torch accepts,
 * is accepted.  A group is added to RMSprop only by its own call, and NULL
 * options are the constructor's.  From a module: its parameters. */
Test(optim_groups, rmsprop_options_groups_and_modules)
{
    tg_tensor *p = NULL, *q = NULL;
    tg_tensor_zeros(&p, TG_F32, 1, (int64_t[]){3});
    tg_tensor_zeros(&q, TG_F32, 1, (int64_t[]){3});
    tg_optimizer *o = NULL, *s = NULL;
    const char *words[] = {"rmsprop: lr=-0.1 must be finite and >= 0",
                           "rmsprop: lr=inf must be finite and >= 0",
                           "rmsprop: alpha=-0.5 must be >= 0", "rmsprop: alpha=nan must be >= 0",
                           "rmsprop: eps=-1e-08 must be >= 0",
                           "rmsprop: momentum=-0.9 must be >= 0",
                           "rmsprop: weight_decay=-0.01 must be >= 0"};
    for (int c = 0; c < 7; c++) {
        tg_rmsprop_opts r = TG_RMSPROP_OPTS_INIT;
        if (c < 2) r.lr = c ? INFINITY : -0.1;
        else if (c < 4) r.alpha = c == 2 ? -0.5 : NAN;
        else if (c == 4) r.eps = -1e-8;
        else if (c == 5) r.momentum = -0.9;
        else r.weight_decay = -0.01;
        REFUSED(tg_rmsprop_new(&o, 1, &p, &r), TG_EINVAL, words[c]);
    }
    REFUSED(tg_rmsprop_new(&o, 1, &p, NULL), TG_EINVAL, "use TG_RMSPROP_OPTS_INIT");
    cr_assert(o == NULL);
    tg_rmsprop_opts r = TG_RMSPROP_OPTS_INIT;
    cr_assert(eq(dbl, r.lr, 1e-2));
    cr_assert(eq(dbl, r.alpha, 0.99));
    cr_assert(eq(dbl, r.eps, 1e-8));
    r.alpha = 1.5;
    cr_assert(eq(int, tg_rmsprop_new(&o, 1, &p, &r), TG_OK), "%s", tg_error_message());
    tg_optimizer_free(o);
    r = (tg_rmsprop_opts)TG_RMSPROP_OPTS_INIT;
    r.lr = 0.3;
    cr_assert(eq(int, tg_rmsprop_new(&o, 1, &p, &r), TG_OK));
    tg_sgd_opts so = TG_SGD_OPTS_INIT;
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    cr_assert(eq(int, tg_sgd_new(&s, 1, &q, &so), TG_OK));
    REFUSED(tg_rmsprop_add_param_group(s, 1, &p, &r), TG_EINVAL,
            "rmsprop_add_param_group: opt is 'sgd'; tg_rmsprop_add_param_group adds to RMSprop "
            "(tg_sgd_add_param_group to an SGD)");
    REFUSED(tg_adam_add_param_group(o, 1, &q, &ao), TG_EINVAL,
            "adam_add_param_group: opt is 'rmsprop'");
    REFUSED(tg_sgd_add_param_group(o, 1, &q, &so), TG_EINVAL, "sgd_add_param_group: opt is "
                                                               "'rmsprop'");
    REFUSED(tg_rmsprop_add_param_group(NULL, 1, &q, &r), TG_EINVAL, "opt must not be NULL");
    r.alpha = -1;
    REFUSED(tg_rmsprop_add_param_group(o, 1, &q, &r), TG_EINVAL,
            "rmsprop_add_param_group: alpha=-1 must be >= 0");
    REFUSED(tg_rmsprop_add_param_group(o, 1, &p, NULL), TG_EINVAL,
            "params[0] is already in param group 0");
    cr_assert(eq(int, tg_optimizer_param_group_count(o), 1));
    cr_assert(eq(int, tg_rmsprop_add_param_group(o, 1, &q, NULL), TG_OK), "%s",
              tg_error_message());
    cr_assert(eq(dbl, tg_optimizer_get_group_lr(o, 1), 0.3));
    tg_optimizer_free(o);
    tg_optimizer_free(s);

    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *m = NULL;
    cr_assert(eq(int, tg_nn_linear_new(&m, 3, 2, true, &rng), TG_OK));
    r = (tg_rmsprop_opts)TG_RMSPROP_OPTS_INIT;
    cr_assert(eq(int, tg_rmsprop_from_module(&o, m, &r), TG_OK), "%s", tg_error_message());
    cr_assert(eq(int, tg_tensor_refcount(tg_module_find(m, "weight")), 2));
    tg_optimizer_free(o);
    REFUSED(tg_rmsprop_from_module(&o, NULL, &r), TG_EINVAL, "rmsprop_from_module");
    tg_module_release(m);
    cr_assert(eq(int, tg_tensor_refcount(p), 1));
    tg_tensor_release(p);
    tg_tensor_release(q);
}

/* A gradient of the wrong shape cannot be set (tg_tensor_set_grad refuses
 * it, as PyTorch's assignment does); a step skips parameters without one. */
Test(optim_groups, wrong_shaped_grads_are_refused_and_step_skips_null_grads)
{
    tg_tensor *p[3] = {NULL, NULL, NULL}, *g0 = NULL, *g1 = NULL;
    for (int j = 0; j < 3; j++) {
        tg_tensor_full(&p[j], TG_F64, 1, (int64_t[]){4}, 1.0);
        tg_tensor_set_requires_grad(p[j], true);
    }
    tg_tensor_full(&g0, TG_F64, 1, (int64_t[]){4}, 2.0);
    tg_tensor_full(&g1, TG_F64, 1, (int64_t[]){5}, 2.0);
    cr_assert(eq(int, tg_tensor_set_grad(p[0], g0), TG_OK));
    cr_assert(eq(int, tg_tensor_set_grad(p[1], g1), TG_ESHAPE));   /* g1 is released */
    cr_assert(strstr(tg_error_message(), "grad has shape (5) but the tensor (4)") != NULL, "%s",
              tg_error_message());
    cr_assert(tg_tensor_grad(p[1]) == NULL);
    tg_tensor *gi = NULL;
    tg_tensor_full(&gi, TG_F32, 1, (int64_t[]){4}, 2.0);
    cr_assert(eq(int, tg_tensor_set_grad(p[1], gi), TG_EDTYPE));   /* f32 grad of an f64 tensor */
    cr_assert(tg_tensor_grad(p[1]) == NULL);
    tg_optimizer *o = NULL;
    tg_sgd_opts s = TG_SGD_OPTS_INIT;
    s.lr = 0.25;
    s.momentum = 0.5;
    cr_assert(eq(int, tg_sgd_new(&o, 3, p, &s), TG_OK));
    uint64_t v0 = tg_tensor_version(p[0]), v1 = tg_tensor_version(p[1]),
             v2 = tg_tensor_version(p[2]);
    double x;

    /* p[0] moves by lr * g (first momentum step uses the gradient itself);
     * p[1] and p[2] (no gradient) are untouched. */
    cr_assert(eq(int, tg_optimizer_step(o), TG_OK));
    for (int i = 0; i < 4; i++) {
        tg_tensor_get_flat(p[0], i, &x);
        cr_assert(eq(dbl, x, 1.0 - 0.25 * 2.0));
        tg_tensor_get_flat(p[2], i, &x);
        cr_assert(eq(dbl, x, 1.0));
    }
    cr_assert(tg_tensor_version(p[0]) > v0);
    cr_assert(eq(u64, tg_tensor_version(p[1]), v1));
    cr_assert(eq(u64, tg_tensor_version(p[2]), v2));
    tg_optimizer_zero_grad(o);
    cr_assert(tg_tensor_grad(p[0]) == NULL);
    cr_assert(eq(int, tg_optimizer_step(NULL), TG_EINVAL));
    tg_optimizer_free(o);
    for (int j = 0; j < 3; j++) tg_tensor_release(p[j]);
}

