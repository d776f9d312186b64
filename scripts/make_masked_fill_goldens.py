#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_masked_fill (tests/test_masked_fill.c):
tests/golden/masked_fill.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_masked_fill_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32,
f64 or bf16) and case<i>.value (a float's repr: "0.0", "nan", "-inf",
"0.3333333333333333", ...), the tensors case<i>.x (in that dtype), case<i>.mask
(u8 0/1, torch's bool), case<i>.g (the gradient of y), case<i>.y =
x.masked_fill(mask.bool(), value) and case<i>.dx, torch.autograd's gradient
of sum(g * y).

The (x, mask) shape pairs: equal, a mask that broadcasts to x, an x that
broadcasts to the mask (y larger than x, dx summed back), both broadcast,
a 0-d x and a 0-d mask, an empty extent.  x holds NaN, +-inf and -0.0;
values are 0, -0.0, 1/3 and -3e38 (rounded to x's dtype), +-inf and
NaN.  (A finite value beyond x's dtype, 1e300 for f32, is refused, as
torch's "cannot be converted without overflow".)
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "masked_fill.safetensors")
SEED = 6212
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
SHAPES = (((3, 4), (3, 4)), ((3, 4), (3, 1)), ((4,), (2, 3, 4)), ((2, 1, 4), (3, 1)),
          ((), (2, 3)), ((2, 3), ()), ((0, 3), (1, 3)))
VALUES = (0.0, -0.0, 1.0 / 3.0, -3e38, math.inf, -math.inf, math.nan)


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for xs, ms in SHAPES:
            for value in VALUES:
                x = torch.rand(xs, dtype=torch.float64) * 8 - 4
                flat = x.view(-1)
                for k, special in enumerate((math.nan, math.inf, -math.inf, -0.0)):
                    if k < flat.numel() - 1:
                        flat[k + 1] = special
                x = x.to(dt)
                mask = torch.rand(ms) < 0.5
                xr = x.clone().requires_grad_()
                y = xr.masked_fill(mask, value)
                g = torch.randn(y.shape, dtype=torch.float64).to(dt)
                (dx,) = torch.autograd.grad(y, (xr,), g)
                p = "case%d." % i
                t = {"x": x, "mask": mask.to(torch.uint8), "g": g, "y": y, "dx": dx}
                for k, v in t.items():
                    tensors[p + k] = v.detach().contiguous()
                meta.update({p + "dtype": name, p + "value": repr(value)})
                i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
