/* tests/fuzz/targets.c - the fuzz targets of targets.h.
 *
 * What every target checks of a refusal (tg_fuzz_refused()): the status is one of
 * tapegrad's negative codes and tg_error_message() says something.  What
 * each checks of an acceptance is in targets.h.  Files go to one private
 * directory (scratch_path) that is removed at exit. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../tools/case.h"
#include "quant/quant_internal.h"   /* tg__q_phase_min_positions */
#include "tapegrad/tapegrad.h"
#include "targets.h"

/* ---- shared ------------------------------------------------------------------ */

int tg_fuzz_broken(const char *target, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz %s: ", target);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

/* A refusal must be a known negative status with a message. */
int tg_fuzz_refused(const char *target, const char *call, int rc)
{
    if (rc >= 0)
        return 0;
    if (strcmp(tg_status_name(rc), "TG_UNKNOWN") == 0)
        return tg_fuzz_broken(target, "%s returned %d, not a tg_status", call, rc);
    const char *msg = tg_error_message();
    if (!msg || !*msg)
        return tg_fuzz_broken(target, "%s returned %s with no message", call, tg_status_name(rc));
    return 0;
}

static char scratch_dir[64];

static void scratch_remove(void)
{
    char path[128];
    static const char *const names[] = {"roundtrip.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", scratch_dir, names[i]);
        unlink(path);
    }
    rmdir(scratch_dir);
}

/* "<private directory>/<name>" in buf, or NULL when no directory can be made. */
static const char *scratch_path(char *buf, size_t n, const char *name)
{
    if (!scratch_dir[0]) {
        strcpy(scratch_dir, "/tmp/tg_fuzz_XXXXXX");
        if (!mkdtemp(scratch_dir)) {
            scratch_dir[0] = '\0';
            return NULL;
        }
        atexit(scratch_remove);
    }
    snprintf(buf, n, "%s/%s", scratch_dir, name);
    return buf;
}

static size_t tensor_bytes(const tg_tensor *t)
{
    return (size_t)tg_tensor_numel(t) * tg_dtype_size(tg_tensor_dtype(t));
}

/* Same dtype, shape and bytes (both contiguous). */
static bool tensors_identical(const tg_tensor *a, const tg_tensor *b)
{
    return tg_tensor_dtype(a) == tg_tensor_dtype(b) && tg_tensor_same_shape(a, b) &&
           tg_tensor_is_contiguous(a) && tg_tensor_is_contiguous(b) &&
           memcmp(tg_tensor_cdata(a), tg_tensor_cdata(b), tensor_bytes(a)) == 0;
}

/* ---- safetensors --------------------------------------------------------------- */

/* a and b hold the same tensors: in order, the same names, dtypes, shapes
 * and bytes. */
static bool same_tensors(const tg_st_file *a, const tg_st_file *b)
{
    if (tg_st_count(a) != tg_st_count(b))
        return false;
    for (int i = 0; i < tg_st_count(a); i++) {
        const char *na, *nb;
        tg_tensor *ta, *tb;
        tg_st_at(a, i, &na, &ta);
        tg_st_at(b, i, &nb, &tb);
        if (strcmp(na, nb) != 0 || !tensors_identical(ta, tb))
            return false;
    }
    return true;
}

/* Tensors and metadata of a and b agree (in order). */
static int files_identical(const tg_st_file *a, const tg_st_file *b)
{
    if (!same_tensors(a, b))
        return tg_fuzz_broken("safetensors", "round trip changed the tensors");
    if (tg_st_meta_count(a) != tg_st_meta_count(b))
        return tg_fuzz_broken("safetensors", "round trip changed the metadata count %d -> %d",
                      tg_st_meta_count(a), tg_st_meta_count(b));
    for (int i = 0; i < tg_st_meta_count(a); i++) {
        const char *ka, *va, *kb, *vb;
        tg_st_meta_at(a, i, &ka, &va);
        tg_st_meta_at(b, i, &kb, &vb);
        if (strcmp(ka, kb) != 0 || strcmp(va, vb) != 0)
            return tg_fuzz_broken("safetensors", "round trip changed metadata %d ('%s')", i, ka);
    }
    return 0;
}

