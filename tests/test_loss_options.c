/* tests/test_loss_options.c - tg_nn_loss_options gives back the options
 * every loss class was made with, under torch's attribute names, with 0
 * or false for the options a class does not have; NULL arguments and a
 * module that is not a loss are refused, the options left as they were. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "helpers.h"
#include "tapegrad/tapegrad.h"

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* The options of m, which must be a loss. */
static tg_nn_loss_opts opts_of(tg_module *m)
{
    tg_nn_loss_opts o;
    memset(&o, 0x5a, sizeof o);
    OK(tg_nn_loss_options(m, &o));
    tg_module_release(m);
    return o;
}

/* o has none of the options but reduction red (0 and false). */
static void expect_only_reduction(const char *what, tg_nn_loss_opts o, tg_reduction red)
{
    cr_assert(eq(int, (int)o.reduction, (int)red), "%s", what);
    const double nums[7] = {(double)o.ignore_index, o.label_smoothing, o.delta, o.beta,
                            o.margin, o.p, o.eps};
    for (int i = 0; i < 7; i++) cr_assert(eq(dbl, nums[i], 0), "%s: option %d is set", what, i);
    const bool flags[4] = {o.log_target, o.swap, o.full, o.log_input};
    for (int i = 0; i < 4; i++) cr_assert(flags[i] == false, "%s: flag %d is set", what, i);
}

Test(loss_options, classes_without_options_give_their_reduction)
{
    tg_module *m = NULL;
    OK(tg_nn_mse_loss_new(&m, TG_REDUCTION_SUM));
    expect_only_reduction("MSELoss", opts_of(m), TG_REDUCTION_SUM);
    OK(tg_nn_l1_loss_new(&m, TG_REDUCTION_NONE));
    expect_only_reduction("L1Loss", opts_of(m), TG_REDUCTION_NONE);
    OK(tg_nn_bce_loss_new(&m, NULL, TG_REDUCTION_MEAN));
    expect_only_reduction("BCELoss", opts_of(m), TG_REDUCTION_MEAN);
    OK(tg_nn_bce_with_logits_loss_new(&m, NULL, TG_REDUCTION_SUM, NULL));
    expect_only_reduction("BCEWithLogitsLoss", opts_of(m), TG_REDUCTION_SUM);
    OK(tg_nn_soft_margin_loss_new(&m, TG_REDUCTION_NONE));
    expect_only_reduction("SoftMarginLoss", opts_of(m), TG_REDUCTION_NONE);
    OK(tg_nn_multilabel_margin_loss_new(&m, TG_REDUCTION_SUM));
    expect_only_reduction("MultiLabelMarginLoss", opts_of(m), TG_REDUCTION_SUM);
    OK(tg_nn_multilabel_soft_margin_loss_new(&m, NULL, TG_REDUCTION_NONE));
    expect_only_reduction("MultiLabelSoftMarginLoss", opts_of(m), TG_REDUCTION_NONE);
}

Test(loss_options, each_class_gives_back_its_own_options)
{
    tg_module *m = NULL;
    tg_nn_loss_opts o;
    OK(tg_nn_cross_entropy_loss_new(&m, NULL, 3, TG_REDUCTION_SUM, 0.25));
    o = opts_of(m);
    cr_assert(eq(i64, o.ignore_index, 3));
    cr_assert(eq(dbl, o.label_smoothing, 0.25));
    cr_assert(eq(int, (int)o.reduction, (int)TG_REDUCTION_SUM));
    OK(tg_nn_nll_loss_new(&m, NULL, -7, TG_REDUCTION_NONE));
    o = opts_of(m);
    cr_assert(eq(i64, o.ignore_index, -7));
    cr_assert(eq(dbl, o.label_smoothing, 0));
    OK(tg_nn_huber_loss_new(&m, TG_REDUCTION_MEAN, 0.5));
    o = opts_of(m);
    cr_assert(eq(dbl, o.delta, 0.5));
    cr_assert(eq(dbl, o.beta, 0));
    OK(tg_nn_smooth_l1_loss_new(&m, TG_REDUCTION_MEAN, 2.5));
    o = opts_of(m);
    cr_assert(eq(dbl, o.beta, 2.5));
    cr_assert(eq(dbl, o.delta, 0));
    OK(tg_nn_kl_div_loss_new(&m, TG_REDUCTION_BATCHMEAN, true));
    o = opts_of(m);
    cr_assert(eq(int, (int)o.reduction, (int)TG_REDUCTION_BATCHMEAN));
    cr_assert(o.log_target && !o.swap && !o.full);
    OK(tg_nn_margin_ranking_loss_new(&m, 0.3, TG_REDUCTION_SUM));
    cr_assert(eq(dbl, opts_of(m).margin, 0.3));
    OK(tg_nn_hinge_embedding_loss_new(&m, 1.5, TG_REDUCTION_SUM));
    cr_assert(eq(dbl, opts_of(m).margin, 1.5));
    OK(tg_nn_cosine_embedding_loss_new(&m, -0.5, TG_REDUCTION_SUM));
    cr_assert(eq(dbl, opts_of(m).margin, -0.5));
    OK(tg_nn_triplet_margin_loss_new(&m, 2.0, 3.0, 1e-4, true, TG_REDUCTION_NONE));
    o = opts_of(m);
    cr_assert(eq(dbl, o.margin, 2.0));
    cr_assert(eq(dbl, o.p, 3.0));
    cr_assert(eq(dbl, o.eps, 1e-4));
    cr_assert(o.swap && !o.log_target && !o.full);
    OK(tg_nn_multi_margin_loss_new(&m, 2, 0.75, NULL, TG_REDUCTION_MEAN));
    o = opts_of(m);
    cr_assert(eq(dbl, o.p, 2.0));
    cr_assert(eq(dbl, o.margin, 0.75));
    cr_assert(eq(dbl, o.eps, 0));
    OK(tg_nn_poisson_nll_loss_new(&m, false, true, 1e-5, TG_REDUCTION_SUM));
    o = opts_of(m);
    cr_assert(o.log_input == false && o.full);
    cr_assert(eq(dbl, o.eps, 1e-5));
    OK(tg_nn_poisson_nll_loss_new(&m, true, false, 1e-8, TG_REDUCTION_SUM));
    o = opts_of(m);
    cr_assert(o.log_input && !o.full);
    OK(tg_nn_gaussian_nll_loss_new(&m, true, 1e-3, TG_REDUCTION_NONE));
    o = opts_of(m);
    cr_assert(o.full && !o.log_input);
    cr_assert(eq(dbl, o.eps, 1e-3));
}

Test(loss_options, null_and_other_modules_are_refused)
{
    tg_module *other = NULL, *mse = NULL;
    OK(tg_nn_flatten_new(&other, 1, -1));
    OK(tg_nn_mse_loss_new(&mse, TG_REDUCTION_MEAN));
    tg_nn_loss_opts o, fill;
    memset(&o, 0x5a, sizeof o);
    memset(&fill, 0x5a, sizeof fill);
    th_expect_refused(tg_nn_loss_options(other, &o), TG_EINVAL,
                      "m is a Flatten module, not a loss", NULL);
    th_expect_refused(tg_nn_loss_options(NULL, &o), TG_EINVAL, "must not be NULL", NULL);
    th_expect_refused(tg_nn_loss_options(mse, NULL), TG_EINVAL, "must not be NULL", NULL);
    cr_assert(memcmp(&o, &fill, sizeof o) == 0, "refused calls wrote the options");
    tg_module_release(other);
    tg_module_release(mse);
}
