#!/usr/bin/python3
"""Writes the PyTorch golden file of the InstanceNorm{1,2,3}d modules
(tests/test_instance_norm.c): tests/golden/instance_norm.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_instance_norm_goldens.py

Case "case<i>", i < the metadata "cases", with metadata
  case<i>.ns        1, 2 or 3 (InstanceNorm1d, 2d, 3d)
  case<i>.affine    "0" or "1"
  case<i>.eps       eps
  case<i>.train     "1" training, "0" eval (the same numbers, as
                    track_running_stats is False)
and tensors of the case's dtype (f64 or f32):
  case<i>.x, case<i>.gy   input and upstream gradient
  case<i>.w, case<i>.b    the module's weight and bias (affine only), set
                          to random values so that a mix-up shows
  case<i>.y               the module's output
  case<i>.gx, case<i>.gw, case<i>.gb   d sum(y * gy) / d(x, w, b)
Inputs are off-centre (mean 1.5) so that the mean matters.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "instance_norm.safetensors")
SEED = 20261203
F64, F32 = torch.float64, torch.float32
CLS = {1: torch.nn.InstanceNorm1d, 2: torch.nn.InstanceNorm2d, 3: torch.nn.InstanceNorm3d}

# (ns, x shape, affine, eps, train, dtype)
CASES = [
    (1, (2, 3, 7), False, 1e-5, True, F64),
    (1, (2, 3, 7), True, 1e-5, True, F64),
    (1, (4, 9), True, 1e-3, True, F64),          # unbatched
    (2, (2, 4, 5, 6), False, 1e-5, True, F64),
    (2, (2, 4, 5, 6), True, 1e-5, False, F64),   # eval: the same statistics
    (2, (3, 6, 5), True, 1e-5, True, F64),       # unbatched
    (3, (2, 2, 3, 4, 5), True, 1e-5, True, F64),
    (2, (2, 8, 16, 16), True, 1e-5, True, F32),
    (1, (3, 5, 300), False, 1e-5, True, F32),
]


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    for i, (ns, shape, affine, eps, train, dt) in enumerate(CASES):
        k = "case%d" % i
        c = shape[-ns - 1]
        m = CLS[ns](c, eps=eps, affine=affine).to(dt)
        m.train(train)
        if affine:
            with torch.no_grad():
                m.weight.copy_(torch.randn(c, dtype=F64) * 0.5 + 1)
                m.bias.copy_(torch.randn(c, dtype=F64))
        x = (torch.randn(*shape, dtype=F64) + 1.5).to(dt).requires_grad_(True)
        y = m(x)
        gy = torch.randn(*y.shape, dtype=F64).to(dt)
        (y * gy).sum().backward()
        tensors.update({k + ".x": x.detach(), k + ".gy": gy, k + ".y": y.detach(),
                        k + ".gx": x.grad})
        if affine:
            tensors.update({k + ".w": m.weight.detach(), k + ".b": m.bias.detach(),
                            k + ".gw": m.weight.grad, k + ".gb": m.bias.grad})
        meta.update({k + ".ns": str(ns), k + ".affine": str(int(affine)), k + ".eps": repr(eps),
                     k + ".train": str(int(train))})
    meta["cases"] = str(len(CASES))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
