/* src/nn/rnn_cell.c - nn.RNNCell, nn.LSTMCell and nn.GRUCell, and what the
 * layers (rnn.c) share with them: one time step of each kind, the
 * parameters and their initialisation.
 *
 * A step is made of recorded ops only, in torch's order (RNN.cpp's cells),
 * so its gradients of every order come from theirs.  With gi = x W_ih^T +
 * b_ih, computed by the caller (a layer projects every time step at once)
 * and gh = h W_hh^T + b_hh:
 *   RNN:  h' = act(gh + gi)
 *   LSTM: (i, f, g, o) = chunk(gh + gi, 4); c' = sig(f) c + sig(i) tanh(g);
 *         h' = sig(o) tanh(c'), then h' W_hr^T with a projection
 *   GRU:  r = sig(gh_r + gi_r), z = sig(gh_z + gi_z),
 *         n = tanh(gi_n + gh_n r), h' = (h - n) z + n */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/rnn_internal.h"
#include "tapegrad/ops.h"
#include "tapegrad/scope.h"

int tg__rnn_gates(tg__rnn_kind k)
{
    return k == TG__RNN_LSTM ? 4 : k == TG__RNN_GRU ? 3 : 1;
}

const char *tg__rnn_name(tg__rnn_kind k, bool cell)
{
    static const char *const names[2][4] = {{"RNN", "RNN", "LSTM", "GRU"},
                                            {"RNNCell", "RNNCell", "LSTMCell", "GRUCell"}};
    return names[cell][k];
}

const char *tg__rnn_shape(char *buf, size_t n, const tg_tensor *t)
{
    size_t len = 0;
    buf[0] = '\0';
    const int nd = tg_tensor_ndim(t);
    len += (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < nd && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? ", " : "",
                                (long long)tg_tensor_dim(t, i));
    if (len < n) snprintf(buf + len, n - len, ")");
    return buf;
}

int tg__rnn_check_dtype(const char *fn, const char *what, const tg_tensor *t, tg_dtype dt)
{
    TG_CHECK(tg_tensor_dtype(t) == dt, TG_EDTYPE,
             "%s: %s has dtype %s; it must be the parameters' dtype %s", fn, what,
             tg_dtype_name(tg_tensor_dtype(t)), tg_dtype_name(dt));
    return TG_OK;
}

/* ---- parameters ---- */

int tg__rnn_add_params(tg_module *m, const tg__rnn_state *s, const char *sfx, int64_t in,
                       int64_t h_in)
{
    const int64_t gh = tg__rnn_gates(s->kind) * s->hidden_size;
    char name[TG__NN_LOCAL_NAME_MAX];
    snprintf(name, sizeof name, "weight_ih%s", sfx);
    TG_TRY(tg__nn_add_param_zeros(m, name, 2, (int64_t[]){gh, in}, NULL));
    snprintf(name, sizeof name, "weight_hh%s", sfx);
    TG_TRY(tg__nn_add_param_zeros(m, name, 2, (int64_t[]){gh, h_in}, NULL));
    if (s->o.bias) {
        snprintf(name, sizeof name, "bias_ih%s", sfx);
        TG_TRY(tg__nn_add_param_zeros(m, name, 1, &gh, NULL));
        snprintf(name, sizeof name, "bias_hh%s", sfx);
        TG_TRY(tg__nn_add_param_zeros(m, name, 1, &gh, NULL));
    }
    if (s->o.proj_size > 0) {
        snprintf(name, sizeof name, "weight_hr%s", sfx);
        TG_TRY(tg__nn_add_param_zeros(m, name, 2, (int64_t[]){s->o.proj_size, s->hidden_size},
                                      NULL));
    }
    return TG_OK;
}

int tg__rnn_init(tg_module *m, int64_t hidden_size, tg_rng *rng)
{
    const double bound = 1.0 / sqrt((double)hidden_size);
    for (int i = 0; i < m->n_params; i++)
        TG_TRY(tg_tensor_rand_uniform(m->params[i].t, rng, -bound, bound));
    return TG_OK;
}

