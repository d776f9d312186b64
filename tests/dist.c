/* Tests of data-parallel training (tapegrad/dist.h), run as
 * `mpirun -np 2 tests/test_dist` (meson registers it that way).  A plain
 * program rather than a Criterion suite: Criterion forks a worker per test,
 * and an MPI process must not be forked.  Every test runs on every rank;
 * rank 0 prints one line per test and a closing "dist: N passed, N failed";
 * the exit status is non-zero when any check failed on any rank.  Arguments:
 * --timeout S ends the job when a test takes more than S seconds (60), and
 * NAME-PART... runs only the tests whose names contain one of them.
 *
 * The model: Linear(5, 16) - tanh - Linear(16, 16) - tanh - Linear(16, 2)
 * (six parameters of 16 to 256 elements), MSE against a fixed target, on a
 * global batch of 2B = 8 rows; rank r trains on rows [r B, (r + 1) B). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "tapegrad/checkpoint.h"

#include "dist_test.h"

enum { B = 4, IN = 5, OUT = 2, STEPS = 5 };

/* Two ranks averaging the means of B rows each and one process taking the
 * mean of 2B rows round differently (a sum in another order, one more
 * division); over STEPS Adam steps on this model the parameters (of order
 * 0.1 to 1) stay within this absolute bound: the gap measured is 3e-8. */
#define F32_BOUND 1e-6

tg_dist *g_dist;
int g_failed, g_checks;
const char *g_test;
static int g_allreduces;   /* MPI_Allreduce calls of this process */
static int g_bcasts;       /* MPI_Bcast calls of this process */

/* Count the blocking all-reduces and broadcasts (MPI's profiling interface:
 * these definitions take the place of the MPI library's and pass the call
 * on to PMPI_*). */
int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    g_allreduces++;
    return PMPI_Allreduce(send, recv, count, type, op, comm);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    g_bcasts++;
    return PMPI_Bcast(buf, count, type, root, comm);
}

