/* char_lm: a character-level language model, the smallest sequence decoder.
 * It learns to predict the next byte of a text (a built-in paragraph, or
 * --text FILE) with one of two models:
 *
 *   --model lstm         Embedding(V, 32) -> LSTM(32, 128, batch_first)
 *                        -> Linear(128, V)
 *   --model transformer  Embedding(V, 64) + a learned position
 *                        Embedding(--seq, 64) -> TransformerEncoderLayer(64,
 *                        4 heads, 128 wide, pre-norm, batch_first) under a
 *                        causal mask -> Linear(64, V)
 *
 * V is the number of distinct bytes of the text.  Adam trains it on random
 * windows of --seq bytes (the loss is the cross entropy of every next
 * byte), then the model writes --sample bytes, each drawn from the softmax
 * of its logits / --temperature (with --top-k K, among the K likeliest
 * bytes only, picked by tg_topk), the LSTM carrying its state from byte to
 * byte, the transformer reading the last --seq bytes again each time.  The
 * weights go to out/char_lm.safetensors with PyTorch's names: the modules
 * are children "embed", "pos" (transformer), "body" and "head" of one
 * container, as a torch nn.Module with those attributes would name them.
 * --onnx PATH also writes the trained LSTM model as ONNX (tapegrad/onnx.h):
 * input "bytes" (batch, --seq) i64 codes, output "logits" (batch, --seq,
 * V) from zero states, the batch free; the transformer does not export
 * (its position embedding and causal mask are no chain of modules).
 * Exit status 1 when the loss did not fall. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tapegrad/tapegrad.h>

#include "example_args.h"

static const char *const prog = "char_lm";

static const char builtin_text[] =
    "A transposed convolution spreads every input value over a window of the "
    "output, weighted by the kernel, and adds the windows where they overlap. "
    "Its gradient with respect to the input is an ordinary convolution of the "
    "output gradient, and its gradient with respect to the kernel is a "
    "product of the input with the unfolded output gradient. A tape records "
    "each operation as it runs; the backward pass reads the tape from the end "
    "and multiplies the incoming gradient by the transposed Jacobian of each "
    "operation in turn. Because those products are operations themselves, the "
    "tape can record them too, and a second backward pass gives second "
    "derivatives. ";

typedef struct opts {
    const char *model, *text, *out, *onnx;
    int64_t steps, seq, batch, sample, threads, top_k;
    double lr, temperature;
    uint64_t seed;
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: char_lm [--model lstm|transformer (lstm)] [--text FILE (built in)]\n"
               "               [--steps N (300)] [--seq N (32)] [--batch N (16)] [--lr X (3e-3)]\n"
               "               [--sample N (200)] [--temperature X (0.8)] [--top-k K (all)]\n"
               "               [--seed N (0)] [--threads N (1..256)] [--out DIR (out)]\n"
               "               [--onnx PATH]\n");
}

static int apply(void *opts_, const char *name, const char *v)
{
    opts *o = opts_;
    if (!strcmp(name, "--model")) {
        if (strcmp(v, "lstm") && strcmp(v, "transformer")) {
            fprintf(stderr, "%s: --model '%s': must be lstm or transformer\n", prog, v);
            return -1;
        }
        return (o->model = v), 0;
    }
    if (!strcmp(name, "--text")) return (o->text = v), 0;
    if (!strcmp(name, "--out")) return (o->out = v), 0;
    if (!strcmp(name, "--onnx")) return (o->onnx = v), 0;
    if (!strcmp(name, "--steps")) return ex_arg_i64(prog, name, v, 1, INT64_MAX, &o->steps);
    if (!strcmp(name, "--seq")) return ex_arg_i64(prog, name, v, 1, 4096, &o->seq);
    if (!strcmp(name, "--batch")) return ex_arg_i64(prog, name, v, 1, 4096, &o->batch);
    if (!strcmp(name, "--sample")) return ex_arg_i64(prog, name, v, 0, 1 << 20, &o->sample);
    if (!strcmp(name, "--threads")) return ex_arg_i64(prog, name, v, 1, 256, &o->threads);
    if (!strcmp(name, "--lr")) return ex_arg_positive(prog, name, v, 1.0, &o->lr);
    if (!strcmp(name, "--top-k")) return ex_arg_i64(prog, name, v, 1, 256, &o->top_k);
    if (!strcmp(name, "--temperature"))
        return ex_arg_positive(prog, name, v, 100.0, &o->temperature);
    return ex_arg_u64(prog, name, v, &o->seed);   /* --seed */
}

