/* DDP at its edges on the ranks of test_dist: rank 0's buffers on every
 * rank, a parameter that no rank used, and a last batch padded to the
 * ranks' shares.  Run by tests/dist.c's main. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "tapegrad/checkpoint.h"

#include "dist_test.h"

/* Sequential(BatchNorm1d(2), Linear(2, 2)) from seed. */
static tg_module *make_bn_first_model(uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *seq = NULL, *m = NULL;
    tg_nn_sequential_new(&seq);
    tg_nn_batchnorm_new(&m, 0, 2, 1e-5, 0.1, true, true);
    tg_nn_sequential_append(seq, m);
    tg_nn_linear_new(&m, 2, 2, true, &rng);
    tg_nn_sequential_append(seq, m);
    return seq;
}

/* Rank r's (4, 2) batch of step s: around 2r, so the ranks' statistics differ. */
static void bn_batch(tg_tensor **x, int rank, int step)
{
    const int64_t shape[2] = {4, 2};
    tg_tensor_zeros(x, TG_F32, 2, shape);
    float *p = tg_tensor_data(*x);
    for (int i = 0; i < 8; i++) p[i] = (float)(2.0 * rank + sin(1.7 * i + 0.9 * step + rank));
}

/* tg_ddp_new_module with broadcast_buffers (the default), as PyTorch's DDP
 * with broadcast_buffers=True: the BatchNorm's running statistics on every
 * rank, after each step, are those of one BatchNorm fed rank 0's batches
 * alone; without broadcast_buffers each rank keeps its own. */
void ddp_keeps_every_rank_on_rank_0s_buffers(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    for (int bb = 1; bb >= 0; bb--) {
        tg_module *m = make_bn_first_model(40 + (uint64_t)rank), *ref = NULL;
        OK(tg_nn_batchnorm_new(&ref, 0, 2, 1e-5, 0.1, true, true));
        tg_ddp_opts o = TG_DDP_OPTS_INIT;
        o.broadcast_buffers = bb;
        tg_ddp *ddp = NULL;
        OK(tg_ddp_new_module(&ddp, g_dist, m, &o));
        tg_tensor **p = NULL;
        int n = 0;
        OK(tg_module_parameters(m, &p, &n));
        tg_sgd_opts so = TG_SGD_OPTS_INIT;
        so.lr = 0.1;
        tg_optimizer *opt = NULL;
        OK(tg_sgd_new(&opt, n, p, &so));
        for (int step = 0; step < 4; step++) {
            tg_tensor *x = NULL, *x0 = NULL, *y = NULL, *y0 = NULL, *loss = NULL;
            bn_batch(&x, rank, step);
            bn_batch(&x0, 0, step);
            tg_optimizer_zero_grad(opt);
            OK(tg_module_forward(m, &y, x));
            OK(tg_mean(&loss, y));
            OK(tg_ddp_prepare(ddp));
            OK(tg_backward(loss, NULL, NULL));
            g_bcasts = 0;
            OK(tg_ddp_finish(ddp));
            /* the three buffers go in one message, as PyTorch coalesces them */
            CHECK(g_bcasts == bb, "broadcast_buffers %d: %d MPI_Bcast "
                  "calls in tg_ddp_finish", bb, g_bcasts);
            OK(tg_optimizer_step(opt));
            OK(tg_module_forward(ref, &y0, x0));
            const char *names[3] = {"running_mean", "running_var", "num_batches_tracked"};
            for (int i = 0; i < 3; i++) {
                char key[32];
                snprintf(key, sizeof key, "0.%s", names[i]);
                const tg_tensor *mine = tg_module_find(m, key), *want = tg_module_find(ref, names[i]);
                if (bb || rank == 0)
                    CHECK(same_bits(mine, want), "broadcast_buffers %d, step %d: %s is not rank "
                          "0's alone", bb, step, names[i]);
                else if (i < 2 && world > 1)
                    CHECK(!same_bits(mine, want), "broadcast_buffers 0, step %d: %s is rank 0's",
                          step, names[i]);
            }
            tg_tensor_release(x), tg_tensor_release(x0), tg_tensor_release(y);
            tg_tensor_release(y0), tg_tensor_release(loss);
        }
        tg_optimizer_free(opt);
        free(p);
        tg_ddp_free(ddp);
        tg_module_release(ref);
        tg_module_release(m);
    }
}

