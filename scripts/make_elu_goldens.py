#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_elu (tests/test_elu.c):
tests/golden/elu.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_elu_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32,
f64 or bf16) and case<i>.alpha, and tensors in that dtype: case<i>.x
(random values in [-6, 3] and +-0, +-inf, NaN), case<i>.g (the gradient
of y), case<i>.y = F.elu(x, alpha) and case<i>.dx, torch.autograd's
gradient of sum(g * y).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "elu.safetensors")
SEED = 7937
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
SPECIAL = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), -100.0]
ALPHAS = (1.0, 0.3, 1.7)


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for alpha in ALPHAS:
            x = torch.rand(200, dtype=torch.float64) * 9 - 6
            x = torch.cat([x, torch.tensor(SPECIAL, dtype=torch.float64)]).to(dt)
            g = torch.randn(x.shape, dtype=torch.float64).to(dt)
            xr = x.clone().requires_grad_()
            y = F.elu(xr, alpha)
            (dx,) = torch.autograd.grad(y, (xr,), g)
            p = "case%d." % i
            for k, v in (("x", x), ("g", g), ("y", y), ("dx", dx)):
                tensors[p + k] = v.detach().contiguous()
            meta.update({p + "dtype": name, p + "alpha": repr(alpha)})
            i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