void tg__rnn_weights_of(const tg_module *m, const char *sfx, tg__rnn_weights *w)
{
    char name[TG__NN_LOCAL_NAME_MAX];
    tg_tensor **slot[5] = {&w->w_ih, &w->w_hh, &w->b_ih, &w->b_hh, &w->w_hr};
    static const char *const base[5] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                        "weight_hr"};
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "%s%s", base[i], sfx);
        *slot[i] = tg__module_local(m, name);
    }
}

/* ---- one step ---- */

/* The LSTM's step from the summed gates (N, 4 H); t[] collects the
 * temporaries, which the caller releases. */
static int lstm_gates(tg_tensor **t, const tg__rnn_weights *w, tg_tensor *gates, tg_tensor *c,
                      tg_tensor **h_out, tg_tensor **c_out)
{
    int n = 0;
    TG_TRY(tg_chunk(t, 4, &n, gates, 4, 1));           /* t[0..4): i, f, g, o */
    TG_TRY(tg_sigmoid(&t[4], t[0]));
    TG_TRY(tg_sigmoid(&t[5], t[1]));
    TG_TRY(tg_tanh(&t[6], t[2]));
    TG_TRY(tg_sigmoid(&t[7], t[3]));
    TG_TRY(tg_mul(&t[8], t[5], c));                    /* sig(f) c */
    TG_TRY(tg_mul(&t[9], t[4], t[6]));                 /* sig(i) tanh(g) */
    TG_TRY(tg_add(&t[10], t[8], t[9]));                /* c' */
    TG_TRY(tg_tanh(&t[11], t[10]));
    TG_TRY(tg_mul(&t[12], t[7], t[11]));               /* h' */
    if (w->w_hr) TG_TRY(tg_linear(&t[13], t[12], w->w_hr, NULL));
    *h_out = tg_tensor_retain(w->w_hr ? t[13] : t[12]);
    *c_out = tg_tensor_retain(t[10]);
    return TG_OK;
}

/* The GRU's step from gi and gh (N, 3 H) each. */
static int gru_gates(tg_tensor **t, tg_tensor *gi, tg_tensor *gh, tg_tensor *h,
                     tg_tensor **h_out)
{
    int n = 0;
    TG_TRY(tg_chunk(t, 3, &n, gi, 3, 1));              /* t[0..3): gi_r, gi_z, gi_n */
    TG_TRY(tg_chunk(t + 3, 3, &n, gh, 3, 1));          /* t[3..6): gh_r, gh_z, gh_n */
    TG_TRY(tg_add(&t[6], t[3], t[0]));
    TG_TRY(tg_sigmoid(&t[7], t[6]));                   /* r */
    TG_TRY(tg_add(&t[8], t[4], t[1]));
    TG_TRY(tg_sigmoid(&t[9], t[8]));                   /* z */
    TG_TRY(tg_mul(&t[10], t[5], t[7]));                /* gh_n r */
    TG_TRY(tg_add(&t[11], t[2], t[10]));
    TG_TRY(tg_tanh(&t[12], t[11]));                    /* n */
    TG_TRY(tg_sub(&t[13], h, t[12]));
    TG_TRY(tg_mul(&t[14], t[13], t[9]));
    TG_TRY(tg_add(&t[15], t[14], t[12]));              /* h' */
    *h_out = tg_tensor_retain(t[15]);
    return TG_OK;
}

#define STEP_TEMPS 16

int tg__rnn_step(tg__rnn_kind k, const tg__rnn_weights *w, tg_tensor *gi, tg_tensor *h,
                 tg_tensor *c, tg_tensor **h_out, tg_tensor **c_out)
{
    tg_tensor *gh = NULL, *sum = NULL, *t[STEP_TEMPS] = {0};
    tg_tensor *hn = NULL, *cn = NULL;
    int rc = tg_linear(&gh, h, w->w_hh, w->b_hh);
    if (rc >= 0 && k != TG__RNN_GRU) rc = tg_add(&sum, gh, gi);
    if (rc >= 0) {
        switch (k) {
        case TG__RNN_TANH: rc = tg_tanh(&hn, sum); break;
        case TG__RNN_RELU: rc = tg_relu(&hn, sum); break;
        case TG__RNN_LSTM: rc = lstm_gates(t, w, sum, c, &hn, &cn); break;
        case TG__RNN_GRU: rc = gru_gates(t, gi, gh, h, &hn); break;
        }
    }
    for (int i = 0; i < STEP_TEMPS; i++) tg_tensor_release(t[i]);
    tg_tensor_release(sum);
    tg_tensor_release(gh);
    if (rc < 0) {
        tg_tensor_release(hn);
        tg_tensor_release(cn);
        return rc;
    }
    *h_out = hn;
    if (c_out) *c_out = cn;
    else tg_tensor_release(cn);
    return TG_OK;
}