static tg_module *make_model(uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *seq = NULL, *m = NULL;
    tg_nn_sequential_new(&seq);
    const int64_t dims[4] = {IN, 16, 16, OUT};
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

/* Rows [row0, row0 + n) of the global batch of step `step`: x, and the
 * target y = a fixed function of x. */
static void make_batch(tg_tensor **x, tg_tensor **y, int step, int64_t row0, int64_t n)
{
    const int64_t xs[2] = {n, IN}, ys[2] = {n, OUT};
    tg_tensor_zeros(x, TG_F32, 2, xs);
    tg_tensor_zeros(y, TG_F32, 2, ys);
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
    t->m = make_model(seed);
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

/* Forward and backward of rows [row0, row0 + n) of the step's batch. */
static int forward_backward(trainer *t, int step, int64_t row0, int64_t n)
{
    tg_tensor *x = NULL, *y = NULL, *out = NULL, *loss = NULL;
    make_batch(&x, &y, step, row0, n);
    int rc = tg_module_forward(t->m, &out, x);
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
        if (rc >= 0) rc = forward_backward(t, step, (int64_t)rank * B, B);
        if (rc < 0) tg_dist_abort(g_dist, rc);   /* the other rank waits in finish */
        rc = tg_ddp_finish(t->ddp);
        if (rc < 0) return rc;
    } else {
        int rc = forward_backward(t, step, 0, (int64_t)world * B);
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

static bool same_bits(const tg_tensor *a, const tg_tensor *b)
{
    return tg_tensor_numel(a) == tg_tensor_numel(b) &&
           memcmp(tg_tensor_cdata(a), tg_tensor_cdata(b),
                  (size_t)tg_tensor_numel(a) * tg_dtype_size(tg_tensor_dtype(a))) == 0;
}

/* ---- the tests ---------------------------------------------------------- */

static void broadcast_gives_every_rank_rank_0s_model(void)
{
    trainer mine, zero;
    /* each rank starts from its own seed; after the broadcast all hold seed 100's */
    OK(trainer_new(&mine, 100 + (uint64_t)tg_dist_rank(g_dist), g_dist, NULL));
    OK(trainer_new(&zero, 100, NULL, NULL));
    for (int i = 0; i < mine.n; i++) CHECK(same_bits(mine.p[i], zero.p[i]), "parameter %d", i);
    trainer_free(&mine);
    trainer_free(&zero);
}

static void ranks_with_batch_b_match_one_process_with_batch_world_b(void)
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

static void checkpoint_of_a_ddp_run_resumes_in_one_process(void)
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
    if (forward_backward(&t, 0, (int64_t)tg_dist_rank(g_dist) * B, B) >= 0) {
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

static void bucketed_overlapped_reduction_is_bit_identical_to_one_allreduce(void)
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
            OK(forward_backward(&t, 0, (int64_t)tg_dist_rank(g_dist) * B, B));
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

static void backward_without_prepare_reduces_nothing(void)
{
    trainer t, local;
    OK(trainer_new(&t, 3, g_dist, NULL));
    OK(trainer_new(&local, 3, NULL, NULL));
    const int64_t row0 = (int64_t)tg_dist_rank(g_dist) * B;
    OK(forward_backward(&t, 0, row0, B));
    OK(forward_backward(&local, 0, row0, B));
    for (int i = 0; i < t.n; i++)
        CHECK(same_bits(tg_tensor_grad(t.p[i]), tg_tensor_grad(local.p[i])), "grad %d", i);
    CHECK(tg_ddp_finish(t.ddp) == TG_EINVAL, "finish without prepare");
    OK(tg_ddp_prepare(t.ddp));
    CHECK(tg_ddp_prepare(t.ddp) == TG_EINVAL, "prepare twice");
    OK(tg_ddp_finish(t.ddp));   /* reduces the gradients already there */
    trainer_free(&t);
    trainer_free(&local);
}

static void an_error_on_one_rank_is_returned_on_every_rank(void)
{
    int rank = tg_dist_rank(g_dist), world = tg_dist_size(g_dist);
    int mine = rank == world - 1 ? tg_error_set(TG_EIO, "cannot open /no/such/data") : TG_OK;
    int rc = tg_dist_agree(g_dist, mine);
    CHECK(rc == TG_EIO, "agree gave %s", tg_status_name(rc));
    char want[64];
    snprintf(want, sizeof want, "rank %d: cannot open /no/such/data", world - 1);
    CHECK(strcmp(tg_error_message(), want) == 0, "message '%s'", tg_error_message());
    /* agreeing again on the agreed error keeps its message */
    rc = tg_dist_agree(g_dist, rc);
    CHECK(rc == TG_EIO && strcmp(tg_error_message(), want) == 0, "again: '%s'",
          tg_error_message());
    CHECK(tg_dist_agree(g_dist, TG_OK) == TG_OK, "all fine");
    /* a model that differs on one rank is refused everywhere */
    tg_module *m = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 1);
    OK(tg_nn_linear_new(&m, rank == 0 ? 3 : 4, 2, true, &rng));
    rc = tg_dist_broadcast_module(g_dist, m);
    CHECK(rc == (world > 1 ? TG_ESHAPE : TG_OK), "broadcast gave %s", tg_status_name(rc));
    tg_tensor **p = NULL;
    int n = 0;
    OK(tg_module_parameters(m, &p, &n));
    tg_ddp *ddp = NULL;
    rc = tg_ddp_new(&ddp, g_dist, n, p, NULL);
    CHECK(rc == (world > 1 ? TG_EINVAL : TG_OK), "ddp_new gave %s", tg_status_name(rc));
    tg_ddp_free(ddp);
    free(p);
    tg_module_release(m);
}

/* Fills t (N, C, H, W) with a smooth function of (row0 + n, c, h, w). */
static void fill_rows(tg_tensor *t, int64_t row0, double phase)
{
    const int64_t *s = tg_tensor_shape(t);
    float *p = tg_tensor_data(t);
    for (int64_t i = 0; i < tg_tensor_numel(t); i++) {
        int64_t w = i % s[3], h = i / s[3] % s[2], c = i / (s[3] * s[2]) % s[1];
        int64_t n = row0 + i / (s[3] * s[2] * s[1]);
        p[i] = (float)(0.5 * c + sin(1.1 * (double)n + 0.7 * (double)h + 0.3 * (double)w +
                                     phase * (double)(c + 1)));
    }
}

static void set_affine(tg_module *bn)
{
    float *w = tg_tensor_data(tg_module_find(bn, "weight"));
    float *b = tg_tensor_data(tg_module_find(bn, "bias"));
    for (int c = 0; c < 3; c++) w[c] = 1.0f + 0.25f * (float)c, b[c] = 0.1f * (float)c;
}

static double max_diff_rows(const tg_tensor *part, const tg_tensor *whole, int64_t row0)
{
    const int64_t per_row = tg_tensor_numel(part) / tg_tensor_dim(part, 0);
    const float *p = tg_tensor_cdata(part), *q = (const float *)tg_tensor_cdata(whole) + row0 * per_row;
    double worst = 0;
    for (int64_t i = 0; i < tg_tensor_numel(part); i++) worst = fmax(worst, fabs(p[i] - q[i]));
    return worst;
}

/* The largest |a_i - b_(row0 rows + i)| / max(1, |b|) over part's elements,
 * read in any dtype. */
static double max_rel_diff_rows(const tg_tensor *part, const tg_tensor *whole, int64_t row0)
{
    const int64_t per_row = tg_tensor_numel(part) / tg_tensor_dim(part, 0);
    double worst = 0;
    for (int64_t i = 0; i < tg_tensor_numel(part); i++) {
        double a = 0, b = 0;
        tg_tensor_get_flat(part, i, &a);
        tg_tensor_get_flat(whole, row0 * per_row + i, &b);
        worst = fmax(worst, fabs(a - b) / fmax(1.0, fabs(b)));
    }
    return worst;
}

/* Compares SyncBatchNorm sbn, run on this rank's rows, with BatchNorm bn
 * run on the whole batch: the weight and bias gradients, each rank's share
 * summed over the ranks, and the running statistics, within 1e-4 absolute
 * (relative: max_rel_diff_rows, for any dtype).  case_ names the case in
 * a failure. */
static void check_sync_state(tg_module *sbn, tg_module *bn, bool relative, const char *case_)
{
    static const char *const names[4] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4; i++) {
        tg_tensor *mine = tg_module_find(sbn, names[i]), *want = tg_module_find(bn, names[i]);
        tg_tensor *v = NULL;
        if (i < 2) {   /* gradients: this rank's share; summed over ranks */
            OK(tg_tensor_clone(&v, tg_tensor_grad(mine)));
            OK(tg_dist_allreduce_sum(g_dist, v));
            want = tg_tensor_grad(want);
        } else {
            OK(tg_tensor_clone(&v, mine));
        }
        double d = relative ? max_rel_diff_rows(v, want, 0) : max_diff_rows(v, want, 0);
        CHECK(d <= 1e-4, "%s: %s%s differs by %g", case_, names[i], i < 2 ? ".grad" : "", d);
        tg_tensor_release(v);
    }
}

/* Rank r holds rows [3r, 3r + 3) of a (3 world, 3, 4, 5) batch; loss =
 * sum(y * G) with a fixed G.  Outputs and input gradients must be the rows of
 * one BatchNorm2d's over the whole batch; the ranks' weight and bias
 * gradients sum to its; the running statistics equal its. */
static void sync_batchnorm_matches_one_batchnorm_over_the_whole_batch(void)
{
    const int world = tg_dist_size(g_dist), rank = tg_dist_rank(g_dist);
    const int64_t rows = 3, part_shape[4] = {rows, 3, 4, 5}, all_shape[4] = {rows * world, 3, 4, 5};
    tg_module *sbn = NULL, *bn = NULL;
    OK(tg_dist_sync_batchnorm_new(&sbn, g_dist, 3, 1e-5, 0.1));
    OK(tg_nn_batchnorm_new(&bn, 2, 3, 1e-5, 0.1, true, true));
    set_affine(sbn);
    set_affine(bn);
    tg_tensor *x = NULL, *xa = NULL, *g = NULL, *ga = NULL, *y = NULL, *ya = NULL;
    tg_tensor *yg = NULL, *yga = NULL, *l = NULL, *la = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 4, part_shape));
    OK(tg_tensor_zeros(&g, TG_F32, 4, part_shape));
    OK(tg_tensor_zeros(&xa, TG_F32, 4, all_shape));
    OK(tg_tensor_zeros(&ga, TG_F32, 4, all_shape));
    fill_rows(x, rank * rows, 0.4);
    fill_rows(xa, 0, 0.4);
    fill_rows(g, rank * rows, 2.3);
    fill_rows(ga, 0, 2.3);
    OK(tg_tensor_set_requires_grad(x, true));
    OK(tg_tensor_set_requires_grad(xa, true));
    OK(tg_module_forward(sbn, &y, x));
    OK(tg_module_forward(bn, &ya, xa));
    OK(tg_mul(&yg, y, g));
    OK(tg_mul(&yga, ya, ga));
    OK(tg_sum(&l, yg));
    OK(tg_sum(&la, yga));
    OK(tg_backward(l, NULL, NULL));
    OK(tg_backward(la, NULL, NULL));
    double dy = max_diff_rows(y, ya, rank * rows);
    double dx = max_diff_rows(tg_tensor_grad(x), tg_tensor_grad(xa), rank * rows);
    CHECK(dy <= 1e-5, "outputs differ by %g", dy);
    CHECK(dx <= 1e-5, "input gradients differ by %g", dx);
    check_sync_state(sbn, bn, false, "f32");
    if (rank == 0) printf("  sync batchnorm vs one batchnorm: max |dy| = %.3g, |dx| = %.3g\n", dy, dx);
    tg_tensor_release(l), tg_tensor_release(la), tg_tensor_release(yg), tg_tensor_release(yga);
    tg_tensor_release(y), tg_tensor_release(ya), tg_tensor_release(x), tg_tensor_release(xa);
    tg_tensor_release(g), tg_tensor_release(ga);
    tg_module_release(sbn);
    tg_module_release(bn);
}

