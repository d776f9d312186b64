/* src/nn/rnn.c - nn.RNN, nn.LSTM and nn.GRU: num_layers stacked layers of
 * one cell kind (rnn_cell.c's steps), each run over the sequence forwards
 * and, when bidirectional, backwards, torch 1.13's shapes and names.
 *
 * Per layer and direction, the input projection of every time step is one
 * tg_linear over the whole (L, N, in) sequence, unbound into L (N, G H)
 * rows; the loop then runs one step per row (last row first for the
 * reverse direction) and stacks the L states h into (L, N, H_out).  The
 * two directions are concatenated along the features; in training the
 * result goes through dropout before the next layer (not after the last).
 *
 * With lengths (torch's pack_padded_sequence, the RNN, then
 * pad_packed_sequence with total_length L), row b of the batch has
 * len[b] valid steps.  The input's padded steps (t >= len[b]) are replaced
 * by zeros, each step's new state is where(t < len[b], h', h): a padded
 * step keeps the state it got, so the forward direction ends with the
 * state after step len[b] - 1 and the reverse direction, which meets the
 * padded steps first, starts from h_0 at step len[b] - 1 and ends after
 * step 0; and the output is zero at the padded steps.  tg_where and
 * tg_masked_fill are recorded ops whose gradients are zero on the side
 * not taken, so nothing of the padded positions reaches a value or a
 * gradient, to any order. */
#include <stdio.h>
#include <string.h>

#include "nn/rnn_internal.h"
#include "tapegrad/ops.h"

/* The buffers of one forward; every tensor owned (NULL or a reference). */
typedef struct run {
    const tg_module *m;
    const tg__rnn_state *s;
    const char *fn;
    int n_dirs, n_states;        /* D, D * num_layers */
    int64_t len, batch, h_out;   /* L, N, H_out */
    tg_tensor **gis, **hs;       /* len each: a direction's input rows and states */
    tg_tensor **h0, **c0;        /* n_states each: the initial states (N, H_out), (N, H) */
    tg_tensor **hn, **cn;        /* n_states each: the final ones */
    const int64_t *lens;         /* batch valid lengths, or NULL: all L */
    tg_tensor **keep;            /* len (N, 1) u8: t < len[b], with lens */
    tg_tensor *pad;              /* (L, N, 1) u8: t >= len[b], with lens */
} run;

static void run_free(run *r)
{
    const int64_t n[6] = {r->len, r->len, r->n_states, r->n_states, r->n_states, r->n_states};
    tg_tensor **const a[6] = {r->gis, r->hs, r->h0, r->c0, r->hn, r->cn};
    for (int k = 0; k < 6; k++) {
        for (int64_t i = 0; a[k] && i < n[k]; i++) tg_tensor_release(a[k][i]);
        free(a[k]);
    }
    for (int64_t i = 0; r->keep && i < r->len; i++) tg_tensor_release(r->keep[i]);
    free(r->keep);
    tg_tensor_release(r->pad);
}

/* r->pad and r->keep from r->lens. */
static int run_masks(run *r)
{
    const int64_t L = r->len, N = r->batch;
    uint8_t *pad = tg__calloc((size_t)(L * N), 1);
    tg_tensor *keep = NULL, *one = NULL;
    int n = 0, rc = TG_ENOMEM;
    r->keep = tg__calloc((size_t)L, sizeof *r->keep);
    if (!pad || !r->keep) goto done;
    for (int64_t t = 0; t < L; t++)
        for (int64_t b = 0; b < N; b++) pad[t * N + b] = t >= r->lens[b];
    TG_TRY_GOTO(tg_tensor_from_data(&r->pad, TG_U8, 3, (int64_t[]){L, N, 1}, pad));
    TG_TRY_GOTO(tg_tensor_scalar(&one, TG_U8, 1));
    TG_TRY_GOTO(tg_ne(&keep, r->pad, one));
    TG_TRY_GOTO(tg_unbind(r->keep, (int)L, &n, keep, 0));
done:
    free(pad);
    tg_tensor_release(keep);
    tg_tensor_release(one);
    return rc;
}