int tg__rnn_check_outputs(const char *fn, int n, tg_tensor **const *dst)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            TG_CHECK(!dst[i] || dst[i] != dst[j], TG_EINVAL,
                     "%s: outputs %d and %d must be two different places", fn, i, j);
    return TG_OK;
}

int tg__rnn_hand_out(int n, tg_tensor **const *dst, tg_tensor **src)
{
    for (int i = 0; i < n; i++)
        if (!dst[i]) {
            tg_tensor_release(src[i]);
            src[i] = NULL;
        }
    for (int i = 0; i < n; i++) {
        if (!src[i]) continue;
        int rc = tg__scope_capture(&src[i], TG_OK);
        if (rc < 0) {   /* src[i] is released; take the earlier ones back */
            for (int j = 0; j < i; j++)
                if (src[j] && tg_scope_keep(src[j])) tg_tensor_release(src[j]);
            for (int j = i + 1; j < n; j++) tg_tensor_release(src[j]);
            return rc;
        }
    }
    for (int i = 0; i < n; i++)
        if (dst[i]) *dst[i] = src[i];
    return TG_OK;
}

tg__rnn_state *tg__rnn_state_of(const tg_module *m)
{
    for (int i = 0; m && i < 3; i++)
        if (m->vt == &tg__nn_rnn_cell_vts[i] || m->vt == &tg__nn_rnn_layer_vts[i])
            return m->state;
    return NULL;
}

/* ---- the cells ---- */

/* Fails unless t (a state: "hx", "cx") is (n, h), or (h) when !batched. */
static int check_state(const char *fn, const char *what, const tg_tensor *t, bool batched,
                       int64_t n, int64_t h, tg_dtype dt)
{
    char got[96];
    const bool ok = batched ? tg_tensor_ndim(t) == 2 && tg_tensor_dim(t, 0) == n &&
                                  tg_tensor_dim(t, 1) == h
                            : tg_tensor_ndim(t) == 1 && tg_tensor_dim(t, 0) == h;
    if (!ok && batched)
        return tg__error(TG_ESHAPE, "%s: %s is %s; for an input of batch N=%lld it must be "
                                    "(N, hidden_size) = (%lld, %lld)", fn, what,
                         tg__rnn_shape(got, sizeof got, t), (long long)n, (long long)n,
                         (long long)h);
    if (!ok)
        return tg__error(TG_ESHAPE, "%s: %s is %s; for an unbatched input it must be "
                                    "(hidden_size) = (%lld)", fn, what,
                         tg__rnn_shape(got, sizeof got, t), (long long)h);
    return tg__rnn_check_dtype(fn, what, t, dt);
}

/* The state st (N, H) for the step (or the input: H = input_size): st
 * itself, unsqueezed when unbatched, or zeros when NULL.  A new
 * reference. */
static int state_in(tg_tensor **out, tg_tensor *st, bool batched, int64_t n, int64_t h,
                    tg_dtype dt)
{
    if (!st) return tg_tensor_zeros(out, dt, 2, (int64_t[]){n, h});
    if (batched) {
        *out = tg_tensor_retain(st);
        return TG_OK;
    }
    return tg_unsqueeze(out, st, 0);
}

/* The new state for the caller: st (N, H), squeezed when unbatched
 * (steals st). */
static int state_out(tg_tensor **out, tg_tensor *st, bool batched)
{
    if (batched || !st) {
        *out = st;
        return TG_OK;
    }
    int rc = tg_squeeze(out, st, 0);
    tg_tensor_release(st);
    return rc;
}

/* One step of cell m: *h and (LSTM) *c new references; hx and cx may be
 * NULL (zeros). */