/* A half x ((rows, 3, 4, 5) from fill_rows, converted) that requires grad. */
static int half_input(tg_tensor **x, tg_dtype dt, int64_t rows, int64_t row0)
{
    const int64_t shape[4] = {rows, 3, 4, 5};
    tg_tensor *x32 = NULL;
    int rc = tg_tensor_zeros(&x32, TG_F32, 4, shape);
    if (rc >= 0) fill_rows(x32, row0, 0.4);
    if (rc >= 0) rc = tg_to_dtype(x, x32, dt);
    if (rc >= 0) rc = tg_tensor_set_requires_grad(*x, true);
    tg_tensor_release(x32);
    return rc;
}

/* Forward of m on x (under autocast(dt) when autocast), then backward of
 * sum(y * G) with G from fill_rows (f32). */
static int half_step(tg_module *m, tg_tensor *x, tg_tensor **y, tg_dtype dt, bool autocast,
                     int64_t row0)
{
    tg_tensor *g = NULL, *yg = NULL, *l = NULL;
    int rc = autocast ? tg_autocast_begin(dt) : TG_OK;
    if (rc < 0) return rc;
    rc = tg_module_forward(m, y, x);
    if (rc >= 0) rc = tg_tensor_zeros(&g, TG_F32, 4, tg_tensor_shape(x));
    if (rc >= 0) fill_rows(g, row0, 2.3);
    if (rc >= 0) rc = tg_mul(&yg, *y, g);
    if (rc >= 0) rc = tg_sum(&l, yg);
    if (autocast) tg_autocast_end();
    if (rc >= 0) rc = tg_backward(l, NULL, NULL);
    tg_tensor_release(l), tg_tensor_release(yg), tg_tensor_release(g);
    return rc;
}

