/* tests/test_onnx_stack.c - tg_onnx_export and tg_onnx_export_n of the
 * rest of the Transformer family: TransformerEncoder (its layers' graphs
 * chained, then the final LayerNorm), TransformerDecoderLayer (self-
 * attention, cross-attention on the memory, feed-forward), TransformerDecoder
 * and Transformer, with their masks as graph inputs in torch's argument
 * order and optional ones left out (NULL); the encoder layer with a key
 * padding mask and no src_mask.  Each graph is checked by onnx's checker
 * and by ONNX Runtime against tapegrad's forward with the same masks
 * (post-norm and norm_first, relu and gelu, batch_first or not, unbatched,
 * a dynamic batch), and the graph torch.onnx.export writes for torch's
 * module holding the same state dict (tests/onnx/torch_inputs.py) gives
 * the same output on the same inputs.  A final norm other than a
 * LayerNorm (a GroupNorm, a Linear, a Sequential) is written as that
 * module.  Refusals name the module and the rule and leave the file at
 * the path as it was. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "onnx_cases.h"
#include "tapegrad/tapegrad.h"

TestSuite(onnx_stack, .init = onnx_setup, .fini = th_tmp_dir_remove);

/* as test_onnx_transformer.c's: f32 sums in other orders */
#define RTOL 1e-5
#define ATOL 1e-5

/* d_model 8, dim_feedforward 12; src length S 5, tgt length T 4, batch 2 */
#define D 8
#define FF 12

/* Every parameter of m uniform in [-0.5, 0.5] (norm weights 0.5 + that),
 * so no bias is 0 and no norm the identity. */
static void randomize(tg_module *m, uint64_t seed)
{
    tg_rng rng;
    tg_rng_init(&rng, seed);
    char **names = NULL;
    tg_tensor **ps = NULL;
    int n = 0;
    cr_assert(tg_module_named_parameters(m, &names, &ps, &n) == TG_OK, "%s", tg_error_message());
    tg_no_grad_begin();
    for (int i = 0; i < n; i++) {
        const bool norm_w = strstr(names[i], "norm") && strstr(names[i], "weight");
        cr_assert(tg_init_uniform_(ps[i], norm_w ? 0.5 : -0.5, norm_w ? 1.5 : 0.5, &rng) == TG_OK);
    }
    tg_no_grad_end();
    free(names);
    free(ps);
}

/* The options of a layer: nf norm_first, g gelu (relu otherwise), bf
 * batch_first. */
typedef struct lopts {
    int64_t heads;
    bool nf, g, bf;
} lopts;

static tg_module *enc_layer(lopts l, uint64_t seed)
{
    tg_nn_transformer_encoder_layer_opts o = TG_NN_TRANSFORMER_ENCODER_LAYER_OPTS_INIT;
    o.dim_feedforward = FF;
    o.activation = l.g ? TG_ACT_GELU : TG_ACT_RELU;
    o.norm_first = l.nf;
    o.batch_first = l.bf;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    cr_assert(tg_nn_transformer_encoder_layer_new(&m, D, l.heads, &o, &rng) == TG_OK, "%s",
              tg_error_message());
    return m;
}

static tg_module *dec_layer(lopts l, uint64_t seed)
{
    tg_nn_transformer_decoder_layer_opts o = TG_NN_TRANSFORMER_DECODER_LAYER_OPTS_INIT;
    o.dim_feedforward = FF;
    o.activation = l.g ? TG_ACT_GELU : TG_ACT_RELU;
    o.norm_first = l.nf;
    o.batch_first = l.bf;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    cr_assert(tg_nn_transformer_decoder_layer_new(&m, D, l.heads, &o, &rng) == TG_OK, "%s",
              tg_error_message());
    return m;
}

/* A TransformerEncoder (dec false) or TransformerDecoder of n layers,
 * with a final LayerNorm(D) when norm; parameters random (seed). */
static tg_module *stack(bool dec, int64_t n, bool norm, lopts l, uint64_t seed)
{
    tg_module *layer = dec ? dec_layer(l, seed) : enc_layer(l, seed), *ln = NULL, *m = NULL;
    if (norm) cr_assert(tg_nn_layer_norm_new(&ln, 1, (const int64_t[]){D}, 1e-5, true) == TG_OK);
    int rc = dec ? tg_nn_transformer_decoder_new(&m, layer, n, ln)
                 : tg_nn_transformer_encoder_new(&m, layer, n, ln);
    cr_assert(rc == TG_OK, "%s", tg_error_message());
    tg_module_release(layer);
    tg_module_release(ln);
    randomize(m, seed + 100);
    return m;
}

static tg_module *transformer(lopts l, uint64_t seed)
{
    tg_nn_transformer_opts o = TG_NN_TRANSFORMER_OPTS_INIT;
    o.num_encoder_layers = 2;
    o.num_decoder_layers = 2;
    o.dim_feedforward = FF;
    o.activation = l.g ? TG_ACT_GELU : TG_ACT_RELU;
    o.norm_first = l.nf;
    o.batch_first = l.bf;
    tg_rng rng;
    tg_rng_init(&rng, seed);
    tg_module *m = NULL;
    cr_assert(tg_nn_transformer_new(&m, D, l.heads, &o, &rng) == TG_OK, "%s", tg_error_message());
    randomize(m, seed + 100);
    return m;
}

static tg_tensor *rnd(int nd, const int64_t *shape, uint64_t seed)
{
    return th_rand_uniform(TG_F32, nd, shape, seed);
}

