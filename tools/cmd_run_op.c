/* tools/cmd_run_op.c - `tapegrad run-op --in CASE --out RESULT [--algo A]`.
 *
 * Runs the conv op described by a case file (see case.h) and writes y and,
 * when the case has grad_y, the gradients into a result file.  Quantized
 * cases (op quantized_*) run the integer ops of tapegrad/quant.h.  Errors print
 * "tapegrad run-op: <message>" and exit 1; usage errors exit 2.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "case.h"
#include "tapegrad/status.h"
#include "tools.h"

static const char run_op_usage[] =
    "usage: tapegrad run-op --in CASE.safetensors --out RESULT.safetensors\n"
    "                       [--algo reference|fast]\n"
    "CASE holds x, weight, [bias], [grad_y] and metadata op, stride, padding,\n"
    "output_padding, dilation, groups, activation, padding_mode (zeros,\n"
    "reflect, replicate, circular: conv only).  RESULT receives y and, with\n"
    "grad_y, grad_x, grad_weight and grad_bias.\n"
    "Quantized ops (op quantized_conv2d, quantized_conv_transpose2d, ...): x U8/I8,\n"
    "weight I8, [bias F32], metadata x_scale, x_zero_point, weight_scale (one, or\n"
    "one per output channel), y_scale, y_zero_point; RESULT holds y in x's dtype.\n";

static int run(const tg_case_args *a)
{
    char err[1024] = "";
    tg_st_file *in = NULL, *res = NULL;
    tg_case c;
    int rc = tg_safetensors_load(&in, a->in);
    if (rc < 0)
        snprintf(err, sizeof err, "cannot read %s: %s", a->in, tg_error_message());
    if (rc >= 0)
        rc = tg_case_parse(&c, in, err, sizeof err);
    if (rc >= 0)
        rc = tg_case_run(&res, &c, a->algo, err, sizeof err);
    if (rc >= 0) {
        rc = tg_safetensors_save(res, a->out);
        if (rc < 0)
            snprintf(err, sizeof err, "cannot write %s: %s", a->out, tg_error_message());
    }
    tg_st_free(res);
    tg_st_free(in);
    if (rc < 0) {
        fprintf(stderr, "tapegrad run-op: %s\n", err);
        return TG_EXIT_FAIL;
    }
    return TG_EXIT_OK;
}

int tg_cmd_run_op(int argc, char **argv)
{
    tg_case_args a;
    int code = tg_tool_case_args("run-op", run_op_usage, argc, argv, &a);
    if (code >= 0)
        return code;
    /* The result would replace the case it came from. */
    struct stat si, so;
    if (stat(a.in, &si) == 0 && stat(a.out, &so) == 0 && si.st_dev == so.st_dev &&
        si.st_ino == so.st_ino) {
        fprintf(stderr, "tapegrad run-op: --out %s is the --in file: the result would replace "
                "the case\n", a.out);
        return TG_EXIT_USAGE;
    }
    return run(&a);
}