/* An f16/bf16 input, inside an autocast scope and outside one: the output
 * has BatchNorm's dtype (the input's under autocast, f32 outside), and the
 * output, input gradient, weight and bias gradients and running statistics
 * are one BatchNorm2d's over the whole batch, to within one rounding of the
 * half output (2^-8 relative for bf16, 2^-11 for f16). */
static void sync_batchnorm_takes_half_input_as_batchnorm_does(void)
{
    const int world = tg_dist_size(g_dist), rank = tg_dist_rank(g_dist);
    const int64_t rows = 3;
    static const tg_dtype dts[2] = {TG_BF16, TG_F16};
    for (int k = 0; k < 4; k++) {
        const tg_dtype dt = dts[k / 2];
        const bool autocast = k % 2 == 0;
        const double ulp = dt == TG_BF16 ? 1.0 / 128 : 1.0 / 1024;
        tg_module *sbn = NULL, *bn = NULL;
        tg_tensor *x = NULL, *xa = NULL, *y = NULL, *ya = NULL;
        OK(tg_dist_sync_batchnorm_new(&sbn, g_dist, 3, 1e-5, 0.1));
        OK(tg_nn_batchnorm_new(&bn, 2, 3, 1e-5, 0.1, true, true));
        set_affine(sbn);
        set_affine(bn);
        OK(half_input(&x, dt, rows, rank * rows));
        OK(half_input(&xa, dt, rows * world, 0));
        OK(half_step(sbn, x, &y, dt, autocast, rank * rows));
        OK(half_step(bn, xa, &ya, dt, autocast, 0));
        const char *what = tg_dtype_name(dt);
        CHECK(tg_tensor_dtype(y) == tg_tensor_dtype(ya), "%s autocast %d: output %s, BatchNorm's %s",
              what, autocast, tg_dtype_name(tg_tensor_dtype(y)),
              tg_dtype_name(tg_tensor_dtype(ya)));
        CHECK(tg_tensor_dtype(y) == (autocast ? dt : TG_F32), "%s autocast %d: output %s", what,
              autocast, tg_dtype_name(tg_tensor_dtype(y)));
        const tg_tensor *dx = tg_tensor_grad(x), *dxa = tg_tensor_grad(xa);
        CHECK(dx && tg_tensor_dtype(dx) == dt, "%s autocast %d: no %s input gradient", what,
              autocast, what);
        if (!dx) return;
        double dy = max_rel_diff_rows(y, ya, rank * rows);
        double ddx = max_rel_diff_rows(dx, dxa, rank * rows);
        CHECK(dy <= ulp, "%s autocast %d: outputs differ by %g", what, autocast, dy);
        CHECK(ddx <= ulp, "%s autocast %d: input gradients differ by %g", what, autocast, ddx);
        char case_[48];
        snprintf(case_, sizeof case_, "%s autocast %d", what, autocast);
        check_sync_state(sbn, bn, true, case_);
        if (rank == 0)
            printf("  sync batchnorm, %s input%s: max rel |dy| = %.3g, |dx| = %.3g\n", what,
                   autocast ? " under autocast" : "", dy, ddx);
        tg_tensor_release(y), tg_tensor_release(ya), tg_tensor_release(x), tg_tensor_release(xa);
        tg_module_release(sbn);
        tg_module_release(bn);
    }
}

