/* src/onnx_none.c - tg_onnx_export in a library built without protobuf-c
 * (meson option onnx=disabled, or protobuf-c / onnx.proto not found). */
#include "core/core.h"
#include "tapegrad/onnx.h"

int tg_onnx_export(tg_module *m, tg_tensor *example_input, const char *path,
                   const tg_onnx_options *opt)
{
    (void)m, (void)example_input, (void)path, (void)opt;
    return tg__error(TG_EUNSUPPORTED, "onnx_export: tapegrad was built without ONNX support "
                     "(needs protobuf-c and onnx.proto: meson option onnx)");
}

int tg_onnx_export_n(tg_module *m, int n_inputs, tg_tensor *const *example_inputs,
                     const char *const *input_names, const char *path,
                     const tg_onnx_options *opt)
{
    (void)n_inputs, (void)input_names;
    return tg_onnx_export(m, example_inputs ? example_inputs[0] : NULL, path, opt);
}

bool tg_onnx_available(void) { return false; }
