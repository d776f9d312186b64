/* DDP against one process on the ranks of test_dist: rank 0's model on every
 * rank after the broadcast, ranks with batch B each training as one process
 * with batch world * B does, a checkpoint of a DDP run resumed in one
 * process, bucketed and overlapped reductions bit-identical to one
 * all-reduce, and a backward without prepare reducing nothing.  Run by
 * tests/dist.c's main.
 *
 * The model: Linear(5, 16) - tanh - Linear(16, 16) - tanh - Linear(16, 2)
 * (six parameters of 16 to 256 elements), MSE against a fixed target, on a
 * global batch of 2B = 8 rows; rank r trains on rows [r B, (r + 1) B). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tapegrad/checkpoint.h"

#include "dist_test.h"

enum { B = 4, IN = DIST_IN, OUT = DIST_OUT, STEPS = 5 };

/* Two ranks averaging the means of B rows each and one process taking the
 * mean of 2B rows round differently (a sum in another order, one more
 * division); over STEPS Adam steps on this model the parameters (of order
 * 0.1 to 1) stay within this absolute bound: the gap measured is 3e-8. */
#define F32_BOUND 1e-6

tg_module *dist_mlp(uint64_t seed, int64_t in, int64_t out)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *seq = NULL, *m = NULL;
    tg_nn_sequential_new(&seq);
    const int64_t dims[4] = {in, 16, 16, out};
    for (int i = 0; i < 3; i++) {
        tg_nn_linear_new(&m, dims[i], dims[i + 1], true, &rng);
        tg_nn_sequential_append(seq, m);
        if (i < 2) {
            tg_nn_activation_new(&m, TG_ACT_TANH, 0);
            tg_nn_sequential_append(seq, m);
        }
    }
    return seq;
}

void dist_batch(tg_tensor **x, tg_tensor **y, int step, int64_t row0, int64_t n)
{
    const int64_t xs[2] = {n, IN}, ys[2] = {n, OUT};
    *x = *y = NULL;
    if (tg_tensor_zeros(x, TG_F32, 2, xs) < 0 || tg_tensor_zeros(y, TG_F32, 2, ys) < 0) {
        tg_tensor_release(*x);
        *x = NULL;
        return;
    }
    float *px = tg_tensor_data(*x), *py = tg_tensor_data(*y);
    for (int64_t r = 0; r < n; r++) {
        double s = 0;
        for (int c = 0; c < IN; c++) {
            double v = sin(0.7 * (double)(row0 + r) + 1.3 * c + 0.37 * step);
            px[r * IN + c] = (float)v;
            s += v * (c + 1);
        }
        py[r * OUT] = (float)tanh(s / 4);
        py[r * OUT + 1] = (float)cos(s);
    }
}

typedef struct trainer {
    tg_module *m;
    tg_tensor **p;
    int n;
    tg_optimizer *opt;
    tg_ddp *ddp;   /* NULL: a single process */
} trainer;

static int trainer_new(trainer *t, uint64_t seed, tg_dist *d, const tg_ddp_opts *o)
{
    memset(t, 0, sizeof *t);
    t->m = dist_mlp(seed, IN, OUT);
    int rc = tg_module_parameters(t->m, &t->p, &t->n);
    tg_adam_opts a = TG_ADAM_OPTS_INIT;
    a.lr = 0.01;
    if (rc >= 0) rc = tg_adam_new(&t->opt, t->n, t->p, &a);
    if (rc >= 0 && d) rc = tg_dist_broadcast_module(d, t->m);
    if (rc >= 0 && d) rc = tg_ddp_new(&t->ddp, d, t->n, t->p, o);
    return rc;
}

static void trainer_free(trainer *t)
{
    tg_ddp_free(t->ddp);
    tg_optimizer_free(t->opt);
    free(t->p);
    tg_module_release(t->m);
}

int dist_forward_backward(tg_module *m, int step, int64_t row0, int64_t n)
{
    tg_tensor *x = NULL, *y = NULL, *out = NULL, *loss = NULL;
    dist_batch(&x, &y, step, row0, n);
    int rc = x && y ? tg_module_forward(m, &out, x) : TG_ENOMEM;
    if (rc >= 0) rc = tg_mse_loss(&loss, out, y, TG_REDUCTION_MEAN);
    if (rc >= 0) rc = tg_backward(loss, NULL, NULL);
    tg_tensor_release(loss);
    tg_tensor_release(out);
    tg_tensor_release(x);
    tg_tensor_release(y);
    return rc;
}

/* One training step: this rank's B rows (with a ddp) or all 2B rows. */
static int train_step(trainer *t, int step)
{
    tg_optimizer_zero_grad(t->opt);
    int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    if (t->ddp) {
        int rc = tg_ddp_prepare(t->ddp);
        if (rc >= 0) rc = dist_forward_backward(t->m, step, (int64_t)rank * B, B);
        if (rc < 0) tg_dist_abort(g_dist, rc);   /* the other rank waits in finish */
        rc = tg_ddp_finish(t->ddp);
        if (rc < 0) return rc;
    } else {
        int rc = dist_forward_backward(t->m, step, 0, (int64_t)world * B);
        if (rc < 0) return rc;
    }
    return tg_optimizer_step(t->opt);
}

