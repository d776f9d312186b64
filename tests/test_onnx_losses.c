/* tests/test_onnx_losses.c - the ONNX export of the loss modules
 * torch.onnx.export writes (src/onnx/onnx_loss.c): CrossEntropyLoss and
 * NLLLoss as SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss,
 * BCEWithLogitsLoss and KLDivLoss written out, on the two graph inputs
 * (input, target) of tg_onnx_export_n, with each reduction, their class
 * weights, ignore_index, one sample and a dynamic batch (its output dims
 * read back), checked by onnx's checker and by ONNX Runtime against
 * tapegrad's forward (onnx_cases.h); the refusals of label smoothing,
 * probability targets and a loss below a Sequential. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_losses, .init = onnx_setup, .fini = th_tmp_dir_remove);

#define OK(call) cr_assert(eq(int, (call), TG_OK), "%s: %s", #call, tg_error_message())

/* f32 sums in other orders */
#define RTOL 1e-5
#define ATOL 1e-6

static const char *const no_inits[] = {NULL};

static tg_tensor *urand(uint64_t seed, int nd, const int64_t *shape, double lo, double hi)
{
    return th_rand_tensor(&seed, TG_F32, nd, shape, lo, hi);
}

static const char *const IT[2] = {"input", "target"};

/* An i64 tensor of the given shape holding v. */
static tg_tensor *i64s(int nd, const int64_t *shape, const int64_t *v)
{
    tg_tensor *t = NULL;
    OK(tg_tensor_from_data(&t, TG_I64, nd, shape, v));
    return t;
}

static tg_tensor *f32s(int nd, const int64_t *shape, const float *v)
{
    tg_tensor *t = NULL;
    OK(tg_tensor_from_data(&t, TG_F32, nd, shape, v));
    return t;
}

static void loss_case(const char *name, tg_module *m, tg_tensor *x, tg_tensor *t)
{
    write_case_n(name, m, 2, (tg_tensor *[]){x, t}, IT, RTOL, ATOL, NULL, NULL);
}

/* CrossEntropyLoss and NLLLoss: each reduction, class weights (their
 * buffer "weight"), ignore_index hit by a target, an input (N, C, d), one
 * sample (C) with a 0-d target, a dynamic batch. */
Test(onnx_losses, class_losses_match_onnxruntime)
{
    need_onnx();
    const float wv[5] = {0.5f, 2.0f, 1.0f, 0.25f, 3.0f};
    tg_tensor *w = f32s(1, (const int64_t[]){5}, wv);
    tg_module *ce = NULL, *cew = NULL, *cen = NULL, *nll = NULL, *nlln = NULL;
    OK(tg_nn_cross_entropy_loss_new(&ce, NULL, TG_IGNORE_INDEX_DEFAULT, TG_REDUCTION_MEAN, 0));
    OK(tg_nn_cross_entropy_loss_new(&cew, w, 2, TG_REDUCTION_MEAN, 0));
    OK(tg_nn_cross_entropy_loss_new(&cen, w, 2, TG_REDUCTION_NONE, 0));
    OK(tg_nn_nll_loss_new(&nll, w, 3, TG_REDUCTION_SUM));
    OK(tg_nn_nll_loss_new(&nlln, NULL, TG_IGNORE_INDEX_DEFAULT, TG_REDUCTION_NONE));
    tg_tensor *x = urand(100, 2, (const int64_t[]){6, 5}, -4, 4);
    tg_tensor *t = i64s(1, (const int64_t[]){6}, (const int64_t[]){0, 2, 4, 1, 3, 2});
    case_graph = "\"ops\": [\"SoftmaxCrossEntropyLoss\"], \"attributes\": "
                 "{\"SoftmaxCrossEntropyLoss\": {\"reduction\": \"mean\", \"ignore_index\": "
                 "-100}}";
    write_case_n("ce_mean", ce, 2, (tg_tensor *[]){x, t}, IT, RTOL, ATOL, no_inits, NULL);
    case_graph = "\"attributes\": {\"SoftmaxCrossEntropyLoss\": {\"ignore_index\": 2}}";
    write_case_n("ce_weight_ignore", cew, 2, (tg_tensor *[]){x, t}, IT, RTOL, ATOL,
                 (const char *const[]){"weight", NULL}, NULL);
    loss_case("ce_none", cen, x, t);
    case_graph = "\"ops\": [\"NegativeLogLikelihoodLoss\"], \"attributes\": "
                 "{\"NegativeLogLikelihoodLoss\": {\"reduction\": \"sum\"}}";
    loss_case("nll_sum_weight", nll, x, t);
    loss_case("nll_none", nlln, x, t);
    /* (N, C, d) with (N, d) */
    tg_tensor *x3 = urand(101, 3, (const int64_t[]){2, 5, 3}, -4, 4);
    tg_tensor *t3 = i64s(2, (const int64_t[]){2, 3}, (const int64_t[]){4, 2, 0, 1, 3, 2});
    loss_case("ce_spatial", cew, x3, t3);
    loss_case("nll_spatial", nll, x3, t3);
    /* one sample: (C) and a 0-d target */
    tg_tensor *x1 = urand(102, 1, (const int64_t[]){5}, -4, 4);
    tg_tensor *t0 = i64s(0, NULL, (const int64_t[]){3});
    case_graph = "\"ops\": [\"Unsqueeze\", \"Unsqueeze\", \"SoftmaxCrossEntropyLoss\", "
                 "\"Squeeze\"]";
    loss_case("ce_one_sample_none", cen, x1, t0);
    loss_case("ce_one_sample_mean", ce, x1, t0);
    tg_tensor *xr = urand(103, 2, (const int64_t[]){9, 5}, -4, 4);
    tg_tensor *tr = i64s(1, (const int64_t[]){9}, (const int64_t[]){4, 4, 2, 0, 1, 3, 2, 0, 1});
    dynamic_case2("ce_dynamic_none", cen, (tg_tensor *[]){x, t}, (tg_tensor *[]){xr, tr},
                   "batch");
    check_cases();
    tg_module *ms[5] = {ce, cew, cen, nll, nlln};
    for (int i = 0; i < 5; i++) tg_module_release(ms[i]);
    th_release_all(9, (tg_tensor *[]){w, x, t, x3, t3, x1, t0, xr, tr});
}

