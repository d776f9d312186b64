#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_cumsum (tests/test_cumsum.c):
tests/golden/cumsum.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_cumsum_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32,
f64 or bf16) and case<i>.dim (an int, negative ones too), and tensors in
that dtype: case<i>.x, case<i>.g (the gradient of y), case<i>.y =
torch.cumsum(x, dim) and case<i>.dx, torch.autograd's gradient of
sum(g * y).  The bf16 cases also hold case<i>.y64 and case<i>.dx64, the
same in f64 from the bf16 x and g.

The shapes have ranks 0 to 4, each summed along every dim, counted from
the front and from the end, and two shapes with an extent of 0.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "cumsum.safetensors")
SEED = 5120
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
SHAPES = ((), (9,), (4, 5), (2, 3, 4), (2, 3, 2, 3), (0, 3), (2, 0, 3))


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for shape in SHAPES:
            span = max(len(shape), 1)
            for dim in range(-span, span):
                x = (torch.rand(shape, dtype=torch.float64) * 8 - 4).to(dt)
                xr = x.clone().requires_grad_()
                y = torch.cumsum(xr, dim)
                g = torch.randn(y.shape, dtype=torch.float64).to(dt)
                (dx,) = torch.autograd.grad(y, (xr,), g)
                out = {"x": x, "g": g, "y": y, "dx": dx}
                if dt == torch.bfloat16:
                    x64 = x.double().requires_grad_()
                    y64 = torch.cumsum(x64, dim)
                    (dx64,) = torch.autograd.grad(y64, (x64,), g.double())
                    out.update({"y64": y64, "dx64": dx64})
                p = "case%d." % i
                for k, v in out.items():
                    tensors[p + k] = v.detach().contiguous()
                meta.update({p + "dtype": name, p + "dim": str(dim)})
                i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
