#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_vector_norm (tests/test_vector_norm.c):
tests/golden/vector_norm.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_vector_norm_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32,
f64 or bf16), case<i>.ord (a float's repr: "inf", "-inf", "2.0", ...),
case<i>.dims ("" for every dim, else "1" or "0,2") and case<i>.keepdim ("0"
or "1"), and tensors in that dtype: case<i>.x, case<i>.g (the gradient of
y), case<i>.y = torch.linalg.vector_norm(x, ord, dims, keepdim) and
case<i>.dx, torch.autograd's gradient of sum(g * y) (zeros for ord 0,
whose gradient torch leaves undefined).

The random x (4, 5, 6) holds zeros and a slice of zeros (a norm of 0).
The "specials" x (6, 3), reduced over dim 1, holds a row of zeros, NaN
after a number, +-inf, a small value, -0.0, and a row whose squares
underflow f64 (a norm of 0 with non-zero elements, whose gradient torch
masks to 0).

The bf16 cases also hold case<i>.y64 and case<i>.dx64, the same in f64
from the bf16 x and g (torch's bf16 kernel sums in bf16 steps: its norm of
120 elements can be 1% off).  The f64 cases with "case<i>.h" also hold
case<i>.ddx: the gradient of sum(h * dx) in x, dx taken with create_graph
(the second derivative).

"second<k>", k < the metadata "seconds": second<k>.x (3 elements, some 0),
second<k>.h and second<k>.ddx as above, for the whole x with ord
second<k>.ord (2, 3, 0.5, -1); torch's ddx is NaN at the zeros.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "vector_norm.safetensors")
SEED = 6211
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
ORDS = (2.0, 1.0, math.inf, -math.inf, 0.0, 3.0, 0.5, -1.0, 1.5)
DIMS = ((None, False), ((1,), False), ((0, 2), True), ((-1,), True))
SPECIALS = [[0.0, 0.0, 0.0], [1.0, math.nan, 2.0], [math.inf, 1.0, -2.0],
            [1e-3, -0.0, 5.0], [-3.0, 4.0, 0.5], [1e-170, -2e-170, 0.0]]


def random_x():
    x = torch.rand(4, 5, 6, dtype=torch.float64) * 6 - 3
    x[x.abs() < 0.3] = 0.0
    x[2, 1, :] = 0.0
    return x


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0

    def add(name, dt, ord_, dims, keepdim, x, second):
        nonlocal i
        x = x.to(dt)
        xr = x.clone().requires_grad_()
        y = torch.linalg.vector_norm(xr, ord_, dims, keepdim)
        g = torch.randn(y.shape, dtype=torch.float64).to(dt)
        (dx,) = torch.autograd.grad(y, (xr,), g, create_graph=second, allow_unused=True)
        if dx is None:   # ord 0: torch's gradient is undefined, which is zero
            dx = torch.zeros_like(x)
        p = "case%d." % i
        out = {"x": x, "g": g, "y": y, "dx": dx}
        if dt == torch.bfloat16:   # torch's bf16 sums round in bf16 steps
            x64 = x.double().requires_grad_()
            y64 = torch.linalg.vector_norm(x64, ord_, dims, keepdim)
            (dx64,) = torch.autograd.grad(y64, (x64,), g.double(), allow_unused=True)
            out.update({"y64": y64, "dx64": torch.zeros_like(x64) if dx64 is None else dx64})
        if second:
            h = torch.randn(x.shape, dtype=torch.float64).to(dt)
            (ddx,) = torch.autograd.grad(dx, (xr,), h)
            out.update({"h": h, "ddx": ddx})
        for k, v in out.items():
            tensors[p + k] = v.detach().contiguous()
        meta.update({p + "dtype": name, p + "ord": repr(float(ord_)),
                     p + "dims": ",".join(str(d) for d in dims) if dims else "",
                     p + "keepdim": "1" if keepdim else "0"})
        i += 1

    for name, dt in DTYPES.items():
        for ord_ in ORDS:
            for dims, keepdim in DIMS:
                second = name == "f64" and ord_ in (2.0, 3.0, 1.5) and dims == (1,)
                add(name, dt, ord_, dims, keepdim, random_x(), second)
            add(name, dt, ord_, (1,), False, torch.tensor(SPECIALS, dtype=torch.float64), False)
    meta["cases"] = str(i)
    # second derivatives at a zero: torch's are NaN there (0 * inf in the
    # branch its masked_fill drops), its values elsewhere are the oracle
    zero_rows = {2.0: [0.0, 0.0, 0.0], 3.0: [0.0, 0.0, 0.0], 0.5: [0.0, 1.5, -2.0],
                 -1.0: [0.0, 1.5, -2.0]}
    for k, (ord_, row) in enumerate(zero_rows.items()):
        x = torch.tensor(row, dtype=torch.float64, requires_grad=True)
        h = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
        (dx,) = torch.autograd.grad(torch.linalg.vector_norm(x, ord_), (x,), create_graph=True)
        (ddx,) = torch.autograd.grad((dx * h).sum(), (x,))
        p = "second%d." % k
        for name, v in (("x", x), ("h", h), ("ddx", ddx)):
            tensors[p + name] = v.detach().contiguous()
        meta[p + "ord"] = repr(ord_)
    meta["seconds"] = str(len(zero_rows))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
