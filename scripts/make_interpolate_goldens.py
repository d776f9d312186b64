#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_upsample_linear,
tg_upsample_bicubic and the linear and bicubic Upsample modules
(tests/test_interpolate.c): tests/golden/interpolate.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_interpolate_goldens.py

Case "case<i>", i < the metadata "cases", with metadata
  case<i>.mode           "linear" (tg_upsample_linear) or "bicubic"
  case<i>.ns             the number of spatial dims (linear: 1 linear,
                         2 bilinear, 3 trilinear; bicubic: 2)
  case<i>.size           "o0,o1,..." the output's spatial extents
  case<i>.align_corners  "0" or "1"
  case<i>.scale          "s0,s1,...": the case was made with
                         scale_factor=s (nn.Upsample), size = S*s; absent
                         when it was made with size=
and tensors, all of the case's dtype (f64, f32 or bf16):
  case<i>.x, case<i>.grad_y   input and output gradient
  case<i>.y, case<i>.grad_x   the op's result and d sum(y * grad_y) / dx
f64 cases are the reference of the f32, bf16 and f16 checks too (the test
computes those dtypes from the f64 case's x rounded).  A bicubic bf16 case
also has case<i>.y_f64 and case<i>.grad_x_f64: the same interpolation of its
x and grad_y in f64, since torch's bf16 bicubic rounds its weights and every
partial sum (several percent of the largest value off).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_cases import Writer  # noqa: E402
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "interpolate.safetensors")
SEED = 7993
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
# mode='bicubic' (2-d only; torch has no f16 bicubic on the CPU): up, down,
# mixed, equal extents, extent 1, an input of 2 x 2 whose four taps are
# clamped at both ends, then nn.Upsample's scale factors.
CUBIC_SIZED = [
    ((2, 2, 4, 5), (8, 10), False, F64),
    ((2, 2, 4, 5), (8, 10), True, F64),
    ((1, 3, 6, 7), (3, 10), False, F64),
    ((1, 3, 6, 7), (3, 10), True, F64),
    ((1, 2, 5, 4), (5, 9), False, F64),
    ((1, 2, 1, 4), (3, 1), False, F64),
    ((1, 2, 1, 4), (3, 1), True, F64),
    ((1, 1, 2, 2), (7, 7), False, F64),
    ((2, 2, 6, 5), (12, 10), False, F32),
    ((2, 2, 6, 5), (9, 17), True, F32),
    ((2, 2, 6, 5), (12, 10), False, BF16),
]
CUBIC_SCALED = [
    ((2, 3, 4, 4), (2, 2), False, F64),
    ((2, 3, 4, 4), (2, 3), True, F64),
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
               {"mode": "linear", "ns": ns, "size": ints(size), "align_corners": int(align),
                "dtype": str(dt)})
    for shape, sc, align, dt in SCALED:
        ns = len(sc)
        x = torch.randn(*shape, dtype=F64).to(dt)
        m = torch.nn.Upsample(scale_factor=sc, mode=MODE[ns], align_corners=align)
        size = [n * s for n, s in zip(shape[2:], sc)]
        # the scale factor and the size it gives interpolate alike
        ref = F.interpolate(x, size=size, mode=MODE[ns], align_corners=align)
        assert torch.allclose(m(x), ref, rtol=0, atol=1e-6), (shape, sc)
        w.case(x, m, {"mode": "linear", "ns": ns, "size": ints(size), "scale": ints(sc),
                      "align_corners": int(align), "dtype": str(dt)})
    for shape, size, align, dt in CUBIC_SIZED:
        x = torch.randn(*shape, dtype=F64).to(dt)
        fn = lambda t: F.interpolate(t, size=size, mode="bicubic", align_corners=align)
        w.case(x, fn, {"mode": "bicubic", "ns": 2, "size": ints(size),
                       "align_corners": int(align), "dtype": str(dt)})
        if dt == BF16:
            k = "case%d" % (w.n - 1)
            x64 = x.to(F64).requires_grad_(True)
            y64 = fn(x64)
            (y64 * w.tensors[k + ".grad_y"].to(F64)).sum().backward()
            w.tensors.update({k + ".y_f64": y64.detach(), k + ".grad_x_f64": x64.grad})
    for shape, sc, align, dt in CUBIC_SCALED:
        x = torch.randn(*shape, dtype=F64).to(dt)
        m = torch.nn.Upsample(scale_factor=sc, mode="bicubic", align_corners=align)
        size = [n * s for n, s in zip(shape[2:], sc)]
        ref = F.interpolate(x, size=size, mode="bicubic", align_corners=align)
        assert torch.allclose(m(x), ref, rtol=0, atol=1e-6), (shape, sc)
        w.case(x, m, {"mode": "bicubic", "ns": 2, "size": ints(size), "scale": ints(sc),
                      "align_corners": int(align), "dtype": str(dt)})
    w.meta["cases"] = str(w.n)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, w.tensors, w.meta)


if __name__ == "__main__":
    main()