/* BCEWithLogitsLoss: logits up to |x| = 1000 (finite), each reduction,
 * weight and pos_weight (buffers, broadcast over the rows), a dynamic
 * batch. */
Test(onnx_losses, bce_with_logits_matches_onnxruntime)
{
    need_onnx();
    const float pv[4] = {0.5f, 2.0f, 3.0f, 1.0f}, wv[4] = {1.0f, 0.25f, 2.0f, 0.5f};
    tg_tensor *pw = f32s(1, (const int64_t[]){4}, pv), *w = f32s(2, (const int64_t[]){1, 4}, wv);
    tg_module *plain = NULL, *both = NULL, *none = NULL;
    OK(tg_nn_bce_with_logits_loss_new(&plain, NULL, TG_REDUCTION_MEAN, NULL));
    OK(tg_nn_bce_with_logits_loss_new(&both, w, TG_REDUCTION_SUM, pw));
    OK(tg_nn_bce_with_logits_loss_new(&none, NULL, TG_REDUCTION_NONE, pw));
    tg_tensor *x = urand(110, 2, (const int64_t[]){5, 4}, -30, 30);
    tg_tensor *t = urand(111, 2, (const int64_t[]){5, 4}, 0, 1);
    const float big[8] = {1000, -1000, 999.5f, -999.5f, 0, 30, -30, 2};
    tg_tensor *xb = f32s(2, (const int64_t[]){2, 4}, big);
    tg_tensor *tb = urand(112, 2, (const int64_t[]){2, 4}, 0, 1);
    case_graph = "\"ops\": [\"Neg\", \"Softplus\", \"Sub\", \"Mul\", \"Add\", \"ReduceMean\"]";
    loss_case("bce_mean", plain, x, t);
    case_graph = "\"ops\": [\"Neg\", \"Softplus\", \"Sub\", \"Mul\", \"Sub\", \"Mul\", \"Add\", "
                 "\"Mul\", \"Add\", \"Mul\", \"ReduceSum\"]";
    write_case_n("bce_weights_sum", both, 2, (tg_tensor *[]){x, t}, IT, RTOL, ATOL,
                 (const char *const[]){"weight", "pos_weight", "/one", NULL}, NULL);
    loss_case("bce_none", none, x, t);
    loss_case("bce_large_logits", none, xb, tb);
    tg_tensor *xr = urand(113, 2, (const int64_t[]){8, 4}, -30, 30);
    tg_tensor *tr = urand(114, 2, (const int64_t[]){8, 4}, 0, 1);
    dynamic_case2("bce_dynamic_none", none, (tg_tensor *[]){x, t}, (tg_tensor *[]){xr, tr},
                   "batch,4");
    check_cases();
    tg_module_release(plain);
    tg_module_release(both);
    tg_module_release(none);
    th_release_all(8, (tg_tensor *[]){pw, w, x, t, xb, tb, xr, tr});
}

static tg_module *kl(tg_reduction red, bool log_target)
{
    tg_module *m = NULL;
    OK(tg_nn_kl_div_loss_new(&m, red, log_target));
    return m;
}