static int run_alloc(run *r)
{
    r->gis = tg__calloc((size_t)r->len, sizeof *r->gis);
    r->hs = tg__calloc((size_t)r->len, sizeof *r->hs);
    r->h0 = tg__calloc((size_t)r->n_states, sizeof *r->h0);
    r->c0 = tg__calloc((size_t)r->n_states, sizeof *r->c0);
    r->hn = tg__calloc((size_t)r->n_states, sizeof *r->hn);
    r->cn = tg__calloc((size_t)r->n_states, sizeof *r->cn);
    return r->gis && r->hs && r->h0 && r->c0 && r->hn && r->cn ? TG_OK : TG_ENOMEM;
}

/* Fails unless st ("h_0", "c_0") is (D num_layers, N, h), or (D
 * num_layers, h) for an unbatched input. */
static int check_state(const run *r, const char *what, const tg_tensor *st, bool batched,
                       int64_t h, tg_dtype dt)
{
    char got[96];
    const int64_t ns = r->n_states;
    const int nd = tg_tensor_ndim(st);
    bool ok = nd == (batched ? 3 : 2) && tg_tensor_dim(st, 0) == ns &&
              tg_tensor_dim(st, nd - 1) == h && (!batched || tg_tensor_dim(st, 1) == r->batch);
    if (!ok && batched)
        return tg__error(TG_ESHAPE, "%s: %s is %s; for a batched input it must be "
                                    "(D*num_layers, N, %s) = (%lld, %lld, %lld)", r->fn, what,
                         tg__rnn_shape(got, sizeof got, st), h == r->h_out ? "H_out" : "H",
                         (long long)ns, (long long)r->batch, (long long)h);
    if (!ok)
        return tg__error(TG_ESHAPE, "%s: %s is %s; for an unbatched input it must be "
                                    "(D*num_layers, %s) = (%lld, %lld)", r->fn, what,
                         tg__rnn_shape(got, sizeof got, st), h == r->h_out ? "H_out" : "H",
                         (long long)ns, (long long)h);
    return tg__rnn_check_dtype(r->fn, what, st, dt);
}

/* into[0..n_states) = the states of st (n_states, N, h) (NULL: zeros). */
static int states_in(const run *r, tg_tensor **into, tg_tensor *st, bool batched, int64_t h,
                     tg_dtype dt)
{
    tg_tensor *t = NULL;
    int rc, n = 0;
    if (!st) {
        TG_TRY(tg_tensor_zeros(&t, dt, 2, (int64_t[]){r->batch, h}));
        for (int i = 0; i < r->n_states; i++) into[i] = tg_tensor_retain(t);
        tg_tensor_release(t);
        return TG_OK;
    }
    if (batched) t = tg_tensor_retain(st);
    else TG_TRY(tg_unsqueeze(&t, st, 1));
    rc = tg_unbind(into, r->n_states, &n, t, 0);
    tg_tensor_release(t);
    return rc;
}

/* One direction of one layer over x (L, N, in): *y (L, N, H_out), and the
 * final states into r->hn[i], r->cn[i]. */
