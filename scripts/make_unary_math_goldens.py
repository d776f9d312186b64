#!/usr/bin/python3
"""Writes the PyTorch golden file of the rounding and elementwise math ops,
atan2 and lerp (tests/test_unary_math.c): tests/golden/unary_math.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_unary_math_goldens.py

For each op in the metadata "ops" (comma-separated) and dtype d in (f32,
f64, bf16), tensors in d: <op>.<d>.x (random values in the op's range, then
+-0, +-inf, NaN and the op's edge inputs), <op>.<d>.g (the gradient of y),
<op>.<d>.y = torch.<op>(x) and <op>.<d>.dx, torch.autograd's gradient of
sum(g * y).

Cases "atan2" (all pairs of special and unit values, then random ones) and
"atan2_bc" (y (3, 1) with x (4)): <case>.<d>.y_in, .x_in, .g, .out, .dy,
.dx.  Cases "lerp" (weights 0, 1, +-0.5, 0.49, 2, -1, NaN, +-inf and random
ones; start and end random, with specials) and "lerp_bc" (start (2, 3, 1),
end (3, 4), weight (4)): <case>.<d>.start, .end, .weight, .g, .out,
.dstart, .dend, .dweight.

Integer inputs, for d in (i8, u8, i32, i64): int.<d>.x (the dtype's
extremes and their neighbours, 0, +-1, +-2, values around 2^53 in i64,
then random ones over the whole range) and int.<d>.<op> = torch.<op>(x)
for op in the metadata "int_ops" (a tensor of dtype d).  Drawn from their
own generator, after the float cases, so those do not change.

lerp with a number weight: for the k-th weight w of the metadata
"lerp_scalar_weights" and d in (f32, f64, bf16), case "lerp_s<k>" (start
and end of 203 values: a few infinities, NaN and -0.0, then random ones)
and "lerp_s<k>_bc" (start (3, 1), end (4)): <case>.<d>.start, .end, .g, .out, .dstart, .dend.
Also from their own generator, after the integer cases.

lerp's kernel with a tensor weight, case "lerp_fused" (also from its own
generator, last): 600 weights, a third in [-0.55, -0.45] (torch's first
form for w < 0.5 where |w| >= 0.5 too), a third in [0.45, 0.55] and a
third in [-1.5, 2.5], with start and end random; the values of a fused
product and sum, one rounding, in f32 and f64.  The same names as "lerp".
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "unary_math.safetensors")
SEED = 8111
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan]
UNIT = [1.0, -1.0, 1.5, -1.5, 0.999, -0.999]
HALVES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5, 0.49999997, 1e-30, -1e-30]

# name: (torch function, low, high of the random values, edge inputs)
OPS = {
    "sign": (torch.sign, -5, 5, [1e-30, -1e-30, 1e30]),
    "floor": (torch.floor, -5, 5, HALVES),
    "ceil": (torch.ceil, -5, 5, HALVES),
    "round": (torch.round, -5, 5, HALVES + [4.5, -4.5, 1e20]),
    "trunc": (torch.trunc, -5, 5, HALVES),
    "reciprocal": (torch.reciprocal, -5, 5, [1e-30, -1e-30, 1e30, 1.0, -1.0]),
    "rsqrt": (torch.rsqrt, 0.01, 10, [-1.0, 1e-30, 1e30, 4.0]),
    "tan": (torch.tan, -1.5, 1.5, [math.pi / 2, -math.pi / 2, 100.0]),
    "atan": (torch.atan, -10, 10, [1e30, -1e30, 1.0]),
    "asin": (torch.asin, -1, 1, UNIT),
    "acos": (torch.acos, -1, 1, UNIT),
    "sinh": (torch.sinh, -5, 5, [100.0, -100.0, 1e-30]),
    "cosh": (torch.cosh, -5, 5, [100.0, -100.0, 1e-30]),
    "asinh": (torch.asinh, -10, 10, [1e30, -1e30, 1e-30]),
    "acosh": (torch.acosh, 1, 10, [1.0, 0.5, -1.0, 1e30]),
    "atanh": (torch.atanh, -1, 1, UNIT),
    "log2": (torch.log2, 0.01, 100, [1.0, 2.0, 1024.0, -1.0, 1e-30]),
    "log10": (torch.log10, 0.01, 100, [1.0, 10.0, 1000.0, -1.0, 1e-30]),
    "exp2": (torch.exp2, -10, 10, [100.0, -100.0, 200.0, -200.0, 0.5]),
    "logsigmoid": (F.logsigmoid, -20, 20, [100.0, -100.0, 800.0, -800.0, 1e-30, 30.0]),
}
PAIR_VALUES = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 1e-30]
INT_DTYPES = {"i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}
INT_OPS = ["sign", "floor", "ceil", "round", "trunc", "abs", "neg"]
LERP_S_WEIGHTS = [0.0, 1.0, 0.5, 0.3, 0.7, -0.7, 0.001, 0.0001, 0.9999, 1.3, 0.49999, -2.0,
                  0.4999999999]
WEIGHTS = [0.0, 1.0, 0.5, -0.5, 0.49, 2.0, -1.0, math.nan, math.inf, -math.inf]


def rand(n, lo, hi):
    return torch.rand(n, dtype=torch.float64) * (hi - lo) + lo


def graded(name, fn, inputs, out_names, dt, tensors):
    """Adds the inputs, a random g, fn's output and torch's gradients of
    sum(g * out) with respect to each input, all in dt."""
    xs = [t.to(dt) for _, t in inputs]
    rs = [x.clone().requires_grad_() for x in xs]
    out = fn(*rs)
    g = torch.randn(out.shape, dtype=torch.float64).to(dt)
    grads = torch.autograd.grad(out, rs, g)
    for (k, _), x in zip(inputs, xs):
        tensors.append((name + k, x.contiguous()))
    tensors.append((name + "g", g.contiguous()))
    tensors.append((name + "out", out.detach().contiguous()))
    for k, d in zip(out_names, grads):
        tensors.append((name + k, d.contiguous()))


def binary_cases(tensors):
    py = [a for a in PAIR_VALUES for _ in PAIR_VALUES]
    px = [b for _ in PAIR_VALUES for b in PAIR_VALUES]
    y = torch.cat([torch.tensor(py, dtype=torch.float64), rand(100, -5, 5)])
    x = torch.cat([torch.tensor(px, dtype=torch.float64), rand(100, -5, 5)])
    yb, xb = rand(3, -5, 5).reshape(3, 1), rand(4, -5, 5)
    ws = torch.cat([torch.tensor(WEIGHTS, dtype=torch.float64), rand(100, -1.5, 2.5)])
    n = ws.numel()
    st = torch.cat([rand(n - 3, -5, 5), torch.tensor([math.inf, math.nan, 0.0])])
    en = torch.cat([rand(n - 3, -5, 5), torch.tensor([1.0, 1.0, -0.0])])
    sb, eb, wb = rand(6, -5, 5).reshape(2, 3, 1), rand(12, -5, 5).reshape(3, 4), rand(4, -1, 2)
    for dn, dt in DTYPES.items():
        graded("atan2.%s." % dn, torch.atan2, [("y_in", y), ("x_in", x)], ["dy", "dx"], dt,
               tensors)
        graded("atan2_bc.%s." % dn, torch.atan2, [("y_in", yb), ("x_in", xb)], ["dy", "dx"],
               dt, tensors)
        names = ["dstart", "dend", "dweight"]
        graded("lerp.%s." % dn, torch.lerp, [("start", st), ("end", en), ("weight", ws)],
               names, dt, tensors)
        graded("lerp_bc.%s." % dn, torch.lerp, [("start", sb), ("end", eb), ("weight", wb)],
               names, dt, tensors)


def int_cases(tensors):
    gen = torch.Generator().manual_seed(SEED + 1)
    for dn, dt in INT_DTYPES.items():
        info = torch.iinfo(dt)
        vals = [info.min, info.min + 1, info.min + 2, info.max - 1, info.max, 0, 1, 2]
        vals += [-1, -2] if info.min < 0 else []
        vals += [2**53 + 1, -(2**53) - 1, 2**62 + 3, -(2**62) - 3] if dt == torch.int64 else []
        rnd = torch.randint(info.min, info.max, (64,), dtype=dt, generator=gen)
        x = torch.cat([torch.tensor(vals, dtype=dt), rnd])
        tensors.append(("int.%s.x" % dn, x))
        for op in INT_OPS:
            y = getattr(torch, op)(x)
            assert y.dtype == dt, (op, dn, y.dtype)
            tensors.append(("int.%s.%s" % (dn, op), y.contiguous()))


def lerp_scalar_cases(tensors):
    gen = torch.Generator().manual_seed(SEED + 2)
    n = 203
    for k, w in enumerate(LERP_S_WEIGHTS):
        st = torch.randn(n, dtype=torch.float64, generator=gen) * 3
        en = torch.randn(n, dtype=torch.float64, generator=gen) * 3
        st[:4] = torch.tensor([math.inf, 1.0, math.nan, -0.0])
        en[:4] = torch.tensor([1.0, -math.inf, 2.0, 0.0])
        sb = torch.randn(3, 1, dtype=torch.float64, generator=gen)
        eb = torch.randn(4, dtype=torch.float64, generator=gen)
        def fn(s, e, w=w):
            return torch.lerp(s, e, w)
        for dn, dt in DTYPES.items():
            graded("lerp_s%d.%s." % (k, dn), fn, [("start", st), ("end", en)],
                   ["dstart", "dend"], dt, tensors)
            graded("lerp_s%d_bc.%s." % (k, dn), fn, [("start", sb), ("end", eb)],
                   ["dstart", "dend"], dt, tensors)


def lerp_fused_cases(tensors):
    gen = torch.Generator().manual_seed(SEED + 3)
    n = 200

    def uni(lo, hi):
        return torch.rand(n, dtype=torch.float64, generator=gen) * (hi - lo) + lo

    ws = torch.cat([uni(-0.55, -0.45), uni(0.45, 0.55), uni(-1.5, 2.5)])
    st = torch.randn(3 * n, dtype=torch.float64, generator=gen) * 3
    en = torch.randn(3 * n, dtype=torch.float64, generator=gen) * 3
    names = ["dstart", "dend", "dweight"]
    for dn, dt in DTYPES.items():
        graded("lerp_fused.%s." % dn, torch.lerp, [("start", st), ("end", en), ("weight", ws)],
               names, dt, tensors)


def main():
    torch.manual_seed(SEED)
    tensors = []
    for op, (fn, lo, hi, edges) in OPS.items():
        for dn, dt in DTYPES.items():
            x = torch.rand(200, dtype=torch.float64) * (hi - lo) + lo
            x = torch.cat([x, torch.tensor(SPECIAL + edges, dtype=torch.float64)]).to(dt)
            g = torch.randn(x.shape, dtype=torch.float64).to(dt)
            xr = x.clone().requires_grad_()
            y = fn(xr)
            (dx,) = torch.autograd.grad(y, (xr,), g)
            p = "%s.%s." % (op, dn)
            for k, v in (("x", x), ("g", g), ("y", y), ("dx", dx)):
                tensors.append((p + k, v.detach().contiguous()))
    binary_cases(tensors)
    int_cases(tensors)
    lerp_scalar_cases(tensors)
    lerp_fused_cases(tensors)
    write_safetensors(OUT, tensors, {"ops": ",".join(OPS), "int_ops": ",".join(INT_OPS),
                                     "lerp_scalar_weights": ",".join(map(repr, LERP_S_WEIGHTS)),
                                     "torch": torch.__version__})
    print("wrote", OUT, "(%d tensors)" % len(tensors))


if __name__ == "__main__":
    main()