/* The text: --text's bytes, or the built-in paragraph.  NULL after saying
 * why (unreadable, or not longer than one window). */
static unsigned char *load_text(const opts *o, size_t *n)
{
    unsigned char *t;
    if (o->text) {
        FILE *f = fopen(o->text, "rb");
        if (!f) {
            fprintf(stderr, "%s: --text %s: cannot open it\n", prog, o->text);
            return NULL;
        }
        size_t cap = 1 << 16;
        t = malloc(cap);
        *n = 0;
        for (size_t got; t && (got = fread(t + *n, 1, cap - *n, f)) > 0;) {
            *n += got;
            if (*n == cap) {
                unsigned char *b = realloc(t, cap *= 2);
                if (!b) free(t);
                t = b;
            }
        }
        fclose(f);
        if (!t) {
            fprintf(stderr, "%s: --text %s: no memory for it\n", prog, o->text);
            return NULL;
        }
    } else {
        *n = sizeof builtin_text - 1;
        t = malloc(*n);
        if (t) memcpy(t, builtin_text, *n);
    }
    if (t && *n <= (size_t)o->seq) {
        fprintf(stderr, "%s: the text has %zu bytes: it must be longer than --seq %lld\n", prog,
                *n, (long long)o->seq);
        free(t);
        return NULL;
    }
    return t;
}

/* The model and what its forward needs. */
typedef struct model {
    tg_module *root;                     /* owns the children below */
    tg_module *embed, *pos, *body, *head;
    bool lstm;
    int64_t seq;
    tg_tensor *mask;        /* (seq, seq): -inf above the diagonal (transformer) */
    tg_tensor *positions;   /* 0..seq-1, i64 (transformer) */
} model;

static const tg_module_vtable root_vt = {.type_name = "CharLM"};

static void build(model *md, const opts *o, int64_t vocab)
{
    tg_rng rng;
    tg_rng_init(&rng, o->seed);
    md->lstm = !strcmp(o->model, "lstm");
    md->seq = o->seq;
    const int64_t e = md->lstm ? 32 : 64, h = md->lstm ? 128 : 64;
    EX_CHECK(tg_module_new(&md->root, &root_vt, NULL), "building the model");
    EX_CHECK(tg_nn_embedding_new(&md->embed, vocab, e, &rng), "building the model");
    EX_CHECK(tg_module_add_child(md->root, "embed", md->embed), "building the model");
    if (md->lstm) {
        tg_rnn_opts ro = TG_RNN_OPTS_INIT;
        ro.batch_first = true;
        EX_CHECK(tg_nn_lstm_new(&md->body, e, h, &ro, &rng), "building the model");
    } else {
        EX_CHECK(tg_nn_embedding_new(&md->pos, o->seq, e, &rng), "building the model");
        EX_CHECK(tg_module_add_child(md->root, "pos", md->pos), "building the model");
        tg_nn_transformer_encoder_layer_opts to = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
        to.dim_feedforward = 128;
        to.dropout = 0;
        to.batch_first = true;
        to.norm_first = true;
        EX_CHECK(tg_nn_transformer_encoder_layer_new(&md->body, e, 4, &to, &rng),
                 "building the model");
        const int64_t s = o->seq;
        EX_CHECK(tg_tensor_zeros(&md->mask, TG_F32, 2, (int64_t[]){s, s}), "building the mask");
        float *mk = tg_tensor_data(md->mask);
        for (int64_t i = 0; i < s; i++)
            for (int64_t j = i + 1; j < s; j++) mk[i * s + j] = -INFINITY;
        EX_CHECK(tg_tensor_zeros(&md->positions, TG_I64, 1, &s), "building the model");
        int64_t *p = tg_tensor_data(md->positions);
        for (int64_t i = 0; i < s; i++) p[i] = i;
    }
    EX_CHECK(tg_module_add_child(md->root, "body", md->body), "building the model");
    EX_CHECK(tg_nn_linear_new(&md->head, h, vocab, true, &rng), "building the model");
    EX_CHECK(tg_module_add_child(md->root, "head", md->head), "building the model");
}