static int run_direction(run *r, tg_tensor **y, tg_tensor *x, int layer, bool reverse)
{
    const tg__rnn_state *s = r->s;
    char sfx[32];
    snprintf(sfx, sizeof sfx, "_l%d%s", layer, reverse ? "_reverse" : "");
    tg__rnn_weights w;
    tg__rnn_weights_of(r->m, sfx, &w);
    const int i = layer * r->n_dirs + reverse;
    tg_tensor *gi = NULL, *h = tg_tensor_retain(r->h0[i]), *c = tg_tensor_retain(r->c0[i]);
    int n = 0, rc;
    TG_TRY_GOTO(tg_linear(&gi, x, w.w_ih, w.b_ih));
    TG_TRY_GOTO(tg_unbind(r->gis, (int)r->len, &n, gi, 0));
    for (int64_t k = 0; k < r->len; k++) {
        const int64_t t = reverse ? r->len - 1 - k : k;
        tg_tensor *h1 = NULL, *c1 = NULL;
        TG_TRY_GOTO(tg__rnn_step(s->kind, &w, r->gis[t], h, c, &h1, &c1));
        if (r->lens) {   /* a padded step keeps the state */
            tg_tensor *hm = NULL, *cm = NULL;
            rc = tg_where(&hm, r->keep[t], h1, h);
            if (rc >= 0 && c1) rc = tg_where(&cm, r->keep[t], c1, c);
            tg_tensor_release(h1);
            tg_tensor_release(c1);
            h1 = hm;
            c1 = cm;
            if (rc < 0) {
                tg_tensor_release(h1);
                tg_tensor_release(c1);
                goto done;
            }
        }
        tg_tensor_release(h);
        tg_tensor_release(c);
        h = h1;
        c = c1;
        r->hs[t] = tg_tensor_retain(h);
    }
    if (r->lens) {   /* zero at the padded steps */
        tg_tensor *st = NULL;
        TG_TRY_GOTO(tg_stack(&st, (int)r->len, r->hs, 0));
        rc = tg_masked_fill(y, st, r->pad, 0);
        tg_tensor_release(st);
        if (rc < 0) goto done;
    } else {
        TG_TRY_GOTO(tg_stack(y, (int)r->len, r->hs, 0));
    }
    r->hn[i] = h;
    r->cn[i] = c;
    h = c = NULL;
done:
    for (int64_t k = 0; k < r->len; k++) {
        tg_tensor_release(r->gis[k]);
        tg_tensor_release(r->hs[k]);
        r->gis[k] = r->hs[k] = NULL;
    }
    tg_tensor_release(gi);
    tg_tensor_release(h);
    tg_tensor_release(c);
    return rc;
}

/* The layers over x (L, N, input_size): *y the last one's output (L, N,
 * D H_out).  rng draws the dropout masks; *drew says whether it did. */
static int run_layers(run *r, tg_module *m, tg_tensor **y, tg_tensor *x, tg_rng *rng,
                      bool *drew)
{
    const tg__rnn_state *s = r->s;
    tg_tensor *in = tg_tensor_retain(x), *dir[2] = {NULL, NULL}, *cat = NULL;
    int rc = TG_OK;
    for (int l = 0; l < s->o.num_layers; l++) {
        for (int d = 0; d < r->n_dirs; d++) TG_TRY_GOTO(run_direction(r, &dir[d], in, l, d));
        if (r->n_dirs == 2) TG_TRY_GOTO(tg_cat(&cat, 2, dir, 2));
        else cat = tg_tensor_retain(dir[0]);
        tg_tensor_release(in);
        in = NULL;
        if (l + 1 < s->o.num_layers && m->training && s->o.dropout > 0) {
            TG_TRY_GOTO(tg_dropout(&in, cat, s->o.dropout, true, rng));
            *drew = true;
        } else {
            in = tg_tensor_retain(cat);
        }
        for (int d = 0; d < 2; d++) {
            tg_tensor_release(dir[d]);
            dir[d] = NULL;
        }
        tg_tensor_release(cat);
        cat = NULL;
    }
    *y = in;
    in = NULL;
done:
    tg_tensor_release(cat);
    tg_tensor_release(dir[0]);
    tg_tensor_release(dir[1]);
    tg_tensor_release(in);
    return rc;
}

