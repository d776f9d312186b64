#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_adaptive_avg_pool
(tests/test_adaptive_pool.c): tests/golden/pool/adaptive_pool.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_adaptive_pool_goldens.py

Case "case<i>", i < the metadata "cases", with metadata
  case<i>.ns           the number of spatial dims
  case<i>.output_size  "o0,o1,..." per spatial dim (0: PyTorch's None)
  case<i>.dtype        "torch.float64", "torch.float32" or "torch.bfloat16"
and tensors, all of the case's dtype:
  case<i>.x, case<i>.grad_y   input and output gradient
  case<i>.y, case<i>.grad_x   F.adaptive_avg_pool<ns>d(x, output_size) and
                              d sum(y * grad_y) / dx
The bf16 cases also hold case<i>.y64 and case<i>.grad_x64: the same in f64
from the bf16 x and grad_y (PyTorch's bf16 kernels round in bf16 steps).
The shapes cover output extents that divide the input's (avg_pool's
windows), that do not (overlapping windows), that are larger than the
input's (repeated windows), 1 everywhere (PyTorch computes x.mean there),
None, and unbatched inputs.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_cases import Writer  # noqa: E402
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "pool", "adaptive_pool.safetensors")
SEED = 5147
F64, F32, BF16 = torch.float64, torch.float32, torch.bfloat16

# (x shape, output size (None: x's extent)); the spatial dims are the
# output size's
CASES = [
    ((2, 3, 10), (5,)),
    ((2, 3, 10), (4,)),
    ((3, 7), (3,)),                      # unbatched
    ((2, 2, 5), (8,)),                   # larger than x
    ((2, 2, 9), (1,)),
    ((2, 3, 8, 6), (4, 3)),
    ((1, 2, 9, 6), (3, 2)),              # windows of 3 x 3
    ((2, 3, 7, 9), (3, 4)),
    ((3, 5, 7), (2, None)),              # unbatched, None
    ((1, 2, 3, 4), (5, 7)),              # larger than x
    ((2, 3, 6, 5), (1, 1)),              # x.mean in PyTorch
    ((2, 2, 11, 4), (4, 8)),             # smaller along one axis, larger along the other
    ((1, 2, 4, 6, 8), (2, 3, 4)),
    ((1, 2, 6, 3, 5), (2, 1, 1)),        # windows of 3 x 3 x 5
    ((2, 2, 5, 7, 6), (3, 4, 4)),
    ((2, 5, 4, 3), (2, None, 5)),        # unbatched, None, larger
    ((1, 2, 3, 4, 5), (1, 1, 1)),        # x.mean in PyTorch
]
BF16_CASES = (1, 3, 7, 8, 9)   # PyTorch 1.13 has no bf16 adaptive_avg_pool3d
# f32 cases with long sums per output and per x element
F32_LONG = [((1, 2, 300), (7,)), ((1, 2, 40, 33), (6, 5)), ((1, 1, 13, 12, 17), (3, 5, 4))]

POOL = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}


def ints(v):
    return ",".join(str(0 if a is None else int(a)) for a in v)


def main():
    torch.manual_seed(SEED)
    w = Writer()

    def add(shape, size, dt):
        ns = len(size)
        fn = POOL[ns]
        x = torch.randn(*shape, dtype=F64).to(dt)
        k = "case%d" % w.n
        w.case(x, lambda t: fn(t, size), {"ns": ns, "output_size": ints(size), "dtype": str(dt)})
        if dt == BF16:
            x64 = w.tensors[k + ".x"].double().requires_grad_(True)
            y64 = fn(x64, size)
            (y64 * w.tensors[k + ".grad_y"].double()).sum().backward()
            w.tensors.update({k + ".y64": y64.detach(), k + ".grad_x64": x64.grad})

    for dt in (F64, F32):
        for shape, size in CASES:
            add(shape, size, dt)
    for i in BF16_CASES:
        add(*CASES[i], BF16)
    for shape, size in F32_LONG:
        add(shape, size, F32)
    w.meta["cases"] = str(w.n)
    write_safetensors(OUT, {k: v.contiguous() for k, v in w.tensors.items()}, w.meta)


if __name__ == "__main__":
    main()
