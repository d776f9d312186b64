#!/usr/bin/python3
"""Writes tests/golden/compare.safetensors: PyTorch 1.13's torch.maximum /
torch.minimum (values and gradients), the comparisons eq, ne, lt, le, gt, ge
(tensor with tensor and tensor with a number) and torch.stack (values and
gradients), which tests/test_compare.c compares tapegrad with.

maximum and minimum, for each case C in the metadata's "mx_cases":
  mx.C.a, mx.C.b                 the inputs (broadcast together; ties, NaN,
                                 +-inf and +-0.0 among them)
  mx.C.F.y, .w, .ga, .gb         F(a, b) for F in maximum, minimum, the
                                 upstream gradient w and d sum(y * w) / da, db
Comparisons, for each case C in "cmp_cases" (tensor with tensor) and
"cmps_cases" (tensor with the number in metadata "C.s", written with %.17g):
  cmp.C.a, cmp.C.b, cmps.C.a     the inputs
  cmp.C.F, cmps.C.F              torch.F(a, b) as u8 (torch's bool), F in
                                 eq, ne, lt, le, gt, ge
stack, for each case C in "stack_cases" (metadata "C.n" tensors, "C.dims"):
  st.C.<i>                       the inputs
  st.C.D.y, .w, .g<i>            torch.stack(ts, D), the upstream gradient w
                                 and each input's gradient

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_compare_goldens.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "compare.safetensors")
SEED = 7937
D = torch.float64
INF, NAN = float("inf"), float("nan")
OPS = ("eq", "ne", "lt", "le", "gt", "ge")


def ties(gen, shape):
    """Values from a few integers (ties are likely), in f64."""
    return torch.randint(-2, 3, shape, generator=gen).to(D) * 0.5


def mx_cases(gen, out, meta):
    a = ties(gen, (3, 1, 4))
    a[0, 0, 1], a[1, 0, 2], a[2, 0, 0] = NAN, INF, -0.0
    b = ties(gen, (2, 4))
    b[0, 3], b[1, 0], b[1, 1] = NAN, 0.0, -INF
    same_a, same_b = ties(gen, (5, 3)), ties(gen, (5, 3))
    same_a[0, :] = torch.tensor([0.0, -0.0, NAN], dtype=D)
    same_b[0, :] = torch.tensor([-0.0, 0.0, NAN], dtype=D)
    cases = {"bc_f64": (a, b), "bc_f32": (a.float(), b.float()),
             "bc_bf16": (a.bfloat16(), b.bfloat16()), "same_f16": (same_a.half(), same_b.half()),
             "same_f64": (same_a, same_b),
             "mixed": (ties(gen, (3, 4)).float(), torch.tensor(0.5, dtype=D)),
             "promote": (ties(gen, (2, 3)).bfloat16(), ties(gen, (3,)).half())}
    for name, (a0, b0) in cases.items():
        out += [("mx.%s.a" % name, a0), ("mx.%s.b" % name, b0)]
        for fn in ("maximum", "minimum"):
            ai = a0.clone().requires_grad_(True)
            bi = b0.clone().requires_grad_(True)
            y = getattr(torch, fn)(ai, bi)
            w = torch.randn(y.shape, generator=gen, dtype=D).to(y.dtype)
            y.backward(w)
            out += [("mx.%s.%s.y" % (name, fn), y.detach()), ("mx.%s.%s.w" % (name, fn), w),
                    ("mx.%s.%s.ga" % (name, fn), ai.grad), ("mx.%s.%s.gb" % (name, fn), bi.grad)]
    meta["mx_cases"] = ",".join(cases)


def cmp_cases(gen, out, meta):
    x = ties(gen, (3, 4))
    x[0, 0], x[1, 1], x[2, 2] = NAN, INF, -0.0
    row = ties(gen, (4,))
    row[3] = NAN
    tenth = torch.tensor([[0.1, 0.2], [0.3, 0.1]], dtype=torch.float32)
    big = torch.tensor([16777217, 16777216, -3, 2 ** 40], dtype=torch.int64)
    cases = {"f32_row": (x.float(), row.float()),
             "f64_f64": (x, row),
             "f32_f64_0d": (tenth, torch.tensor(0.1, dtype=D)),
             "i64_f32_0d": (big, torch.tensor(16777216.0)),
             "i32_f64_0d": (torch.tensor([[1, 2], [3, 4]], dtype=torch.int32),
                            torch.tensor(2.5, dtype=D)),
             "u8_i8": (torch.tensor([[0, 5, 200, 127]], dtype=torch.uint8),
                       torch.tensor([[-1], [5], [127]], dtype=torch.int8)),
             "i64_i32": (torch.tensor([2 ** 62 + 1, -7, 3]),
                         torch.tensor([2 ** 30, -7, 4], dtype=torch.int32)),
             "f16_bf16": (x.half(), row.bfloat16()),
             "f64_i64": (x, torch.tensor([0, -1, 1, 2]))}
    for name, (a, b) in cases.items():
        out += [("cmp.%s.a" % name, a), ("cmp.%s.b" % name, b)]
        for op in OPS:
            out.append(("cmp.%s.%s" % (name, op), getattr(torch, op)(a, b).to(torch.uint8)))
    meta["cmp_cases"] = ",".join(cases)
    scases = {"f16_tenth": (torch.tensor([0.1, 0.2, 0.0999755859375, NAN]).half(), 0.1),
              "f32_tenth": (tenth, 0.1),
              "f16_big": (torch.tensor([65504.0, -65504.0, INF]).half(), 1e6),
              "bf16_third": (x.bfloat16() / 3, 1.0 / 6),
              "f64_nan": (x, NAN),
              "f64_inf": (x, INF),
              "i64_half": (torch.tensor([[2, 3], [-3, -2]]), 2.5),
              "i64_neg": (torch.tensor([[2, 3], [-3, -2]]), -2.5),
              "i32_int": (torch.tensor([1, 3, 5], dtype=torch.int32), 3.0),
              "u8_int": (torch.tensor([0, 7, 255], dtype=torch.uint8), 7.0)}
    for name, (a, s) in scases.items():
        out.append(("cmps.%s.a" % name, a))
        si = int(s) if s == s and abs(s) != INF and float(s).is_integer() else s
        for op in OPS:
            out.append(("cmps.%s.%s" % (name, op), getattr(torch, op)(a, si).to(torch.uint8)))
        meta[name + ".s"] = "%.17g" % s
    meta["cmps_cases"] = ",".join(scases)


def stack_cases(gen, out, meta):
    cases = {"f32": ([torch.randn(2, 3, generator=gen) for _ in range(3)], [0, 1, 2, -1, -3]),
             "mixed": ([torch.randn(4, generator=gen), torch.randn(4, generator=gen, dtype=D)],
                       [0, 1]),
             "scalars": ([torch.tensor(1.5), torch.tensor(-2.0), torch.tensor(3.0)], [0, -1])}
    for name, (ts, dims) in cases.items():
        for i, t in enumerate(ts):
            out.append(("st.%s.%d" % (name, i), t))
        for d in dims:
            ti = [t.clone().requires_grad_(True) for t in ts]
            y = torch.stack(ti, d)
            w = torch.randn(y.shape, generator=gen, dtype=D).to(y.dtype)
            y.backward(w)
            out += [("st.%s.%d.y" % (name, d), y.detach()), ("st.%s.%d.w" % (name, d), w)]
            for i, t in enumerate(ti):
                out.append(("st.%s.%d.g%d" % (name, d, i), t.grad))
        meta[name + ".n"] = str(len(ts))
        meta[name + ".dims"] = ",".join(str(d) for d in dims)
    meta["stack_cases"] = ",".join(cases)


def main():
    gen = torch.Generator().manual_seed(SEED)
    out, meta = [], {"torch": torch.__version__}
    mx_cases(gen, out, meta)
    cmp_cases(gen, out, meta)
    stack_cases(gen, out, meta)
    write_safetensors(OUT, out, meta)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