static void model_free(model *md)
{
    tg_tensor_release(md->mask);
    tg_tensor_release(md->positions);
    tg_module_release(md->root);   /* the children are its own */
}

/* The logits (B, T, V) of the bytes idx (B, T), i64, T <= seq.  The LSTM
 * starts from (h, c) when h is not NULL and leaves its final state there.
 * Runs inside the caller's scope. */
static int forward(model *md, tg_tensor **logits, tg_tensor *idx, tg_tensor **h, tg_tensor **c)
{
    tg_tensor *x, *y;
    TG_TRY(tg_module_forward(md->embed, &x, idx));
    if (md->lstm) {
        TG_TRY(tg_nn_lstm_forward(md->body, &y, h, c, x, h ? *h : NULL, c ? *c : NULL));
    } else {
        const int64_t t = tg_tensor_shape(idx)[1];
        tg_tensor *pos, *p, *xp, *mask, *rows;
        TG_TRY(tg_slice(&pos, md->positions, 0, 0, t, 1));
        TG_TRY(tg_module_forward(md->pos, &p, pos));
        TG_TRY(tg_add(&xp, x, p));
        TG_TRY(tg_slice(&rows, md->mask, 0, 0, t, 1));
        TG_TRY(tg_slice(&mask, rows, 1, 0, t, 1));
        TG_TRY(tg_nn_transformer_encoder_layer_forward(md->body, &y, xp, mask, NULL));
    }
    return tg_module_forward(md->head, logits, y);
}

/* A batch of random windows: idx (B, T) and the next bytes tgt (B T). */
static void batch(const unsigned char *text, size_t n, const int64_t *code, const opts *o,
                  tg_rng *rng, tg_tensor **idx, tg_tensor **tgt)
{
    const int64_t b = o->batch, t = o->seq;
    EX_CHECK(tg_tensor_zeros(idx, TG_I64, 2, (int64_t[]){b, t}), "making a batch");
    EX_CHECK(tg_tensor_zeros(tgt, TG_I64, 1, (int64_t[]){b * t}), "making a batch");
    int64_t *xi = tg_tensor_data(*idx), *yi = tg_tensor_data(*tgt);
    for (int64_t r = 0; r < b; r++) {
        size_t start = (size_t)(tg_rng_uniform(rng) * (double)(n - (size_t)t));
        if (start > n - (size_t)t - 1) start = n - (size_t)t - 1;
        for (int64_t j = 0; j < t; j++) {
            xi[r * t + j] = code[text[start + (size_t)j]];
            yi[r * t + j] = code[text[start + (size_t)j + 1]];
        }
    }
    tg_scope_add(*idx);
    tg_scope_add(*tgt);
}

/* One Adam step on a batch; the loss in *loss. */
static void train_step(model *md, tg_optimizer *opt, tg_tensor *const *params, int n_params,
                       tg_tensor *idx, tg_tensor *tgt, int64_t vocab, double *loss)
{
    tg_tensor *logits, *flat, *l;
    EX_CHECK(tg_scope_begin(), "training");
    tg_optimizer_zero_grad(opt);
    EX_CHECK(forward(md, &logits, idx, NULL, NULL), "running the model");
    EX_CHECK(tg_reshape(&flat, logits, 2, (int64_t[]){-1, vocab}), "running the model");
    EX_CHECK(tg_cross_entropy(&l, flat, tgt, TG_REDUCTION_MEAN), "computing the loss");
    EX_CHECK(tg_backward(l, NULL, NULL), "computing the gradients");
    EX_CHECK(tg_clip_grad_norm(NULL, n_params, params, 1.0, 2.0, false), "clipping the gradients");
    EX_CHECK(tg_optimizer_step(opt), "updating the weights");
    *loss = tg_tensor_item(l);
    EX_CHECK(tg_scope_end(), "training");
}

/* Draws one of the n indices keep[] (NULL: all of 0..v) from
 * softmax(logits / temperature) over them. */
static int64_t draw(const float *logits, int64_t v, const int64_t *keep, int64_t n,
                    double temperature, tg_rng *rng)
{
    if (!keep) n = v;
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, logits[keep ? keep[i] : i]);
    double *p = malloc(sizeof *p * (size_t)n);
    if (!p) return 0;
    for (int64_t i = 0; i < n; i++)
        sum += p[i] = exp((logits[keep ? keep[i] : i] - mx) / temperature);
    double u = tg_rng_uniform(rng) * sum;
    int64_t k = 0;
    while (k < n - 1 && (u -= p[k]) > 0) k++;
    free(p);
    return keep ? keep[k] : k;
}

