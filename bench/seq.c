/* bench/seq: the time of one training step of a small sequence model, for
 * bench/seq.py (which runs the same step in PyTorch and gives the ratio).
 *
 *   seq --model lstm|gru|transformer|decoder [--batch B (16)] [--seq T (32)]
 *       [--vocab V (64)] [--embed E (32)] [--hidden H (128)] [--layers L (1)]
 *       [--threads N] [--repeat R (20)] [--infer] [--dtype f32|bf16|f16 (f32)]
 *       [--amp bf16|f16]
 *
 * The model is Embedding(V, E), then LSTM(E, H) or GRU(E, H) with L layers
 * (batch first), or L TransformerEncoderLayers (d_model E, 4 heads,
 * dim_feedforward H, no dropout, batch first, pre-norm) under a causal
 * mask after a learned position embedding, then Linear(H or E, V).  A step
 * on a fixed batch of random tokens: zero the gradients, the logits (B, T,
 * V), the mean cross entropy against the next tokens, backward, gradient
 * clipping to norm 1, one Adam step (lr 1e-3).  With --infer (transformer
 * only) the step is the layers' forward instead, in eval and without
 * gradients, on a fixed (B, T, E) batch of normal values, without a mask.
 * --model decoder (with --infer only) times L TransformerDecoderLayers'
 * forward so (the transformer's options), tgt and memory fixed (B, T, E)
 * batches of normal values, under the causal tgt_mask.  --dtype (with
 * --infer only) runs the layers, their input, the memory and the mask in
 * that dtype (cast from the f32 ones); --amp (with --infer only) runs the
 * f32 layers on their f32 input inside autocast of that dtype.
 * After three steps of warmup, times R steps and prints one JSON line with
 * the median in ms. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tapegrad/tapegrad.h>

#include "timing.h"

#define CHECK(call) BENCH_CHECK("seq", call)

typedef struct seq_case {
    char model;              /* 'l'stm, 'g'ru, 't'ransformer, 'd'ecoder */
    int64_t vocab, layers;
    tg_module *root;         /* owns embed, pos, body[], head */
    tg_module *embed, *pos, *head;
    tg_module **body;
    tg_tensor *idx, *tgt, *mask, *positions;
    tg_tensor *x, *mem;      /* --infer: the layers' input (B, T, E), the memory */
    tg_tensor **params;
    int n_params;
    tg_optimizer *opt;
    tg_dtype amp;            /* --amp: autocast's dtype; TG_F32: none */
} seq_case;

static const tg_module_vtable root_vt = {.type_name = "SeqModel"};

static void add(tg_module *root, const char *name, tg_module *child)
{
    CHECK(tg_module_add_child(root, name, child));
}