static int cell_run(tg_module *m, tg_tensor **h, tg_tensor **c, tg_tensor *x, tg_tensor *hx,
                    tg_tensor *cx)
{
    const tg__rnn_state *s = m->state;
    const char *fn = tg__rnn_name(s->kind, true);
    tg__rnn_weights w;
    tg__rnn_weights_of(m, "", &w);
    const tg_dtype dt = tg_tensor_dtype(w.w_ih);
    char got[96];
    TG_CHECK(x != NULL, TG_EINVAL, "%s: input must not be NULL", fn);
    const int nd = tg_tensor_ndim(x);
    TG_CHECK(nd == 1 || nd == 2, TG_ESHAPE,
             "%s: input is %s; it must be 2-d (N, input_size) or 1-d unbatched (input_size)",
             fn, tg__rnn_shape(got, sizeof got, x));
    TG_CHECK(tg_tensor_dim(x, nd - 1) == s->input_size, TG_ESHAPE,
             "%s: input is %s; its last extent must be input_size=%lld", fn,
             tg__rnn_shape(got, sizeof got, x), (long long)s->input_size);
    const bool batched = nd == 2;
    const int64_t n = batched ? tg_tensor_dim(x, 0) : 1, hs = s->hidden_size;
    TG_TRY(tg__rnn_check_dtype(fn, "input", x, dt));
    if (hx) TG_TRY(check_state(fn, "hx", hx, batched, n, hs, dt));
    if (cx) TG_TRY(check_state(fn, "cx", cx, batched, n, hs, dt));

    tg_tensor *xb = NULL, *hb = NULL, *cb = NULL, *gi = NULL, *hn = NULL, *cn = NULL;
    int rc;
    TG_TRY_GOTO(state_in(&xb, x, batched, n, s->input_size, dt));
    TG_TRY_GOTO(state_in(&hb, hx, batched, n, hs, dt));
    if (s->kind == TG__RNN_LSTM) TG_TRY_GOTO(state_in(&cb, cx, batched, n, hs, dt));
    TG_TRY_GOTO(tg_linear(&gi, xb, w.w_ih, w.b_ih));
    TG_TRY_GOTO(tg__rnn_step(s->kind, &w, gi, hb, cb, &hn, &cn));
    tg_tensor *hv = hn, *cv = c ? cn : NULL;   /* state_out steals them */
    if (!c) tg_tensor_release(cn);
    hn = cn = NULL;
    rc = state_out(h, hv, batched);
    if (rc < 0) {
        tg_tensor_release(cv);
        goto done;
    }
    if (c) rc = state_out(c, cv, batched);
    if (rc < 0) {
        tg_tensor_release(*h);
        *h = NULL;
    }
done:
    tg_tensor_release(cn);
    tg_tensor_release(hn);
    tg_tensor_release(gi);
    tg_tensor_release(cb);
    tg_tensor_release(hb);
    tg_tensor_release(xb);
    return rc;
}

/* tg_module_forward_n: (x), (x, hx) for RNNCell and GRUCell, (x, hx, cx)
 * for LSTMCell; gives h. */
static int cell_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    const tg__rnn_state *s = m->state;
    const bool lstm = s->kind == TG__RNN_LSTM;
    TG_CHECK(n == 1 || n == (lstm ? 3 : 2), TG_EINVAL,
             "%s: forward takes (input) or (input, %s); got %d inputs",
             tg__rnn_name(s->kind, true), lstm ? "hx, cx" : "hx", n);
    tg_tensor *c = NULL;
    int rc = cell_run(m, y, lstm ? &c : NULL, xs[0], n > 1 ? xs[1] : NULL, n > 2 ? xs[2] : NULL);
    tg_tensor_release(c);
    return rc;
}

#define CELL_VT(name)                                                                 \
    {.type_name = name, .forward_n = cell_forward_n, .release = free,                 \
     .state_size = sizeof(tg__rnn_state)}
const tg_module_vtable tg__nn_rnn_cell_vts[3] = {CELL_VT("RNNCell"), CELL_VT("LSTMCell"),
                                                 CELL_VT("GRUCell")};
#undef CELL_VT