/* A SyncBatchNorm training forward makes two blocking all-reduces (the sums,
 * the element count) and its backward one, as docs/distributed.md says. */
static void sync_batchnorm_makes_two_allreduces_forward_and_one_backward(void)
{
    tg_module *sbn = NULL;
    tg_tensor *x = NULL, *y = NULL, *l = NULL;
    OK(tg_dist_sync_batchnorm_new(&sbn, g_dist, 3, 1e-5, 0.1));
    OK(tg_tensor_zeros(&x, TG_F32, 4, (int64_t[]){2, 3, 4, 5}));
    fill_rows(x, 2 * tg_dist_rank(g_dist), 0.4);
    OK(tg_tensor_set_requires_grad(x, true));
    g_allreduces = 0;
    OK(tg_module_forward(sbn, &y, x));
    const int forward = g_allreduces;
    OK(tg_sum(&l, y));
    g_allreduces = 0;
    OK(tg_backward(l, NULL, NULL));
    const int backward = g_allreduces;
    CHECK(forward == 2 && backward == 1, "MPI_Allreduce calls: %d in forward, %d in backward; "
          "2 and 1 documented", forward, backward);
    tg_tensor_release(l), tg_tensor_release(y), tg_tensor_release(x);
    tg_module_release(sbn);
}

/* Sequential(BatchNorm2d(3), ReLU, Sequential(BatchNorm2d(3))) with DCGAN's
 * init drawn from seed. */
static tg_module *make_bn_model(uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *seq = NULL, *inner = NULL, *m = NULL;
    tg_nn_sequential_new(&seq);
    tg_nn_batchnorm_new(&m, 2, 3, 1e-5, 0.1, true, true);
    tg_nn_sequential_append(seq, m);
    tg_nn_activation_new(&m, TG_ACT_RELU, 0);
    tg_nn_sequential_append(seq, m);
    tg_nn_sequential_new(&inner);
    tg_nn_batchnorm_new(&m, 2, 3, 1e-5, 0.1, true, true);
    tg_nn_sequential_append(inner, m);
    tg_nn_sequential_append(seq, inner);
    tg_nn_init_normal(seq, 0.0, 0.02, &rng);
    return seq;
}