static void build(seq_case *c, int64_t b, int64_t t, int64_t e, int64_t h)
{
    tg_rng rng;
    tg_rng_init(&rng, 1);
    CHECK(tg_module_new(&c->root, &root_vt, NULL));
    CHECK(tg_nn_embedding_new(&c->embed, c->vocab, e, &rng));
    add(c->root, "embed", c->embed);
    c->body = calloc((size_t)c->layers, sizeof *c->body);
    if (!c->body) exit(1);
    int64_t width = h;
    if (c->model == 't' || c->model == 'd') {
        width = e;
        CHECK(tg_nn_embedding_new(&c->pos, t, e, &rng));
        add(c->root, "pos", c->pos);
        tg_nn_transformer_encoder_layer_opts to = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
        to.dim_feedforward = h;
        to.dropout = 0;
        to.batch_first = true;
        to.norm_first = true;
        for (int64_t i = 0; i < c->layers; i++) {
            char name[32];
            snprintf(name, sizeof name, "body%lld", (long long)i);
            if (c->model == 't') {
                CHECK(tg_nn_transformer_encoder_layer_new(&c->body[i], e, 4, &to, &rng));
            } else {
                tg_nn_transformer_decoder_layer_opts d = TG_NN_TRANSFORMER_DECODER_LAYER_OPTS_INIT;
                d.dim_feedforward = h;
                d.dropout = 0;
                d.batch_first = true;
                d.norm_first = true;
                CHECK(tg_nn_transformer_decoder_layer_new(&c->body[i], e, 4, &d, &rng));
            }
            add(c->root, name, c->body[i]);
        }
        CHECK(tg_tensor_zeros(&c->mask, TG_F32, 2, (int64_t[]){t, t}));
        float *mk = tg_tensor_data(c->mask);
        for (int64_t i = 0; i < t; i++)
            for (int64_t j = i + 1; j < t; j++) mk[i * t + j] = -INFINITY;
        CHECK(tg_tensor_zeros(&c->positions, TG_I64, 1, &t));
        int64_t *p = tg_tensor_data(c->positions);
        for (int64_t i = 0; i < t; i++) p[i] = i;
    } else {
        tg_rnn_opts ro = TG_RNN_OPTS_INIT;
        ro.batch_first = true;
        ro.num_layers = c->layers;
        CHECK(c->model == 'l' ? tg_nn_lstm_new(&c->body[0], e, h, &ro, &rng)
                              : tg_nn_gru_new(&c->body[0], e, h, &ro, &rng));
        add(c->root, "body", c->body[0]);
    }
    CHECK(tg_nn_linear_new(&c->head, width, c->vocab, true, &rng));
    add(c->root, "head", c->head);

    CHECK(tg_tensor_zeros(&c->idx, TG_I64, 2, (int64_t[]){b, t}));
    CHECK(tg_tensor_zeros(&c->tgt, TG_I64, 1, (int64_t[]){b * t}));
    int64_t *xi = tg_tensor_data(c->idx), *yi = tg_tensor_data(c->tgt);
    for (int64_t i = 0; i < b * t; i++) {
        xi[i] = (int64_t)(tg_rng_uniform(&rng) * (double)c->vocab) % c->vocab;
        yi[i] = (int64_t)(tg_rng_uniform(&rng) * (double)c->vocab) % c->vocab;
    }
    CHECK(tg_module_parameters(c->root, &c->params, &c->n_params));
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    ao.lr = 1e-3;
    CHECK(tg_adam_from_module(&c->opt, c->root, &ao));
}

static void step(const void *arg)
{
    const seq_case *c = arg;
    tg_tensor *x, *y, *logits, *flat, *loss;
    CHECK(tg_scope_begin());
    tg_optimizer_zero_grad(c->opt);
    CHECK(tg_module_forward(c->embed, &x, c->idx));
    if (c->model == 't') {
        tg_tensor *p;
        CHECK(tg_module_forward(c->pos, &p, c->positions));
        CHECK(tg_add(&y, x, p));
        for (int64_t i = 0; i < c->layers; i++)
            CHECK(tg_nn_transformer_encoder_layer_forward(c->body[i], &y, y, c->mask, NULL));
    } else {
        CHECK(tg_module_forward(c->body[0], &y, x));
    }
    CHECK(tg_module_forward(c->head, &logits, y));
    CHECK(tg_reshape(&flat, logits, 2, (int64_t[]){-1, c->vocab}));
    CHECK(tg_cross_entropy(&loss, flat, c->tgt, TG_REDUCTION_MEAN));
    CHECK(tg_backward(loss, NULL, NULL));
    CHECK(tg_clip_grad_norm(NULL, c->n_params, c->params, 1.0, 2.0, false));
    CHECK(tg_optimizer_step(c->opt));
    CHECK(tg_scope_end());
}

/* --infer: the layers' forward, in eval and without gradients. */
static void infer_step(const void *arg)
{
    const seq_case *c = arg;
    CHECK(tg_scope_begin());
    tg_no_grad_begin();
    if (c->amp != TG_F32) CHECK(tg_autocast_begin(c->amp));
    tg_tensor *y = c->x;
    tg_nn_transformer_masks mk = TG_NN_TRANSFORMER_MASKS_INIT;
    mk.tgt_mask = c->mask;
    for (int64_t i = 0; i < c->layers; i++)
        if (c->model == 'd')
            CHECK(tg_nn_transformer_decoder_layer_forward(c->body[i], &y, y, c->mem, &mk));
        else
            CHECK(tg_nn_transformer_encoder_layer_forward(c->body[i], &y, y, NULL, NULL));
    if (c->amp != TG_F32) CHECK(tg_autocast_end());
    tg_no_grad_end();
    CHECK(tg_scope_end());
}

/* *t cast to dt in place of it (f32: kept). */
static void cast_to(tg_tensor **t, tg_dtype dt)
{
    if (!*t || dt == TG_F32) return;
    tg_tensor *c = NULL;
    CHECK(tg_to_dtype(&c, *t, dt));
    tg_tensor_release(*t);
    *t = c;
}

