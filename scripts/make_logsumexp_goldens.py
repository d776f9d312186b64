#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_logsumexp (tests/test_logsumexp.c):
tests/golden/logsumexp.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_logsumexp_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32,
f64 or bf16), case<i>.dims ("" for every dim, else "1" or "0,2") and
case<i>.keepdim ("0" or "1"), and tensors in that dtype: case<i>.x,
case<i>.g (the gradient of y), case<i>.y = torch.logsumexp(x, dims,
keepdim) and case<i>.dx, torch.autograd's gradient of sum(g * y).  The
bf16 cases also hold case<i>.y64 and case<i>.dx64, the same in f64 from
the bf16 x and g.  The f64 cases with "case<i>.h" also hold case<i>.ddx:
the gradient of sum(h * dx) in x, dx taken with create_graph.

The random x (4, 5, 6) spans [-30, 30) with a slice near 80 (whose exp
overflows f32).  The "specials" x (5, 3), reduced over dim 1, holds a row
of -inf, a row with +inf, a row with +inf and -inf, a row with NaN and a
row with one -inf; torch's gradient is NaN in the first three.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "logsumexp.safetensors")
SEED = 7411
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
DIMS = (((0, 1, 2), False, ""), ((1,), False, None), ((0, 2), True, None),
        ((-1,), True, None), ((1,), True, None))
INF = math.inf
SPECIALS = [[-INF, -INF, -INF], [INF, 1.0, -2.0], [INF, -INF, 0.0],
            [1.0, math.nan, 2.0], [-INF, 3.0, 4.0]]


def random_x():
    x = torch.rand(4, 5, 6, dtype=torch.float64) * 60 - 30
    x[1, 2, :] = 80.0 + torch.rand(6, dtype=torch.float64)
    return x


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0

    def add(name, dt, dims, keepdim, label, x, second):
        nonlocal i
        x = x.to(dt)
        xr = x.clone().requires_grad_()
        y = torch.logsumexp(xr, dims, keepdim)
        g = torch.randn(y.shape, dtype=torch.float64).to(dt)
        (dx,) = torch.autograd.grad(y, (xr,), g, create_graph=second)
        p = "case%d." % i
        out = {"x": x, "g": g, "y": y, "dx": dx}
        if dt == torch.bfloat16:
            x64 = x.double().requires_grad_()
            y64 = torch.logsumexp(x64, dims, keepdim)
            (dx64,) = torch.autograd.grad(y64, (x64,), g.double())
            out.update({"y64": y64, "dx64": dx64})
        if second:
            h = torch.randn(x.shape, dtype=torch.float64).to(dt)
            (ddx,) = torch.autograd.grad(dx, (xr,), h)
            out.update({"h": h, "ddx": ddx})
        for k, v in out.items():
            tensors[p + k] = v.detach().contiguous()
        meta.update({p + "dtype": name,
                     p + "dims": label if label is not None else ",".join(str(d) for d in dims),
                     p + "keepdim": "1" if keepdim else "0"})
        i += 1

    for name, dt in DTYPES.items():
        for dims, keepdim, label in DIMS:
            second = name == "f64" and dims in ((1,), (0, 2))
            add(name, dt, dims, keepdim, label, random_x(), second)
        add(name, dt, (1,), False, None, torch.tensor(SPECIALS, dtype=torch.float64), False)
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
