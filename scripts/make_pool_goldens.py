#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_avg_pool, tg_max_pool and
tg_upsample_nearest (tests/test_pool.c): tests/golden/pool/pool.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_pool_goldens.py

Case "case<i>", i < the metadata "cases", with metadata
  case<i>.kind       "avg", "max" or "up"
  case<i>.ns         the number of spatial dims
  case<i>.kernel, .stride, .padding, .dilation   "k0,k1,..." per spatial dim
                     (stride 0: PyTorch's stride=None, the kernel)
  case<i>.ceil_mode, .count_include_pad          "0" or "1"
  case<i>.scale      "s0,s1,..." (up)
and tensors, all of the case's dtype (f64, f32 or bf16):
  case<i>.x, case<i>.grad_y   input and output gradient
  case<i>.y, case<i>.grad_x   the op's result and d sum(y * grad_y) / dx
Max cases draw x from a few integers, so that windows hold ties (PyTorch
takes the first maximum in row-major order); one holds NaN and -inf.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_cases import Writer  # noqa: E402
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "pool", "pool.safetensors")
SEED = 8039
F64, F32, BF16 = torch.float64, torch.float32, torch.bfloat16

# (x shape, kernel, stride (None: the kernel), padding, ceil_mode,
#  count_include_pad, dtype); the spatial dims are those of the kernel.
AVG = [
    ((2, 3, 9), (3,), (2,), (1,), False, True, F64),
    ((2, 3, 9), (3,), (2,), (1,), True, False, F64),
    # ceil_mode adds a window past x's end: divisor 2 either way
    ((2, 2, 6), (3,), (2,), (0,), True, True, F64),
    # ... and one that runs past the right padding: with count_include_pad
    # its divisor counts up to the padding's end (2, x[5] and one zero)
    ((2, 2, 6), (3,), (2,), (1,), True, True, F64),
    ((2, 2, 6), (3,), (2,), (1,), True, False, F64),
    ((2, 3, 7, 6), (3, 2), (2, 1), (1, 1), False, True, F64),
    ((2, 3, 7, 6), (3, 3), (2, 2), (1, 1), True, False, F64),
    ((1, 2, 5, 5), (2, 2), None, (0, 0), True, True, F32),
    ((3, 5, 6), (2, 2), (2, 2), (1, 1), False, False, F64),   # unbatched
    ((1, 2, 5, 6, 4), (3, 2, 2), (2, 2, 1), (1, 0, 1), True, True, F64),
    ((2, 2, 5, 4, 4), (2, 2, 2), None, (1, 0, 1), True, False, F64),
    ((2, 2, 4, 4, 4), (2, 2, 2), None, (0, 0, 0), False, True, F32),
    ((2, 3, 6, 6), (3, 3), (2, 2), (1, 1), False, True, BF16),
    ((2, 3, 9), (3,), (2,), (1,), True, False, BF16),
    ((2, 5, 7), (4,), (3,), (2,), True, True, F32),   # unbatched 2-d input to a 1-d pool
]

# (x shape, kernel, stride, padding, dilation, ceil_mode, dtype)
MAX = [
    ((2, 3, 10), (3,), (2,), (1,), (1,), False, F64),
    ((2, 3, 10), (3,), (1,), (1,), (2,), True, F64),
    ((2, 3, 7, 6), (3, 3), (2, 2), (1, 1), (1, 1), True, F64),
    ((2, 2, 8, 7), (2, 3), (2, 1), (1, 1), (2, 1), False, F64),
    ((2, 3, 6, 6), (2, 2), None, (0, 0), (1, 1), False, F32),
    ((3, 7, 7), (3, 3), (2, 2), (1, 1), (1, 1), True, F64),   # unbatched
    ((1, 2, 5, 6, 5), (2, 3, 2), (2, 2, 1), (1, 1, 0), (1, 1, 2), True, F64),
    ((2, 2, 4, 4, 4), (2, 2, 2), None, (0, 0, 0), (1, 1, 1), False, F32),
    ((2, 3, 6, 6), (3, 3), (2, 2), (1, 1), (1, 1), False, BF16),
    ((2, 4, 9), (2,), None, (0,), (1,), True, BF16),
    ((1, 1, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), True, F64),   # ceil_mode's extra window
    ((2, 6, 5), (3,), (3,), (1,), (1,), True, F64),   # unbatched 2-d input to a 1-d pool
]
SPECIAL = ((1, 2, 8), (3,), (1,), (1,), (1,), False, F64)   # NaN and -inf in x

# (x shape, scale per spatial dim, dtype)
UP = [
    ((2, 3, 5), (3,), F64),
    ((2, 3, 4, 5), (2, 3), F64),
    ((1, 2, 3, 3), (1, 2), F32),
    ((1, 2, 2, 3, 2), (2, 1, 3), F64),
    ((2, 2, 3, 4), (2, 2), BF16),
    ((1, 3, 2, 2, 3), (2, 2, 2), F32),
    ((2, 2, 7), (1,), F64),
]

