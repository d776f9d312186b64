#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_selu, tg_celu, tg_hardshrink,
tg_softshrink, tg_threshold, tg_softsign, tg_tanhshrink, tg_glu, tg_softmin
and tg_rrelu (tests/test_activation2.c): tests/golden/activation2.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_activation2_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op (the
function's name without F.), case<i>.dtype (f32, f64 or bf16) and
case<i>.p0, case<i>.p1 (the op's parameters: alpha; lambd; threshold and
value; dim; lower and upper; unused ones 0), and tensors in that dtype:
case<i>.x, case<i>.g (the gradient of y), case<i>.y (the op's value) and
case<i>.dx, torch.autograd's gradient of sum(g * y).

x holds 256 elements (a multiple of every vector width), the special values
first: +-0, +-inf, NaN, +-100, the kinks (+-lambd, threshold, their
neighbours in the dtype), then random values in [-6, 6], so that every
element takes torch's vectorized kernels, not the scalar tail loop, whose
gradients differ at NaN.  glu's and softmin's x is 8 x 32 (glu: dim 1 or 0;
softmin: dim 1), their rows random but for a row of large values.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "activation2.safetensors")
SEED = 6211
N = 256
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
INF, NAN = float("inf"), float("nan")
SPECIAL = [0.0, -0.0, INF, -INF, NAN, -100.0, 100.0, -1e-10, 1e-10, -1e-4]

# (op, p0, p1, the function of x, the kinks)
OPS = [
    ("selu", 0, 0, F.selu, [0.0]),
    ("celu", 1.0, 0, lambda x: F.celu(x, 1.0), [0.0]),
    ("celu", 0.5, 0, lambda x: F.celu(x, 0.5), [0.0]),
    ("celu", -1.5, 0, lambda x: F.celu(x, -1.5), [0.0]),
    ("hardshrink", 0.5, 0, lambda x: F.hardshrink(x, 0.5), [0.5, -0.5]),
    ("hardshrink", 0.0, 0, lambda x: F.hardshrink(x, 0.0), [0.0]),
    ("hardshrink", 0.3, 0, lambda x: F.hardshrink(x, 0.3), [0.3, -0.3]),
    ("softshrink", 0.5, 0, lambda x: F.softshrink(x, 0.5), [0.5, -0.5]),
    ("softshrink", 1.3, 0, lambda x: F.softshrink(x, 1.3), [1.3, -1.3]),
    ("threshold", 0.5, -2.0, lambda x: F.threshold(x, 0.5, -2.0), [0.5]),
    ("threshold", -1.1, 3.7, lambda x: F.threshold(x, -1.1, 3.7), [-1.1]),
    ("softsign", 0, 0, F.softsign, []),
    ("tanhshrink", 0, 0, F.tanhshrink, []),
    ("rrelu", 0.125, 1.0 / 3.0, lambda x: F.rrelu(x, 0.125, 1.0 / 3.0, False), [0.0]),
]
ROWS = [("glu", 1, F.glu), ("glu", 0, F.glu), ("softmin", 1, F.softmin)]


def kinks_in(dt, kinks):
    """Each kink as the dtype rounds it and its neighbours there."""
    out = []
    for k in kinks:
        t = torch.tensor([k], dtype=dt)
        up = torch.nextafter(t.float(), torch.tensor([INF])).to(dt) if dt != torch.float64 \
            else torch.nextafter(t, torch.tensor([INF], dtype=dt))
        dn = torch.nextafter(t.float(), torch.tensor([-INF])).to(dt) if dt != torch.float64 \
            else torch.nextafter(t, torch.tensor([-INF], dtype=dt))
        if dt == torch.bfloat16:   # the next bf16 values, not the next f32
            bits = t.view(torch.int16).item()
            up = torch.tensor([bits + (1 if k >= 0 else -1)], dtype=torch.int16).view(dt)
            dn = torch.tensor([bits - (1 if k >= 0 else -1)], dtype=torch.int16).view(dt)
        out += [t, up, dn]
    return torch.cat(out).to(torch.float64) if out else torch.zeros(0, dtype=torch.float64)


def grads(f, x, g):
    xr = x.clone().requires_grad_()
    y = f(xr)
    (dx,) = torch.autograd.grad(y, (xr,), g)
    return y.detach(), dx


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0

    def put(op, name, p0, p1, x, g, y, dx):
        nonlocal i
        p = "case%d." % i
        for k, v in (("x", x), ("g", g), ("y", y), ("dx", dx)):
            tensors[p + k] = v.detach().contiguous()
        meta.update({p + "op": op, p + "dtype": name, p + "p0": repr(float(p0)),
                     p + "p1": repr(float(p1))})
        i += 1

    for name, dt in DTYPES.items():
        for op, p0, p1, f, kinks in OPS:
            head = torch.cat([torch.tensor(SPECIAL, dtype=torch.float64), kinks_in(dt, kinks)])
            x = torch.rand(N - head.numel(), dtype=torch.float64) * 12 - 6
            x = torch.cat([head, x]).to(dt)
            g = torch.randn(N, dtype=torch.float64).to(dt)
            y, dx = grads(f, x, g)
            put(op, name, p0, p1, x, g, y, dx)
        for op, dim, f in ROWS:
            x = torch.rand(8, 32, dtype=torch.float64) * 12 - 6
            x[3] *= 100   # large values
            x = x.to(dt)
            y0 = f(x, dim)
            g = torch.randn(y0.shape, dtype=torch.float64).to(dt)
            y, dx = grads(lambda t: f(t, dim), x, g)
            put(op, name, dim, 0, x, g, y, dx)
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