/* sum(a(x) + b(x)), or sum(a(x)) when use_b is false; then backward. */
static int unused_forward_backward(tg_module *a, tg_module *b, tg_tensor *x, bool use_b)
{
    tg_tensor *ya = NULL, *yb = NULL, *s = NULL, *loss = NULL;
    int rc = tg_module_forward(a, &ya, x);
    if (rc >= 0 && use_b) rc = tg_module_forward(b, &yb, x);
    if (rc >= 0) rc = use_b ? tg_add(&s, ya, yb) : (s = tg_tensor_retain(ya), TG_OK);
    if (rc >= 0) rc = tg_sum(&loss, s);
    if (rc >= 0) rc = tg_backward(loss, NULL, NULL);
    tg_tensor_release(loss), tg_tensor_release(s), tg_tensor_release(yb), tg_tensor_release(ya);
    return rc;
}

/* As PyTorch's DDP with find_unused_parameters=True: a parameter that no
 * rank's backward reaches keeps .grad NULL (so Adam leaves it alone); one
 * that only rank 0's reaches gets rank 0's gradient averaged with zeros. */
void ddp_leaves_the_grad_of_a_parameter_no_rank_used_unset(void)
{
    const int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    tg_rng rng;
    tg_rng_init(&rng, 1);
    tg_module *root = NULL, *a = NULL, *b = NULL;
    OK(tg_nn_sequential_new(&root));
    OK(tg_nn_linear_new(&a, 3, 1, true, &rng));
    OK(tg_nn_linear_new(&b, 3, 1, true, &rng));
    OK(tg_nn_sequential_append(root, a));
    OK(tg_nn_sequential_append(root, b));
    tg_ddp *ddp = NULL;
    OK(tg_ddp_new_module(&ddp, g_dist, root, NULL));
    tg_optimizer *opt = NULL;
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    ao.lr = 0.1;
    OK(tg_adam_from_module(&opt, root, &ao));
    tg_tensor *x = NULL, *bw = tg_module_find(b, "weight"), *before = NULL, *local = NULL;
    OK(tg_tensor_full(&x, TG_F32, 2, (int64_t[]){2, 3}, 1.0 + rank));
    /* step 0: b used everywhere; step 1: nowhere; step 2: on rank 0 only */
    for (int step = 0; step < 3; step++) {
        const bool use_b = step == 0 || (step == 2 && rank == 0);
        tg_optimizer_zero_grad(opt);
        OK(tg_ddp_prepare(ddp));
        OK(unused_forward_backward(a, b, x, use_b));
        if (step == 2) {   /* rank 0's own gradient of b.weight, on every rank */
            OK(tg_tensor_zeros(&local, TG_F32, 2, (int64_t[]){1, 3}));
            if (rank == 0) OK(tg_tensor_copy_(local, tg_tensor_grad(bw)));
            OK(tg_dist_broadcast_tensor(g_dist, local, 0));
        }
        OK(tg_ddp_finish(ddp));
        OK(tg_tensor_clone(&before, bw));
        if (step == 1) {
            CHECK(tg_tensor_grad(bw) == NULL, "step 1: b.weight.grad is set though no rank "
                  "used b");
            CHECK(tg_tensor_grad(tg_module_find(b, "bias")) == NULL, "step 1: b.bias.grad set");
        } else {
            const tg_tensor *g = tg_tensor_grad(bw);
            CHECK(g != NULL, "step %d: b.weight.grad is NULL", step);
            for (int k = 0; g && step == 2 && k < 3; k++) {
                double got = 0, want = 0;
                OK(tg_tensor_get_flat(g, k, &got));
                OK(tg_tensor_get_flat(local, k, &want));
                want /= world;
                CHECK(got == want, "step 2: b.weight.grad[%d] = %g, not rank 0's / %d = %g", k,
                      got, world, want);
            }
        }
        OK(tg_optimizer_step(opt));
        if (step == 1) CHECK(same_bits(before, bw), "step 1: Adam moved the unused b.weight");
        tg_tensor_release(before);
        before = NULL;
    }
    tg_tensor_release(local);
    tg_tensor_release(x);
    tg_optimizer_free(opt);
    tg_ddp_free(ddp);
    tg_module_release(root);
}

