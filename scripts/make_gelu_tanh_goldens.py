#!/usr/bin/python3
"""Writes the PyTorch golden files of tg_gelu_tanh and of nn.GELU(approximate='tanh')
(tests/test_gelu_tanh.c): tests/golden/gelu_tanh.safetensors and
tests/golden/nn/gelu_tanh_seq.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_gelu_tanh_goldens.py

gelu_tanh.safetensors: case "case<i>", i < the metadata "cases", with
metadata case<i>.dtype (f32, f64 or bf16) and tensors in that dtype:
case<i>.x (random values in [-8, 8], a band in [-0.5, 0.5], large
magnitudes up to the dtype's largest and +-0, +-inf, NaN), case<i>.g (the
gradient of y), case<i>.y = F.gelu(x, approximate='tanh') and case<i>.dx,
torch.autograd's gradient of sum(g * y).  x holds 528 elements, a multiple
of 16, so that torch's vectorized kernel computes every one.  fma_f32.x
and fma_f64.x: inputs where torch's value hangs on its kernel computing
x + kappa x^3 as one fused multiply-add, and fma_<dtype>.y its values.

nn/gelu_tanh_seq.safetensors: Linear(6, 8) -> GELU(approximate='tanh') ->
Linear(8, 4), in the layout of scripts/make_nn_goldens.py's cases.
"""
import math
import os
import sys
from fractions import Fraction

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_nn_goldens import OUT_DIR, case  # noqa: E402
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "gelu_tanh.safetensors")
SEED = 8161
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
INF, NAN = float("inf"), float("nan")
SPECIAL = [0.0, -0.0, INF, -INF, NAN, 1e-30, -1e-30, 10.0, -10.0, 30.0, -30.0,
           1e3, -1e3, 1e13, -1e13, 1e30, -1e30]


def inputs(dt):
    big = torch.finfo(dt).max
    x = torch.cat([torch.rand(400, dtype=torch.float64) * 16 - 8,
                   torch.rand(96, dtype=torch.float64) - 0.5,
                   torch.tensor(SPECIAL + [big, -big], dtype=torch.float64).clamp(-big, big)])
    pad = -x.numel() % 16
    x = torch.cat([x, torch.rand(pad, dtype=torch.float64) * 6 - 3])
    return x.to(dt)


def fma(a, b, c, dt):
    """a * b + c rounded once to dt (f32: through double, exact but for
    halfway cases that the selection below would not keep)."""
    v = [float(Fraction(float(p)) * Fraction(float(q)) + Fraction(float(r)))
         for p, q, r in zip(a.tolist(), b.tolist(), c.tolist())]
    return torch.tensor(v, dtype=torch.float64).to(dt)


def contraction_inputs(dt, n=48):
    """n inputs in [-6, 6] where the contraction of x + kappa x^3 into one
    fused multiply-add decides torch's result: its value differs from the
    unfused steps' (both with torch's tanh), and equals the fused steps'
    where tanh of the fused argument, correctly rounded in f32 (libm's in
    f64), is torch's tanh, so that it does not hang on tanh's last bit."""
    beta = torch.tensor(math.sqrt(2) * (2 / math.sqrt(math.pi)) * 0.5, dtype=dt)
    kappa = torch.tensor(0.044715, dtype=dt)
    x = (torch.rand(1 << 16, dtype=torch.float64) * 12 - 6).to(dt)
    y = F.gelu(x, approximate="tanh")
    x3 = x * x * x
    unfused = beta * (x + kappa * x3)
    fused = beta * fma(kappa.expand_as(x3), x3, x, dt)
    t = torch.tanh(fused)
    if dt == torch.float32:
        own = torch.tanh(fused.double()).to(dt)
    else:
        own = torch.tensor([math.tanh(v) for v in fused.tolist()], dtype=dt)
    pick = ((0.5 * x * (1 + torch.tanh(unfused)) != y) & (0.5 * x * (1 + t) == y) & (own == t))
    return x[pick][:n]


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name in ("f32", "f64"):
        x = contraction_inputs(DTYPES[name])
        assert x.numel() >= 32, (name, x.numel())
        tensors["fma_%s.x" % name] = x
        tensors["fma_%s.y" % name] = F.gelu(x, approximate="tanh")
    for name, dt in DTYPES.items():
        x = inputs(dt)
        g = torch.randn(x.shape, dtype=torch.float64).to(dt)
        xr = x.clone().requires_grad_()
        y = F.gelu(xr, approximate="tanh")
        (dx,) = torch.autograd.grad(y, (xr,), g)
        p = "case%d." % i
        for k, v in (("x", x), ("g", g), ("y", y), ("dx", dx)):
            tensors[p + k] = v.detach().contiguous()
        meta[p + "dtype"] = name
        i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)
    os.makedirs(OUT_DIR, exist_ok=True)
    model = nn.Sequential(nn.Linear(6, 8), nn.GELU(approximate="tanh"), nn.Linear(8, 4))
    case("gelu_tanh_seq", model, (5, 6))


if __name__ == "__main__":
    main()