static double max_param_diff(const trainer *a, const trainer *b)
{
    double worst = 0;
    for (int i = 0; i < a->n; i++)
        for (int64_t k = 0; k < tg_tensor_numel(a->p[i]); k++) {
            double u = ((const float *)tg_tensor_cdata(a->p[i]))[k];
            double v = ((const float *)tg_tensor_cdata(b->p[i]))[k];
            worst = fmax(worst, fabs(u - v));
        }
    return worst;
}

void broadcast_gives_every_rank_rank_0s_model(void)
{
    trainer mine, zero;
    /* each rank starts from its own seed; after the broadcast all hold seed 100's */
    OK(trainer_new(&mine, 100 + (uint64_t)tg_dist_rank(g_dist), g_dist, NULL));
    OK(trainer_new(&zero, 100, NULL, NULL));
    for (int i = 0; i < mine.n; i++) CHECK(same_bits(mine.p[i], zero.p[i]), "parameter %d", i);
    trainer_free(&mine);
    trainer_free(&zero);
}

void ranks_with_batch_b_match_one_process_with_batch_world_b(void)
{
    trainer dist, whole;
    OK(trainer_new(&dist, 100 + (uint64_t)tg_dist_rank(g_dist), g_dist, NULL));
    OK(trainer_new(&whole, 100, NULL, NULL));
    for (int s = 0; s < STEPS; s++) {
        OK(train_step(&dist, s));
        OK(train_step(&whole, s));
    }
    double diff = max_param_diff(&dist, &whole);
    CHECK(diff <= F32_BOUND, "max |p_ddp - p_single| = %g after %d steps > %g", diff, STEPS,
          F32_BOUND);
    CHECK(diff > 0 || tg_dist_size(g_dist) == 1, "the runs were not independent");
    if (tg_dist_rank(g_dist) == 0)
        printf("  %d ranks x batch %d vs 1 x batch %d: max |dp| = %.3g after %d Adam steps\n",
               tg_dist_size(g_dist), B, tg_dist_size(g_dist) * B, diff, STEPS);
    /* and every rank holds the same parameters, bit for bit */
    for (int i = 0; i < dist.n; i++) {
        tg_tensor *c = NULL;
        OK(tg_tensor_clone(&c, dist.p[i]));
        OK(tg_dist_broadcast_tensor(g_dist, c, 0));
        CHECK(same_bits(c, dist.p[i]), "parameter %d differs from rank 0's", i);
        tg_tensor_release(c);
    }
    trainer_free(&dist);
    trainer_free(&whole);
}

/* A checkpoint slot list over a trainer. */
static int checkpoint_of(tg_checkpoint **ck, trainer *t, int64_t *step)
{
    int rc = tg_checkpoint_new(ck);
    if (rc >= 0) rc = tg_checkpoint_add_module(*ck, "model", t->m);
    if (rc >= 0) rc = tg_checkpoint_add_optimizer(*ck, "opt", t->opt);
    if (rc >= 0) rc = tg_checkpoint_add_i64(*ck, "step", step);
    return rc;
}

void checkpoint_of_a_ddp_run_resumes_in_one_process(void)
{
    char path[256] = "";
    if (tg_dist_rank(g_dist) == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/tg_dist_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
        if (!mkdtemp(path)) path[0] = '\0';
        else strncat(path, "/ck.safetensors", sizeof path - strlen(path) - 1);
    }
    trainer dist, resumed;
    tg_checkpoint *ck = NULL, *ck2 = NULL;
    int64_t step = 0, step2 = 0;
    OK(trainer_new(&dist, 7, g_dist, NULL));
    for (; step < 3; step++) OK(train_step(&dist, (int)step));
    OK(checkpoint_of(&ck, &dist, &step));
    OK(tg_dist_checkpoint_save(g_dist, ck, path, NULL));
    /* rank 0 alone, as a one-process run would: load, then take step 3 on
     * the whole batch; the ranks take step 3 together */
    OK(train_step(&dist, (int)step));
    if (tg_dist_rank(g_dist) == 0) {
        OK(trainer_new(&resumed, 12345, NULL, NULL));
        OK(checkpoint_of(&ck2, &resumed, &step2));
        OK(tg_checkpoint_load(ck2, path));
        CHECK(step2 == 3, "step %lld after the load", (long long)step2);
        OK(train_step(&resumed, (int)step2));
        double diff = max_param_diff(&dist, &resumed);
        CHECK(diff <= F32_BOUND, "resumed step differs by %g", diff);
        printf("  checkpoint of %d ranks after 3 steps, step 4 in one process: max |dp| = %.3g\n",
               tg_dist_size(g_dist), diff);
        tg_checkpoint_free(ck2);
        trainer_free(&resumed);
        remove(path);
        *strrchr(path, '/') = '\0';
        rmdir(path);
    }
    tg_checkpoint_free(ck);
    trainer_free(&dist);
}