/* A (seq, batch, D) input, (batch, seq, D) with bf, (seq, D) for batch 0. */
static tg_tensor *seq(int64_t len, int64_t batch, bool bf, uint64_t seed)
{
    if (!batch) return rnd(2, (const int64_t[]){len, D}, seed);
    return rnd(3, bf ? (const int64_t[]){batch, len, D} : (const int64_t[]){len, batch, D}, seed);
}

static tg_tensor *u8(int nd, const int64_t *shape, const uint8_t *v)
{
    tg_tensor *t = NULL;
    cr_assert(tg_tensor_from_data(&t, TG_U8, nd, shape, v) == TG_OK, "%s", tg_error_message());
    return t;
}

/* The masks: no row of any of them masks every key, alone or together. */
/* (5, 5): 1 above the diagonal, the causal src_mask */
static const uint8_t CAUSAL[25] = {0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1,
                                   0, 0, 0, 0, 1, 0, 0, 0, 0, 0};
/* (4, 5): query i may not attend memory position i */
static const uint8_t MEM_MASK[20] = {1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0};
/* (3, 5) and (3, 4): padding at the ends of the sequences (batch 2: the
 * first two rows) */
static const uint8_t SRC_PAD[15] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1};
static const uint8_t TGT_PAD[12] = {0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1};
/* (3, 5) for the memory, other than the src's */
static const uint8_t MEM_PAD[15] = {0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1};

/* Every mask for batch n (1 to 3; 0 unbatched): what each is. */
typedef struct masks {
    tg_tensor *src_mask, *tgt_mask, *memory_mask, *src_kpm, *tgt_kpm, *mem_kpm;
} masks;

static masks make_masks(int64_t n)
{
    masks k = {0};
    k.src_mask = u8(2, (const int64_t[]){5, 5}, CAUSAL);
    cr_assert(tg_nn_transformer_square_subsequent_mask(&k.tgt_mask, 4, TG_F32) == TG_OK);
    k.memory_mask = u8(2, (const int64_t[]){4, 5}, MEM_MASK);
    k.src_kpm = n ? u8(2, (const int64_t[]){n, 5}, SRC_PAD) : u8(1, (const int64_t[]){5}, SRC_PAD);
    k.tgt_kpm = n ? u8(2, (const int64_t[]){n, 4}, TGT_PAD) : u8(1, (const int64_t[]){4}, TGT_PAD);
    k.mem_kpm = n ? u8(2, (const int64_t[]){n, 5}, MEM_PAD) : u8(1, (const int64_t[]){5}, MEM_PAD);
    return k;
}

static void free_masks(masks k)
{
    th_release_all(6, (tg_tensor *[]){k.src_mask, k.tgt_mask, k.memory_mask, k.src_kpm,
                                      k.tgt_kpm, k.mem_kpm});
}

/* torch's argument names, the graph inputs' */
static const char *const TEL[3] = {"src", "src_mask", "src_key_padding_mask"};
static const char *const ENC[3] = {"src", "mask", "src_key_padding_mask"};
static const char *const DEC[6] = {"tgt", "memory", "tgt_mask", "memory_mask",
                                   "tgt_key_padding_mask", "memory_key_padding_mask"};
static const char *const TF[8] = {"src", "tgt", "src_mask", "tgt_mask", "memory_mask",
                                  "src_key_padding_mask", "tgt_key_padding_mask",
                                  "memory_key_padding_mask"};

static tg_tensor *at(int n, tg_tensor *const *xs, int i)
{
    return i < n ? xs[i] : NULL;
}

/* tapegrad's forward (eval, no grad) of a module of the family on the
 * inputs in torch's order, NULL where left out: a new reference. */
static tg_tensor *family_forward(tg_module *m, int n, tg_tensor *const *xs)
{
    const char *type = tg_module_type_name(m);
    tg_nn_transformer_masks mk = TG_NN_TRANSFORMER_MASKS_INIT;
    tg_tensor *y = NULL;
    int rc;
    tg_module_train(m, false);
    tg_no_grad_begin();
    if (!strcmp(type, "TransformerEncoderLayer")) {
        rc = tg_nn_transformer_encoder_layer_forward(m, &y, xs[0], at(n, xs, 1), at(n, xs, 2));
    } else if (!strcmp(type, "TransformerEncoder")) {
        rc = tg_nn_transformer_encoder_forward(m, &y, xs[0], at(n, xs, 1), at(n, xs, 2));
    } else if (!strcmp(type, "Transformer")) {
        mk = (tg_nn_transformer_masks){at(n, xs, 2), at(n, xs, 3), at(n, xs, 4),
                                       at(n, xs, 5), at(n, xs, 6), at(n, xs, 7)};
        rc = tg_nn_transformer_forward(m, &y, xs[0], xs[1], &mk);
    } else {
        mk.tgt_mask = at(n, xs, 2);
        mk.memory_mask = at(n, xs, 3);
        mk.tgt_key_padding_mask = at(n, xs, 4);
        mk.memory_key_padding_mask = at(n, xs, 5);
        rc = !strcmp(type, "TransformerDecoder")
                 ? tg_nn_transformer_decoder_forward(m, &y, xs[0], xs[1], &mk)
                 : tg_nn_transformer_decoder_layer_forward(m, &y, xs[0], xs[1], &mk);
    }
    tg_no_grad_end();
    cr_assert(rc == TG_OK, "%s forward: %s", type, tg_error_message());
    return y;
}

/* Exports m on xs (tg_onnx_export_n) as case `name`, expecting
 * family_forward(m, run) on the inputs run (xs when NULL): a dynamic batch
 * when run is given. */