/* Checks the arguments of a forward of layer m and fills r's sizes. */
static int check_args(run *r, tg_module *m, tg_tensor *x, tg_tensor *h0, tg_tensor *c0,
                      tg_dtype dt)
{
    const tg__rnn_state *s = m->state;
    char got[96];
    *r = (run){.m = m, .s = s, .fn = tg__rnn_name(s->kind, false)};
    const char *fn = r->fn;
    TG_CHECK(x != NULL, TG_EINVAL, "%s: input must not be NULL", fn);
    const int nd = tg_tensor_ndim(x);
    TG_CHECK(nd == 2 || nd == 3, TG_ESHAPE,
             "%s: input is %s; it must be 3-d %s or 2-d unbatched (L, input_size)", fn,
             tg__rnn_shape(got, sizeof got, x),
             s->o.batch_first ? "(N, L, input_size) (batch_first)" : "(L, N, input_size)");
    TG_CHECK(tg_tensor_dim(x, nd - 1) == s->input_size, TG_ESHAPE,
             "%s: input is %s; its last extent must be input_size=%lld", fn,
             tg__rnn_shape(got, sizeof got, x), (long long)s->input_size);
    const bool bf = nd == 3 && s->o.batch_first;
    r->len = tg_tensor_dim(x, bf ? 1 : 0);
    r->batch = nd == 3 ? tg_tensor_dim(x, bf ? 0 : 1) : 1;
    TG_CHECK(r->len >= 1, TG_ESHAPE,
             "%s: input is %s; the sequence length L must be >= 1 (the batch N may be 0)", fn,
             tg__rnn_shape(got, sizeof got, x));
    TG_TRY(tg__rnn_check_dtype(fn, "input", x, dt));
    TG_CHECK(r->len <= INT32_MAX, TG_ESHAPE, "%s: the sequence length L=%lld must be <= %d", fn,
             (long long)r->len, INT32_MAX);
    r->n_dirs = s->o.bidirectional ? 2 : 1;
    r->n_states = r->n_dirs * s->o.num_layers;
    r->h_out = s->o.proj_size > 0 ? s->o.proj_size : s->hidden_size;
    if (h0) TG_TRY(check_state(r, "h_0", h0, nd == 3, r->h_out, dt));
    if (c0) TG_TRY(check_state(r, "c_0", c0, nd == 3, s->hidden_size, dt));
    return TG_OK;
}

/* Reads lengths (i64 or i32, (N)) into lens[0..N), each in [1, L], for
 * the batched input x of r's sizes. */
static int read_lengths(const run *r, int64_t *lens, const tg_tensor *lengths,
                        const tg_tensor *x)
{
    char got[96];
    const char *fn = r->fn;
    TG_CHECK(tg_tensor_ndim(x) == 3, TG_ESHAPE,
             "%s: input is %s; with lengths it must be batched, 3-d %s", fn,
             tg__rnn_shape(got, sizeof got, x),
             r->s->o.batch_first ? "(N, L, input_size) (batch_first)" : "(L, N, input_size)");
    TG_CHECK(r->batch >= 1, TG_ESHAPE,
             "%s: input is %s; with lengths its batch N must be >= 1 (torch cannot pack an "
             "empty batch)", fn, tg__rnn_shape(got, sizeof got, x));
    const tg_dtype dt = tg_tensor_dtype(lengths);
    TG_CHECK(dt == TG_I64 || dt == TG_I32, TG_EINVAL,
             "%s: lengths has dtype %s; it must be i64 (or i32)", fn, tg_dtype_name(dt));
    TG_CHECK(tg_tensor_ndim(lengths) == 1 && tg_tensor_dim(lengths, 0) == r->batch, TG_EINVAL,
             "%s: lengths is %s; it must be 1-d with one length per batch row, (N) = (%lld)",
             fn, tg__rnn_shape(got, sizeof got, lengths), (long long)r->batch);
    for (int64_t b = 0; b < r->batch; b++) {
        double v = 0;
        TG_TRY(tg_tensor_get_flat(lengths, b, &v));
        TG_CHECK(v >= 1 && v <= (double)r->len, TG_EINVAL,
                 "%s: lengths[%lld]=%.0f must be in [1, L=%lld] (L the input's sequence "
                 "length)", fn, (long long)b, v, (long long)r->len);
        lens[b] = (int64_t)v;
    }
    return TG_OK;
}

/* The states (n_states, N, h) from the list sts, squeezed when unbatched. */
static int states_out(tg_tensor **out, const run *r, tg_tensor **sts, bool batched)
{
    tg_tensor *t = NULL;
    TG_TRY(tg_stack(&t, r->n_states, sts, 0));
    if (batched) {
        *out = t;
        return TG_OK;
    }
    int rc = tg_squeeze(out, t, 1);
    tg_tensor_release(t);
    return rc;
}

/* A forward of layer m: res[0] output, res[1] h_n, res[2] c_n (LSTM),
 * new references; lengths NULL or each row's valid steps.  On error none
 * is made and m is unchanged. */
