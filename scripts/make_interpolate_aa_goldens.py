#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_upsample_antialias
(tests/test_interpolate_aa.c): tests/golden/interpolate_aa.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_interpolate_aa_goldens.py

Case "case<i>", i < the metadata "cases", with metadata
  case<i>.mode           "bilinear" or "bicubic"
  case<i>.size           "o0,o1" the output's spatial extents
  case<i>.align_corners  "0" or "1"
and tensors, all of the case's dtype (f64 or f32):
  case<i>.x, case<i>.grad_y   input and output gradient
  case<i>.y, case<i>.grad_x   F.interpolate(x, size, mode, align_corners,
                              antialias=True) and d sum(y * grad_y) / dx
A case marked case<i>.bf16 = "1" (f64) also has case<i>.x_bf16 and
case<i>.grad_y_bf16, its x and grad_y rounded to bf16 (held in f64), and
case<i>.y_bf16, case<i>.grad_x_bf16, the f64 interpolation of those: the
reference of tapegrad's bf16 results (torch 1.13 has no bf16 or f16
antialiased interpolation).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_cases import Writer  # noqa: E402
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "interpolate_aa.safetensors")
SEED = 7963
F64, F32, BF16 = torch.float64, torch.float32, torch.bfloat16

# (x shape, output size, align_corners, dtype), for both modes: shrinking
# by 2 and 3, by non-integer factors, one axis down and one up, enlarging
# (where bicubic's a = -0.5 and align_corners part from the plain modes),
# an axis of equal extent, an output extent of 1.
CASES = [
    ((2, 2, 8, 8), (4, 4), False, F64),
    ((2, 2, 8, 8), (4, 4), True, F64),
    ((1, 3, 9, 12), (3, 4), False, F64),
    ((1, 3, 9, 12), (3, 4), True, F64),
    ((2, 2, 10, 7), (3, 5), False, F64),
    ((1, 2, 13, 11), (5, 4), True, F64),
    ((1, 2, 9, 4), (4, 7), False, F64),
    ((1, 2, 4, 5), (9, 11), False, F64),
    ((1, 2, 4, 5), (9, 11), True, F64),
    ((1, 2, 6, 7), (6, 3), False, F64),
    ((1, 2, 5, 6), (1, 2), False, F64),
    ((1, 2, 5, 6), (1, 2), True, F64),
    ((1, 1, 40, 33), (3, 7), False, F64),   # wide filters: 13 by 4.7
    ((2, 3, 12, 10), (5, 3), False, F32),
    ((2, 3, 12, 10), (5, 3), True, F32),
    ((1, 2, 7, 9), (13, 20), True, F32),
    ((1, 2, 31, 17), (7, 6), False, F32),
]
BF16_CASES = {0, 4, 7}   # indices into CASES (f64) with a bf16 reference


def ints(v):
    return ",".join(str(int(a)) for a in v)


def main():
    torch.manual_seed(SEED)
    w = Writer()
    for mode in ("bilinear", "bicubic"):
        for i, (shape, size, align, dt) in enumerate(CASES):
            x = torch.randn(*shape, dtype=F64).to(dt)

            def fn(t):
                return F.interpolate(t, size=size, mode=mode, align_corners=align,
                                     antialias=True)

            w.case(x, fn, {"mode": mode, "size": ints(size), "align_corners": int(align)})
            if i not in BF16_CASES:
                continue
            k = "case%d" % (w.n - 1)
            xb = x.to(BF16).to(F64).requires_grad_(True)
            gb = w.tensors[k + ".grad_y"].to(BF16).to(F64)
            yb = fn(xb)
            (yb * gb).sum().backward()
            w.meta[k + ".bf16"] = "1"
            w.tensors.update({k + ".x_bf16": xb.detach(), k + ".grad_y_bf16": gb,
                              k + ".y_bf16": yb.detach(), k + ".grad_x_bf16": xb.grad})
    w.meta["cases"] = str(w.n)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, w.tensors, w.meta)


if __name__ == "__main__":
    main()
