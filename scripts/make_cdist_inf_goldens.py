#!/usr/bin/python3
"""Writes the PyTorch golden file of torch.cdist with p = inf over
differences that are NaN or infinite (tests/test_cdist_inf.c):
tests/golden/cdist_inf.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_cdist_inf_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32
or f64), and tensors in that dtype: case<i>.x1, case<i>.x2 (rows of M
columns, random values with NaN, +inf and -inf put in), case<i>.g (the
gradient of y), case<i>.y (torch.cdist(x1, x2, p=inf)) and case<i>.d1,
case<i>.d2, torch.autograd's gradients of sum(g * y).  The cases: a NaN in
x1, in x2 or in both at one column, infinities in one operand or in both
(inf - inf is NaN), a row of NaNs only, ties beside a NaN, batch dims, and
column counts of 1 to 17 (torch's kernel runs in vectors of 4 or 8).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "cdist_inf.safetensors")
SEED = 7311
NAN, INF = float("nan"), float("inf")

# (x1 shape, x2 shape, [(operand, index, value), ...])
CASES = [
    ((2, 3), (3, 3), [(1, (0, 1), NAN)]),
    ((2, 3), (3, 3), [(2, (1, 2), NAN)]),
    ((2, 4), (2, 4), [(1, (0, 0), NAN), (2, (1, 0), NAN)]),
    ((3, 5), (2, 5), [(1, (1, 3), INF), (1, (2, 0), -INF)]),
    ((2, 3), (2, 3), [(1, (0, 1), INF), (2, (0, 1), INF), (2, (1, 2), -INF)]),
    ((2, 2), (2, 2), [(1, (0, 0), NAN), (1, (0, 1), NAN)]),
    ((2, 9), (3, 9), [(1, (0, 1), NAN), (1, (1, 7), INF), (2, (2, 4), NAN)]),
    ((2, 2, 4), (1, 3, 4), [(1, (1, 0, 2), NAN), (2, (0, 2, 3), -INF)]),
    ((1, 1), (2, 1), [(2, (1, 0), NAN)]),
    ((2, 17), (2, 17), [(1, (0, 16), NAN), (2, (1, 8), INF), (1, (1, 3), NAN)]),
]


def ties(x1, x2):
    """Row 0 of x1 and row 0 of x2 differ by 1.5 in two columns (a tie)
    when they have 3 or more: the other differences are below 1."""
    m = x1.shape[-1]
    if m < 3:
        return
    x1[..., 0, :] = 0.25
    x2[..., 0, :] = 0.0
    x1[..., 0, m - 1] = 1.5
    x1[..., 0, m - 3] = -1.5


def main():
    torch.manual_seed(SEED)
    tensors, meta, i = {}, {}, 0
    for name, dt in (("f64", torch.float64), ("f32", torch.float32)):
        for s1, s2, puts in CASES:
            x1 = (torch.rand(s1, dtype=torch.float64) * 2 - 1).to(dt)
            x2 = (torch.rand(s2, dtype=torch.float64) * 2 - 1).to(dt)
            ties(x1, x2)
            for which, at, v in puts:
                (x1 if which == 1 else x2)[at] = v
            a, b = x1.clone().requires_grad_(), x2.clone().requires_grad_()
            y = torch.cdist(a, b, p=INF)
            g = (torch.rand(y.shape, dtype=torch.float64) + 0.5).to(dt)
            d1, d2 = torch.autograd.grad(y, (a, b), g)
            p = "case%d." % i
            tensors.update({p + "x1": x1, p + "x2": x2, p + "g": g, p + "y": y.detach(),
                            p + "d1": d1, p + "d2": d2})
            meta[p + "dtype"] = name
            i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
