#!/usr/bin/env python3
"""Calls every public function (each TG_API prototype in include/tapegrad) with
bad arguments, one call per child process, against a sanitizer build, and lists
the calls that crashed, aborted or drew a sanitizer report.  The brief's rule:
a bad argument from a caller is never an abort or a crash.

    python3 scripts/api_sweep.py [--build build-asan]

Three rounds: every argument NULL or zero; then valid small tensors with
integers -1, and with integers 2^30 and doubles NaN (shapes and int arrays
hold the same values).  Functions whose contract makes the harness itself
wrong are skipped (they steal or free their argument, write into a caller's
buffer of a stated size, or read a caller's array of a stated length):
see SKIP.  Exit status 1 when anything is listed.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = {
    "tg_module_add_parameter", "tg_module_add_buffer", "tg_tensor_set_grad",  # steal t
    "tg_scope_add",                            # steals t
    "tg_tensor_release", "tg_tensor_retain",   # the harness releases t itself
    "tg_shape_str",                            # writes n bytes into buf
    "tg_feature_stats",                        # writes d and d*d doubles
    "tg_grad", "tg_cat", "tg_stack",           # read n entries of an array
    "tg_block_diag",
    "tg_zero_partition",                       # reads numel[0..n), writes owner[0..n)
    "tg_zero_partition_groups",                # reads n_params[0..n_groups) and numel
    "tg_pad_sequence", "tg_pack_sequence",
    "tg_split", "tg_split_size", "tg_chunk", "tg_unbind",   # write cap pieces
    "tg_clip_grad_norm", "tg_clip_grad_value",
    "tg_dist_abort",                           # ends the process (MPI_Abort) by contract
    "tg_dist_init", "tg_dist_init_comm",       # join an MPI job: an mpirun's, or MPI_Init'ed
}
INTS = ("int", "int64_t", "size_t", "long", "int32_t")
UINTS = ("uint64_t", "uint32_t", "unsigned")


def prototypes():
    src = "".join(open(h).read() + "\n"
                  for h in sorted(glob.glob(os.path.join(ROOT, "include/tapegrad/*.h"))))
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    return re.findall(r"TG_API\s+([^;(]*?)\b(tg_\w+)\s*\(([^;]*?)\)\s*;", src, flags=re.S)


def split_params(params):
    parts, cur, depth = [], "", 0
    for ch in " ".join(params.split()):
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch in "([{"
        depth -= ch in ")]}"
        cur += ch
    parts.append(cur.strip())
    return [p for p in parts if p and p not in ("void", "...")]


def argument(p, mode):
    """The C expression passed for parameter declaration p in round mode."""
    q = p.replace("const ", "")
    ival = {"null": "0", "neg": "-1", "big": "(1 << 30)"}[mode]
    if "(*" in p:
        return "NULL"
    if mode != "null":
        if re.match(r"tg_tensor \*\s*\*", q):
            return "arr" if "*const" in p.replace(" ", "") else "&out"
        for pat, expr in ((r"tg_tensor \*", "t"), (r"int64_t (\*|\w+\[)", "shp"),
                          (r"int \*", "ints"), (r"double \*", "dbl"), (r"char \*", '"x"')):
            if re.match(pat, q):
                return expr
    if "*" in p or "[" in p:
        return "NULL"
    typ = re.sub(r"\b\w+$", "", p).strip().replace("const ", "")
    if typ in INTS:
        return ival
    if typ in UINTS:
        return "0"
    if typ in ("double", "float"):
        return {"null": "0.0", "neg": "-1.0", "big": "NAN"}[mode]
    if typ == "bool":
        return "1"
    if typ == "tg_dtype":
        return "(tg_dtype)" + ival
    return "(%s){0}" % typ


def harness(protos, mode):
    ival = {"null": "0", "neg": "-1", "big": "(1 << 30)"}[mode]
    dval = {"null": "0", "neg": "-1.0", "big": "NAN"}[mode]
    lines = [
        "#include <math.h>", "#include <stdlib.h>", "#include <tapegrad/tapegrad.h>",
        "int main(int argc, char **argv) {",
        " if (argc < 2) return 3;",
        " tg_tensor *t = NULL, *u = NULL, *out = NULL;",
        " tg_tensor_zeros(&t, TG_F32, 2, (int64_t[]){2, 3});",
        " tg_tensor_zeros(&u, TG_F32, 2, (int64_t[]){2, 3});",
        " tg_tensor *arr[2] = {t, u};",
        " int64_t shp[8] = {2, %s, 3, %s, 1, 1, 1, 1};" % (ival, ival),
        " int ints[8] = {%s, 0, 1, %s, 0, 0, 0, 0};" % (ival, ival),
        " double dbl[8] = {%s, %s, 0, 0, 0, 0, 0, 0};" % (dval, dval),
        " (void)arr; (void)shp; (void)ints; (void)dbl;",
        " switch (atoi(argv[1])) {",
    ]
    for i, (ret, name, params) in enumerate(protos):
        args = ", ".join(argument(p, mode) for p in split_params(params))
        cast = "(void)" if ret.strip() != "void" else ""
        lines.append(" case %d: %s%s(%s); break;" % (i, cast, name, args))
    lines += [" default: return 3;", " }", " tg_tensor_release(out);",
              " tg_tensor_release(t);", " tg_tensor_release(u);", " return 0;", "}"]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-asan"))
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    protos = prototypes()
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1",
               UBSAN_OPTIONS="halt_on_error=1")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("null", "neg", "big"):
            c, exe = os.path.join(tmp, mode + ".c"), os.path.join(tmp, mode)
            open(c, "w").write(harness(protos, mode))
            subprocess.run(["cc", "-std=c17", "-w", "-fsanitize=address,undefined", c, "-o", exe,
                            "-I" + os.path.join(ROOT, "include"), "-I" + os.path.join(build, "include"),
                            "-L" + build, "-ltapegrad", "-Wl,-rpath," + build, "-lm"], check=True)
            for i, (_, name, _) in enumerate(protos):
                if name in SKIP:
                    continue
                r = subprocess.run([exe, str(i)], env=env, capture_output=True, text=True,
                                   timeout=60)
                report = re.search(r"(ERROR: \w+Sanitizer[^\n]*|runtime error:[^\n]*)", r.stderr)
                if r.returncode != 0 or report:
                    bad += 1
                    print("%-5s %-36s exit %d %s" % (mode, name, r.returncode,
                                                      report.group(1)[:120] if report else ""))
    print("api_sweep: %d functions x 3 rounds, %d skipped, %d failures"
          % (len(protos), len(SKIP), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
