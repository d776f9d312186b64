"""Writes the PyTorch golden file of the pooling modules' ONNX export
(tests/test_onnx_unpool.c):
  tests/golden/pool/onnx_pool.safetensors

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_onnx_pool_goldens.py

Cases "case<i>", i < the metadata "cases", all f32 and batched, as ONNX
takes them.  Metadata case<i>.kind: "lppool" (nn.LPPool1d/2d: .norm_type,
.ceil_mode), "maxpool" (nn.MaxPool1d/2d/3d(return_indices=True): .padding,
.dilation, .ceil_mode) or "chain" (y, i = MaxPool(return_indices=True)(x);
MaxUnpool(y, i) with the same kernel, stride and padding); .ns, .kernel,
.stride.  Tensors .x (randn: negative values included), .y (the module's
output; the chain's unpooled tensor) and, for maxpool, .indices (i64,
within each (n, c) plane).  The LPPool cases take odd, fractional and even
norm types, and ceil_mode windows cut short by x's end.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLD = os.path.join(ROOT, "tests", "golden")
SEED = 5183
LPPOOL = {1: nn.LPPool1d, 2: nn.LPPool2d}
MAXPOOL = {1: nn.MaxPool1d, 2: nn.MaxPool2d, 3: nn.MaxPool3d}
UNPOOL = {1: nn.MaxUnpool1d, 2: nn.MaxUnpool2d, 3: nn.MaxUnpool3d}

# shape, norm_type, kernel, stride, ceil_mode
LP_CASES = [
    ((2, 3, 9), 3.0, (3,), (2,), False),
    ((2, 2, 7, 6), 1.0, (3, 2), (2, 2), True),      # windows cut short
    ((1, 2, 6, 6), 1.5, (2, 2), (2, 2), False),     # NaN where a window's sum is negative
    ((1, 3, 5, 4), 2.0, (2, 2), (2, 2), True),      # even, windows cut short
    ((2, 2, 8), 2.5, (3,), (3,), True),
    ((2, 2, 6, 8), 4.0, (2, 2), (2, 2), False),     # LpPool
    ((1, 2, 7, 7), 3.0, (3, 3), (2, 2), True),
]
# shape, kernel, stride, padding, dilation, ceil_mode
MAX_CASES = [
    ((2, 3, 9), (3,), (2,), (1,), (1,), False),
    ((2, 2, 7, 9), (3, 2), (2, 1), (1, 0), (1, 1), True),
    ((1, 2, 9, 8), (2, 2), (2, 2), (1, 0), (2, 2), False),
    ((1, 2, 5, 6, 4), (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), True),
]
# shape, kernel, stride, padding
CHAIN_CASES = [
    ((2, 3, 8), (2,), (2,), (0,)),
    ((2, 3, 6, 8), (2, 2), (2, 2), (0, 0)),
    ((1, 2, 7, 9), (3, 3), (2, 2), (1, 1)),
    ((1, 2, 4, 6, 4), (2, 2, 2), (2, 2, 2), (0, 0, 0)),
]


def ints(v):
    return ",".join(str(int(a)) for a in v)


def one(v, ns):
    return v[0] if ns == 1 else v


def main():
    torch.manual_seed(SEED)
    tensors, meta, n = {}, {}, 0
    for shape, pn, k, s, ceil in LP_CASES:
        ns, c = len(k), "case%d" % n
        n += 1
        x = torch.randn(*shape)
        y = LPPOOL[ns](pn, one(k, ns), one(s, ns), ceil)(x)
        tensors.update({c + ".x": x, c + ".y": y})
        meta.update({c + ".kind": "lppool", c + ".ns": str(ns), c + ".kernel": ints(k),
                     c + ".stride": ints(s), c + ".norm_type": repr(pn),
                     c + ".ceil_mode": str(int(ceil))})
    for shape, k, s, p, d, ceil in MAX_CASES:
        ns, c = len(k), "case%d" % n
        n += 1
        x = torch.randn(*shape)
        y, idx = MAXPOOL[ns](k, s, p, d, return_indices=True, ceil_mode=ceil)(x)
        tensors.update({c + ".x": x, c + ".y": y, c + ".indices": idx})
        meta.update({c + ".kind": "maxpool", c + ".ns": str(ns), c + ".kernel": ints(k),
                     c + ".stride": ints(s), c + ".padding": ints(p), c + ".dilation": ints(d),
                     c + ".ceil_mode": str(int(ceil))})
    for shape, k, s, p in CHAIN_CASES:
        ns, c = len(k), "case%d" % n
        n += 1
        x = torch.randn(*shape)
        y, idx = MAXPOOL[ns](k, s, p, return_indices=True)(x)
        u = UNPOOL[ns](k, s, p)(y, idx)
        tensors.update({c + ".x": x, c + ".y": u})
        meta.update({c + ".kind": "chain", c + ".ns": str(ns), c + ".kernel": ints(k),
                     c + ".stride": ints(s), c + ".padding": ints(p)})
    meta["cases"] = str(n)
    write_safetensors(os.path.join(GOLD, "pool", "onnx_pool.safetensors"),
                      {k: v.detach().contiguous() for k, v in tensors.items()}, meta)


if __name__ == "__main__":
    main()