static void case_n(const char *name, tg_module *m, int n, tg_tensor *const *xs,
                   const char *const *names, tg_tensor *const *run, const char *const *inits)
{
    char path[256], file[128];
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = run != NULL;
    snprintf(file, sizeof file, "%s.onnx", name);
    cr_assert(tg_onnx_export_n(m, n, xs, names, th_tmp_path(path, sizeof path, file), &o) ==
                  TG_OK, "%s: %s", name, tg_error_message());
    tg_tensor *y = family_forward(m, n, run ? run : xs);
    write_expected_n(name, n, run ? run : xs, names, y, RTOL, ATOL, inits);
    tg_tensor_release(y);
}

/* The same module in torch (tests/onnx/torch_inputs.py builds it from the
 * state dict and `what`), exported by torch.onnx.export on the inputs of
 * case `name`: case "<name>_torch", which must give tapegrad's output. */
static void same_as_torch(const char *name, tg_module *m, const char *what)
{
    char path[256], file[128];
    tg_st_file *f = NULL;
    snprintf(file, sizeof file, "%s.safetensors", name);
    cr_assert(tg_st_new(&f) == TG_OK);
    cr_assert(tg_module_state_dict_save(m, f, "") == TG_OK, "%s", tg_error_message());
    cr_assert(tg_safetensors_save(f, th_tmp_path(path, sizeof path, file)) == TG_OK);
    tg_st_free(f);
    int rc = th_run("TG_PYTHON", (const char *const[]){TG_SOURCE_ROOT
                                                       "/tests/onnx/torch_inputs.py",
                                                       file, name, what, NULL});
    cr_log_info("torch_inputs.py %s: %s", name, th_out);
    cr_assert(rc == 0, "%s by torch.onnx.export:\n%s%s", name, th_out, th_err);
}

Test(onnx_stack, encoder_one_input)
{
    need_onnx();
    /* one layer and the norm: the layer's names under "layers.0." */
    tg_module *a = stack(false, 1, true, (lopts){2, false, false, false}, 1);
    tg_tensor *x = seq(5, 2, false, 2);
    write_case("enc1", a, x, RTOL, ATOL,
               (const char *const[]){
                   "layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias",
                   "layers.0.self_attn.out_proj.weight", "layers.0.self_attn.out_proj.bias",
                   "layers.0.linear1.weight", "layers.0.linear1.bias", "layers.0.linear2.weight",
                   "layers.0.linear2.bias", "layers.0.norm1.weight", "layers.0.norm1.bias",
                   "layers.0.norm2.weight", "layers.0.norm2.bias", "norm.weight", "norm.bias",
                   "/layers/0/self_attn/qkv_split", "/layers/0/self_attn/head_shape",
                   "/layers/0/self_attn/merged_shape", "/layers/0/self_attn/scale", NULL},
               NULL);
    /* three layers without a norm, norm_first gelu batch_first: the
     * layers hold different values after randomize */
    tg_module *b = stack(false, 3, false, (lopts){4, true, true, true}, 3);
    tg_tensor *xb = seq(5, 3, true, 4);
    case_graph = "\"attributes\": {\"LayerNormalization\": {\"axis\": -1}}";
    write_case("enc3_pre_gelu_bf", b, xb, RTOL, ATOL, NULL, NULL);
    /* unbatched (S, E) */
    tg_tensor *xu = seq(5, 0, false, 5);
    write_case("enc_unbatched", a, xu, RTOL, ATOL, NULL, NULL);
    /* a dynamic batch: exported on 3, run on 2 */
    tg_onnx_options o = TG_ONNX_OPTIONS_INIT;
    o.dynamic_batch = true;
    char path[256];
    cr_assert(tg_onnx_export(b, xb, th_tmp_path(path, sizeof path, "enc_dynamic.onnx"), &o) ==
                  TG_OK, "%s", tg_error_message());
    tg_tensor *xr = seq(5, 2, true, 6);
    tg_tensor *yr = forward(b, xr);
    write_expected("enc_dynamic", xr, yr, RTOL, ATOL, NULL);
    /* inside a Sequential between Linears */
    tg_module *s = NULL, *lin = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 7);
    cr_assert(tg_nn_sequential_new(&s) == TG_OK);
    cr_assert(tg_nn_linear_new(&lin, 6, D, true, &rng) == TG_OK);
    append(s, lin);
    append(s, stack(false, 2, true, (lopts){2, false, true, true}, 8));
    cr_assert(tg_nn_linear_new(&lin, D, 3, true, &rng) == TG_OK);
    append(s, lin);
    tg_tensor *xs = rnd(3, (const int64_t[]){2, 5, 6}, 9);
    write_case("enc_in_sequential", s, xs, RTOL, ATOL, NULL, NULL);
    check_cases();
    th_release_all(6, (tg_tensor *[]){x, xb, xu, xr, yr, xs});
    tg_module_release(a);
    tg_module_release(b);
    tg_module_release(s);
}

