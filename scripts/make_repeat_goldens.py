#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_repeat (tests/test_repeat.c):
tests/golden/repeat.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_repeat_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32,
f64 or bf16) and case<i>.repeats ("" for none, else "2,1,3"), and tensors in
that dtype: case<i>.x, case<i>.g (the gradient of y), case<i>.y =
x.repeat(repeats) and case<i>.dx, torch.autograd's gradient of sum(g * y)
(the sum of g's tiles).  The bf16 cases also hold case<i>.dx64, that
gradient in f64 from the bf16 g.

The shapes have ranks 0 to 5 and two have an extent of 0; each is
repeated with one repeat per dim (ones, zeros and larger counts) and with
one and two more repeats than dims.  The rank-5 case tiles every dim, more
than one expand of 8 dims can hold.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "repeat.safetensors")
SEED = 7302
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
CASES = (
    ((), ()), ((), (3,)), ((), (2, 3)),
    ((5,), (1,)), ((5,), (3,)), ((5,), (0,)), ((5,), (2, 2)), ((5,), (2, 1, 3)),
    ((3, 4), (1, 1)), ((3, 4), (2, 3)), ((3, 4), (1, 2)), ((3, 4), (0, 2)),
    ((3, 4), (2, 1, 2)), ((1, 4), (3, 2)), ((3, 1), (2, 1, 4)),
    ((2, 3, 4), (2, 1, 3)), ((2, 3, 4), (1, 2, 1, 2)), ((2, 1, 3), (3, 2, 2)),
    ((2, 3, 2, 3), (2, 1, 2, 1)), ((2, 3, 2, 3), (1, 2, 2, 1, 2)),
    ((2, 3, 2, 2, 2), (2, 2, 2, 2, 2)),
    ((0, 3), (2, 2)), ((2, 0, 3), (1, 3, 1, 2)),
)


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for shape, repeats in CASES:
            x = (torch.rand(shape, dtype=torch.float64) * 8 - 4).to(dt)
            xr = x.clone().requires_grad_()
            y = xr.repeat(repeats)
            g = torch.randn(y.shape, dtype=torch.float64).to(dt)
            (dx,) = torch.autograd.grad(y, (xr,), g)
            out = {"x": x, "g": g, "y": y, "dx": dx}
            if dt == torch.bfloat16:
                x64 = x.double().requires_grad_()
                (dx64,) = torch.autograd.grad(x64.repeat(repeats), (x64,), g.double())
                out["dx64"] = dx64
            p = "case%d." % i
            for k, v in out.items():
                tensors[p + k] = v.detach().contiguous()
            meta.update({p + "dtype": name, p + "repeats": ",".join(str(r) for r in repeats)})
            i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