/* Converting a model's BatchNorms keeps their tensors (the init, the very
 * objects) and names; the converted model on rank r's rows gives the rows
 * and running statistics of the plain model over the whole batch.  A
 * BatchNorm that cannot be converted is refused with nothing changed. */
static void convert_sync_batchnorm_keeps_the_init_and_syncs(void)
{
    const int world = tg_dist_size(g_dist), rank = tg_dist_rank(g_dist);
    const int64_t rows = 2, part_shape[4] = {rows, 3, 4, 5}, all_shape[4] = {rows * world, 3, 4, 5};
    tg_module *sm = make_bn_model(7), *pm = make_bn_model(7), *bad = NULL, *nobn = NULL;
    tg_tensor *w0 = tg_module_find(sm, "0.weight"), *rv1 = tg_module_find(sm, "2.0.running_var");
    int n = 0;
    OK(tg_dist_convert_sync_batchnorm(g_dist, sm, &n));
    CHECK(n == 2, "converted %d BatchNorms, not 2", n);
    CHECK(!strcmp(tg_module_type_name(tg_module_child(sm, "0")), "SyncBatchNorm") &&
          !strcmp(tg_module_type_name(tg_module_child(tg_module_child(sm, "2"), "0")),
                  "SyncBatchNorm"), "a BatchNorm was left");
    CHECK(tg_module_find(sm, "0.weight") == w0 && tg_module_find(sm, "2.0.running_var") == rv1,
          "the converted modules hold other tensors");
    CHECK(max_diff_rows(w0, tg_module_find(pm, "0.weight"), 0) == 0, "the init changed");
    tg_tensor *x = NULL, *xa = NULL, *y = NULL, *ya = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 4, part_shape));
    OK(tg_tensor_zeros(&xa, TG_F32, 4, all_shape));
    fill_rows(x, rank * rows, 0.9);
    fill_rows(xa, 0, 0.9);
    OK(tg_module_forward(sm, &y, x));
    OK(tg_module_forward(pm, &ya, xa));
    double dy = max_diff_rows(y, ya, rank * rows);
    double dr = max_diff_rows(tg_module_find(sm, "2.0.running_var"),
                              tg_module_find(pm, "2.0.running_var"), 0);
    CHECK(dy <= 1e-5, "outputs differ by %g", dy);
    CHECK(dr <= 1e-5, "running_var differs by %g", dr);
    /* BatchNorm without affine parameters, below a plain one: refused whole */
    tg_nn_sequential_new(&bad);
    tg_nn_batchnorm_new(&nobn, 2, 3, 1e-5, 0.1, true, true);
    tg_nn_sequential_append(bad, nobn);
    tg_nn_batchnorm_new(&nobn, 2, 3, 1e-5, 0.1, false, true);
    tg_nn_sequential_append(bad, nobn);
    int rc = tg_dist_convert_sync_batchnorm(g_dist, bad, NULL);
    CHECK(rc == TG_EINVAL && strstr(tg_error_message(), "1 has affine=0"), "gave %s: %s",
          tg_status_name(rc), tg_error_message());
    CHECK(!strcmp(tg_module_type_name(tg_module_child(bad, "0")), "BatchNorm"),
          "a refused conversion changed the model");
    rc = tg_dist_convert_sync_batchnorm(g_dist, tg_module_child(bad, "0"), NULL);
    CHECK(rc == TG_EINVAL && strstr(tg_error_message(), "itself a BatchNorm"), "gave %s",
          tg_status_name(rc));
    tg_tensor_release(x), tg_tensor_release(xa), tg_tensor_release(y), tg_tensor_release(ya);
    tg_module_release(bad);
    tg_module_release(sm);
    tg_module_release(pm);
}

/* A state dict without num_batches_tracked (torch before 0.4.1) loads, strict,
 * into SyncBatchNorm as into BatchNorm: the count reads as 0. */
