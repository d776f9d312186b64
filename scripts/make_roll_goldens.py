#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_roll (tests/test_roll.c):
tests/golden/roll.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_roll_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32,
f64 or bf16), case<i>.shifts ("3" or "2,-1") and case<i>.dims ("" for the
flattened roll, torch.roll without dims, else "1" or "0,-1"), and tensors in
that dtype: case<i>.x, case<i>.g (the gradient of y), case<i>.y =
torch.roll(x, shifts, dims) and case<i>.dx, torch.autograd's gradient of
sum(g * y).

The shapes have ranks 0 to 4 and two have an extent of 0.  Each is rolled
flattened by a shift within, before and beyond its size, along every dim
(from the front and from the end) by a shift of either sign, some larger
than the extent, and along two dims at once, one of them named twice.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "roll.safetensors")
SEED = 6210
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
SHAPES = ((), (9,), (4, 5), (2, 3, 4), (2, 3, 2, 3), (0, 3), (2, 0, 3))


def rolls(shape):
    """(shifts, dims) pairs; dims None for the flattened roll."""
    numel = 1
    for e in shape:
        numel *= e
    out = [((3,), None), ((-2,), None), ((numel * 2 + 1,), None)]
    r = len(shape)
    for dim in range(-r, r):
        out.append(((dim + 2,), (dim,)))
        out.append(((-(dim + 7),), (dim,)))
    if r >= 2:
        out.append(((1, -3), (0, -1)))
        out.append(((2, 1, 5), (-1, 0, -1)))
    return out


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for shape in SHAPES:
            for shifts, dims in rolls(shape):
                x = (torch.rand(shape, dtype=torch.float64) * 8 - 4).to(dt)
                xr = x.clone().requires_grad_()
                if dims is None:
                    y = torch.roll(xr, shifts[0])
                else:
                    y = torch.roll(xr, shifts, dims)
                g = torch.randn(y.shape, dtype=torch.float64).to(dt)
                (dx,) = torch.autograd.grad(y, (xr,), g)
                p = "case%d." % i
                for k, v in {"x": x, "g": g, "y": y, "dx": dx}.items():
                    tensors[p + k] = v.detach().contiguous()
                meta.update({p + "dtype": name,
                             p + "shifts": ",".join(str(s) for s in shifts),
                             p + "dims": "" if dims is None else ",".join(str(d) for d in dims)})
                i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