/* The gradients of every parameter, concatenated (f32). */
static float *grads_flat(const trainer *t, int64_t *total)
{
    *total = 0;
    for (int i = 0; i < t->n; i++) *total += tg_tensor_numel(t->p[i]);
    float *out = malloc((size_t)*total * sizeof *out), *q = out;
    for (int i = 0; i < t->n && out; i++) {
        const tg_tensor *g = tg_tensor_grad(t->p[i]);
        memcpy(q, tg_tensor_cdata(g), (size_t)tg_tensor_numel(g) * sizeof *q);
        q += tg_tensor_numel(g);
    }
    return out;
}

/* The reference: a local backward, then one blocking all-reduce of all the
 * gradients as one tensor, divided by the number of ranks. */
static float *reference_grads(int64_t *total)
{
    trainer t;
    float *ref = NULL;
    if (trainer_new(&t, 3, g_dist, NULL) < 0) return NULL;
    if (dist_forward_backward(t.m, 0, (int64_t)tg_dist_rank(g_dist) * B, B) >= 0) {
        ref = grads_flat(&t, total);
        tg_tensor *all = NULL;
        const int64_t shape[1] = {*total};
        if (ref && tg_tensor_from_data(&all, TG_F32, 1, shape, ref) >= 0 &&
            tg_dist_allreduce_sum(g_dist, all) >= 0) {
            const float *s = tg_tensor_cdata(all), size = (float)tg_dist_size(g_dist);
            for (int64_t k = 0; k < *total; k++) ref[k] = s[k] / size;
        }
        tg_tensor_release(all);
    }
    trainer_free(&t);
    return ref;
}

void bucketed_overlapped_reduction_is_bit_identical_to_one_allreduce(void)
{
    int64_t total = 0;
    float *ref = reference_grads(&total);
    CHECK(ref != NULL, "reference: %s", tg_error_message());
    if (!ref) return;
    /* caps from one parameter per bucket (1 byte) to all in one bucket */
    const size_t caps[] = {1, 64, 300, 1100, 2000, (size_t)1 << 30};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        for (int overlap = 0; overlap < 2; overlap++) {
            tg_ddp_opts o = {.bucket_cap_bytes = caps[c], .overlap = overlap};
            trainer t;
            OK(trainer_new(&t, 3, g_dist, &o));
            OK(tg_ddp_prepare(t.ddp));
            OK(dist_forward_backward(t.m, 0, (int64_t)tg_dist_rank(g_dist) * B, B));
            OK(tg_ddp_finish(t.ddp));
            int64_t n = 0;
            float *got = grads_flat(&t, &n);
            CHECK(n == total && memcmp(got, ref, (size_t)n * sizeof *got) == 0,
                  "cap %zu overlap %d: gradients differ from one all-reduce", caps[c], overlap);
            tg_ddp_stats st;
            OK(tg_ddp_get_stats(t.ddp, &st));
            if (caps[c] == 1) CHECK(st.n_buckets == t.n, "%d buckets", st.n_buckets);
            if (caps[c] == (size_t)1 << 30) CHECK(st.n_buckets == 1, "%d buckets", st.n_buckets);
            CHECK(st.bytes_per_step == total * 4, "bytes %lld", (long long)st.bytes_per_step);
            /* the last layer's bucket completes before backward reaches the first */
            if (overlap && st.n_buckets > 1)
                CHECK(st.buckets_overlapped >= 1, "no bucket started during backward");
            if (!overlap) CHECK(st.buckets_overlapped == 0, "started during backward");
            free(got);
            trainer_free(&t);
        }
    }
    free(ref);
}

void backward_without_prepare_reduces_nothing(void)
{
    trainer t, local;
    OK(trainer_new(&t, 3, g_dist, NULL));
    OK(trainer_new(&local, 3, NULL, NULL));
    const int64_t row0 = (int64_t)tg_dist_rank(g_dist) * B;
    OK(dist_forward_backward(t.m, 0, row0, B));
    OK(dist_forward_backward(local.m, 0, row0, B));
    for (int i = 0; i < t.n; i++)
        CHECK(same_bits(tg_tensor_grad(t.p[i]), tg_tensor_grad(local.p[i])), "grad %d", i);
    CHECK(tg_ddp_finish(t.ddp) == TG_EINVAL, "finish without prepare");
    OK(tg_ddp_prepare(t.ddp));
    CHECK(tg_ddp_prepare(t.ddp) == TG_EINVAL, "prepare twice");
    OK(tg_ddp_finish(t.ddp));   /* reduces the gradients already there */
    trainer_free(&t);
    trainer_free(&local);
}
