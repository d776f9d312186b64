#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_unfold, tg_fold and nn.Unfold /
nn.Fold (tests/test_fold.c): tests/golden/fold.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_fold_goldens.py

Case "case<i>", i < the metadata "cases", with metadata
  case<i>.k, .d, .p, .s   kernel_size, dilation, padding, stride as two
                          integers "a,b" (the call passes an int where both
                          are equal: ints and pairs are both swept)
and tensors, for an image x (N, C, H, W) or unbatched (C, H, W):
  case<i>.x    (f64) the image; .y = F.unfold(x, ...) in f64
  case<i>.gy   (f64) a gradient for y; .gx = the gradient of x in f64
  case<i>.z    (f64) columns of y's shape; .f = F.fold(z, (H, W), ...)
  case<i>.gf   (f64) a gradient for f; .gz = the gradient of z in f64
  case<i>.y32, .gx32, .f32, .gz32   the same in f32 (x, gy, z, gf rounded)
  case<i>.ybf, .gxbf, .fbf, .gzbf   the same in bf16 (torch 1.13 sums fold's
                                    overlaps in bf16, one rounding per add)
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "fold.safetensors")
SEED = 4241

# (x shape, kernel_size, dilation, padding, stride): ints and pairs,
# batched and unbatched, stride above the kernel (positions no block
# covers), a kernel the size of the image (L = 1), 1x1 kernels, planes
# with rows long enough for the kernels' row-by-row paths.
CASES = [
    ((2, 3, 5, 6), 2, 1, 0, 1),
    ((3, 5, 6), (2, 3), 1, 0, 1),
    ((2, 2, 7, 8), 3, 2, 1, 1),
    ((1, 2, 6, 7), (3, 2), (1, 2), (1, 0), (2, 3)),
    ((2, 1, 9, 9), 2, 1, 2, 3),
    ((2, 4, 4, 4), 1, 1, 0, 2),
    ((2, 8, 5), (1, 3), (1, 3), (2, 1), (1, 2)),
    ((2, 3, 4, 5), (4, 5), 1, 0, 1),
    ((1, 1, 12, 33), 3, 1, 1, 1),
    ((2, 10, 34), (3, 4), (2, 1), (0, 3), (2, 1)),
    ((1, 10, 6, 6), (2, 2), 1, 1, 2),
]


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def run(x, gy, z, gf, args, hw):
    x = x.clone().requires_grad_(True)
    y = F.unfold(x, *args)
    (gx,) = torch.autograd.grad(y, x, gy)
    z = z.clone().requires_grad_(True)
    f = F.fold(z, hw, *args)
    (gz,) = torch.autograd.grad(f, z, gf)
    return y.detach(), gx, f.detach(), gz


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    for i, (shape, k, d, p, s) in enumerate(CASES):
        args = (k, d, p, s)   # F.unfold(x, kernel_size, dilation, padding, stride)
        x = torch.randn(*shape, dtype=torch.float64)
        hw = tuple(shape[-2:])
        y = F.unfold(x, *args)
        gy = torch.randn(y.shape, dtype=torch.float64)
        z = torch.randn(y.shape, dtype=torch.float64)
        f = F.fold(z, hw, *args)
        gf = torch.randn(f.shape, dtype=torch.float64)
        c = "case%d" % i
        for name, v in zip(("k", "d", "p", "s"), args):
            meta["%s.%s" % (c, name)] = "%d,%d" % pair(v)
        for suf, dt in (("", torch.float64), ("32", torch.float32), ("bf", torch.bfloat16)):
            y_, gx_, f_, gz_ = run(x.to(dt), gy.to(dt), z.to(dt), gf.to(dt), args, hw)
            tensors.update({c + ".y" + suf: y_, c + ".gx" + suf: gx_,
                            c + ".f" + suf: f_, c + ".gz" + suf: gz_})
        tensors.update({c + ".x": x, c + ".gy": gy, c + ".z": z, c + ".gf": gf})
    meta["cases"] = str(len(CASES))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