# f32 cases whose sums have several terms per output and per x element
# (overlapping windows, long rows), where tapegrad matches PyTorch's f32
# results to the bit: (kind, x shape, kernel, stride, padding, ceil_mode,
# count_include_pad or dilation).  Drawn after the cases above, which keep
# their values.
F32_ORDER = [
    ("avg", (1, 2, 600), (5,), (1,), (2,), False, True),
    ("avg", (1, 2, 600), (3,), (1,), (1,), False, False),
    ("avg", (1, 2, 12, 13), (3, 3), (1, 1), (1, 1), False, True),
    ("avg", (1, 2, 11, 9), (3, 3), (2, 2), (1, 1), True, False),
    ("max", (1, 2, 600), (3,), (1,), (1,), False, 1),
    ("max", (1, 2, 12, 13), (3, 3), (1, 1), (1, 1), False, 1),
]
UP_F32 = [((2, 2, 5, 7), (2, 3)), ((1, 1, 3, 300), (1, 2))]

POOL = {("avg", 1): F.avg_pool1d, ("avg", 2): F.avg_pool2d, ("avg", 3): F.avg_pool3d,
        ("max", 1): F.max_pool1d, ("max", 2): F.max_pool2d, ("max", 3): F.max_pool3d}


def ints(v):
    return ",".join(str(int(a)) for a in v)


def main():
    torch.manual_seed(SEED)
    w = Writer()
    for shape, k, s, p, ceil, cip, dt in AVG:
        ns = len(k)
        x = torch.randn(*shape, dtype=F64).to(dt)
        fn = POOL[("avg", ns)]
        w.case(x, lambda t: fn(t, k, s, p, ceil_mode=ceil, count_include_pad=cip),
               {"kind": "avg", "ns": ns, "kernel": ints(k), "stride": ints(s or [0] * ns),
                "padding": ints(p), "dilation": ints([1] * ns), "ceil_mode": int(ceil),
                "count_include_pad": int(cip), "dtype": str(dt)})
    for i, (shape, k, s, p, d, ceil, dt) in enumerate(MAX + [SPECIAL]):
        ns = len(k)
        x = torch.randint(-2, 3, shape).to(F64)   # ties in most windows
        if i == len(MAX):
            x = torch.tensor([[[1.0, float("nan"), 3.0, float("nan"), 2.0, -float("inf"),
                                -float("inf"), -float("inf")],
                               [3.0, 3.0, -1.0, float("nan"), 0.5, 0.5, -float("inf"), 7.0]]],
                             dtype=F64)
        x = x.to(dt)
        fn = POOL[("max", ns)]
        w.case(x, lambda t: fn(t, k, s, p, d, ceil_mode=ceil),
               {"kind": "max", "ns": ns, "kernel": ints(k), "stride": ints(s or [0] * ns),
                "padding": ints(p), "dilation": ints(d), "ceil_mode": int(ceil),
                "count_include_pad": 1, "dtype": str(dt)})
    for shape, sc, dt in UP:
        x = torch.randn(*shape, dtype=F64).to(dt)
        w.case(x, lambda t: F.interpolate(t, scale_factor=sc, mode="nearest"),
               {"kind": "up", "ns": len(sc), "scale": ints(sc), "dtype": str(dt)})
        # nn.Upsample gives the same numbers
        m = torch.nn.Upsample(scale_factor=sc)
        assert torch.equal(m(x), F.interpolate(x, scale_factor=sc, mode="nearest"))
    for kind, shape, k, s, p, ceil, extra in F32_ORDER:
        ns = len(k)
        fn = POOL[(kind, ns)]
        meta = {"kind": kind, "ns": ns, "kernel": ints(k), "stride": ints(s), "padding": ints(p),
                "ceil_mode": int(ceil), "dtype": str(F32)}
        if kind == "avg":
            x = torch.randn(*shape, dtype=F64).to(F32)
            meta.update(dilation=ints([1] * ns), count_include_pad=int(extra))
            w.case(x, lambda t: fn(t, k, s, p, ceil_mode=ceil, count_include_pad=extra), meta)
        else:
            x = torch.randint(-2, 3, shape).to(F32)   # ties, and sums of several g
            meta.update(dilation=ints([extra] * ns), count_include_pad=1)
            w.case(x, lambda t: fn(t, k, s, p, extra, ceil_mode=ceil), meta)
    for shape, sc in UP_F32:
        x = torch.randn(*shape, dtype=F64).to(F32)
        w.case(x, lambda t: F.interpolate(t, scale_factor=sc, mode="nearest"),
               {"kind": "up", "ns": len(sc), "scale": ints(sc), "dtype": str(F32)})
    w.meta["cases"] = str(w.n)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, w.tensors, w.meta)


if __name__ == "__main__":
    main()