Test(onnx_stack, encoder_masks_and_padding_alone)
{
    need_onnx();
    masks k = make_masks(2), k3 = make_masks(3), ku = make_masks(0);
    tg_module *e = stack(false, 2, true, (lopts){2, false, false, false}, 10);
    tg_module *eb = stack(false, 2, false, (lopts){4, true, true, true}, 11);
    tg_module *l = enc_layer((lopts){2, false, false, true}, 12);
    randomize(l, 13);
    tg_tensor *x = seq(5, 2, false, 14), *xb = seq(5, 2, true, 15), *xu = seq(5, 0, false, 16);
    tg_tensor *fm = rnd(2, (const int64_t[]){5, 5}, 17);
    case_n("enc_mask", e, 2, (tg_tensor *[]){x, k.src_mask}, ENC, NULL, NULL);
    case_n("enc_fmask_kpm", eb, 3, (tg_tensor *[]){xb, fm, k.src_kpm}, ENC, NULL, NULL);
    /* the padding mask alone: the graph has two inputs, src and the mask */
    case_graph = "\"attributes\": {\"Tile\": {}}";
    case_n("enc_kpm_alone", e, 3, (tg_tensor *[]){x, NULL, k.src_kpm}, ENC, NULL, NULL);
    case_n("enc_unbatched_kpm", e, 3, (tg_tensor *[]){xu, NULL, ku.src_kpm}, ENC, NULL, NULL);
    case_n("tel_kpm_alone", l, 3, (tg_tensor *[]){xb, NULL, k.src_kpm}, TEL, NULL, NULL);
    /* a dynamic batch: exported on 2, run on 3 */
    tg_tensor *x3 = seq(5, 3, true, 18);
    case_n("enc_dynamic_kpm", eb, 3, (tg_tensor *[]){xb, k.src_mask, k.src_kpm}, ENC,
           (tg_tensor *[]){x3, k.src_mask, k3.src_kpm}, NULL);
    case_n("tel_dynamic_kpm", l, 3, (tg_tensor *[]){xb, NULL, k.src_kpm}, NULL,
           (tg_tensor *[]){x3, NULL, k3.src_kpm}, NULL);
    check_cases();
    free_masks(k);
    free_masks(k3);
    free_masks(ku);
    th_release_all(5, (tg_tensor *[]){x, xb, xu, fm, x3});
    tg_module_release(e);
    tg_module_release(eb);
    tg_module_release(l);
}

/* A float padding mask of batch n (0: unbatched (len)) holding v where
 * pad is set, 0 elsewhere. */
static tg_tensor *float_pad(int64_t n, int64_t len, const uint8_t *pad, float v)
{
    float f[15];
    const int64_t count = (n ? n : 1) * len;
    cr_assert(count <= 15);
    for (int64_t i = 0; i < count; i++) f[i] = pad[i] ? v : 0.0f;
    tg_tensor *t = NULL;
    const int64_t shape[2] = {n, len};
    cr_assert(tg_tensor_from_data(&t, TG_F32, n ? 2 : 1, n ? shape : shape + 1, f) == TG_OK,
              "%s", tg_error_message());
    return t;
}

/* Float key padding masks, merged as MultiheadAttention merges them:
 * added to the scores, or -inf where nonzero beside a u8 attention mask
 * (torch 1.13 or-s the two as bools). */
Test(onnx_stack, float_key_padding_masks)
{
    need_onnx();
    masks k = make_masks(2);
    tg_module *e = stack(false, 2, true, (lopts){2, false, false, false}, 60);
    tg_module *eb = stack(false, 2, false, (lopts){4, true, true, true}, 61);
    tg_tensor *x = seq(5, 2, false, 62), *xb = seq(5, 2, true, 63), *xu = seq(5, 0, false, 64);
    tg_tensor *x3 = seq(5, 3, true, 65), *fm = rnd(2, (const int64_t[]){5, 5}, 66);
    tg_tensor *fpad = float_pad(2, 5, SRC_PAD, -2.5f), *fpad3 = float_pad(3, 5, SRC_PAD, -2.5f);
    tg_tensor *fpadu = float_pad(0, 5, SRC_PAD, -2.5f);
    case_n("enc_fkpm_alone", e, 3, (tg_tensor *[]){x, NULL, fpad}, ENC, NULL, NULL);
    case_n("enc_u8mask_fkpm", e, 3, (tg_tensor *[]){x, k.src_mask, fpad}, ENC, NULL, NULL);
    case_n("enc_fmask_fkpm", eb, 3, (tg_tensor *[]){xb, fm, fpad}, ENC, NULL, NULL);
    case_n("enc_unbatched_fkpm", e, 3, (tg_tensor *[]){xu, NULL, fpadu}, ENC, NULL, NULL);
    case_n("enc_dynamic_fkpm", eb, 3, (tg_tensor *[]){xb, fm, fpad}, ENC,
           (tg_tensor *[]){x3, fm, fpad3}, NULL);
    /* the decoder layer: a float tgt_mask beside a float tgt padding mask
     * (added), a u8 memory_mask beside a float memory one (or-ed) */
    tg_module *m = dec_layer((lopts){2, false, false, false}, 67);
    randomize(m, 68);
    tg_tensor *t = seq(4, 2, false, 69), *mem = seq(5, 2, false, 70);
    tg_tensor *ftpad = float_pad(2, 4, TGT_PAD, -1.5f), *fmpad = float_pad(2, 5, MEM_PAD, -2.0f);
    case_n("tdl_fkpms", m, 6, (tg_tensor *[]){t, mem, k.tgt_mask, k.memory_mask, ftpad, fmpad},
           DEC, NULL, NULL);
    check_cases();
    free_masks(k);
    th_release_all(12, (tg_tensor *[]){x, xb, xu, x3, fm, fpad, fpad3, fpadu, t, mem, ftpad,
                                       fmpad});
    tg_module_release(e);
    tg_module_release(eb);
    tg_module_release(m);
}