static int cell_new(tg_module **out, tg__rnn_kind k, int64_t input_size, int64_t hidden_size,
                    bool bias, tg_rng *rng)
{
    const char *fn = k == TG__RNN_LSTM ? "nn_lstm_cell_new"
                     : k == TG__RNN_GRU ? "nn_gru_cell_new" : "nn_rnn_cell_new";
    TG_CHECK(out != NULL && rng != NULL, TG_EINVAL, "%s: out and rng must not be NULL", fn);
    TG_CHECK(input_size >= 1 && hidden_size >= 1, TG_EINVAL,
             "%s: input_size=%lld and hidden_size=%lld must be >= 1", fn,
             (long long)input_size, (long long)hidden_size);
    tg__rnn_state s = {.kind = k, .input_size = input_size, .hidden_size = hidden_size,
                       .o = (tg_rnn_opts)TG_RNN_OPTS_INIT};
    s.o.bias = bias;
    s.o.nonlinearity = k == TG__RNN_RELU ? TG_RNN_RELU : TG_RNN_TANH;
    tg_module *m = NULL;
    TG_TRY(tg__module_new_state(&m, &tg__nn_rnn_cell_vts[tg__rnn_vt_index(k)], &s));
    int rc = tg__rnn_add_params(m, &s, "", input_size, hidden_size);
    if (rc >= 0) rc = tg__rnn_init(m, hidden_size, rng);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_rnn_cell_new(tg_module **out, int64_t input_size, int64_t hidden_size, bool bias,
                       tg_rnn_nonlinearity nonlinearity, tg_rng *rng)
{
    TG_CHECK(nonlinearity == TG_RNN_TANH || nonlinearity == TG_RNN_RELU, TG_EINVAL,
             "nn_rnn_cell_new: nonlinearity=%d must be TG_RNN_TANH or TG_RNN_RELU",
             (int)nonlinearity);
    return cell_new(out, nonlinearity == TG_RNN_RELU ? TG__RNN_RELU : TG__RNN_TANH,
                    input_size, hidden_size, bias, rng);
}

int tg_nn_lstm_cell_new(tg_module **out, int64_t input_size, int64_t hidden_size, bool bias,
                        tg_rng *rng)
{
    return cell_new(out, TG__RNN_LSTM, input_size, hidden_size, bias, rng);
}

int tg_nn_gru_cell_new(tg_module **out, int64_t input_size, int64_t hidden_size, bool bias,
                       tg_rng *rng)
{
    return cell_new(out, TG__RNN_GRU, input_size, hidden_size, bias, rng);
}

/* The public cell forwards: m's kind checked, the ops run on the
 * library's behalf, the results handed to the caller's scope. */
static int cell_forward(const char *fn, bool lstm, tg_module *m, tg_tensor **h, tg_tensor **c,
                        tg_tensor *x, tg_tensor *hx, tg_tensor *cx)
{
    TG_CHECK(m != NULL && x != NULL, TG_EINVAL, "%s: m and x must not be NULL", fn);
    const tg__rnn_state *s = tg__rnn_state_of(m);
    const bool ok = s && m->vt == &tg__nn_rnn_cell_vts[tg__rnn_vt_index(s->kind)] &&
                    (s->kind == TG__RNN_LSTM) == lstm;
    TG_CHECK(ok, TG_EINVAL, "%s: m is a %s module, not %s", fn, tg_module_type_name(m),
             lstm ? "an LSTMCell" : "an RNNCell or GRUCell");
    TG_TRY(tg__rnn_check_outputs(fn, 2, (tg_tensor **const[]){h, c}));
    tg_tensor *r[2] = {NULL, NULL};
    tg__lib_enter();
    int rc = cell_run(m, &r[0], lstm ? &r[1] : NULL, x, hx, cx);
    tg__lib_leave();
    if (rc < 0) return rc;
    return tg__rnn_hand_out(2, (tg_tensor **const[]){h, c}, r);
}

int tg_nn_rnn_cell_forward(tg_module *m, tg_tensor **h, tg_tensor *x, tg_tensor *hx)
{
    return cell_forward("nn_rnn_cell_forward", false, m, h, NULL, x, hx, NULL);
}

int tg_nn_lstm_cell_forward(tg_module *m, tg_tensor **h, tg_tensor **c, tg_tensor *x,
                            tg_tensor *hx, tg_tensor *cx)
{
    return cell_forward("nn_lstm_cell_forward", true, m, h, c, x, hx, cx);
}