static int layer_run(tg_module *m, tg_tensor **res, tg_tensor *x, const tg_tensor *lengths,
                     tg_tensor *h0, tg_tensor *c0)
{
    tg__rnn_state *s = m->state;
    const tg_dtype dt = tg_tensor_dtype(m->params[0].t);
    run r;
    TG_TRY(check_args(&r, m, x, h0, c0, dt));
    int64_t *lens = NULL;
    if (lengths) {
        lens = tg__calloc((size_t)r.batch, sizeof *lens);
        if (!lens) return TG_ENOMEM;
        int rc = read_lengths(&r, lens, lengths, x);
        if (rc < 0) {
            free(lens);
            return rc;
        }
        r.lens = lens;
    }
    const bool batched = tg_tensor_ndim(x) == 3, lstm = s->kind == TG__RNN_LSTM;
    tg_tensor *xs = NULL, *y = NULL, *out[3] = {NULL, NULL, NULL};
    tg_rng rng = {.seed = s->o.seed, .counter = s->calls << 40};
    bool drew = false;
    int rc = run_alloc(&r);
    if (rc < 0) goto done;
    /* xs: the input as (L, N, input_size), zero at the padded steps */
    if (!batched) TG_TRY_GOTO(tg_unsqueeze(&xs, x, 1));
    else if (s->o.batch_first) TG_TRY_GOTO(tg_transpose(&xs, x, 0, 1));
    else xs = tg_tensor_retain(x);
    if (lens) {
        tg_tensor *z = NULL;
        TG_TRY_GOTO(run_masks(&r));
        rc = tg_masked_fill(&z, xs, r.pad, 0);
        tg_tensor_release(xs);
        xs = z;
        if (rc < 0) goto done;
    }
    TG_TRY_GOTO(states_in(&r, r.h0, h0, batched, r.h_out, dt));
    if (lstm) TG_TRY_GOTO(states_in(&r, r.c0, c0, batched, s->hidden_size, dt));
    TG_TRY_GOTO(run_layers(&r, m, &y, xs, &rng, &drew));
    if (!batched) TG_TRY_GOTO(tg_squeeze(&out[0], y, 1));
    else if (s->o.batch_first) TG_TRY_GOTO(tg_transpose(&out[0], y, 0, 1));
    else out[0] = tg_tensor_retain(y);
    TG_TRY_GOTO(states_out(&out[1], &r, r.hn, batched));
    if (lstm) TG_TRY_GOTO(states_out(&out[2], &r, r.cn, batched));
    for (int i = 0; i < 3; i++) {
        res[i] = out[i];
        out[i] = NULL;
    }
    if (drew) s->calls++;   /* the next training forward draws new masks */
done:
    for (int i = 0; i < 3; i++) tg_tensor_release(out[i]);
    tg_tensor_release(y);
    tg_tensor_release(xs);
    run_free(&r);
    free(lens);
    return rc;
}

/* tg_module_forward_n: (input), (input, h_0), or (input, h_0, c_0) for an
 * LSTM; gives the output. */
static int layer_forward_n(tg_module *m, tg_tensor **y, int n, tg_tensor *const *xs)
{
    const tg__rnn_state *s = m->state;
    const bool lstm = s->kind == TG__RNN_LSTM;
    TG_CHECK(n == 1 || n == (lstm ? 3 : 2), TG_EINVAL,
             "%s: forward takes (input) or (input, %s); got %d inputs",
             tg__rnn_name(s->kind, false), lstm ? "h_0, c_0" : "h_0", n);
    tg_tensor *res[3] = {NULL, NULL, NULL};
    TG_TRY(layer_run(m, res, xs[0], NULL, n > 1 ? xs[1] : NULL, n > 2 ? xs[2] : NULL));
    tg_tensor_release(res[1]);
    tg_tensor_release(res[2]);
    *y = res[0];
    return TG_OK;
}

#define LAYER_VT(name)                                                                \
    {.type_name = name, .forward_n = layer_forward_n, .release = free,                \
     .state_size = sizeof(tg__rnn_state)}
const tg_module_vtable tg__nn_rnn_layer_vts[3] = {LAYER_VT("RNN"), LAYER_VT("LSTM"),
                                                  LAYER_VT("GRU")};
