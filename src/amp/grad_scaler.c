/* tg_grad_scaler: dynamic loss scaling (PyTorch's GradScaler).
 *
 * Half-precision gradients underflow to zero below ~6e-8 (f16).  Multiplying
 * the loss by a large scale S multiplies every gradient by S (backward is
 * linear in the seed), lifting small gradients into range; dividing by S
 * before the optimizer step restores them.  When S is too large some
 * gradient overflows to inf: that step is skipped and S halved.  After
 * growth_interval clean steps in a row S is doubled again, so S hovers just
 * below the overflow threshold. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "amp/scaler_check.h"
#include "tapegrad/amp.h"
#include "tapegrad/ops.h"

/* Where a scaler is inside one training step. */
typedef enum scaler_stage {
    STAGE_READY = 0,   /* since the last update nothing happened */
    STAGE_UNSCALED,    /* gradients unscaled, found_inf known */
    STAGE_STEPPED,     /* the step was taken or skipped */
} scaler_stage;

struct tg_grad_scaler {
    tg_grad_scaler_opts o;
    double scale;             /* always a finite f32 value, as PyTorch's f32 tensor */
    int64_t growth_tracker;   /* clean steps since the scale last changed */
    bool found_inf;
    bool checked;             /* the last unscale saw at least one gradient */
    scaler_stage stage;
};

static int check_opts(const tg_grad_scaler_opts *o)
{
    TG_CHECK(isfinite(o->init_scale) && o->init_scale > 0 && o->init_scale <= FLT_MAX,
             TG_EINVAL, "grad_scaler_new: init_scale=%g must be a positive finite f32",
             o->init_scale);
    TG_CHECK(isfinite(o->growth_factor) && o->growth_factor > 1.0, TG_EINVAL,
             "grad_scaler_new: growth_factor=%g must be > 1", o->growth_factor);
    TG_CHECK(o->backoff_factor > 0.0 && o->backoff_factor < 1.0, TG_EINVAL,
             "grad_scaler_new: backoff_factor=%g must be in (0, 1)", o->backoff_factor);
    TG_CHECK(o->growth_interval >= 1, TG_EINVAL,
             "grad_scaler_new: growth_interval=%lld must be >= 1",
             (long long)o->growth_interval);
    return TG_OK;
}

int tg_grad_scaler_new(tg_grad_scaler **out, const tg_grad_scaler_opts *opts)
{
    TG_CHECK(out != NULL, TG_EINVAL, "grad_scaler_new: out must not be NULL");
    tg_grad_scaler_opts o = opts ? *opts : (tg_grad_scaler_opts)TG_GRAD_SCALER_OPTS_INIT;
    TG_TRY(check_opts(&o));
    tg_grad_scaler *s = tg__calloc(1, sizeof *s);
    if (!s) return TG_ENOMEM;
    s->o = o;
    s->scale = (double)(float)o.init_scale;
    *out = s;
    return TG_OK;
}

void tg_grad_scaler_free(tg_grad_scaler *s) { free(s); }

static int scale_loss(tg_grad_scaler *s, tg_tensor **out, tg_tensor *loss)
{
    TG_CHECK(s != NULL, TG_EINVAL, "grad_scaler_scale: s must not be NULL");
    TG_CHECK(out != NULL, TG_EINVAL, "grad_scaler_scale: out must not be NULL");
    TG_CHECK(loss != NULL, TG_EINVAL, "grad_scaler_scale: loss must not be NULL");
    TG_CHECK(tg_dtype_is_float(loss->dtype), TG_EDTYPE,
             "grad_scaler_scale: loss has dtype %s; float dtypes only",
             tg_dtype_name(loss->dtype));
    if (!s->o.enabled) {
        *out = tg_tensor_retain(loss);
        return TG_OK;
    }
    if (loss->dtype == TG_F64 || loss->dtype == TG_F32) return tg_mul_scalar(out, loss, s->scale);
    /* A half loss is scaled in f32, as PyTorch's f32 scale tensor promotes
     * it: in f16 the default scale 65536 alone is already inf. */
    tg_tensor *l32 = NULL;
    TG_TRY(tg_to_dtype(&l32, loss, TG_F32));
    int rc = tg_mul_scalar(out, l32, s->scale);
    tg_tensor_release(l32);
    return rc;
}