/* Writes o->sample bytes drawn from the model, after the text's first. */
static void sample(model *md, const opts *o, const unsigned char *text, const int64_t *code,
                   const unsigned char *byte, int64_t vocab)
{
    tg_rng rng;
    tg_rng_init(&rng, o->seed + 1);
    tg_module_train(md->root, false);
    const bool prev = tg_set_grad_enabled(false);
    int64_t *ctx = malloc(sizeof *ctx * (size_t)(o->sample + 1));
    if (!ctx) exit(EX_EXIT_FAIL);
    ctx[0] = code[text[0]];
    tg_tensor *h = NULL, *c = NULL;
    const int64_t top = o->top_k && o->top_k < vocab ? o->top_k : 0;
    if (top) printf("sample (temperature %g, top-k %lld):\n", o->temperature, (long long)top);
    else printf("sample (temperature %g):\n", o->temperature);
    putchar(byte[ctx[0]]);
    for (int64_t i = 0; i < o->sample; i++) {
        EX_CHECK(tg_scope_begin(), "sampling");
        /* the LSTM reads one byte with its state; the transformer the last seq */
        const int64_t t = md->lstm ? 1 : (i + 1 < md->seq ? i + 1 : md->seq);
        tg_tensor *idx, *logits;
        EX_CHECK(tg_tensor_from_data(&idx, TG_I64, 2, (int64_t[]){1, t}, ctx + i + 1 - t),
                 "sampling");
        tg_scope_add(idx);
        tg_tensor *h1 = h, *c1 = c;
        EX_CHECK(forward(md, &logits, idx, md->lstm ? &h1 : NULL, md->lstm ? &c1 : NULL),
                 "sampling");
        if (md->lstm) {   /* keep the new state past the scope */
            tg_tensor_release(h);
            tg_tensor_release(c);
            h = tg_tensor_retain(h1);
            c = tg_tensor_retain(c1);
        }
        tg_tensor *last, *row, *best, *idx_k = NULL;
        EX_CHECK(tg_contiguous(&last, logits), "sampling");
        if (top) {   /* the indices of the top likeliest bytes of the last position */
            EX_CHECK(tg_narrow(&row, last, 1, t - 1, 1), "sampling");
            EX_CHECK(tg_topk(NULL, &best, row, top, -1, true, true), "sampling");
            EX_CHECK(tg_contiguous(&idx_k, best), "sampling");
        }
        ctx[i + 1] = draw((const float *)tg_tensor_data(last) + (t - 1) * vocab, vocab,
                          idx_k ? tg_tensor_data(idx_k) : NULL, top, o->temperature, &rng);
        putchar(byte[ctx[i + 1]]);
        EX_CHECK(tg_scope_end(), "sampling");
    }
    putchar('\n');
    tg_tensor_release(h);
    tg_tensor_release(c);
    free(ctx);
    tg_set_grad_enabled(prev);
}

/* --onnx PATH: the LSTM model as Sequential(embed, body, head) (the
 * children shared, so the initializers keep their state-dict names), on
 * the first window of the text, its batch free. */
