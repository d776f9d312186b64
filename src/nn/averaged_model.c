/* src/nn/averaged_model.c - torch.optim.swa_utils.AveragedModel: a deep copy
 * of a model whose parameters (and, with use_buffers, buffers) follow a
 * running average of the model's, as update_parameters computes it.
 *
 * With n = n_averaged before the call, each averaged tensor a and the model's
 * tensor p:  n == 0: a = p;  equal average: a = a + (p - a) / (n + 1);
 * EMA: a = decay * a + (1 - decay) * p.  As torch, every operation is
 * rounded to the compute dtype ct (the tensor's dtype, or f32, torch's
 * default dtype, for integer buffers), and so are its scalars (decay,
 * 1 - decay and n + 1, which torch converts to ct).  Computing an operation
 * of two ct values in double and rounding once gives the correctly rounded
 * ct result (double has more than 2p + 2 bits for every float dtype p), as
 * torch's float (f32 opmath for f16 and bf16) computation does. */
#include <math.h>
#include <string.h>

#include "nn/module_internal.h"
#include "tapegrad/optim.h"

typedef struct avg_state {
    double decay;      /* < 0: the equal average */
    bool use_buffers;
} avg_state;

static int avg_forward(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    return tg_module_forward_n(tg_module_child(m, "module"), y, n, xs);
}

static const tg_module_vtable avg_vt = {.type_name = "AveragedModel", .forward_n = avg_forward,
                                        .release = free, .state_size = sizeof(avg_state)};

static int avg_set_no_grad(tg_module *m, void *user)
{
    (void)user;
    for (int i = 0; i < m->n_params; i++)
        TG_TRY(tg_tensor_set_requires_grad(m->params[i].t, false));
    return TG_OK;
}