int tg_grad_scaler_scale(tg_grad_scaler *s, tg_tensor **out, tg_tensor *loss)
{
    tg__lib_enter();
    int rc = scale_loss(s, out, loss);
    tg__lib_leave();
    return tg__scope_capture(out, rc);
}

/* buf[0..n) *= inv; true when it held an inf or NaN (a NaN fails the <=):
 * one pass without a branch per element. */
static bool unscale_f32(float *f, int64_t n, float inv)
{
    bool bad = false;
    for (int64_t i = 0; i < n; i++) {
        bad |= !(fabsf(f[i]) <= FLT_MAX);
        f[i] *= inv;
    }
    return bad;
}

static bool unscale_f64(double *d, int64_t n, float inv)
{
    bool bad = false;
    for (int64_t i = 0; i < n; i++) {
        bad |= !(fabs(d[i]) <= DBL_MAX);
        d[i] *= (double)inv;
    }
    return bad;
}

/* What unscale_one does to each element: times inv, noting an inf or NaN. */
typedef struct unscale_op {
    float inv;
    bool found;
} unscale_op;

static void unscale_elems(tg_dtype cdt, void *buf, int64_t n, void *user)
{
    unscale_op *op = user;
    if (cdt == TG_F64 ? unscale_f64(buf, n, op->inv) : unscale_f32(buf, n, op->inv))
        op->found = true;
}

/* grad *= inv in g's compute dtype; true when g held an inf or NaN.  A
 * contiguous f32/f64 gradient (an f32 master weight's) is scaled in place;
 * others through a copy in the compute dtype. */
static int unscale_one(tg_tensor *g, float inv, bool *found)
{
    unscale_op op = {inv, false};
    TG_TRY(tg__update_in_compute_dtype(g, unscale_elems, &op));
    if (op.found) *found = true;
    return TG_OK;
}

int tg_grad_scaler_unscale(tg_grad_scaler *s, int n, tg_tensor *const *params)
{
    TG_CHECK(s != NULL, TG_EINVAL, "grad_scaler_unscale: s must not be NULL");
    TG_TRY(tg__check_param_list("grad_scaler_unscale", n, params, false));
    if (!s->o.enabled) return TG_OK;
    TG_CHECK(s->stage == STAGE_READY, TG_EINVAL,
             "grad_scaler_unscale: already called since the last update (once per step)");
    /* PyTorch: inv_scale = scale.double().reciprocal().float(). */
    float inv = (float)(1.0 / s->scale);
    bool found = false, checked = false;
    for (int i = 0; i < n; i++) {
        tg_tensor *g = params[i]->grad;
        if (g) TG_TRY(unscale_one(g, inv, &found));
        checked = checked || g != NULL;
    }
    s->found_inf = found;
    s->checked = checked;
    s->stage = STAGE_UNSCALED;
    return TG_OK;
}

bool tg_grad_scaler_should_step(const tg_grad_scaler *s)
{
    return !s || !s->o.enabled || !s->found_inf;
}

bool tg_grad_scaler_found_inf(const tg_grad_scaler *s) { return s && s->found_inf; }