Test(onnx_stack, decoder_layer)
{
    need_onnx();
    masks k = make_masks(2), k3 = make_masks(3), ku = make_masks(0);
    tg_tensor *t = seq(4, 2, false, 20), *mem = seq(5, 2, false, 21);
    tg_tensor *tb = seq(4, 2, true, 22), *memb = seq(5, 2, true, 23);
    static const struct {
        const char *name;
        lopts l;
    } cases[] = {
        {"tdl_post_relu_sf_h2", {2, false, false, false}},
        {"tdl_post_gelu_bf_h4", {4, false, true, true}},
        {"tdl_pre_relu_bf_h1", {1, true, false, true}},
        {"tdl_pre_gelu_sf_h4", {4, true, true, false}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tg_module *m = dec_layer(cases[i].l, 30 + i);
        randomize(m, 40 + i);
        const bool bf = cases[i].l.bf;
        char name[64];
        case_n(cases[i].name, m, 2, (tg_tensor *[]){bf ? tb : t, bf ? memb : mem}, DEC, NULL,
               NULL);
        snprintf(name, sizeof name, "%s_masks", cases[i].name);
        case_n(name, m, 6,
               (tg_tensor *[]){bf ? tb : t, bf ? memb : mem, k.tgt_mask, k.memory_mask,
                               k.tgt_kpm, k.mem_kpm},
               DEC, NULL, NULL);
        tg_module_release(m);
    }
    tg_module *m = dec_layer((lopts){2, false, false, true}, 50);
    randomize(m, 51);
    /* the padding masks without the attention masks; the memory's alone */
    case_n("tdl_kpms", m, 6, (tg_tensor *[]){tb, memb, NULL, NULL, k.tgt_kpm, k.mem_kpm}, DEC,
           NULL, NULL);
    case_n("tdl_mem_kpm", m, 6, (tg_tensor *[]){tb, memb, NULL, NULL, NULL, k.mem_kpm}, DEC,
           NULL, NULL);
    case_n("tdl_memory_mask", m, 4, (tg_tensor *[]){tb, memb, NULL, k.memory_mask}, NULL, NULL,
           NULL);
    /* unbatched (T, E), (S, E) */
    tg_tensor *tu = seq(4, 0, false, 52), *memu = seq(5, 0, false, 53);
    case_n("tdl_unbatched", m, 6,
           (tg_tensor *[]){tu, memu, k.tgt_mask, k.memory_mask, ku.tgt_kpm, ku.mem_kpm}, DEC,
           NULL, NULL);
    /* a dynamic batch: exported on 2, run on 3 */
    tg_tensor *t3 = seq(4, 3, true, 54), *mem3 = seq(5, 3, true, 55);
    case_n("tdl_dynamic", m, 6,
           (tg_tensor *[]){tb, memb, k.tgt_mask, NULL, k.tgt_kpm, k.mem_kpm}, DEC,
           (tg_tensor *[]){t3, mem3, k.tgt_mask, NULL, k3.tgt_kpm, k3.mem_kpm}, NULL);
    check_cases();
    free_masks(k);
    free_masks(k3);
    free_masks(ku);
    th_release_all(8, (tg_tensor *[]){t, mem, tb, memb, tu, memu, t3, mem3});
    tg_module_release(m);
}

Test(onnx_stack, decoder_and_transformer)
{
    need_onnx();
    masks k = make_masks(2), k3 = make_masks(3), ku = make_masks(0);
    tg_tensor *t = seq(4, 2, false, 60), *mem = seq(5, 2, false, 61);
    tg_tensor *tb = seq(4, 2, true, 62), *memb = seq(5, 2, true, 63);
    /* decoders of two layers, with and without the norm */
    tg_module *d = stack(true, 2, true, (lopts){2, false, false, false}, 64);
    tg_module *db = stack(true, 2, false, (lopts){4, true, true, true}, 65);
    case_n("dec", d, 2, (tg_tensor *[]){t, mem}, DEC, NULL, NULL);
    case_n("dec_masks", d, 6,
           (tg_tensor *[]){t, mem, k.tgt_mask, k.memory_mask, k.tgt_kpm, k.mem_kpm}, DEC, NULL,
           NULL);
    case_n("dec_pre_gelu_bf", db, 5, (tg_tensor *[]){tb, memb, k.tgt_mask, NULL, k.tgt_kpm},
           DEC, NULL, NULL);
    /* Transformers: the memory is the encoder's output, the masks each at
     * its attention */
    tg_module *f = transformer((lopts){2, false, false, false}, 66);
    tg_module *fb = transformer((lopts){4, true, true, true}, 67);
    tg_tensor *s = seq(5, 2, false, 68), *sb = seq(5, 2, true, 69);
    case_n("tf", f, 2, (tg_tensor *[]){s, t}, TF, NULL,
           (const char *const[]){
               "encoder.layers.0.self_attn.in_proj_weight",
               "encoder.layers.0.self_attn.in_proj_bias",
               "encoder.layers.0.self_attn.out_proj.weight",
               "encoder.layers.0.self_attn.out_proj.bias", "encoder.layers.0.linear1.weight",
               "encoder.layers.0.linear1.bias", "encoder.layers.0.linear2.weight",
               "encoder.layers.0.linear2.bias", "encoder.layers.0.norm1.weight",
               "encoder.layers.0.norm1.bias", "encoder.layers.0.norm2.weight",
               "encoder.layers.0.norm2.bias", "encoder.layers.1.self_attn.in_proj_weight",
               "encoder.layers.1.self_attn.in_proj_bias",
               "encoder.layers.1.self_attn.out_proj.weight",
               "encoder.layers.1.self_attn.out_proj.bias", "encoder.layers.1.linear1.weight",
               "encoder.layers.1.linear1.bias", "encoder.layers.1.linear2.weight",
               "encoder.layers.1.linear2.bias", "encoder.layers.1.norm1.weight",
               "encoder.layers.1.norm1.bias", "encoder.layers.1.norm2.weight",
               "encoder.layers.1.norm2.bias", "encoder.norm.weight", "encoder.norm.bias",
               "decoder.layers.0.self_attn.in_proj_weight",
               "decoder.layers.0.self_attn.in_proj_bias",
               "decoder.layers.0.self_attn.out_proj.weight",
               "decoder.layers.0.self_attn.out_proj.bias",
               "decoder.layers.0.multihead_attn.in_proj_weight",
               "decoder.layers.0.multihead_attn.in_proj_bias",
               "decoder.layers.0.multihead_attn.out_proj.weight",
               "decoder.layers.0.multihead_attn.out_proj.bias",
               "decoder.layers.0.linear1.weight", "decoder.layers.0.linear1.bias",
               "decoder.layers.0.linear2.weight", "decoder.layers.0.linear2.bias",
               "decoder.layers.0.norm1.weight", "decoder.layers.0.norm1.bias",
               "decoder.layers.0.norm2.weight", "decoder.layers.0.norm2.bias",
               "decoder.layers.0.norm3.weight", "decoder.layers.0.norm3.bias",
               "decoder.layers.1.self_attn.in_proj_weight",
               "decoder.layers.1.self_attn.in_proj_bias",
               "decoder.layers.1.self_attn.out_proj.weight",
               "decoder.layers.1.self_attn.out_proj.bias",
               "decoder.layers.1.multihead_attn.in_proj_weight",
               "decoder.layers.1.multihead_attn.in_proj_bias",
               "decoder.layers.1.multihead_attn.out_proj.weight",
               "decoder.layers.1.multihead_attn.out_proj.bias",
               "decoder.layers.1.linear1.weight", "decoder.layers.1.linear1.bias",
               "decoder.layers.1.linear2.weight", "decoder.layers.1.linear2.bias",
               "decoder.layers.1.norm1.weight", "decoder.layers.1.norm1.bias",
               "decoder.layers.1.norm2.weight", "decoder.layers.1.norm2.bias",
               "decoder.layers.1.norm3.weight", "decoder.layers.1.norm3.bias",
               "decoder.norm.weight", "decoder.norm.bias",
               "/encoder/layers/0/self_attn/qkv_split", "/encoder/layers/0/self_attn/head_shape",
               "/encoder/layers/0/self_attn/merged_shape", "/encoder/layers/0/self_attn/scale",
               "/encoder/layers/1/self_attn/qkv_split", "/encoder/layers/1/self_attn/head_shape",
               "/encoder/layers/1/self_attn/merged_shape", "/encoder/layers/1/self_attn/scale",
               "/decoder/layers/0/self_attn/qkv_split", "/decoder/layers/0/self_attn/head_shape",
               "/decoder/layers/0/self_attn/merged_shape", "/decoder/layers/0/self_attn/scale",
               "/decoder/layers/0/multihead_attn/qkv_split",
               "/decoder/layers/0/multihead_attn/head_shape",
               "/decoder/layers/0/multihead_attn/merged_shape",
               "/decoder/layers/0/multihead_attn/scale",
               "/decoder/layers/1/self_attn/qkv_split", "/decoder/layers/1/self_attn/head_shape",
               "/decoder/layers/1/self_attn/merged_shape", "/decoder/layers/1/self_attn/scale",
               "/decoder/layers/1/multihead_attn/qkv_split",
               "/decoder/layers/1/multihead_attn/head_shape",
               "/decoder/layers/1/multihead_attn/merged_shape",
               "/decoder/layers/1/multihead_attn/scale", NULL});
    case_n("tf_masks", f, 8,
           (tg_tensor *[]){s, t, k.src_mask, k.tgt_mask, k.memory_mask, k.src_kpm, k.tgt_kpm,
                           k.mem_kpm},
           TF, NULL, NULL);
    case_n("tf_pre_gelu_bf_some", fb, 8,
           (tg_tensor *[]){sb, tb, NULL, k.tgt_mask, NULL, k.src_kpm, NULL, k.mem_kpm}, TF, NULL,
           NULL);
    tg_tensor *su = seq(5, 0, false, 70), *tu = seq(4, 0, false, 71);
    case_n("tf_unbatched", fb, 7,
           (tg_tensor *[]){su, tu, k.src_mask, k.tgt_mask, NULL, ku.src_kpm, ku.tgt_kpm}, TF,
           NULL, NULL);
    /* a dynamic batch: exported on 2, run on 3 */
    tg_tensor *s3 = seq(5, 3, true, 72), *t3 = seq(4, 3, true, 73);
    case_n("tf_dynamic", fb, 8,
           (tg_tensor *[]){sb, tb, k.src_mask, k.tgt_mask, k.memory_mask, k.src_kpm, k.tgt_kpm,
                           k.mem_kpm},
           TF,
           (tg_tensor *[]){s3, t3, k.src_mask, k.tgt_mask, k.memory_mask, k3.src_kpm,
                           k3.tgt_kpm, k3.mem_kpm},
           NULL);
    check_cases();
    free_masks(k);
    free_masks(k3);
    free_masks(ku);
    th_release_all(10, (tg_tensor *[]){t, mem, tb, memb, s, sb, su, tu, s3, t3});
    tg_module *ms[4] = {d, db, f, fb};
    for (int i = 0; i < 4; i++) tg_module_release(ms[i]);
}

Test(onnx_stack, same_outputs_as_torch_onnx_export)
{
    need_onnx();
    masks k = make_masks(2), ku = make_masks(0);
    tg_tensor *s = seq(5, 2, false, 80), *sb = seq(5, 2, true, 81), *su = seq(5, 0, false, 82);
    tg_tensor *t = seq(4, 2, false, 83), *tb = seq(4, 2, true, 84), *tu = seq(4, 0, false, 85);
    tg_tensor *mem = seq(5, 2, false, 86), *memb = seq(5, 2, true, 87);
    /* the encoder layer with the padding mask alone */
    tg_module *l = enc_layer((lopts){2, false, true, true}, 88);
    randomize(l, 89);
    case_n("t_tel_kpm", l, 3, (tg_tensor *[]){sb, NULL, k.src_kpm}, TEL, NULL, NULL);
    same_as_torch("t_tel_kpm", l, "tel heads=2 batch_first gelu");
    /* encoders: post-norm seq-first with both masks and the norm;
     * norm_first batch_first gelu with the padding mask alone */
    tg_module *e = stack(false, 2, true, (lopts){2, false, false, false}, 90);
    case_n("t_enc", e, 3, (tg_tensor *[]){s, k.src_mask, k.src_kpm}, ENC, NULL, NULL);
    same_as_torch("t_enc", e, "te heads=2");
    tg_module *eb = stack(false, 3, false, (lopts){4, true, true, true}, 91);
    case_n("t_enc_pre", eb, 3, (tg_tensor *[]){sb, NULL, k.src_kpm}, ENC, NULL, NULL);
    same_as_torch("t_enc_pre", eb, "te heads=4 norm_first batch_first gelu");
    /* decoder layers, every mask; some, batch_first */
    tg_module *dl = dec_layer((lopts){2, false, false, false}, 92);
    randomize(dl, 93);
    case_n("t_tdl", dl, 6, (tg_tensor *[]){t, mem, k.tgt_mask, k.memory_mask, k.tgt_kpm,
                                           k.mem_kpm}, DEC, NULL, NULL);
    same_as_torch("t_tdl", dl, "tdl heads=2");
    tg_module *dlb = dec_layer((lopts){4, true, true, true}, 94);
    randomize(dlb, 95);
    case_n("t_tdl_pre", dlb, 6, (tg_tensor *[]){tb, memb, NULL, k.memory_mask, NULL, k.mem_kpm},
           DEC, NULL, NULL);
    same_as_torch("t_tdl_pre", dlb, "tdl heads=4 norm_first batch_first gelu");
    /* a decoder of two layers and the norm */
    tg_module *d = stack(true, 2, true, (lopts){2, false, true, true}, 96);
    case_n("t_dec", d, 5, (tg_tensor *[]){tb, memb, k.tgt_mask, NULL, k.tgt_kpm}, DEC, NULL,
           NULL);
    same_as_torch("t_dec", d, "td heads=2 batch_first gelu");
    /* Transformers: every mask, seq-first; unbatched norm_first */
    tg_module *f = transformer((lopts){2, false, false, false}, 97);
    case_n("t_tf", f, 8,
           (tg_tensor *[]){s, t, k.src_mask, k.tgt_mask, k.memory_mask, k.src_kpm, k.tgt_kpm,
                           k.mem_kpm},
           TF, NULL, NULL);
    same_as_torch("t_tf", f, "tf heads=2");
    tg_module *fu = transformer((lopts){4, true, false, true}, 98);
    case_n("t_tf_unbatched", fu, 8,
           (tg_tensor *[]){su, tu, NULL, k.tgt_mask, NULL, ku.src_kpm, NULL, ku.mem_kpm}, TF,
           NULL, NULL);
    same_as_torch("t_tf_unbatched", fu, "tf heads=4 norm_first batch_first");
    check_cases();
    free_masks(k);
    free_masks(ku);
    th_release_all(8, (tg_tensor *[]){s, sb, su, t, tb, tu, mem, memb});
    tg_module *ms[8] = {l, e, eb, dl, dlb, d, f, fu};
    for (int i = 0; i < 8; i++) tg_module_release(ms[i]);
}

/* export_n(m, xs) fails with rc and a message holding want, and the file
 * already at path keeps its bytes (n 1: tg_onnx_export). */
/* A stack of 2 layers with the final norm `norm` (stolen), parameters
 * random. */
static tg_module *normed_stack(bool dec, tg_module *norm, lopts l, uint64_t seed)
{
    tg_module *layer = dec ? dec_layer(l, seed) : enc_layer(l, seed), *m = NULL;
    int rc = dec ? tg_nn_transformer_decoder_new(&m, layer, 2, norm)
                 : tg_nn_transformer_encoder_new(&m, layer, 2, norm);
    cr_assert(rc == TG_OK, "%s", tg_error_message());
    tg_module_release(layer);
    tg_module_release(norm);
    randomize(m, seed + 100);
    return m;
}

/* A final norm other than a LayerNorm: any module that exports, written
 * after the last layer as it would be on its own. */
Test(onnx_stack, final_norm_of_any_exported_module)
{
    need_onnx();
    tg_rng rng;
    tg_rng_init(&rng, 120);
    /* batch first (N, S, D): a GroupNorm over the 6 positions in 3 groups,
     * a dynamic batch run on 3 samples */
    tg_module *gn = NULL, *lin = NULL, *ln = NULL, *sq = NULL;
    cr_assert(tg_nn_group_norm_new(&gn, 3, 6, 1e-5, true) == TG_OK);
    tg_module *e1 = normed_stack(false, gn, (lopts){2, false, false, true}, 121);
    tg_tensor *s2 = seq(6, 2, true, 122), *s3 = seq(6, 3, true, 123);
    case_graph = "\"attributes\": {\"InstanceNormalization\": {}}";
    case_n("encoder_group_norm", e1, 1, &s2, TEL, &s3, NULL);
    /* a Linear as the norm, seq-first */
    cr_assert(tg_nn_linear_new(&lin, D, D, true, &rng) == TG_OK);
    tg_module *e2 = normed_stack(false, lin, (lopts){2, true, true, false}, 124);
    tg_tensor *s = seq(5, 2, false, 125);
    case_n("encoder_linear_norm", e2, 1, &s, TEL, NULL, NULL);
    /* a decoder's norm a Sequential: LayerNorm, then Tanh */
    cr_assert(tg_nn_layer_norm_new(&ln, 1, (const int64_t[]){D}, 1e-5, true) == TG_OK);
    cr_assert(tg_nn_sequential_new(&sq) == TG_OK);
    append(sq, ln);
    append(sq, act(TG_ACT_TANH, 0));
    tg_module *d = normed_stack(true, sq, (lopts){2, false, false, false}, 126);
    tg_tensor *t = seq(4, 2, false, 127), *mem = seq(5, 2, false, 128);
    case_graph = "\"attributes\": {\"Tanh\": {}}";
    case_n("decoder_sequential_norm", d, 2, (tg_tensor *[]){t, mem}, DEC, NULL, NULL);
    check_cases();
    tg_module *ms[3] = {e1, e2, d};
    for (int i = 0; i < 3; i++) tg_module_release(ms[i]);
    th_release_all(5, (tg_tensor *[]){s2, s3, s, t, mem});
}

static void refused(tg_module *m, int n, tg_tensor *const *xs, int rc, const char *want)
{
    char path[256];
    th_tmp_path(path, sizeof path, "kept.onnx");
    th_write_bytes(path, "kept", 4);
    int got_rc = n == 1 ? tg_onnx_export(m, xs[0], path, NULL)
                        : tg_onnx_export_n(m, n, xs, NULL, path, NULL);
    cr_assert(eq(int, got_rc, rc), "%s: %s", want, tg_error_message());
    th_expect_in(tg_error_message(), want);
    size_t len = 0;
    char *got = th_read_file(path, &len);
    cr_assert(len == 4 && strncmp(got, "kept", 4) == 0, "a refused export changed %s", path);
    free(got);
}

Test(onnx_stack, refusals_name_the_module_and_write_nothing)
{
    need_onnx();
    masks k = make_masks(2);
    tg_tensor *t = seq(4, 2, false, 100), *mem = seq(5, 2, false, 101);
    tg_tensor *ipad = NULL;
    cr_assert(tg_tensor_zeros(&ipad, TG_I32, 2, (const int64_t[]){2, 5}) == TG_OK);
    tg_module *dl = dec_layer((lopts){2, false, false, false}, 103);
    tg_module *f = transformer((lopts){2, false, false, false}, 104);
    /* one input: the decoders and the Transformer take two */
    refused(dl, 1, (tg_tensor *[]){t}, TG_EUNSUPPORTED,
            "onnx_export: module '<top>' (TransformerDecoderLayer) is not supported on its "
            "own: its forward takes tgt and memory");
    refused(f, 1, (tg_tensor *[]){t}, TG_EUNSUPPORTED,
            "module '<top>' (Transformer) is not supported on its own: its forward takes src "
            "and tgt");
    tg_module *seq_m = NULL;
    cr_assert(tg_nn_sequential_new(&seq_m) == TG_OK);
    append(seq_m, tg_module_retain(dl));
    refused(seq_m, 1, (tg_tensor *[]){t}, TG_EUNSUPPORTED,
            "module '0' (TransformerDecoderLayer) is not supported on its own");
    /* the memory left out, too many inputs, an integer padding mask */
    refused(dl, 3, (tg_tensor *[]){t, NULL, k.tgt_mask}, TG_EINVAL,
            "module '<top>' (TransformerDecoderLayer) takes the graph inputs (tgt, memory[, "
            "tgt_mask[, memory_mask[, tgt_key_padding_mask[, memory_key_padding_mask]]]]), "
            "memory given, not 3");
    refused(dl, 7, (tg_tensor *[]){t, mem, NULL, NULL, NULL, NULL, k.tgt_kpm}, TG_EINVAL,
            "memory given, not 7");
    refused(dl, 6, (tg_tensor *[]){t, mem, NULL, NULL, NULL, ipad}, TG_EDTYPE,
            "graph input 5 (memory_key_padding_mask) has dtype i32; it must be u8 or f32");
    refused(f, 3, (tg_tensor *[]){t, NULL, k.src_mask}, TG_EINVAL,
            "module '<top>' (Transformer) takes the graph inputs (src, tgt[, src_mask[, ");
    refused(f, 8, (tg_tensor *[]){t, t, NULL, NULL, NULL, NULL, NULL, ipad}, TG_EDTYPE,
            "graph input 7 (memory_key_padding_mask) has dtype i32; it must be u8 or f32");
    /* a stack's final norm that does not export, named by its path */
    tg_module *layer = enc_layer((lopts){2, false, false, false}, 105), *lin = NULL, *e = NULL;
    tg_rng rng;
    tg_rng_init(&rng, 106);
    tg_rnn_opts ro = TG_RNN_OPTS_INIT;
    ro.proj_size = 2;
    cr_assert(tg_nn_lstm_new(&lin, D, 4, &ro, &rng) == TG_OK);
    cr_assert(tg_nn_transformer_encoder_new(&e, layer, 2, lin) == TG_OK);
    tg_tensor *src = seq(5, 2, false, 107);
    refused(e, 1, (tg_tensor *[]){src}, TG_EUNSUPPORTED,
            "onnx_export: module 'norm' (LSTM) with proj_size=2 is not supported");
    /* still: a MultiheadAttention takes every input */
    refused(tg_module_child(layer, "self_attn"), 3, (tg_tensor *[]){src, NULL, src}, TG_EINVAL,
            "example_inputs[1] must not be NULL");
    free_masks(k);
    th_release_all(4, (tg_tensor *[]){t, mem, ipad, src});
    tg_module *ms[6] = {dl, f, seq_m, layer, lin, e};
    for (int i = 0; i < 6; i++) tg_module_release(ms[i]);
}
