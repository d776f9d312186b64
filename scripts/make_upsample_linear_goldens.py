#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_upsample_linear and the linear
Upsample module (tests/test_upsample_linear.c):
tests/golden/upsample_linear.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_upsample_linear_goldens.py

Case "case<i>", i < the metadata "cases", with metadata
  case<i>.ns             the number of spatial dims (1 linear, 2 bilinear,
                         3 trilinear)
  case<i>.size           "o0,o1,..." the output's spatial extents
  case<i>.align_corners  "0" or "1"
  case<i>.scale          "s0,s1,...": the case was made with
                         scale_factor=s (nn.Upsample), size = S*s; absent
                         when it was made with size=
and tensors, all of the case's dtype (f64, f32 or bf16):
  case<i>.x, case<i>.grad_y   input and output gradient
  case<i>.y, case<i>.grad_x   the op's result and d sum(y * grad_y) / dx
f64 cases are the reference of the f32, bf16 and f16 checks too (the test
computes those dtypes from the f64 case's x rounded).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_cases import Writer  # noqa: E402
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "upsample_linear.safetensors")
SEED = 20261203
F64, F32, BF16 = torch.float64, torch.float32, torch.bfloat16
MODE = {1: "linear", 2: "bilinear", 3: "trilinear"}

# (x shape, output size, align_corners, dtype): up, down, mixed, equal
# extents, extent 1 on either side, unbatched inputs are not PyTorch's
# (F.interpolate takes (B, C, S...) only).
SIZED = [
    ((2, 3, 5), (11,), False, F64),
    ((2, 3, 5), (11,), True, F64),
    ((2, 3, 9), (4,), False, F64),
    ((2, 3, 9), (4,), True, F64),
    ((2, 2, 4, 5), (7, 13), False, F64),
    ((2, 2, 4, 5), (7, 13), True, F64),
    ((1, 3, 6, 7), (3, 10), False, F64),   # one axis down, one up
    ((1, 2, 5, 4), (5, 9), True, F64),     # an axis of equal extent
    ((1, 2, 1, 4), (3, 1), False, F64),    # extent 1 in and out
    ((1, 2, 1, 4), (3, 1), True, F64),
    ((1, 2, 3, 4, 2), (5, 4, 5), False, F64),
    ((1, 2, 3, 4, 2), (5, 4, 5), True, F64),
    ((2, 2, 6, 5), (12, 10), False, F32),
    ((2, 2, 6, 5), (9, 17), True, F32),
    ((1, 2, 3, 3, 3), (6, 5, 4), False, F32),
    ((2, 2, 6, 5), (12, 10), False, BF16),
]
# nn.Upsample(scale_factor=s, mode=..., align_corners=...): (x shape, s,
# align_corners, dtype)
SCALED = [
    ((2, 3, 4, 4), (2, 2), False, F64),
    ((2, 3, 4, 4), (2, 3), True, F64),
    ((1, 2, 3), (3,), False, F64),
    ((1, 2, 2, 3, 2), (2, 2, 2), False, F64),
    ((2, 4, 7, 7), (2, 2), False, F32),
]


def ints(v):
    return ",".join(str(int(a)) for a in v)


def main():
    torch.manual_seed(SEED)
    w = Writer()
    for shape, size, align, dt in SIZED:
        ns = len(size)
        x = torch.randn(*shape, dtype=F64).to(dt)
        w.case(x, lambda t: F.interpolate(t, size=size, mode=MODE[ns], align_corners=align),
               {"ns": ns, "size": ints(size), "align_corners": int(align), "dtype": str(dt)})
    for shape, sc, align, dt in SCALED:
        ns = len(sc)
        x = torch.randn(*shape, dtype=F64).to(dt)
        m = torch.nn.Upsample(scale_factor=sc, mode=MODE[ns], align_corners=align)
        size = [n * s for n, s in zip(shape[2:], sc)]
        # the scale factor and the size it gives interpolate alike
        ref = F.interpolate(x, size=size, mode=MODE[ns], align_corners=align)
        assert torch.allclose(m(x), ref, rtol=0, atol=1e-6), (shape, sc)
        w.case(x, m, {"ns": ns, "size": ints(size), "scale": ints(sc),
                      "align_corners": int(align), "dtype": str(dt)})
    w.meta["cases"] = str(w.n)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, w.tensors, w.meta)


if __name__ == "__main__":
    main()
