/* tests/onnx_cases.h - writing and checking the cases of the ONNX export
 * tests (test_onnx.c, test_onnx_conv.c, test_onnx_int8.c,
 * test_onnx_resample.c, test_onnx_act.c; onnx_cases.c).
 *
 * Each case writes <name>.onnx, the input and tapegrad's output (raw f32)
 * and <name>.json (shapes, tolerances, the expected initializer names,
 * ONNX Runtime's optimization level) into the test's temporary folder;
 * check_cases then runs onnx's checker (tests/onnx/check.py) and ONNX
 * Runtime (tests/onnx/run.mjs) over the folder. */
#ifndef TG_TESTS_ONNX_CASES_H
#define TG_TESTS_ONNX_CASES_H

#include <stddef.h>

#include "tapegrad/tapegrad.h"

/* The suites' .init: a new temporary folder (.fini: th_tmp_dir_remove). */
void onnx_setup(void);

/* Skips the test where the library was built without ONNX support. */
void need_onnx(void);

/* Runs m (eval, no grad) on x: a new reference. */
tg_tensor *forward(tg_module *m, tg_tensor *x);

/* Writes t's values as raw f32 to <name><ext> in the temporary folder. */
void write_f32(const char *name, const char *ext, const tg_tensor *t);

/* What write_expected adds to the next case's .json: ONNX Runtime's
 * graphOptimizationLevel (NULL: run.mjs's "all"), the initializers
 * whose types check.py checks ("name": "UINT8" pairs, NULL for none) and
 * what it checks of the graph (a JSON fragment with "ops", "attributes",
 * "initializer_values"; NULL for none).  Reset after each case. */
extern const char *case_level;
extern const char *case_types;
extern const char *case_graph;

/* The outputs beyond the first of the next case (tg_onnx_options'
 * extra_outputs): writes ys[i] to <name>.out<i+1>.f32 and lists them,
 * named names[i], as the .json's "extra_outputs", which run.mjs compares
 * with ONNX Runtime's outputs of those names (the same tolerances), also
 * requiring the graph to have no other outputs.  Reset after each case. */
void case_extra_outputs(const char *name, int n, tg_tensor *const *ys, const char *const *names);

/* The files of case `name` but its .onnx: the input x, tapegrad's output y
 * and <name>.json; inits (NULL-terminated, or NULL to skip the check) are
 * the initializer names the file must hold. */
void write_expected(const char *name, const tg_tensor *x, const tg_tensor *y, double rtol,
                    double atol, const char *const *inits);

/* Exports m on x as case `name`, with its expected output m(x). */
void write_case(const char *name, tg_module *m, tg_tensor *x, double rtol, double atol,
                const char *const *inits, const tg_onnx_options *o);

/* Runs m (eval, no grad) on its n inputs xs: a new reference. */
tg_tensor *forward_n(tg_module *m, int n, tg_tensor *const *xs);

/* write_expected for a graph of n inputs xs named names (NULL: input_0,
 * ...): <name>.in<i>.f32 (or .uint8, .int64, .int32) and "inputs" in the
 * .json; a NULL xs[i] (an optional input left out) is skipped. */
void write_expected_n(const char *name, int n, tg_tensor *const *xs, const char *const *names,
                      const tg_tensor *y, double rtol, double atol, const char *const *inits);

/* Exports m on its n inputs xs (tg_onnx_export_n) as case `name`, with
 * its expected output. */
void write_case_n(const char *name, tg_module *m, int n, tg_tensor *const *xs,
                  const char *const *names, double rtol, double atol, const char *const *inits,
                  const tg_onnx_options *o);

/* The checker and ONNX Runtime over every case of the folder. */
void check_cases(void);

/* One Conv or ConvTranspose: spatial dims, channels, groups, and per axis
 * kernel, stride, dilation, padding before and after, output padding and
 * the input's extent. */
typedef struct conv_case {
    const char *name;
    bool transpose;
    int ns;
    int64_t c_in, c_out, groups;
    int64_t k[3], stride[3], dil[3], lo[3], hi[3], outpad[3], in[3];
    tg_activation act;
    bool bias;
    tg_pad_mode mode;   /* padding_mode */
} conv_case;

/* The conv / convT sweep's cases (n_conv_cases of them): every rank, both
 * directions, asymmetric padding, groups and fused activations. */
extern const conv_case conv_cases[];
extern const size_t n_conv_cases;

/* The module of case c, its weights drawn from rng: a new reference. */
tg_module *conv_module(const conv_case *c, tg_rng *rng);

/* A uniform input of case c's shape with the given batch. */
tg_tensor *conv_input(const conv_case *c, int64_t batch, uint64_t seed);

/* Appends m to seq (asserting). */
void append(tg_module *seq, tg_module *m);

/* An activation module: a new reference. */
tg_module *act(tg_activation a, double slope);

/* The generator of examples/dcgan/model.h (nz 16, C 8) after a few
 * training-mode forwards, so its running statistics are not (0, 1). */
tg_module *dcgan_generator(void);

/* Appends printf output to the string buf of size bytes. */
void __attribute__((format(printf, 3, 4))) jcat(char *buf, size_t size, const char *fmt, ...);

/* The dims of the graph output of <name>.onnx in the temporary folder as
 * the file declares them, "d0,d1,..." with a symbolic dim by its name
 * ("batch,3"; "" for 0-d), read by onnx's Python package: a new string. */
char *onnx_output_dims(const char *name);

/* Case `name` of a module of two inputs: exported with a dynamic batch on
 * xs (rtol 1e-5, atol 1e-6), its output's declared dims checked to be
 * out_dims, then run by ONNX Runtime on xr, inputs of another batch,
 * against m's forward on them. */
void dynamic_case2(const char *name, tg_module *m, tg_tensor *const *xs, tg_tensor *const *xr,
                   const char *out_dims);

/* tg_onnx_export_n(m, n, xs, names) must return rc with want in its
 * message and leave an existing file at its path unchanged. */
void refused_export_n(tg_module *m, int n, tg_tensor *const *xs, const char *const *names, int rc,
                      const char *want);

#endif
