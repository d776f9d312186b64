#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_hardtanh, tg_relu6, tg_hardsigmoid,
tg_hardswish and tg_mish (tests/test_hardact.c):
tests/golden/hardact.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_hardact_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32,
f64 or bf16), case<i>.op (hardtanh, relu6, hardsigmoid, hardswish or mish)
and, for hardtanh, case<i>.min and case<i>.max; tensors in that dtype:
case<i>.x (the special points first: the kinks -3, 3, the bounds, +-0,
+-inf, NaN and others, then random values in [-8, 8]), case<i>.g (the
gradient of y), case<i>.y = the op of x and case<i>.dx, torch.autograd's
gradient of sum(g * y).

The special points come first so that torch's vectorized kernels compute
them, as they do nearly every element of a tensor (its scalar tail loop
differs at NaN and, for hardswish, at 3).  torch 1.13 has no bf16
hardtanh_backward and no bf16 mish on the CPU: those bf16 cases are the f32
op on the same numbers (hardtanh's gradient is g or 0, exact) and, for
mish, the f64 op, each rounded once to bf16.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "hardact.safetensors")
SEED = 6613
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
SPECIAL = [-3.0, 3.0, 0.0, -0.0, float("inf"), -float("inf"), float("nan"), -6.0, 6.0,
           -1.0, 1.0, -2.5, 2.5, 20.0, -20.0, 100.0, -100.0]
# (op, min, max, the torch function)
OPS = [("hardtanh", -1.0, 1.0, lambda x: F.hardtanh(x, -1.0, 1.0)),
       ("hardtanh", -0.25, 2.5, lambda x: F.hardtanh(x, -0.25, 2.5)),
       ("relu6", None, None, F.relu6),
       ("hardsigmoid", None, None, F.hardsigmoid),
       ("hardswish", None, None, F.hardswish),
       ("mish", None, None, F.mish)]


def run(f, x, g, dt):
    """y and dx of f at x with output gradient g, computed in dtype dt and
    rounded to x's dtype."""
    xr = x.to(dt).requires_grad_()
    y = f(xr)
    (dx,) = torch.autograd.grad(y, (xr,), g.to(dt))
    return y.detach().to(x.dtype), dx.to(x.dtype)


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for op, lo, hi, f in OPS:
            x = torch.rand(200, dtype=torch.float64) * 16 - 8
            x = torch.cat([torch.tensor(SPECIAL, dtype=torch.float64), x]).to(dt)
            g = torch.randn(x.shape, dtype=torch.float64).to(dt)
            via = dt
            if dt == torch.bfloat16 and op in ("hardtanh", "relu6"):
                via = torch.float32
            if dt == torch.bfloat16 and op == "mish":
                via = torch.float64
            y, dx = run(f, x, g, via)
            p = "case%d." % i
            for k, v in (("x", x), ("g", g), ("y", y), ("dx", dx)):
                tensors[p + k] = v.contiguous()
            meta.update({p + "dtype": name, p + "op": op})
            if lo is not None:
                meta.update({p + "min": repr(lo), p + "max": repr(hi)})
            i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