int tg_fuzz_safetensors(const uint8_t *data, size_t size)
{
    tg_st_file *f = NULL, *back = NULL;
    int rc = tg_safetensors_parse(&f, data, size);
    if (rc < 0)
        return f ? tg_fuzz_broken("safetensors", "a refused parse set *out")
                 : tg_fuzz_refused("safetensors", "tg_safetensors_parse", rc);
    char path[128];
    int bad = 0;
    if (!scratch_path(path, sizeof path, "roundtrip.safetensors")) {
        bad = tg_fuzz_broken("safetensors", "no scratch directory");
    } else if ((rc = tg_safetensors_save(f, path)) < 0) {
        bad = tg_fuzz_broken("safetensors", "a parsed file does not save: %s", tg_error_message());
    } else if ((rc = tg_safetensors_load(&back, path)) < 0) {
        bad = tg_fuzz_broken("safetensors", "a saved file does not load: %s", tg_error_message());
    } else {
        bad = files_identical(f, back);
    }
    tg_st_free(back);
    tg_st_free(f);
    return bad;
}

/* ---- IDX ------------------------------------------------------------------------- */

int tg_fuzz_idx(const uint8_t *data, size_t size)
{
    /* The bytes as a file without touching the disk: a memfd, opened by its
     * /proc name (tg_idx_load takes a path). */
    int fd = memfd_create("idx", 0);
    if (fd < 0)
        return tg_fuzz_broken("idx", "memfd_create failed");
    if (size > 0 && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return tg_fuzz_broken("idx", "writing the memfd failed");
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    tg_tensor *t = NULL;
    int rc = tg_idx_load(&t, path);
    close(fd);
    if (rc < 0)
        return t ? tg_fuzz_broken("idx", "a refused load set *out") : tg_fuzz_refused("idx", "tg_idx_load", rc);
    int bad = 0;
    /* A plain (not gzip) file: its header is the bytes themselves. */
    if (size >= 4 && data[0] == 0 && data[1] == 0) {
        const int ndim = data[3];
        int64_t numel = 1;
        for (int d = 0; d < ndim; d++) {
            const uint8_t *b = data + 4 + 4 * d;
            numel *= (int64_t)b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3];
        }
        if (tg_tensor_ndim(t) != ndim || tg_tensor_numel(t) != numel)
            bad = tg_fuzz_broken("idx", "header says %d dims, %lld elements; tensor has %d, %lld", ndim,
                         (long long)numel, tg_tensor_ndim(t), (long long)tg_tensor_numel(t));
    }
    tg_tensor_release(t);
    return bad;
}

/* ---- checkpoint ------------------------------------------------------------------ */

/* A small training state: Linear(3, 4) + BatchNorm1d(4) after one Adam step,
 * a grad scaler, a loader over four 2x2 images, an RNG, a step counter and a
 * must-match metadata value; the same every time it is made. */
typedef struct train_state {
    tg_module *model;
    tg_optimizer *opt;
    tg_grad_scaler *scaler;
    tg_dataset *data;
    tg_loader *loader;
    tg_rng rng;
    int64_t step;
    tg_checkpoint *ck;
} train_state;

static void state_free(train_state *s)
{
    tg_checkpoint_free(s->ck);
    tg_loader_free(s->loader);
    tg_dataset_release(s->data);
    tg_grad_scaler_free(s->scaler);
    tg_optimizer_free(s->opt);
    tg_module_release(s->model);
}

/* One Adam step on mean(model(x)^2), so that the optimizer has state. */
static int state_train_once(train_state *s)
{
    const int64_t xs[2] = {5, 3};
    tg_tensor *x = NULL, *y = NULL, *sq = NULL, *loss = NULL;
    int rc = tg_tensor_zeros(&x, TG_F32, 2, xs);
    if (rc >= 0) rc = tg_tensor_rand_normal(x, &s->rng, 0.0, 1.0);
    if (rc >= 0) rc = tg_module_forward(s->model, &y, x);
    if (rc >= 0) rc = tg_mul(&sq, y, y);
    if (rc >= 0) rc = tg_mean(&loss, sq);
    if (rc >= 0) rc = tg_backward(loss, NULL, NULL);
    if (rc >= 0) rc = tg_optimizer_step(s->opt);
    tg_tensor_release(loss);
    tg_tensor_release(sq);
    tg_tensor_release(y);
    tg_tensor_release(x);
    return rc;
}