/* A sharded loader without drop_last over 11 samples, batch 4 per rank:
 * the last run of 3 is padded to 4 (as PyTorch's DistributedSampler), so
 * each rank's last batch has 2 samples and the DDP gradient of mean(x w)
 * is the mean over the padded global batch, as every other batch's is. */
void ddp_on_a_padded_last_batch_weighs_every_sample_alike(void)
{
    enum { N = 11 };
    const int world = tg_dist_size(g_dist);
    uint8_t img[N];
    int64_t lab[N] = {0};
    for (int i = 0; i < N; i++) img[i] = (uint8_t)(i * 20);
    tg_tensor *ti = NULL, *tl = NULL, *w = NULL, *x = NULL, *y = NULL;
    tg_dataset *ds = NULL;
    tg_loader *ld = NULL;
    tg_ddp *ddp = NULL;
    OK(tg_tensor_from_data(&ti, TG_U8, 4, (int64_t[]){N, 1, 1, 1}, img));
    OK(tg_tensor_from_data(&tl, TG_I64, 1, (int64_t[]){N}, lab));
    OK(tg_dataset_from_tensors(&ds, ti, tl));
    tg_loader_options o = TG_LOADER_OPTIONS_INIT;
    o.batch_size = 4;
    o.seed = 3;
    OK(tg_loader_new(&ld, ds, &o));
    OK(tg_loader_set_shard(ld, tg_dist_rank(g_dist), world));
    OK(tg_tensor_full(&w, TG_F32, 0, NULL, 1.0));
    OK(tg_tensor_set_requires_grad(w, true));
    OK(tg_ddp_new(&ddp, g_dist, 1, &w, NULL));
    int k = 0;
    while (tg_loader_next(ld, &x, &y) == 1) {
        tg_tensor *xw = NULL, *loss = NULL, *sum = NULL;
        OK(tg_tensor_set_grad(w, NULL));
        OK(tg_ddp_prepare(ddp));
        OK(tg_mul(&xw, x, w));
        OK(tg_mean(&loss, xw));   /* d loss / d w = mean(x) */
        OK(tg_backward(loss, NULL, NULL));
        OK(tg_ddp_finish(ddp));
        /* the mean over the global batch: all-reduced sum and count */
        double s = 0, got = 0;
        for (int64_t i = 0; i < tg_tensor_numel(x); i++) {
            double v = 0;
            OK(tg_tensor_get_flat(x, i, &v));
            s += v;
        }
        OK(tg_tensor_from_data(&sum, TG_F64, 1, (int64_t[]){2},
                               (double[]){s, (double)tg_tensor_numel(x)}));
        OK(tg_dist_allreduce_sum(g_dist, sum));
        const double *tot = tg_tensor_cdata(sum);
        OK(tg_tensor_get_flat(tg_tensor_grad(w), 0, &got));
        CHECK(fabs(got - tot[0] / tot[1]) <= 1e-6 * fmax(1.0, fabs(got)),
              "batch %d: the DDP gradient %.9g is not the global batch's mean %.9g", k, got,
              tot[0] / tot[1]);
        if (k == 1) CHECK(tot[1] == 4, "the last global batch has %g samples, not 3 + 1", tot[1]);
        tg_tensor_release(sum), tg_tensor_release(loss), tg_tensor_release(xw);
        tg_tensor_release(x), tg_tensor_release(y);
        k++;
    }
    CHECK(k == 2 || world != 2, "%d batches, not 2", k);
    tg_ddp_free(ddp);
    tg_tensor_release(w);
    tg_loader_free(ld);
    tg_dataset_release(ds);
    tg_tensor_release(ti), tg_tensor_release(tl);
}
