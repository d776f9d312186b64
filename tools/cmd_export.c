/* tools/cmd_export.c - `tapegrad export --onnx OUT.onnx WEIGHTS.safetensors`:
 * the DCGAN generator of examples/dcgan/model.h, loaded strictly from a
 * generator file or a training checkpoint (keys "gen.net..."; its size read
 * from net.0.weight), written as an ONNX model (tapegrad/onnx.h) in eval
 * form; with --int8, first quantized by tg_quantize_model (per-channel
 * weights, u8 activations, BatchNorms folded, ReLUs fused) on --calib
 * batches of 64 latents z ~ N(0, 1) and written in QDQ form. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcgan/model.h"
#include "tapegrad/onnx.h"
#include "tapegrad/quant.h"
#include "tapegrad/tapegrad.h"
#include "tools.h"

static const char export_usage[] =
    "usage: tapegrad export --onnx OUT.onnx [options] WEIGHTS.safetensors\n"
    "Writes the DCGAN generator (examples/dcgan/model.h) held by WEIGHTS (a\n"
    "generator.safetensors or a checkpoint.safetensors of examples/dcgan) as an\n"
    "ONNX model (opset 17, input \"input\" (N, nz), output \"output\" (N, 1, 28, 28)).\n"
    "  --prefix P        key prefix of the generator (default gen when WEIGHTS has\n"
    "                    gen.net.0.weight, module when it has module.net.0.weight,\n"
    "                    as generator_ema.safetensors, else none)\n"
    "  --batch N         batch of the example input (default 1)\n"
    "  --dynamic-batch   make the batch dim symbolic (\"batch\")\n"
    "  --int8            quantize first (tg_quantize_model) and write QDQ nodes\n"
    "  --u8-weights      with --int8: the weights as u8 with zero point 128 (the same\n"
    "                    values), which ONNX Runtime multiplies without saturation\n"
    "                    on CPUs that lack VNNI (docs/onnx.md)\n"
    "  --calib N         calibration batches of 64 latents for --int8 (default 8)\n"
    "  --seed S          seed of the example input and the calibration latents (0)\n";

typedef struct export_opts {
    const char *onnx, *weights, *prefix;
    long long batch, calib, seed;
    bool dynamic_batch, int8, u8_weights;
} export_opts;

static int parse_ll(const char *s, long long lo, long long hi, long long *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) return -1;
    *v = x;
    return 0;
}

/* 0, or an exit code after printing the problem. */
static int parse(export_opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long *num = !strcmp(a, "--batch")   ? &o->batch
                         : !strcmp(a, "--calib") ? &o->calib
                         : !strcmp(a, "--seed")  ? &o->seed
                                                 : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(export_usage, stdout);
            return -1;
        } else if (!strcmp(a, "--dynamic-batch")) {
            o->dynamic_batch = true;
        } else if (!strcmp(a, "--int8")) {
            o->int8 = true;
        } else if (!strcmp(a, "--u8-weights")) {
            o->u8_weights = true;
        } else if (!strcmp(a, "--onnx") || !strcmp(a, "--prefix") || num) {
            if (!v) {
                fprintf(stderr, "tapegrad export: %s needs a value\n%s", a, export_usage);
                return TG_EXIT_USAGE;
            }
            if (num && parse_ll(v, num == &o->seed ? 0 : 1, num == &o->seed ? INT64_MAX : 65536,
                                num) < 0) {
                fprintf(stderr, "tapegrad export: bad value '%s' for %s: an integer in %s\n", v,
                        a, num == &o->seed ? "0..2^63-1" : "1..65536");
                return TG_EXIT_USAGE;
            }
            if (!strcmp(a, "--onnx")) o->onnx = v;
            if (!strcmp(a, "--prefix")) o->prefix = v;
            i++;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tapegrad export: unknown option '%s'\n%s", a, export_usage);
            return TG_EXIT_USAGE;
        } else if (o->weights) {
            fprintf(stderr, "tapegrad export: one WEIGHTS file, got '%s' and '%s'\n",
                    o->weights, a);
            return TG_EXIT_USAGE;
        } else {
            o->weights = a;
        }
    }
    if (!o->onnx || !o->weights) {
        fprintf(stderr, "tapegrad export: --onnx OUT.onnx and a WEIGHTS file are required\n%s",
                export_usage);
        return TG_EXIT_USAGE;
    }
    if (o->u8_weights && !o->int8) {
        fprintf(stderr, "tapegrad export: --u8-weights applies to int8 weights: add --int8\n%s",
                export_usage);
        return TG_EXIT_USAGE;
    }
    return 0;
}