static int state_make(train_state *s)
{
    memset(s, 0, sizeof *s);
    tg_rng_init(&s->rng, 7);
    s->step = 3;
    tg_module *lin = NULL, *bn = NULL;
    int rc = tg_nn_sequential_new(&s->model);
    if (rc >= 0) rc = tg_nn_linear_new(&lin, 3, 4, true, &s->rng);
    if (rc >= 0) rc = tg_nn_sequential_append(s->model, lin);
    if (rc >= 0) rc = tg_nn_batchnorm_new(&bn, 0, 4, 1e-5, 0.1, true, true);
    if (rc >= 0) rc = tg_nn_sequential_append(s->model, bn);
    tg_tensor **params = NULL;
    int np = 0;
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    if (rc >= 0) rc = tg_module_parameters(s->model, &params, &np);
    if (rc >= 0) rc = tg_adam_new(&s->opt, np, params, &ao);
    free(params);
    if (rc >= 0) rc = state_train_once(s);
    if (rc >= 0) rc = tg_grad_scaler_new(&s->scaler, NULL);
    const int64_t is[3] = {4, 2, 2}, ls[1] = {4};
    tg_tensor *images = NULL, *labels = NULL;
    if (rc >= 0) rc = tg_tensor_full(&images, TG_U8, 3, is, 9);
    if (rc >= 0) rc = tg_tensor_full(&labels, TG_I64, 1, ls, 1);
    if (rc >= 0) rc = tg_dataset_from_tensors(&s->data, images, labels);
    tg_tensor_release(images);
    tg_tensor_release(labels);
    tg_loader_options lo = TG_LOADER_OPTIONS_INIT;
    lo.batch_size = 2;
    if (rc >= 0) rc = tg_loader_new(&s->loader, s->data, &lo);
    if (rc >= 0) rc = tg_checkpoint_new(&s->ck);
    if (rc >= 0) rc = tg_checkpoint_add_module(s->ck, "model", s->model);
    if (rc >= 0) rc = tg_checkpoint_add_optimizer(s->ck, "opt", s->opt);
    if (rc >= 0) rc = tg_checkpoint_add_grad_scaler(s->ck, "scaler", s->scaler);
    if (rc >= 0) rc = tg_checkpoint_add_loader(s->ck, "loader", s->loader);
    if (rc >= 0) rc = tg_checkpoint_add_rng(s->ck, "rng", &s->rng);
    if (rc >= 0) rc = tg_checkpoint_add_i64(s->ck, "step", &s->step);
    if (rc >= 0) rc = tg_checkpoint_set_meta(s->ck, "arch", "linear3x4-bn", true);
    if (rc < 0) state_free(s);
    return rc;
}

/* Everything a checkpoint load may change, as one file: the state dicts of
 * the model and the optimizer plus the scalar state as tensors. */
