#!/usr/bin/python3
"""Writes tests/golden/cast.safetensors: PyTorch's float -> integer casts
(Tensor.to), which tests/test_dtype.c checks tg_to_dtype against.

For every source dtype s in (f32, f64) and integer dtype d in (i8, u8, i32,
i64) the file holds
  x.<s>.<d>   source values, dtype s
  y.<s>.<d>   x.<s>.<d>.to(d), computed by torch 1.13
The values are the ones whose cast torch defines: finite, with trunc(x) in
d's range (beyond it, and for NaN, C++ leaves the conversion undefined and
torch returns whatever the CPU gives; tapegrad saturates, see dtype.h).
They cover quarter steps around zero (ties at +-0.5 and +-1.5 included),
+-0, tiny values, both ends of the range to within the source's precision,
and uniform random values over the whole range.

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_cast_goldens.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "cast.safetensors")
SEED = 7933

SOURCES = {"f32": torch.float32, "f64": torch.float64}
TARGETS = {"i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}


def values(src, dst, gen):
    """Source values of dtype src whose truncation fits dst."""
    info = torch.iinfo(dst)
    lo, top = float(info.min), float(info.max + 1)   # both exact doubles

    def fits(t):
        return (t.trunc() >= lo) & (t.trunc() < top)

    v = [k / 4 for k in range(-40, 41)] + [-0.0, 1e-30, -1e-30, 0.999, -0.999]
    # both ends: just inside the open interval (lo - 1, top) of values
    # that truncate into range, at the source's precision
    for end, inward in ((lo - 1, 1.0), (top, -1.0)):
        e = torch.tensor(end, dtype=torch.float64).to(src)
        while not fits(e):
            e = torch.nextafter(e, torch.tensor(inward * float("inf"), dtype=src))
        v += [float(e), float(torch.nextafter(e, torch.tensor(inward * float("inf"), dtype=src)))]
    v += [lo, lo + 0.5, top - 1, top - 1.5]
    u = torch.rand(200, generator=gen, dtype=torch.float64) * (top - lo + 0.98) + (lo - 0.99)
    v += u.tolist()
    x = torch.tensor(v, dtype=torch.float64).to(src)
    return x[fits(x)]   # rounding to src can push a value out


def main():
    gen = torch.Generator().manual_seed(SEED)
    out = []
    for sn, s in SOURCES.items():
        for dn, d in TARGETS.items():
            x = values(s, d, gen)
            out.append(("x.%s.%s" % (sn, dn), x))
            out.append(("y.%s.%s" % (sn, dn), x.to(d)))
    write_safetensors(OUT, out, {"torch": torch.__version__})
    print("wrote", OUT, "(%d tensors)" % len(out))


if __name__ == "__main__":
    main()