int tg_grad_scaler_step(tg_grad_scaler *s, int n, tg_tensor *const *params,
                        tg_grad_scaler_step_fn step, void *user, bool *stepped)
{
    TG_CHECK(s != NULL, TG_EINVAL, "grad_scaler_step: s must not be NULL");
    TG_CHECK(step != NULL, TG_EINVAL, "grad_scaler_step: step must not be NULL");
    TG_CHECK(!s->o.enabled || s->stage != STAGE_STEPPED, TG_EINVAL,
             "grad_scaler_step: already called since the last update (once per step)");
    if (stepped) *stepped = false;
    if (s->o.enabled && s->stage == STAGE_READY) TG_TRY(tg_grad_scaler_unscale(s, n, params));
    /* PyTorch: "No inf checks were recorded for this optimizer." */
    TG_CHECK(!s->o.enabled || s->checked, TG_EINVAL,
             "grad_scaler_step: no parameter had a gradient when unscaling (no inf checks "
             "were recorded)");
    int rc = TG_OK;
    if (tg_grad_scaler_should_step(s)) {
        tg__callback_begin();
        rc = tg__callback_end("grad_scaler_step: the step callback", step(user));
    }
    /* Stepped only when the step ran or was skipped: after a failing step
     * callback the stage stays, so that the step can be retried. */
    if (rc >= 0 && s->o.enabled) s->stage = STAGE_STEPPED;
    if (rc >= 0 && stepped) *stepped = tg_grad_scaler_should_step(s);
    return rc;
}

int tg_grad_scaler_update(tg_grad_scaler *s)
{
    TG_CHECK(s != NULL, TG_EINVAL, "grad_scaler_update: s must not be NULL");
    if (!s->o.enabled) return TG_OK;
    TG_CHECK(s->stage != STAGE_READY && s->checked, TG_EINVAL,
             "grad_scaler_update: no unscale or step since the last update, or no "
             "parameter had a gradient (no inf checks were recorded)");
    if (s->found_inf) {
        s->scale = (double)(float)(s->scale * s->o.backoff_factor);
        s->growth_tracker = 0;
    } else if (++s->growth_tracker == s->o.growth_interval) {
        float grown = (float)(s->scale * s->o.growth_factor);
        if (isfinite(grown)) s->scale = (double)grown;   /* keep S when it would overflow */
        s->growth_tracker = 0;
    }
    s->found_inf = false;
    s->stage = STAGE_READY;
    return TG_OK;
}

double tg_grad_scaler_get_scale(const tg_grad_scaler *s)
{
    return s && s->o.enabled ? s->scale : 1.0;
}

int64_t tg_grad_scaler_growth_tracker(const tg_grad_scaler *s) { return s ? s->growth_tracker : 0; }

bool tg_grad_scaler_enabled(const tg_grad_scaler *s) { return s && s->o.enabled; }

/* ---- checkpoint state ----------------------------------------------------------- */

static const char *const state_keys[] = {"scale", "growth_factor", "backoff_factor",
                                         "growth_tracker", "growth_interval"};
enum { KEY_SCALE, KEY_GROWTH, KEY_BACKOFF, KEY_TRACKER, KEY_INTERVAL, N_KEYS };

static int key_name(char *buf, size_t size, const char *what, const char *prefix, int k)
{
    int len = snprintf(buf, size, "%s.%s", prefix, state_keys[k]);
    TG_CHECK(len > 0 && (size_t)len < size, TG_EINVAL, "%s: prefix '%.32s...' is too long",
             what, prefix);
    return TG_OK;
}

int tg_grad_scaler_state_save(const tg_grad_scaler *s, tg_st_file *f, const char *prefix)
{
    const char *what = "grad_scaler_state_save";
    TG_CHECK(s != NULL && f != NULL && prefix != NULL, TG_EINVAL,
             "%s: s, f and prefix must not be NULL", what);
    if (!s->o.enabled) return TG_OK;
    const double v[N_KEYS] = {s->scale, s->o.growth_factor, s->o.backoff_factor,
                              (double)s->growth_tracker, (double)s->o.growth_interval};
    char name[256];
    for (int k = 0; k < N_KEYS; k++) TG_TRY(key_name(name, sizeof name, what, prefix, k));
    for (int k = 0; k < N_KEYS; k++) {
        tg_tensor *t = NULL;
        TG_TRY(tg_tensor_scalar(&t, k >= KEY_TRACKER ? TG_I64 : TG_F64, v[k]));
        TG_TRY(key_name(name, sizeof name, what, prefix, k));
        int rc = tg_st_set(f, name, t);
        tg_tensor_release(t);
        TG_TRY(rc);
    }
    return TG_OK;
}

