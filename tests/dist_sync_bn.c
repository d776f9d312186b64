/* SyncBatchNorm (tg_dist_sync_batchnorm_new, tg_dist_convert_sync_batchnorm)
 * on the ranks of test_dist: each rank normalises its rows by the
 * statistics of the whole batch, as one BatchNorm over all the rows does,
 * with the all-reduces it should make.  Run by tests/dist.c's main. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "tapegrad/checkpoint.h"

#include "dist_test.h"

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
void sync_batchnorm_matches_one_batchnorm_over_the_whole_batch(void)
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
void sync_batchnorm_takes_half_input_as_batchnorm_does(void)
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
void sync_batchnorm_makes_two_allreduces_forward_and_one_backward(void)
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
void convert_sync_batchnorm_keeps_the_init_and_syncs(void)
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
void sync_batchnorm_loads_a_state_dict_without_num_batches_tracked(void)
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

/* The bytes of the file at path (malloc'd, *n its length), or NULL. */
static char *read_all(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    rewind(f);
    char *b = malloc(*n > 0 ? (size_t)*n : 1);
    if (b && fread(b, 1, (size_t)*n, f) != (size_t)*n) *n = -1;
    fclose(f);
    return b;
}

/* In eval a SyncBatchNorm is a BatchNorm with its running statistics, and
 * so is its ONNX export: a converted model (eps 1e-3, statistics not 0 and
 * 1) writes the same bytes as the plain one holding the same tensors.
 * Its parameters read back; another module is refused. */
void sync_batchnorm_exports_as_batchnorm(void)
{
    double eps = 0, momentum = 0;
    tg_module *sbn = NULL, *lin = NULL;
    OK(tg_dist_sync_batchnorm_new(&sbn, g_dist, 3, 2e-3, 0.25));
    OK(tg_dist_sync_batchnorm_params(sbn, &eps, &momentum));
    CHECK(eps == 2e-3 && momentum == 0.25, "params read %g, %g", eps, momentum);
    OK(tg_nn_activation_new(&lin, TG_ACT_RELU, 0));
    int rc = tg_dist_sync_batchnorm_params(lin, &eps, NULL);
    CHECK(rc == TG_EINVAL && strstr(tg_error_message(), "m is a ReLU module, not SyncBatchNorm"),
          "another module gave %s: %s", tg_status_name(rc), tg_error_message());
    tg_module_release(sbn);
    tg_module_release(lin);
    if (!tg_onnx_available()) return;
    tg_module *pm = NULL, *sm = NULL, *bn = NULL;
    OK(tg_nn_sequential_new(&pm));
    OK(tg_nn_batchnorm_new(&bn, 2, 3, 1e-3, 0.1, true, true));
    OK(tg_nn_sequential_append(pm, bn));
    float *mean = tg_tensor_data(tg_module_find(pm, "0.running_mean"));
    float *var = tg_tensor_data(tg_module_find(pm, "0.running_var"));
    for (int c = 0; c < 3; c++) mean[c] = 0.3f * (float)c - 0.2f, var[c] = 0.5f + (float)c;
    set_affine(bn);
    const int64_t shape[4] = {2, 3, 4, 5};
    tg_tensor *x = NULL;
    OK(tg_tensor_zeros(&x, TG_F32, 4, shape));
    fill_rows(x, 0, 0.4);
    char p1[96], p2[96];
    snprintf(p1, sizeof p1, "/tmp/tg_dist_sbn_onnx_%ld_%d_bn.onnx", (long)getpid(),
             tg_dist_rank(g_dist));
    snprintf(p2, sizeof p2, "/tmp/tg_dist_sbn_onnx_%ld_%d_sync.onnx", (long)getpid(),
             tg_dist_rank(g_dist));
    OK(tg_onnx_export(pm, x, p1, NULL));
    OK(tg_nn_sequential_new(&sm));
    OK(tg_nn_sequential_append(sm, tg_module_retain(bn)));
    OK(tg_dist_convert_sync_batchnorm(g_dist, sm, NULL));
    CHECK(!strcmp(tg_module_type_name(tg_module_child(sm, "0")), "SyncBatchNorm"),
          "the BatchNorm was not converted");
    tg_module_train(sm, true);
    OK(tg_onnx_export(sm, x, p2, NULL));
    CHECK(tg_module_is_training(tg_module_child(sm, "0")), "the export left the module in eval");
    long n1 = 0, n2 = 0;
    char *b1 = read_all(p1, &n1), *b2 = read_all(p2, &n2);
    CHECK(b1 && b2 && n1 > 0 && n1 == n2 && !memcmp(b1, b2, (size_t)n1),
          "the SyncBatchNorm's export (%ld bytes) is not the BatchNorm's (%ld bytes)", n2, n1);
    free(b1);
    free(b2);
    remove(p1);
    remove(p2);
    tg_tensor_release(x);
    tg_module_release(pm);
    tg_module_release(sm);
}