static int export_onnx(const model *md, const opts *o, const unsigned char *text,
                       const int64_t *code)
{
    tg_module *seq = NULL;
    tg_tensor *idx = NULL;
    int rc = tg_nn_sequential_new(&seq);
    if (rc >= 0) rc = tg_module_add_child(seq, "embed", tg_module_retain(md->embed));
    if (rc >= 0) rc = tg_module_add_child(seq, "body", tg_module_retain(md->body));
    if (rc >= 0) rc = tg_module_add_child(seq, "head", tg_module_retain(md->head));
    if (rc >= 0) rc = tg_tensor_zeros(&idx, TG_I64, 2, (int64_t[]){1, o->seq});
    if (rc >= 0) {
        int64_t *xi = tg_tensor_data(idx);
        for (int64_t j = 0; j < o->seq; j++) xi[j] = code[text[j]];
        tg_onnx_options oo = TG_ONNX_OPTIONS_INIT;
        oo.dynamic_batch = true;
        oo.input_name = "bytes";
        oo.output_name = "logits";
        oo.graph_name = "char_lm";
        rc = tg_onnx_export(seq, idx, o->onnx, &oo);
    }
    if (rc >= 0) printf("char_lm: wrote the model as ONNX to %s\n", o->onnx);
    tg_tensor_release(idx);
    tg_module_release(seq);
    return rc;
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"--model", "--text",  "--steps", "--seq",
                                        "--batch", "--lr",    "--sample", "--temperature",
                                        "--seed",  "--threads", "--out", "--onnx", "--top-k"};
    opts o = {.model = "lstm", .out = "out", .steps = 300, .seq = 32, .batch = 16,
              .sample = 200, .lr = 3e-3, .temperature = 0.8};
    int rc = ex_args_parse(prog, argc, argv, names, sizeof names / sizeof *names, apply, &o,
                           usage);
    if (rc != 0) {
        if (rc < 0) usage(stderr);
        return rc < 0 ? EX_EXIT_USAGE : EX_EXIT_OK;
    }
    if (o.onnx && strcmp(o.model, "lstm") != 0) {
        fprintf(stderr, "%s: --onnx: only --model lstm exports (the transformer's position "
                "embedding and causal mask are no chain of modules)\n", prog);
        return EX_EXIT_USAGE;
    }
    size_t n;
    unsigned char *text = load_text(&o, &n);
    if (!text || ex_out_dir(prog, "--out", o.out) < 0) {
        free(text);
        return EX_EXIT_FAIL;
    }
    if (o.threads > 0) tg_set_num_threads((int)o.threads);
    /* the vocabulary: the distinct bytes, in byte order */
    int64_t code[256], vocab = 0;
    unsigned char byte[256];
    bool seen[256] = {0};
    for (size_t i = 0; i < n; i++) seen[text[i]] = true;
    for (int b = 0; b < 256; b++)
        if (seen[b]) code[b] = vocab, byte[vocab++] = (unsigned char)b;
    model md = {0};
    build(&md, &o, vocab);
    tg_tensor **params;
    int n_params;
    EX_CHECK(tg_module_parameters(md.root, &params, &n_params), "listing the weights");
    tg_adam_opts ao = TG_ADAM_OPTS_INIT;
    ao.lr = o.lr;
    tg_optimizer *opt;
    EX_CHECK(tg_adam_from_module(&opt, md.root, &ao), "making the optimizer");
    printf("char_lm: %s, %lld weights, %zu bytes of text, %lld distinct, windows of %lld\n",
           o.model, (long long)tg_module_parameter_numel(md.root), n, (long long)vocab,
           (long long)o.seq);
    tg_rng rng;
    tg_rng_init(&rng, o.seed);
    const double t0 = ex_now_s();
    double first = 0, avg = 0, loss = 0;
    for (int64_t s = 1; s <= o.steps; s++) {
        tg_tensor *idx, *tgt;
        EX_CHECK(tg_scope_begin(), "training");
        batch(text, n, code, &o, &rng, &idx, &tgt);
        train_step(&md, opt, params, n_params, idx, tgt, vocab, &loss);
        EX_CHECK(tg_scope_end(), "training");
        if (s == 1) first = loss;
        avg = s == 1 ? loss : 0.9 * avg + 0.1 * loss;
        if (s == 1 || s % 50 == 0 || s == o.steps)
            printf("step %5lld  loss %.4f  (%.1f s)\n", (long long)s, avg, ex_now_s() - t0);
    }
    printf("char_lm: loss %.4f -> %.4f in %lld steps\n", first, avg, (long long)o.steps);
    if (ex_save_module(prog, md.root, o.out, "char_lm.safetensors") < 0) exit(EX_EXIT_FAIL);
    if (o.onnx && export_onnx(&md, &o, text, code) < 0) {
        fprintf(stderr, "%s: --onnx %s: %s\n", prog, o.onnx, tg_error_message());
        exit(EX_EXIT_FAIL);
    }
    sample(&md, &o, text, code, byte, vocab);
    const bool fell = avg < first;
    if (!fell) fprintf(stderr, "%s: the loss did not fall (%.4f -> %.4f)\n", prog, first, avg);
    tg_optimizer_free(opt);
    free(params);
    model_free(&md);
    free(text);
    return fell ? EX_EXIT_OK : EX_EXIT_FAIL;
}