/* Reads the one value of f's tensor prefix.<key k> into *v. */
static int read_value(const tg_st_file *f, const char *prefix, int k, double *v)
{
    const char *what = "grad_scaler_state_load";
    char name[256];
    TG_TRY(key_name(name, sizeof name, what, prefix, k));
    tg_tensor *t = tg_st_get(f, name);
    TG_CHECK(t != NULL, TG_ENOTFOUND, "%s: no tensor '%s'", what, name);
    TG_CHECK(tg_tensor_numel(t) == 1, TG_EINVAL, "%s: '%s' must hold one value, not %lld",
             what, name, (long long)tg_tensor_numel(t));
    return tg_tensor_get_flat(t, 0, v);
}

/* The options and growth tracker that f holds for s, validated. */
static int read_state(const tg_grad_scaler *s, const tg_st_file *f, const char *prefix,
                      tg_grad_scaler_opts *out, int64_t *tracker_out)
{
    const char *what = "grad_scaler_state_load";
    double v[N_KEYS];
    for (int k = 0; k < N_KEYS; k++) TG_TRY(read_value(f, prefix, k, &v[k]));
    tg_grad_scaler_opts o = s->o;
    o.init_scale = v[KEY_SCALE];
    o.growth_factor = v[KEY_GROWTH];
    o.backoff_factor = v[KEY_BACKOFF];
    /* Range first: converting NaN or a double beyond int64 is undefined. */
    TG_CHECK(v[KEY_INTERVAL] >= 1 && v[KEY_INTERVAL] < 0x1p62 &&
                 v[KEY_INTERVAL] == floor(v[KEY_INTERVAL]),
             TG_EINVAL, "%s: growth_interval=%g must be an integer >= 1", what, v[KEY_INTERVAL]);
    o.growth_interval = (int64_t)v[KEY_INTERVAL];
    TG_TRY(check_opts(&o));
    TG_CHECK(v[KEY_TRACKER] >= 0 && v[KEY_TRACKER] < (double)o.growth_interval &&
                 v[KEY_TRACKER] == floor(v[KEY_TRACKER]),
             TG_EINVAL, "%s: growth_tracker=%g must be an integer in [0, %lld)", what,
             v[KEY_TRACKER], (long long)o.growth_interval);
    int64_t tracker = (int64_t)v[KEY_TRACKER];
    *out = o;
    *tracker_out = tracker;
    return TG_OK;
}

int tg__grad_scaler_state_check(const tg_grad_scaler *s, const tg_st_file *f, const char *prefix)
{
    tg_grad_scaler_opts o;
    int64_t tracker;
    return s->o.enabled ? read_state(s, f, prefix, &o, &tracker) : TG_OK;
}

/* As PyTorch's load_state_dict: the scale, factors, interval and tracker;
 * the step in progress (found_inf, the stage) is left as it is. */
int tg_grad_scaler_state_load(tg_grad_scaler *s, const tg_st_file *f, const char *prefix)
{
    TG_CHECK(s != NULL && f != NULL && prefix != NULL, TG_EINVAL,
             "grad_scaler_state_load: s, f and prefix must not be NULL");
    if (!s->o.enabled) return TG_OK;
    tg_grad_scaler_opts o;
    int64_t tracker;
    TG_TRY(read_state(s, f, prefix, &o, &tracker));
    s->o = o;
    s->scale = (double)(float)o.init_scale;
    s->growth_tracker = tracker;
    return TG_OK;
}
