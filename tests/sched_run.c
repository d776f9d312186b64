/* tests/sched_run.c - the two-group scheduler runs of sched_run.h. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "sched_run.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

tg_tensor *sr_param(void)
{
    tg_tensor *t = NULL;
    OK(tg_tensor_zeros(&t, TG_F64, 1, (int64_t[]){1}));
    tg_tensor_set_requires_grad(t, true);
    return t;
}

void sr_make_opt(run *r, okind k)
{
    memset(r, 0, sizeof *r);
    r->p = sr_param();
    r->q = sr_param();
    const double lrs[2] = {0.1, 0.02};
    tg_tensor *ps[2] = {r->p, r->q};
    for (int g = 0; g < 2; g++) {
        if (k == O_SGD_M || k == O_SGD) {
            tg_sgd_opts o = TG_SGD_OPTS_INIT;
            o.lr = lrs[g];
            o.momentum = k == O_SGD_M ? 0.9 : 0.0;
            OK(g ? tg_sgd_add_param_group(r->opt, 1, &ps[g], &o) : tg_sgd_new(&r->opt, 1, ps, &o));
        } else if (k == O_ADAM || k == O_ADAMW) {
            tg_adam_opts o = TG_ADAM_OPTS_INIT;
            if (k == O_ADAMW) {
                o = (tg_adam_opts)TG_ADAMW_OPTS_INIT;
                o.beta1 = 0.5;
                o.beta2 = 0.99;
            }
            o.lr = lrs[g];
            OK(g ? tg_adam_add_param_group(r->opt, 1, &ps[g], &o)
                 : k == O_ADAM ? tg_adam_new(&r->opt, 1, ps, &o)
                               : tg_adamw_new(&r->opt, 1, ps, &o));
        } else {
            tg_rmsprop_opts o = TG_RMSPROP_OPTS_INIT;
            o.lr = lrs[g];
            o.momentum = k == O_RMS5 ? 0.5 : 0.3;
            OK(g ? tg_rmsprop_add_param_group(r->opt, 1, &ps[g], &o)
                 : tg_rmsprop_new(&r->opt, 1, ps, &o));
        }
    }
}

void sr_run_make(run *r, const tcase *c)
{
    sr_make_opt(r, c->o);
    c->build(r);
}

void sr_run_free(run *r)
{
    bool top_is_part = false;
    for (int i = 0; i < SR_PARTS; i++) top_is_part = top_is_part || r->top == r->parts[i];
    if (!top_is_part) tg_lr_scheduler_free(r->top);
    for (int i = 0; i < SR_PARTS; i++) tg_lr_scheduler_free(r->parts[i]);
    tg_optimizer_free(r->opt);
    tg_tensor_release(r->p);
    tg_tensor_release(r->q);
}

tg_checkpoint *sr_checkpoint_of(const run *r)
{
    tg_checkpoint *ck = NULL;
    OK(tg_checkpoint_new(&ck));
    OK(tg_checkpoint_add_optimizer(ck, "opt", r->opt));
    OK(tg_checkpoint_add_lr_scheduler(ck, "sched", r->top));
    return ck;
}

const tg_tensor *sr_golden(tg_st_file *goldens, const tcase *c, const char *what)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", c->name, what);
    return tg_st_get(goldens, k);
}

int64_t sr_n_steps(tg_st_file *goldens, const tcase *c)
{
    const tg_tensor *t = sr_golden(goldens, c, "lr");
    cr_assert(t != NULL, "no golden for %s", c->name);
    return tg_tensor_shape(t)[0] - 1;
}
