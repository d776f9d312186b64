#!/usr/bin/python3
"""Writes the PyTorch golden file of torch.linalg.matrix_exp in bf16 and
f16 (tests/test_linalg_more.c): tests/golden/matrix_exp_half.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_matrix_exp_half_goldens.py

torch 1.13's CPU matrix_exp takes bf16 but its results are not finite
(inf and NaN even for a small matrix), and it has no f16 kernel: each case
is x (in its half dtype) converted to f64, its exponential and the
gradient of sum(g * matrix_exp(x)) taken by torch in f64, both rounded to
the half dtype, which is what tapegrad computes (in f64, rounded once).

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype
(bf16 or f16) and tensors in that dtype: case<i>.x, the result case<i>.y,
the upstream gradient case<i>.g and x's gradient case<i>.dx.  Shapes
(1, 1), (3, 3), (2, 4, 4) and (2, 1, 3, 3), x uniform in [-s, s) for an
s that keeps the 1-norm below 1/2 (no scaling) or above it (scaled and
squared).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "matrix_exp_half.safetensors")
SEED = 1307
HALF = {"bf16": torch.bfloat16, "f16": torch.float16}
SHAPES = ((1, 1), (3, 3), (2, 4, 4), (2, 1, 3, 3))


def main():
    gen = torch.Generator().manual_seed(SEED)
    tensors, meta, n = {}, {}, 0
    for name, dt in HALF.items():
        for shape in SHAPES:
            for s in (0.1, 1.5):
                x = ((torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * s).to(dt)
                g = torch.randn(shape, generator=gen, dtype=torch.float64).to(dt)
                x64 = x.to(torch.float64).requires_grad_()
                y = torch.linalg.matrix_exp(x64)
                (dx,) = torch.autograd.grad(y, (x64,), g.to(torch.float64))
                p = "case%d." % n
                n += 1
                meta[p + "dtype"] = name
                tensors[p + "x"] = x.contiguous()
                tensors[p + "y"] = y.detach().to(dt).contiguous()
                tensors[p + "g"] = g.contiguous()
                tensors[p + "dx"] = dx.to(dt).contiguous()
    meta["cases"] = str(n)
    print("%d cases" % n)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