static int state_snapshot(const train_state *s, tg_st_file **out)
{
    tg_st_file *f = NULL;
    int64_t epoch, index;
    tg_loader_position(s->loader, &epoch, &index);
    const double scalars[] = {(double)s->rng.seed, (double)s->rng.counter, (double)s->step,
                              (double)epoch, (double)index,
                              tg_grad_scaler_get_scale(s->scaler),
                              (double)tg_grad_scaler_growth_tracker(s->scaler),
                              tg_module_is_training(s->model)};
    const int64_t n = sizeof scalars / sizeof scalars[0];
    tg_tensor *t = NULL;
    int rc = tg_st_new(&f);
    if (rc >= 0) rc = tg_module_state_dict_save(s->model, f, "model");
    if (rc >= 0) rc = tg_optimizer_state_save(s->opt, f, "opt");
    if (rc >= 0) rc = tg_tensor_from_data(&t, TG_F64, 1, &n, scalars);
    if (rc >= 0) rc = tg_st_set(f, "scalars", t);
    tg_tensor_release(t);
    if (rc < 0) {
        tg_st_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

int tg_fuzz_checkpoint(const uint8_t *data, size_t size)
{
    tg_st_file *f = NULL;
    int rc = tg_safetensors_parse(&f, data, size);
    if (rc < 0)
        return tg_fuzz_refused("checkpoint", "tg_safetensors_parse", rc);
    train_state s;
    tg_st_file *before = NULL, *after = NULL;
    int bad = 0;
    if (state_make(&s) < 0) {
        tg_st_free(f);
        return tg_fuzz_broken("checkpoint", "making the training state failed: %s",
                      tg_error_message());
    }
    if (state_snapshot(&s, &before) < 0) {
        bad = tg_fuzz_broken("checkpoint", "snapshot failed: %s", tg_error_message());
    } else if ((rc = tg_checkpoint_load_file(s.ck, f)) < 0) {
        bad = tg_fuzz_refused("checkpoint", "tg_checkpoint_load_file", rc);
        if (!bad && state_snapshot(&s, &after) < 0)
            bad = tg_fuzz_broken("checkpoint", "snapshot failed: %s", tg_error_message());
        else if (!bad && !same_tensors(before, after))
            bad = tg_fuzz_broken("checkpoint", "a refused load (%s: %s) changed the state",
                         tg_status_name(rc), tg_error_message());
    } else if (state_train_once(&s) < 0 &&
               !strstr(tg_error_message(), "num_batches_tracked = 9223372036854775807 cannot")) {
        /* An accepted state must be one training can go on from, but for a
         * BatchNorm count of INT64_MAX: PyTorch loads it too, and the step
         * refuses to increment it (torch's add_(1) would wrap around). */
        bad = tg_fuzz_broken("checkpoint", "a step after an accepted load failed: %s",
                     tg_error_message());
    }
    tg_st_free(after);
    tg_st_free(before);
    state_free(&s);
    tg_st_free(f);
    return bad;
}

int tg_fuzz_checkpoint_seed(const char *path)
{
    train_state s;
    int rc = state_make(&s);
    if (rc < 0)
        return rc;
    rc = tg_checkpoint_save(s.ck, path, NULL);
    state_free(&s);
    return rc;
}

/* ---- conv cases ------------------------------------------------------------------ */

/* The most work a case may take (multiply-adds of one pass, output
 * elements): larger cases are parsed but not run, so that every input runs
 * in milliseconds. */
#define CASE_MAX_MACS (1 << 22)
#define CASE_MAX_OUT (1 << 18)

/* The largest |value| of t, or INFINITY when t holds a NaN or an infinity. */
static double max_abs(const tg_tensor *t)
{
    double m = 0.0;
    for (int64_t i = 0; t && i < tg_tensor_numel(t); i++) {
        double v = 0.0;
        tg_tensor_get_flat(t, i, &v);
        if (!isfinite(v))
            return INFINITY;
        m = fmax(m, fabs(v));
    }
    return m;
}

/* Sizes of a parsed case: batch, channels, products of the spatial extents
 * of x, y and the kernel, and whether the shapes are sane enough to size. */
typedef struct case_size {
    bool ok;
    int64_t n, c_in, c_out, groups, x_sp, y_sp, k_sp;
} case_size;

static case_size size_case(const tg_case *c)
{
    case_size z = {.ok = false};
    const int nd = tg_tensor_ndim(c->x), ns = nd - 2;
    if (nd < 3 || nd > 5 || tg_tensor_ndim(c->weight) != nd || c->params.groups < 1)
        return z;
    const int64_t *xs = tg_tensor_shape(c->x), *ws = tg_tensor_shape(c->weight);
    int64_t out[3];
    int rc = c->transpose
                 ? tg_conv_transpose_output_size(out, ns, xs + 2, ws + 2, &c->params)
                 : tg_conv_output_size(out, ns, xs + 2, ws + 2, &c->params);
    if (rc < 0)
        return z;
    z.n = xs[0];
    z.c_in = xs[1];
    z.groups = c->params.groups;
    z.c_out = c->transpose ? ws[1] * z.groups : ws[0];
    z.x_sp = z.y_sp = z.k_sp = 1;
    for (int d = 0; d < ns; d++) {
        if (out[d] > CASE_MAX_OUT || ws[d + 2] > CASE_MAX_OUT)
            return z;
        z.x_sp *= xs[d + 2];
        z.y_sp *= out[d];
        z.k_sp *= ws[d + 2];
        if (z.y_sp > CASE_MAX_OUT || z.k_sp > CASE_MAX_OUT)
            return z;
    }
    const double macs = (double)z.n * z.c_out * z.y_sp * (double)(z.c_in / z.groups) * z.k_sp;
    z.ok = macs <= CASE_MAX_MACS && (double)z.n * z.c_out * z.y_sp <= CASE_MAX_OUT;
    return z;
}

/* Unit roundoff of the precision a result is computed and stored in. */
static double unit_roundoff(tg_dtype dt)
{
    switch (dt) {
    case TG_F64: return 0x1p-53;
    case TG_F16: return 0x1p-11;
    case TG_BF16: return 0x1p-8;
    default: return 0x1p-24;
    }
}

static double max_finite(tg_dtype dt)
{
    switch (dt) {
    case TG_F64: return 1.7976931348623157e308;
    case TG_F16: return 65504.0;
    case TG_BF16: return 3.3895313892515355e38;
    default: return 3.4028234663852886e38;
    }
}

/* fast and reference agree on tensor `name` of the two results: each element
 * within a rounding bound of `terms` products of size at most `scale`
 * (summed in f32 or f64), plus one rounding into the result's dtype. */
static int results_agree(const tg_st_file *fast, const tg_st_file *ref, const char *name,
                         double scale, double terms, const char *op)
{
    tg_tensor *a = tg_st_get(fast, name), *b = tg_st_get(ref, name);
    if (!a && !b)
        return 0;
    if (!a || !b || tg_tensor_dtype(a) != tg_tensor_dtype(b) || !tg_tensor_same_shape(a, b))
        return tg_fuzz_broken("case", "%s: %s differs in presence, dtype or shape", op, name);
    const tg_dtype dt = tg_tensor_dtype(a);
    const double u_sum = dt == TG_F64 ? 0x1p-53 : 0x1p-24;
    const double tol_abs = 4.0 * (terms + 2.0) * u_sum * scale;
    const double u_out = unit_roundoff(dt);
    for (int64_t i = 0; i < tg_tensor_numel(a); i++) {
        double va = 0.0, vb = 0.0;
        tg_tensor_get_flat(a, i, &va);
        tg_tensor_get_flat(b, i, &vb);
        if (va == vb || (isnan(va) && isnan(vb)))
            continue;
        /* One overflowed and the other nearly did: a result at the edge of
         * the dtype's range rounds either way. */
        if (!isfinite(va) || !isfinite(vb)) {
            const double fin = isfinite(va) ? fabs(va) : isfinite(vb) ? fabs(vb) : 0.0;
            if (!isnan(va) && !isnan(vb) && fin > 0.25 * max_finite(dt))
                continue;
            return tg_fuzz_broken("case", "%s: %s[%lld] fast %.9g, reference %.9g", op, name,
                          (long long)i, va, vb);
        }
        const double tol = tol_abs + 2.0 * u_out * fmax(fabs(va), fabs(vb)) + 2.0 * u_out * tol_abs;
        if (!(fabs(va - vb) <= tol))
            return tg_fuzz_broken("case", "%s: %s[%lld] fast %.9g, reference %.9g (tolerance %.3g)", op,
                          name, (long long)i, va, vb, tol);
    }
    return 0;
}

/* Both algorithms on a float case; they must agree (see targets.h). */
static int case_differential(const tg_case *c)
{
    const case_size z = size_case(c);
    if (!z.ok)
        return 0;
    tg_st_file *fast = NULL, *ref = NULL;
    char err_fast[512], err_ref[512];
    const int rf = tg_case_run(&fast, c, TG_CONV_ALGO_FAST, err_fast, sizeof err_fast);
    const int rr = tg_case_run(&ref, c, TG_CONV_ALGO_REFERENCE, err_ref, sizeof err_ref);
    int bad = 0;
    if ((rf < 0) != (rr < 0)) {
        bad = tg_fuzz_broken("case", "%s: fast %s (%s), reference %s (%s)", c->op, tg_status_name(rf),
                     rf < 0 ? err_fast : "ok", tg_status_name(rr), rr < 0 ? err_ref : "ok");
    } else if (rf < 0) {
        if (rf != rr)
            bad = tg_fuzz_broken("case", "%s: fast refused with %s, reference with %s", c->op,
                         tg_status_name(rf), tg_status_name(rr));
    } else {
        /* Inputs with NaN, infinities or values too large to bound the
         * rounding by are run (they must not crash) but not compared. */
        const double mx = max_abs(c->x), mw = max_abs(c->weight), mb = max_abs(c->bias),
                     mg = max_abs(c->grad_y), lim = 1e15;
        if (mx < lim && mw < lim && mb < lim && mg < lim) {
            /* The activation's derivative is at most 1.13 (GELU). */
            const double cin_g = (double)(z.c_in / z.groups), cout_g = (double)(z.c_out / z.groups);
            bad = results_agree(fast, ref, "y", fmax(mx * mw, mb), cin_g * z.k_sp + 1, c->op);
            if (!bad)
                bad = results_agree(fast, ref, "grad_x", 1.13 * mg * mw, cout_g * z.k_sp, c->op);
            if (!bad)
                bad = results_agree(fast, ref, "grad_weight", 1.13 * mg * mx,
                                    (double)z.n * (double)(z.x_sp > z.y_sp ? z.x_sp : z.y_sp), c->op);
            if (!bad)
                bad = results_agree(fast, ref, "grad_bias", 1.13 * mg, (double)z.n * z.y_sp, c->op);
        }
    }
    tg_st_free(fast);
    tg_st_free(ref);
    return bad;
}

/* got holds the tensors of want with the same dtypes, shapes and values. */
static int same_results(const tg_st_file *want, const tg_st_file *got, const char *what,
                        const char *op)
{
    for (int i = 0; i < tg_st_count(want); i++) {
        const char *name = NULL;
        tg_tensor *a = NULL;
        tg_st_at(want, i, &name, &a);
        tg_tensor *b = tg_st_get(got, name);
        if (!b || tg_tensor_dtype(a) != tg_tensor_dtype(b) || !tg_tensor_same_shape(a, b))
            return tg_fuzz_broken("case", "%s: %s differs from portable in presence, dtype or shape",
                          op, what);
        for (int64_t e = 0; e < tg_tensor_numel(a); e++) {
            double va = 0.0, vb = 0.0;
            tg_tensor_get_flat(a, e, &va);
            tg_tensor_get_flat(b, e, &vb);
            if (va != vb && !(isnan(va) && isnan(vb)))
                return tg_fuzz_broken("case", "%s: %s[%lld] portable %.9g, %s %.9g", op, name,
                              (long long)e, va, what, vb);
        }
    }
    return 0;
}

/* A quantized case with the portable int8 kernel and with every other one
 * this CPU has (AVX2, VNNI and AMX also with their column-free ConvTranspose
 * forced for any size): the same refusal, or the same values (every kernel computes the
 * same integers and requantizes them the same way). */
static int case_kernels(const tg_case *c)
{
    if (!size_case(c).ok)
        return 0;
    const int64_t phase_default = tg__q_phase_min_positions;
    char err[512];
    tg_st_file *want = NULL;
    tg_int8_kernel_set(TG_INT8_KERNEL_PORTABLE);
    const int rw = tg_case_run(&want, c, TG_CONV_ALGO_DEFAULT, err, sizeof err);
    int bad = rw < 0 && !*err ? tg_fuzz_broken("case", "%s: refused with no message", c->op) : 0;
    static const struct {
        tg_int8_kernel k;
        bool phase_always;
        const char *what;
    } runs[] = {{TG_INT8_KERNEL_AVX2, false, "avx2"},
                {TG_INT8_KERNEL_AVX2, true, "avx2 (column-free forced)"},
                {TG_INT8_KERNEL_VNNI, false, "vnni"},
                {TG_INT8_KERNEL_VNNI, true, "vnni (column-free forced)"},
                {TG_INT8_KERNEL_AMX, false, "amx"},
                {TG_INT8_KERNEL_AMX, true, "amx (column-free forced)"}};
    for (size_t i = 0; !bad && i < sizeof runs / sizeof *runs; i++) {
        if (!tg_int8_kernel_available(runs[i].k))
            continue;
        tg_int8_kernel_set(runs[i].k);
        tg__q_phase_min_positions = runs[i].phase_always ? 1 : phase_default;
        tg_st_file *got = NULL;
        const int rg = tg_case_run(&got, c, TG_CONV_ALGO_DEFAULT, err, sizeof err);
        if (rg != rw)
            bad = tg_fuzz_broken("case", "%s: portable %s, %s %s", c->op, tg_status_name(rw),
                         runs[i].what, tg_status_name(rg));
        else if (rg >= 0)
            bad = same_results(want, got, runs[i].what, c->op);
        tg_st_free(got);
    }
    tg__q_phase_min_positions = phase_default;
    tg_int8_kernel_set(TG_INT8_KERNEL_AUTO);
    tg_st_free(want);
    return bad;
}

int tg_fuzz_case(const uint8_t *data, size_t size)
{
    tg_st_file *f = NULL;
    int rc = tg_safetensors_parse(&f, data, size);
    if (rc < 0)
        return tg_fuzz_refused("case", "tg_safetensors_parse", rc);
    tg_case c;
    char err[512];
    int bad = 0;
    if (tg_case_parse(&c, f, err, sizeof err) >= 0) {
        if (!c.quantized) {
            bad = case_differential(&c);
        } else {
            bad = case_kernels(&c);
        }
    }
    tg_st_free(f);
    return bad;
}

const tg_fuzz_target tg_fuzz_targets[] = {
    {"safetensors", tg_fuzz_safetensors},
    {"idx", tg_fuzz_idx},
    {"checkpoint", tg_fuzz_checkpoint},
    {"case", tg_fuzz_case},
    {"tape", tg_fuzz_tape},
    {NULL, NULL},
};