static void infer_setup(seq_case *c, int64_t b, int64_t t, int64_t e, tg_dtype dt)
{
    tg_rng rng;
    tg_rng_init(&rng, 2);
    CHECK(tg_tensor_randn(&c->x, TG_F32, 3, (int64_t[]){b, t, e}, &rng));
    if (c->model == 'd') CHECK(tg_tensor_randn(&c->mem, TG_F32, 3, (int64_t[]){b, t, e}, &rng));
    tg_module_train(c->root, false);
    if (dt != TG_F32) CHECK(tg_module_to_dtype(c->root, dt));
    cast_to(&c->x, dt);
    cast_to(&c->mem, dt);
    cast_to(&c->mask, dt);
}

static int usage(void)
{
    fprintf(stderr, "usage: seq --model lstm|gru|transformer|decoder [--batch B] [--seq T] "
                    "[--vocab V] [--embed E] [--hidden H] [--layers L] [--threads N] "
                    "[--repeat R] [--infer] [--dtype f32|bf16|f16] [--amp bf16|f16]\n");
    return 2;
}

int main(int argc, char **argv)
{
    long batch = 16, seq = 32, vocab = 64, embed = 32, hidden = 128, layers = 1, threads = 0,
         repeat = 20;
    seq_case c = {.model = 0, .amp = TG_F32};
    bool infer = false;
    tg_dtype dtype = TG_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *dst = !strcmp(a, "--batch")     ? &batch
                    : !strcmp(a, "--seq")     ? &seq
                    : !strcmp(a, "--vocab")   ? &vocab
                    : !strcmp(a, "--embed")   ? &embed
                    : !strcmp(a, "--hidden")  ? &hidden
                    : !strcmp(a, "--layers")  ? &layers
                    : !strcmp(a, "--threads") ? &threads
                    : !strcmp(a, "--repeat")  ? &repeat
                                              : NULL;
        if (dst && v) {
            char *end;
            *dst = strtol(v, &end, 10);
            if (*end || end == v || *dst < 0) return usage();
            i++;
        } else if (!strcmp(a, "--infer")) {
            infer = true;
        } else if (!strcmp(a, "--dtype") && v &&
                   (!strcmp(v, "f32") || !strcmp(v, "bf16") || !strcmp(v, "f16"))) {
            dtype = !strcmp(v, "f32") ? TG_F32 : !strcmp(v, "bf16") ? TG_BF16 : TG_F16;
            i++;
        } else if (!strcmp(a, "--amp") && v && (!strcmp(v, "bf16") || !strcmp(v, "f16"))) {
            c.amp = !strcmp(v, "bf16") ? TG_BF16 : TG_F16;
            i++;
        } else if (!strcmp(a, "--model") && v &&
                   (!strcmp(v, "lstm") || !strcmp(v, "gru") || !strcmp(v, "transformer") ||
                    !strcmp(v, "decoder"))) {
            c.model = v[0];
            i++;
        } else {
            return usage();
        }
    }
    if (!c.model || batch < 1 || seq < 1 || vocab < 1 || embed < 1 || hidden < 1 ||
        layers < 1 || repeat < 1 || ((c.model == 't' || c.model == 'd') && embed % 4) ||
        (infer && c.model != 't' && c.model != 'd') || (c.model == 'd' && !infer) ||
        (dtype != TG_F32 && !infer) || (c.amp != TG_F32 && (!infer || dtype != TG_F32)))
        return usage();
    if (threads > 0) CHECK(tg_set_num_threads((int)threads));
    c.vocab = vocab;
    c.layers = layers;
    build(&c, batch, seq, embed, hidden);
    if (infer) infer_setup(&c, batch, seq, embed, dtype);
    if (bench_time_calls(infer ? infer_step : step, &c, repeat)) return 1;
    tg_tensor_release(c.x);
    tg_tensor_release(c.mem);
    tg_optimizer_free(c.opt);
    free(c.params);
    tg_tensor_release(c.idx);
    tg_tensor_release(c.tgt);
    tg_tensor_release(c.mask);
    tg_tensor_release(c.positions);
    free(c.body);
    tg_module_release(c.root);
    return 0;
}