/* The generator of f under prefix, loaded strictly, in *g. */
static int load_generator(tg_module **g, const tg_st_file *f, const char *prefix)
{
    char key[TG_MODULE_NAME_MAX];
    snprintf(key, sizeof key, "%s%snet.0.weight", prefix, prefix[0] ? "." : "");
    dcgan_arch a = DCGAN_ARCH_INIT;
    tg_rng rng;
    tg_rng_init(&rng, 0);
    int rc = dcgan_arch_from_generator_weight(&a, tg_st_get(f, key), key);
    if (rc >= 0) rc = dcgan_generator_new(g, &a, &rng);
    if (rc >= 0) rc = tg_module_load_state_dict(*g, f, prefix, true);
    return rc;
}

/* tg_quantize_model on o->calib batches of 64 latents. */
static int quantize(tg_module **q, tg_module *g, int64_t nz, const export_opts *o, tg_rng *rng)
{
    tg_tensor **calib = calloc((size_t)o->calib, sizeof *calib);
    if (!calib) return tg_error_set(TG_ENOMEM, "out of memory");
    int rc = TG_OK;
    for (long long i = 0; i < o->calib && rc >= 0; i++) rc = dcgan_latents(&calib[i], 64, nz, rng);
    if (rc >= 0) rc = tg_quantize_model(q, g, (int)o->calib, calib, NULL);
    for (long long i = 0; i < o->calib; i++) tg_tensor_release(calib[i]);
    free(calib);
    return rc;
}

int tg_cmd_export(int argc, char **argv)
{
    export_opts o = {.batch = 1, .calib = 8};
    int code = parse(&o, argc, argv);
    if (code) return code < 0 ? TG_EXIT_OK : code;
    tg_st_file *f = NULL;
    tg_module *g = NULL, *q = NULL;
    tg_tensor *z = NULL;
    tg_rng rng;
    tg_rng_init(&rng, (uint64_t)o.seed);
    const char *step = "reading";
    int rc = tg_safetensors_load(&f, o.weights);
    const char *prefix = o.prefix                                  ? o.prefix
                         : f && tg_st_get(f, "gen.net.0.weight")    ? "gen"
                         : f && tg_st_get(f, "module.net.0.weight") ? "module"
                                                                    : "";
    if (rc >= 0) {
        step = "loading the generator from";
        rc = load_generator(&g, f, prefix);
    }
    const int64_t nz = rc >= 0 ? tg_tensor_dim(tg_module_find(g, "net.0.weight"), 1) : 0;
    if (rc >= 0 && o.int8) {
        step = "quantizing the generator of";
        rc = quantize(&q, g, nz, &o, &rng);
    }
    if (rc >= 0) rc = dcgan_latents(&z, o.batch, nz, &rng);
    tg_onnx_options oo = TG_ONNX_OPTIONS_INIT;
    oo.dynamic_batch = o.dynamic_batch;
    oo.u8_weights = o.u8_weights;
    oo.graph_name = o.int8 ? "dcgan_generator_int8" : "dcgan_generator";
    if (rc >= 0) {
        step = "exporting the generator of";
        rc = tg_onnx_export(q ? q : g, z, o.onnx, &oo);
    }
    if (rc < 0) {
        fprintf(stderr, "tapegrad export: %s %s: %s\n", step, o.weights, tg_error_message());
    } else {
        const int64_t c = tg_tensor_dim(tg_module_find(g, "net.0.weight"), 0) / 49;
        printf("tapegrad export: generator nz=%lld C=%lld from %s (prefix '%s') -> %s (%s, "
               "opset 17)\n", (long long)nz, (long long)c, o.weights, prefix, o.onnx,
               o.int8 ? (o.u8_weights ? "int8 QDQ, u8 weights" : "int8 QDQ") : "f32");
    }
    tg_tensor_release(z);
    tg_module_release(q);
    tg_module_release(g);
    tg_st_free(f);
    return rc < 0 ? TG_EXIT_FAIL : TG_EXIT_OK;
}