/* KLDivLoss: each reduction, batchmean on a dynamic batch (the sum over
 * the run's batch, not the export's), targets with zeros (xlogy's 0),
 * log_target, a target broadcast over the batch. */
Test(onnx_losses, kl_div_matches_onnxruntime)
{
    need_onnx();
    tg_module *mean = kl(TG_REDUCTION_MEAN, false), *sum = kl(TG_REDUCTION_SUM, false);
    tg_module *none = kl(TG_REDUCTION_NONE, false), *bm = kl(TG_REDUCTION_BATCHMEAN, false);
    tg_module *lt = kl(TG_REDUCTION_BATCHMEAN, true);
    tg_tensor *x = urand(120, 2, (const int64_t[]){3, 4}, -3, 0);
    const float tv[12] = {0.1f, 0, 0.6f, 0.3f, 0, 0, 1, 0, 0.25f, 0.25f, 0.25f, 0.25f};
    tg_tensor *t = f32s(2, (const int64_t[]){3, 4}, tv);
    case_graph = "\"ops\": [\"Log\", \"Mul\", \"Equal\", \"Where\", \"Mul\", \"Sub\", "
                 "\"ReduceMean\"]";
    loss_case("kl_mean", mean, x, t);
    loss_case("kl_sum", sum, x, t);
    loss_case("kl_none", none, x, t);
    case_graph = "\"ops\": [\"Log\", \"Mul\", \"Equal\", \"Where\", \"Mul\", \"Sub\", "
                 "\"ReduceSum\", \"Shape\", \"Gather\", \"Cast\", \"Div\"]";
    loss_case("kl_batchmean", bm, x, t);
    tg_tensor *lt_t = urand(121, 2, (const int64_t[]){3, 4}, -4, 0);
    case_graph = "\"ops\": [\"Exp\", \"Sub\", \"Mul\", \"ReduceSum\", \"Shape\", \"Gather\", "
                 "\"Cast\", \"Div\"]";
    loss_case("kl_log_target", lt, x, lt_t);
    tg_tensor *row = urand(122, 1, (const int64_t[]){4}, 0, 1);
    loss_case("kl_broadcast_target", bm, x, row);
    tg_tensor *xr = urand(123, 2, (const int64_t[]){7, 4}, -3, 0);
    tg_tensor *tr = urand(124, 2, (const int64_t[]){7, 4}, 0, 1);
    dynamic_case2("kl_dynamic_batchmean", bm, (tg_tensor *[]){x, t}, (tg_tensor *[]){xr, tr},
                   "");
    check_cases();
    tg_module *ms[5] = {mean, sum, none, bm, lt};
    for (int i = 0; i < 5; i++) tg_module_release(ms[i]);
    th_release_all(6, (tg_tensor *[]){x, t, lt_t, row, xr, tr});
}

/* A CrossEntropyLoss with label smoothing, or given class probabilities,
 * has no ONNX operator; a loss below a Sequential gets one input; a loss
 * without an ONNX form (MSELoss) takes none. */
Test(onnx_losses, loss_refusals_name_the_module_and_write_nothing)
{
    need_onnx();
    tg_module *ls = NULL, *ce = NULL, *seq = NULL;
    OK(tg_nn_cross_entropy_loss_new(&ls, NULL, TG_IGNORE_INDEX_DEFAULT, TG_REDUCTION_MEAN, 0.1));
    OK(tg_nn_cross_entropy_loss_new(&ce, NULL, TG_IGNORE_INDEX_DEFAULT, TG_REDUCTION_MEAN, 0));
    tg_tensor *x = urand(130, 2, (const int64_t[]){3, 4}, -2, 2);
    tg_tensor *p = urand(131, 2, (const int64_t[]){3, 4}, 0, 1);
    tg_tensor *t = i64s(1, (const int64_t[]){3}, (const int64_t[]){0, 3, 1});
    refused_export_n(ls, 2, (tg_tensor *[]){x, t}, NULL, TG_EUNSUPPORTED,
              "module '<top>' (CrossEntropyLoss) with label_smoothing=0.1 is not supported: "
              "ONNX's SoftmaxCrossEntropyLoss has no label smoothing");
    refused_export_n(ce, 2, (tg_tensor *[]){x, p}, NULL, TG_EDTYPE,
              "module '<top>' (CrossEntropyLoss): graph input 1 (target) has dtype f32; it "
              "must be i64 class indices");
    OK(tg_nn_sequential_new(&seq));
    append(seq, tg_module_retain(ce));
    refused_export_n(seq, 1, (tg_tensor *[]){x}, NULL, TG_EINVAL,
              "module '0' (CrossEntropyLoss) takes the graph inputs (input, target), not 1");
    tg_module_release(ls);
    tg_module_release(ce);
    tg_module_release(seq);
    th_release_all(3, (tg_tensor *[]){x, p, t});
}
