#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_adaptive_max_pool
(tests/test_adaptive_max_pool.c):
tests/golden/pool/adaptive_max_pool.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_adaptive_max_pool_goldens.py

Case "case<i>", i < the metadata "cases", with metadata
  case<i>.ns           the number of spatial dims
  case<i>.output_size  "o0,o1,..." per spatial dim (0: PyTorch's None)
  case<i>.fill         how x was drawn: "randn", "ties" (integers in
                       [-2, 2], so windows hold equal maxima), "nan" (randn
                       with about a third NaN, windows with several),
                       "-inf" (about two thirds -inf, windows of -infs only)
  case<i>.dtype        "torch.float64", "torch.float32" or "torch.bfloat16"
and tensors:
  case<i>.x, case<i>.grad_y   input and output gradient (the case's dtype)
  case<i>.y, case<i>.indices  F.adaptive_max_pool<ns>d(x, output_size,
                              return_indices=True) (indices: int64)
  case<i>.grad_x              d sum(y * grad_y) / dx
The shapes cover output extents that divide the input's, that do not
(overlapping windows), that are larger than the input's (repeated
windows), 1 everywhere, None, and unbatched inputs.  PyTorch 1.13 has no
bf16 adaptive_max_pool3d: the bf16 cases are 1-d and 2-d.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "pool", "adaptive_max_pool.safetensors")
SEED = 6211
F64, F32, BF16 = torch.float64, torch.float32, torch.bfloat16

# (x shape, output size (None: x's extent)); the spatial dims are the
# output size's
CASES = [
    ((2, 3, 10), (5,)),
    ((2, 3, 10), (4,)),                  # overlapping windows
    ((3, 7), (3,)),                      # unbatched
    ((2, 2, 5), (8,)),                   # larger than x
    ((2, 2, 9), (1,)),
    ((2, 3, 8, 6), (4, 3)),
    ((2, 3, 7, 9), (3, 4)),
    ((3, 5, 7), (2, None)),              # unbatched, None
    ((1, 2, 3, 4), (5, 7)),              # larger than x
    ((2, 3, 6, 5), (1, 1)),
    ((2, 2, 11, 4), (4, 8)),             # smaller along one axis, larger along the other
    ((1, 2, 4, 6, 8), (2, 3, 4)),
    ((2, 2, 5, 7, 6), (3, 4, 4)),
    ((2, 5, 4, 3), (2, None, 5)),        # unbatched, None, larger
    ((1, 2, 3, 4, 5), (1, 1, 1)),
]
FILLS = ("randn", "ties", "nan", "-inf")
POOL = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}


def ints(v):
    return ",".join(str(0 if a is None else int(a)) for a in v)


def draw(shape, fill):
    x = torch.randn(*shape, dtype=F64)
    if fill == "ties":
        x = torch.randint(-2, 3, shape).to(F64)
    elif fill == "nan":
        x[torch.rand(*shape) < 0.35] = float("nan")
    elif fill == "-inf":
        x[torch.rand(*shape) < 0.65] = float("-inf")
    return x


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    n = 0
    for dt in (F64, F32, BF16):
        for shape, size in CASES:
            ns = len(size)
            if dt == BF16 and ns == 3:
                continue
            for fill in FILLS:
                k = "case%d" % n
                n += 1
                x = draw(shape, fill).to(dt).requires_grad_(True)
                y, idx = POOL[ns](x, size, return_indices=True)
                gy = torch.randn(*y.shape, dtype=F64).to(dt)
                (y * gy).sum().backward()
                tensors.update({k + ".x": x.detach(), k + ".grad_y": gy, k + ".y": y.detach(),
                                k + ".indices": idx, k + ".grad_x": x.grad})
                meta.update({k + ".ns": str(ns), k + ".output_size": ints(size),
                             k + ".fill": fill, k + ".dtype": str(dt)})
    meta["cases"] = str(n)
    write_safetensors(OUT, {k: v.contiguous() for k, v in tensors.items()}, meta)


if __name__ == "__main__":
    main()
