#!/usr/bin/python3
"""Writes tests/golden/elementwise.safetensors: PyTorch 1.13's values for
the elementwise ops where tests/test_ops.c and tests/test_activation.c check
tapegrad bit for bit.

  relu.x.<d>, relu.y.<d>      torch.relu, d in (f32, f64): random values
                              and the special ones (+-0, +-inf, NaN, tiny)
  leaky.x.<d>, leaky.y.<d>    F.leaky_relu(x, 0.2), d in (f32, f64, bf16;
                              torch has no f16 leaky_relu on the CPU)
  pows.x.<d>, pows.y<k>.<d>   torch.pow(x, p) for a Python number p
                              (k 0: 1.7, k 1: -1.3), d in (f32, f16,
                              bf16): torch converts p to d first
  powgrad.a, powgrad.b        f64 bases and exponents around the special
                              points (base 0, negative base, exponent 0)
  powgrad.ga, powgrad.gb      torch.autograd's d(a ** b)/da and /db there

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_ew_goldens.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "elementwise.safetensors")
SEED = 7949
SPECIAL = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40, -1e-40,
           1e-300, -1e-300, 1.0, -1.0]
POW_EXPONENTS = (1.7, -1.3)
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}


def inputs(gen, dt):
    x = torch.rand(1000, generator=gen, dtype=torch.float64) * 20 - 10
    return torch.cat([x, torch.tensor(SPECIAL, dtype=torch.float64)]).to(dt)


def pow_grads():
    """torch's gradients of a ** b at every pair of the listed values."""
    av = [0.0, -0.0, -2.0, -0.5, 0.5, 2.0, float("inf"), float("nan")]
    bv = [0.0, -0.0, 1.0, 2.0, 0.5, -1.0, -2.0, 3.0, float("nan")]
    a = torch.tensor([x for x in av for _ in bv], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([y for _ in av for y in bv], dtype=torch.float64, requires_grad=True)
    torch.pow(a, b).backward(torch.ones_like(a))
    return [("powgrad.a", a.detach()), ("powgrad.b", b.detach()),
            ("powgrad.ga", a.grad), ("powgrad.gb", b.grad)]


def main():
    gen = torch.Generator().manual_seed(SEED)
    out = []
    for dn in ("f32", "f64"):
        x = inputs(gen, DTYPES[dn])
        out += [("relu.x." + dn, x), ("relu.y." + dn, torch.relu(x))]
    for dn, dt in DTYPES.items():
        x = inputs(gen, dt)
        out += [("leaky.x." + dn, x), ("leaky.y." + dn, F.leaky_relu(x, 0.2))]
    for dn, dt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
        x = (torch.rand(1000, generator=gen, dtype=torch.float64) * 4).to(dt)
        out.append(("pows.x." + dn, x))
        for k, p in enumerate(POW_EXPONENTS):
            out.append(("pows.y%d.%s" % (k, dn), torch.pow(x, p)))
    out += pow_grads()
    write_safetensors(OUT, out, {"torch": torch.__version__})
    print("wrote", OUT, "(%d tensors)" % len(out))


if __name__ == "__main__":
    main()