int tg_averaged_model_new(tg_module **out, const tg_module *model, double decay, bool use_buffers)
{
    TG_CHECK(out != NULL && model != NULL, TG_EINVAL,
             "averaged_model_new: out and model must not be NULL");
    TG_CHECK(decay < 1.0 && isfinite(decay), TG_EINVAL,
             "averaged_model_new: decay=%g must be in [0, 1) for an exponential moving average, "
             "or negative for the equal average", decay);
    avg_state *s = tg__malloc(sizeof *s);
    if (!s) return TG_ENOMEM;
    *s = (avg_state){.decay = decay < 0 ? -1.0 : decay, .use_buffers = use_buffers};
    tg_module *m = NULL, *copy = NULL;
    int rc = tg_module_new(&m, &avg_vt, s);
    if (rc < 0) {
        free(s);
        return rc;
    }
    tg_tensor *n = NULL;
    rc = tg_module_copy(&copy, model);
    if (rc == TG_OK) rc = tg__module_visit(copy, avg_set_no_grad, NULL);
    if (rc == TG_OK) rc = tg_module_add_child(m, "module", tg_module_retain(copy));
    if (rc == TG_OK) rc = tg_tensor_zeros(&n, TG_I64, 0, NULL);
    if (rc == TG_OK) rc = tg_module_add_buffer(m, "n_averaged", n);   /* steals n */
    tg_module_release(copy);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

static int avg_check(const char *fn, const tg_module *avg)
{
    TG_CHECK(avg != NULL, TG_EINVAL, "%s: avg must not be NULL", fn);
    TG_CHECK(avg->vt == &avg_vt, TG_EINVAL,
             "%s: avg is a %s module, not one made by tg_averaged_model_new", fn,
             tg_module_type_name(avg));
    return TG_OK;
}

int tg_averaged_model_params(const tg_module *avg, double *decay, bool *use_buffers)
{
    TG_TRY(avg_check("averaged_model_params", avg));
    const avg_state *s = avg->state;
    if (decay) *decay = s->decay;
    if (use_buffers) *use_buffers = s->use_buffers;
    return TG_OK;
}

/* ---- update_parameters ---- */

typedef struct avg_entry {
    char name[TG_MODULE_NAME_MAX];
    tg_tensor *t;                      /* borrowed */
    bool is_param;
} avg_entry;

typedef struct avg_list {
    int n, cap;
    avg_entry *e;
} avg_list;

static int avg_collect(const char *name, tg_tensor *t, bool is_param, void *user)
{
    avg_list *l = user;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        avg_entry *e = realloc(l->e, (size_t)cap * sizeof *e);
        if (!e) return tg__error(TG_ENOMEM, "averaged_model_update: out of memory");
        l->e = e;
        l->cap = cap;
    }
    avg_entry *e = &l->e[l->n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->t = t;
    e->is_param = is_param;
    return TG_OK;
}

/* The averaged copy's entry a and the model's entry p must agree. */
static int avg_compare(const avg_entry *a, const avg_entry *p)
{
    const char *fn = "averaged_model_update";
    TG_CHECK(strcmp(a->name, p->name) == 0 && a->is_param == p->is_param, TG_EINVAL,
             "%s: the model's %s '%s' is not the averaged copy's %s '%s': the models differ "
             "in structure", fn, p->is_param ? "parameter" : "buffer", p->name,
             a->is_param ? "parameter" : "buffer", a->name);
    if (!tg_tensor_same_shape(a->t, p->t)) {
        char sa[96], sp[96];
        tg_shape_str(sa, sizeof sa, tg_tensor_ndim(a->t), tg_tensor_shape(a->t));
        tg_shape_str(sp, sizeof sp, tg_tensor_ndim(p->t), tg_tensor_shape(p->t));
        return tg__error(TG_ESHAPE, "%s: '%s' has shape %s in the model, %s in the averaged copy",
                         fn, p->name, sp, sa);
    }
    TG_CHECK(tg_tensor_dtype(a->t) == tg_tensor_dtype(p->t), TG_EDTYPE,
             "%s: '%s' has dtype %s in the model, %s in the averaged copy (convert one with "
             "tg_module_to_dtype)", fn, p->name, tg_dtype_name(tg_tensor_dtype(p->t)),
             tg_dtype_name(tg_tensor_dtype(a->t)));
    return TG_OK;
}

/* The pairs to average: dst (the averaged copy's tensor) and src (a
 * contiguous view of the model's), each tensor once, as torch's
 * parameters() and buffers() list them. */
typedef struct avg_work {
    int n;
    tg_tensor **dst, **src, **buf;   /* buf: dst's contiguous work copy, or dst */
} avg_work;

static void avg_work_free(avg_work *w)
{
    for (int i = 0; i < w->n; i++) {
        tg_tensor_release(w->src[i]);
        tg_tensor_release(w->buf[i]);
    }
    free(w->dst);
    free(w->src);
    free(w->buf);
}

static int avg_add_pair(avg_work *w, tg_tensor *a, tg_tensor *p)
{
    tg_tensor *src = NULL, *buf = NULL;
    TG_TRY(tg_tensor_contiguous(&src, p));
    int rc = tg_tensor_contiguous(&buf, a);
    if (rc < 0) {
        tg_tensor_release(src);
        return rc;
    }
    w->dst[w->n] = a;
    w->src[w->n] = src;
    w->buf[w->n++] = buf;
    return TG_OK;
}

/* Fills w from the aligned entry lists al (averaged copy) and pl (model). */
static int avg_pairs(avg_work *w, const avg_list *al, const avg_list *pl, bool use_buffers)
{
    size_t sz = (size_t)(al->n ? al->n : 1);
    w->dst = malloc(sz * sizeof *w->dst);
    w->src = malloc(sz * sizeof *w->src);
    w->buf = malloc(sz * sizeof *w->buf);
    if (!w->dst || !w->src || !w->buf)
        return tg__error(TG_ENOMEM, "averaged_model_update: out of memory");
    for (int i = 0; i < al->n; i++) {
        if (!al->e[i].is_param && !use_buffers) continue;
        tg_tensor *a = al->e[i].t, *p = pl->e[i].t;
        bool seen = false;
        for (int k = 0; k < i; k++) {
            if (!al->e[k].is_param && !use_buffers) continue;
            bool ka = al->e[k].t == a, kp = pl->e[k].t == p;
            TG_CHECK(ka == kp, TG_EINVAL,
                     "averaged_model_update: '%s' and '%s' are one tensor in %s but two in %s: "
                     "the models tie weights differently", al->e[k].name, al->e[i].name,
                     ka ? "the averaged copy" : "the model",
                     ka ? "the model" : "the averaged copy");
            seen |= ka;
        }
        if (!seen) TG_TRY(avg_add_pair(w, a, p));
    }
    return TG_OK;
}

/* One tensor's average, in place in buf (contiguous, as src). */
static void avg_one(tg_tensor *buf, const tg_tensor *src, double decay, int64_t n_averaged)
{
    const tg_dtype dt = tg_tensor_dtype(buf);
    const tg_dtype ct = tg_dtype_is_float(dt) ? dt : TG_F32;
    void *a = tg_tensor_data(buf);
    const void *p = tg_tensor_cdata(src);
    const int64_t numel = tg_tensor_numel(buf);
    const double d = tg__round_to(ct, decay), e = tg__round_to(ct, 1.0 - decay);
    const double k = tg__round_to(ct, (double)n_averaged + 1.0);
    for (int64_t i = 0; i < numel; i++) {
        double av = tg__round_to(ct, tg_dtype_load(dt, a, i));
        double pv = tg__round_to(ct, tg_dtype_load(dt, p, i));
        double r;
        if (n_averaged == 0) {
            r = pv;
        } else if (decay >= 0) {
            double x = tg__round_to(ct, d * av), y = tg__round_to(ct, e * pv);
            r = tg__round_to(ct, x + y);
        } else {
            double q = tg__round_to(ct, tg__round_to(ct, pv - av) / k);
            r = tg__round_to(ct, av + q);
        }
        tg_dtype_store(dt, a, i, r);
    }
}

int tg_averaged_model_update(tg_module *avg, const tg_module *model)
{
    const char *fn = "averaged_model_update";
    TG_TRY(avg_check(fn, avg));
    TG_CHECK(model != NULL, TG_EINVAL, "%s: model must not be NULL", fn);
    const avg_state *s = avg->state;
    tg_module *inner = tg_module_child(avg, "module");
    tg_tensor *nt = tg__module_local(avg, "n_averaged");
    TG_ASSERT(inner && nt && tg_tensor_dtype(nt) == TG_I64 && tg_tensor_numel(nt) == 1);
    const int64_t n = *(const int64_t *)tg_tensor_cdata(nt);
    TG_CHECK(n >= 0 && n < INT64_MAX, TG_EINVAL,
             "%s: n_averaged = %lld must be in [0, 2^63 - 1)", fn, (long long)n);
    avg_list al = {0}, pl = {0};
    avg_work w = {0};
    int rc = tg_module_foreach_state(inner, avg_collect, &al);
    if (rc == TG_OK) rc = tg_module_foreach_state(model, avg_collect, &pl);
    for (int i = 0; rc == TG_OK && i < al.n && i < pl.n; i++) rc = avg_compare(&al.e[i], &pl.e[i]);
    if (rc == TG_OK && al.n != pl.n) {
        const avg_list *more = al.n > pl.n ? &al : &pl;
        const int lo = al.n < pl.n ? al.n : pl.n;
        rc = tg__error(TG_EINVAL, "%s: '%s' is in the %s only: the models differ in structure "
                                  "(%d state entries in the model, %d in the averaged copy)",
                       fn, more->e[lo].name, more == &al ? "averaged copy" : "model", pl.n, al.n);
    }
    if (rc == TG_OK) rc = avg_pairs(&w, &al, &pl, s->use_buffers);
    if (rc == TG_OK) {
        for (int i = 0; i < w.n; i++) avg_one(w.buf[i], w.src[i], s->decay, n);
        for (int i = 0; i < w.n && rc == TG_OK; i++) {
            if (w.buf[i] != w.dst[i]) rc = tg_tensor_copy_(w.dst[i], w.buf[i]);
            tg_tensor_bump_version(w.dst[i]);
        }
        *(int64_t *)tg_tensor_data(nt) = n + 1;
        tg_tensor_bump_version(nt);
    }
    avg_work_free(&w);
    free(al.e);
    free(pl.e);
    return rc;
}