#undef LAYER_VT

static int check_opts(const char *fn, tg__rnn_kind k, int64_t input_size, int64_t hidden_size,
                      const tg_rnn_opts *o)
{
    TG_CHECK(input_size >= 1 && hidden_size >= 1, TG_EINVAL,
             "%s: input_size=%lld and hidden_size=%lld must be >= 1", fn,
             (long long)input_size, (long long)hidden_size);
    TG_CHECK(o->num_layers >= 1, TG_EINVAL, "%s: num_layers=%d must be >= 1", fn,
             o->num_layers);
    TG_CHECK(o->dropout >= 0 && o->dropout <= 1, TG_EINVAL,
             "%s: dropout=%g must be in [0, 1]", fn, o->dropout);
    TG_CHECK(o->nonlinearity == TG_RNN_TANH || o->nonlinearity == TG_RNN_RELU, TG_EINVAL,
             "%s: nonlinearity=%d must be TG_RNN_TANH or TG_RNN_RELU", fn,
             (int)o->nonlinearity);
    TG_CHECK(k <= TG__RNN_RELU || o->nonlinearity == TG_RNN_TANH, TG_EINVAL,
             "%s: nonlinearity is an option of RNN only; it must be TG_RNN_TANH here", fn);
    TG_CHECK(k == TG__RNN_LSTM || o->proj_size == 0, TG_EINVAL,
             "%s: proj_size=%lld: a projection is an option of LSTM only; it must be 0 here",
             fn, (long long)o->proj_size);
    TG_CHECK(o->proj_size >= 0 && o->proj_size < hidden_size, TG_EINVAL,
             "%s: proj_size=%lld must be in [0, hidden_size=%lld)", fn,
             (long long)o->proj_size, (long long)hidden_size);
    return TG_OK;
}

static int layer_new(tg_module **out, const char *fn, tg__rnn_kind k, int64_t input_size,
                     int64_t hidden_size, const tg_rnn_opts *opts, tg_rng *rng)
{
    TG_CHECK(out != NULL && rng != NULL, TG_EINVAL, "%s: out and rng must not be NULL", fn);
    const tg_rnn_opts o = opts ? *opts : (tg_rnn_opts)TG_RNN_OPTS_INIT;
    TG_TRY(check_opts(fn, k, input_size, hidden_size, &o));
    if (k == TG__RNN_TANH && o.nonlinearity == TG_RNN_RELU) k = TG__RNN_RELU;
    const tg__rnn_state s = {.kind = k, .input_size = input_size, .hidden_size = hidden_size,
                             .o = o};
    const int n_dirs = o.bidirectional ? 2 : 1;
    const int64_t h_out = o.proj_size > 0 ? o.proj_size : hidden_size;
    tg_module *m = NULL;
    TG_TRY(tg__module_new_state(&m, &tg__nn_rnn_layer_vts[tg__rnn_vt_index(k)], &s));
    int rc = TG_OK;
    for (int l = 0; l < o.num_layers && rc >= 0; l++)
        for (int d = 0; d < n_dirs && rc >= 0; d++) {
            char sfx[32];
            snprintf(sfx, sizeof sfx, "_l%d%s", l, d ? "_reverse" : "");
            rc = tg__rnn_add_params(m, &s, sfx, l ? n_dirs * h_out : input_size, h_out);
        }
    if (rc >= 0) rc = tg__rnn_init(m, hidden_size, rng);
    if (rc < 0) {
        tg_module_release(m);
        return rc;
    }
    *out = m;
    return TG_OK;
}

int tg_nn_rnn_new(tg_module **out, int64_t input_size, int64_t hidden_size,
                  const tg_rnn_opts *opts, tg_rng *rng)
{
    return layer_new(out, "nn_rnn_new", TG__RNN_TANH, input_size, hidden_size, opts, rng);
}

int tg_nn_lstm_new(tg_module **out, int64_t input_size, int64_t hidden_size,
                   const tg_rnn_opts *opts, tg_rng *rng)
{
    return layer_new(out, "nn_lstm_new", TG__RNN_LSTM, input_size, hidden_size, opts, rng);
}

