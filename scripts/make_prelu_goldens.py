#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_prelu and the PReLU module
(tests/test_prelu.c): tests/golden/prelu.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_prelu_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype
(f32, f64 or bf16, or bf16_wf32: a bf16 x with an f32 weight, which torch
casts to bf16 first) and tensors in that dtype (w and dw f32 in bf16_wf32):
  case<i>.x, case<i>.w    F.prelu's input and weight (x holds +-0, +-inf
                          and NaN besides random values)
  case<i>.g               the gradient of y
  case<i>.y               F.prelu(x, w)
  case<i>.dx, case<i>.dw  torch.autograd's gradients of sum(g * y)
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "prelu.safetensors")
SEED = 7927
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
SPECIAL = [0.0, -0.0, float("inf"), -float("inf"), float("nan")]

# (x shape, weight count): per channel in 2-d, 1-d and 3-d images, one
# weight for all, an (N, C) batch, and x of one and no channel dim
CASES = [
    ((2, 3, 4, 5), 3),
    ((2, 4, 7), 4),
    ((1, 2, 3, 2, 2), 2),
    ((2, 3, 4, 5), 1),
    ((5, 6), 6),
    ((7,), 1),
    ((), 1),
]


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in list(DTYPES.items()) + [("bf16_wf32", torch.bfloat16)]:
        for shape, nw in (CASES if name != "bf16_wf32" else CASES[:1] + CASES[3:4]):
            x = torch.randn(shape, dtype=torch.float64) * 3
            if x.numel() >= len(SPECIAL):
                x.view(-1)[: len(SPECIAL)] = torch.tensor(SPECIAL, dtype=torch.float64)
            w = torch.rand(nw, dtype=torch.float64) - 0.3
            g = torch.randn(shape, dtype=torch.float64)
            x, g = x.to(dt), g.to(dt)
            w = w.to(torch.float32 if name == "bf16_wf32" else dt)
            xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
            y = F.prelu(xr, wr)
            dx, dw = torch.autograd.grad(y, (xr, wr), g)
            p = "case%d." % i
            for k, v in (("x", x), ("w", w), ("g", g), ("y", y), ("dx", dx), ("dw", dw)):
                tensors[p + k] = v.detach().contiguous()
            meta[p + "dtype"] = name
            i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