static void sync_batchnorm_loads_a_state_dict_without_num_batches_tracked(void)
{
    tg_module *sm = make_bn_model(3), *pm = make_bn_model(3);
    OK(tg_dist_convert_sync_batchnorm(g_dist, sm, NULL));
    tg_st_file *f = NULL;
    OK(tg_st_new(&f));
    static const char *const keys[] = {"0.weight", "0.bias", "0.running_mean", "0.running_var",
                                       "2.0.weight", "2.0.bias", "2.0.running_mean",
                                       "2.0.running_var"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        OK(tg_st_set(f, keys[i], tg_module_find(pm, keys[i])));
    for (int k = 0; k < 2; k++) {
        tg_module *m = k ? sm : pm;
        tg_tensor *nbt = tg_module_find(m, "2.0.num_batches_tracked");
        OK(tg_tensor_set_flat(nbt, 0, 5.0));
        int rc = tg_module_load_state_dict(m, f, NULL, true);
        CHECK(rc == TG_OK, "%s: load gave %s: %s", tg_module_type_name(tg_module_child(m, "0")),
              tg_status_name(rc), tg_error_message());
        double v = -1;
        OK(tg_tensor_get_flat(nbt, 0, &v));
        CHECK(v == 0, "%s: num_batches_tracked = %g after the load, not 0",
              tg_module_type_name(tg_module_child(m, "0")), v);
    }
    tg_st_free(f);
    tg_module_release(sm);
    tg_module_release(pm);
}

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
static void ddp_keeps_every_rank_on_rank_0s_buffers(void)
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
static void ddp_leaves_the_grad_of_a_parameter_no_rank_used_unset(void)
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
static void ddp_on_a_padded_last_batch_weighs_every_sample_alike(void)
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

typedef void (*test_fn)(void);

/* A test that leaves a rank waiting in a collective call that another rank
 * never makes ends the job after g_timeout seconds, naming the test, rather
 * than holding the suite until meson's timeout: SIGALRM's handler writes the
 * line prepared in g_alarm_msg and exits, and mpirun ends the other ranks. */
static unsigned g_timeout = 60;
static char g_alarm_msg[256];

static void on_alarm(int sig)
{
    (void)sig;
    ssize_t w = write(STDERR_FILENO, g_alarm_msg, strlen(g_alarm_msg));
    (void)w;
    _exit(3);
}

/* Whether the test named name runs: every test when no filter was given,
 * else those whose name contains one of the filters. */
static bool selected(const char *name, int n_filters, char **filters)
{
    for (int i = 0; i < n_filters; i++)
        if (strstr(name, filters[i])) return true;
    return n_filters == 0;
}

/* test_dist [--timeout SECONDS] [NAME-PART...] */
int main(int argc, char **argv)
{
    int rc = tg_dist_init(&g_dist, &argc, &argv);
    if (rc < 0) {
        fprintf(stderr, "dist_init: %s\n", tg_error_message());
        return 1;
    }
    int n_filters = 0;
    char **filters = argv + 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--timeout") && i + 1 < argc) g_timeout = (unsigned)atoi(argv[++i]);
        else filters[n_filters++] = argv[i];
    }
    signal(SIGALRM, on_alarm);
    tg_set_num_threads(1);
    static const struct { const char *name; test_fn fn; } tests[] = {
        {"broadcast_gives_every_rank_rank_0s_model", broadcast_gives_every_rank_rank_0s_model},
        {"ranks_with_batch_b_match_one_process_with_batch_world_b",
         ranks_with_batch_b_match_one_process_with_batch_world_b},
        {"checkpoint_of_a_ddp_run_resumes_in_one_process",
         checkpoint_of_a_ddp_run_resumes_in_one_process},
        {"bucketed_overlapped_reduction_is_bit_identical_to_one_allreduce",
         bucketed_overlapped_reduction_is_bit_identical_to_one_allreduce},
        {"backward_without_prepare_reduces_nothing", backward_without_prepare_reduces_nothing},
        {"sync_batchnorm_matches_one_batchnorm_over_the_whole_batch",
         sync_batchnorm_matches_one_batchnorm_over_the_whole_batch},
        {"sync_batchnorm_makes_two_allreduces_forward_and_one_backward",
         sync_batchnorm_makes_two_allreduces_forward_and_one_backward},
        {"sync_batchnorm_takes_half_input_as_batchnorm_does",
         sync_batchnorm_takes_half_input_as_batchnorm_does},
        {"convert_sync_batchnorm_keeps_the_init_and_syncs",
         convert_sync_batchnorm_keeps_the_init_and_syncs},
        {"sync_batchnorm_loads_a_state_dict_without_num_batches_tracked",
         sync_batchnorm_loads_a_state_dict_without_num_batches_tracked},
        {"ddp_keeps_every_rank_on_rank_0s_buffers", ddp_keeps_every_rank_on_rank_0s_buffers},
        {"ddp_leaves_the_grad_of_a_parameter_no_rank_used_unset",
         ddp_leaves_the_grad_of_a_parameter_no_rank_used_unset},
        {"ddp_on_a_padded_last_batch_weighs_every_sample_alike",
         ddp_on_a_padded_last_batch_weighs_every_sample_alike},
        {"an_error_on_one_rank_is_returned_on_every_rank",
         an_error_on_one_rank_is_returned_on_every_rank},
        {"dist_init_refused_on_one_rank_is_refused_on_every_rank",
         dist_init_refused_on_one_rank_is_refused_on_every_rank},
        {"broadcast_module_refused_on_one_rank_is_refused_on_every_rank",
         broadcast_module_refused_on_one_rank_is_refused_on_every_rank},
        {"broadcast_tensor_refused_on_one_rank_is_refused_on_every_rank",
         broadcast_tensor_refused_on_one_rank_is_refused_on_every_rank},
        {"allreduce_sum_refused_on_one_rank_is_refused_on_every_rank",
         allreduce_sum_refused_on_one_rank_is_refused_on_every_rank},
        {"ddp_new_refused_on_one_rank_is_refused_on_every_rank",
         ddp_new_refused_on_one_rank_is_refused_on_every_rank},
        {"ddp_new_module_refused_changes_no_rank_s_module",
         ddp_new_module_refused_changes_no_rank_s_module},
        {"ddp_finish_without_prepare_on_one_rank_fails_on_every_rank",
         ddp_finish_without_prepare_on_one_rank_fails_on_every_rank},
        {"ddp_free_in_the_middle_of_a_step_does_not_wait_forever",
         ddp_free_in_the_middle_of_a_step_does_not_wait_forever},
        {"ddp_cancel_on_one_rank_fails_every_rank_s_finish",
         ddp_cancel_on_one_rank_fails_every_rank_s_finish},
        {"sync_batchnorm_refused_input_on_one_rank_is_refused_on_every_rank",
         sync_batchnorm_refused_input_on_one_rank_is_refused_on_every_rank},
        {"sync_batchnorm_backward_failing_on_one_rank_fails_on_every_rank",
         sync_batchnorm_backward_failing_on_one_rank_fails_on_every_rank},
        {"dcgan_step_failing_on_one_rank_fails_on_every_rank",
         dcgan_step_failing_on_one_rank_fails_on_every_rank},
    };
    int n_tests = 0, passed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (!selected(tests[i].name, n_filters, filters)) continue;
        n_tests++;
        g_test = tests[i].name;
        snprintf(g_alarm_msg, sizeof g_alarm_msg, "rank %d: dist::%s did not end within %u s "
                 "(a rank waits in a collective call)\n", tg_dist_rank(g_dist), g_test, g_timeout);
        int before = g_failed, failed_any = 0;
        alarm(g_timeout);
        tests[i].fn();
        int mine = g_failed > before;
        tg_dist_barrier(g_dist);
        /* a test fails when it failed on any rank */
        tg_tensor *f = NULL;
        tg_tensor_scalar(&f, TG_I64, mine);
        tg_dist_allreduce_sum(g_dist, f);
        failed_any = *(const int64_t *)tg_tensor_cdata(f) > 0;
        tg_tensor_release(f);
        alarm(0);
        passed += !failed_any;
        if (tg_dist_rank(g_dist) == 0)
            printf("[%s] dist::%s\n", failed_any ? "FAIL" : "PASS", tests[i].name);
        fflush(stdout);
    }
    if (tg_dist_rank(g_dist) == 0)
        printf("dist (%d ranks): %d passed, %d failed\n", tg_dist_size(g_dist), passed,
               n_tests - passed);
    tg_dist_free(g_dist);
    return passed == n_tests ? 0 : 1;
}