int tg_nn_gru_new(tg_module **out, int64_t input_size, int64_t hidden_size,
                  const tg_rnn_opts *opts, tg_rng *rng)
{
    return layer_new(out, "nn_gru_new", TG__RNN_GRU, input_size, hidden_size, opts, rng);
}

/* The public layer forwards: m's kind checked, the ops run on the
 * library's behalf, the results handed to the caller's scope. */
static int layer_forward(const char *fn, bool lstm, tg_module *m, tg_tensor **const dst[3],
                         tg_tensor *x, bool packed, const tg_tensor *lengths, tg_tensor *h0,
                         tg_tensor *c0)
{
    TG_CHECK(m != NULL && x != NULL, TG_EINVAL, "%s: m and input must not be NULL", fn);
    TG_CHECK(!packed || lengths != NULL, TG_EINVAL,
             "%s: lengths must not be NULL (without lengths, use %s)", fn,
             lstm ? "tg_nn_lstm_forward" : "tg_nn_rnn_forward");
    const tg__rnn_state *s = tg__rnn_state_of(m);
    const bool ok = s && m->vt == &tg__nn_rnn_layer_vts[tg__rnn_vt_index(s->kind)] &&
                    (s->kind == TG__RNN_LSTM) == lstm;
    TG_CHECK(ok, TG_EINVAL, "%s: m is a %s module, not %s", fn, tg_module_type_name(m),
             lstm ? "an LSTM" : "an RNN or GRU");
    TG_TRY(tg__rnn_check_outputs(fn, 3, dst));
    tg_tensor *res[3] = {NULL, NULL, NULL};
    tg__lib_enter();
    int rc = layer_run(m, res, x, lengths, h0, c0);
    tg__lib_leave();
    if (rc < 0) return rc;
    return tg__rnn_hand_out(3, dst, res);
}

int tg_nn_rnn_forward(tg_module *m, tg_tensor **output, tg_tensor **h_n, tg_tensor *input,
                      tg_tensor *h_0)
{
    return layer_forward("nn_rnn_forward", false, m, (tg_tensor **const[]){output, h_n, NULL},
                         input, false, NULL, h_0, NULL);
}

int tg_nn_rnn_forward_packed(tg_module *m, tg_tensor **output, tg_tensor **h_n,
                             tg_tensor *input, const tg_tensor *lengths, tg_tensor *h_0)
{
    return layer_forward("nn_rnn_forward_packed", false, m,
                         (tg_tensor **const[]){output, h_n, NULL}, input, true, lengths, h_0,
                         NULL);
}

int tg_nn_lstm_forward(tg_module *m, tg_tensor **output, tg_tensor **h_n, tg_tensor **c_n,
                       tg_tensor *input, tg_tensor *h_0, tg_tensor *c_0)
{
    return layer_forward("nn_lstm_forward", true, m, (tg_tensor **const[]){output, h_n, c_n},
                         input, false, NULL, h_0, c_0);
}

int tg_nn_lstm_forward_packed(tg_module *m, tg_tensor **output, tg_tensor **h_n,
                              tg_tensor **c_n, tg_tensor *input, const tg_tensor *lengths,
                              tg_tensor *h_0, tg_tensor *c_0)
{
    return layer_forward("nn_lstm_forward_packed", true, m,
                         (tg_tensor **const[]){output, h_n, c_n}, input, true, lengths, h_0,
                         c_0);
}

int tg_nn_rnn_options(const tg_module *m, int64_t *input_size, int64_t *hidden_size,
                      tg_rnn_opts *opts)
{
    TG_CHECK(m != NULL, TG_EINVAL, "nn_rnn_options: m must not be NULL");
    const tg__rnn_state *s = tg__rnn_state_of(m);
    TG_CHECK(s != NULL, TG_EINVAL,
             "nn_rnn_options: m is a %s module, not a recurrent one (RNN, LSTM, GRU or a cell)",
             tg_module_type_name(m));
    if (input_size) *input_size = s->input_size;
    if (hidden_size) *hidden_size = s->hidden_size;
    if (opts) *opts = s->o;
    return TG_OK;
}
