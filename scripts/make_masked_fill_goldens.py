#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_masked_fill (tests/test_masked_fill.c):
tests/golden/masked_fill.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_masked_fill_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (f32,
f64 or bf16) and case<i>.value (a float's repr: "0.0", "nan", "-inf",
"0.3333333333333333", ...), the tensors case<i>.x (in that dtype), case<i>.mask
(u8 0/1, torch's bool), case<i>.g (the gradient of y), case<i>.y =
x.masked_fill(mask.bool(), value) and case<i>.dx, torch.autograd's gradient
of sum(g * y).

The (x, mask) shape pairs: equal, a mask that broadcasts to x, an x that
broadcasts to the mask (y larger than x, dx summed back), both broadcast,
a 0-d x and a 0-d mask, an empty extent.  x holds NaN, +-inf and -0.0;
values are 0, -0.0, 1/3 and -3e38 (rounded to x's dtype), +-inf and
NaN.  (A finite value beyond x's dtype, 1e300 for f32, is refused, as
torch's "cannot be converted without overflow".)

Integer x: case "icase<i>", i < the metadata "icases", with metadata
icase<i>.dtype (i8, u8, i32 or i64) and icase<i>.value, the tensors
icase<i>.x (in that dtype, its minimum and maximum among random values),
icase<i>.mask (u8) and icase<i>.y (not differentiable: no gradient).  The
shape pairs above, each with a random, an all-true and an all-false mask;
values 0, -1, 2.7 and -2.7 (truncated toward zero), the dtype's minimum
and maximum, and a value just inside each end (max + 0.5 is outside).
"refuse<k>", k < the metadata "refusals": metadata refuse<k>.dtype and
refuse<k>.value, a value torch refuses for that dtype ("value cannot be
converted to type int8_t without overflow"): one past each end, half past
each end, NaN, +-inf, 1e300.  (torch 1.13 accepts 2^63 for int64 and
writes INT64_MIN, an undefined conversion; tapegrad refuses it, and that
value is left out.)
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_cases import int_tensor  # noqa: E402
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "masked_fill.safetensors")
SEED = 6212
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
SHAPES = (((3, 4), (3, 4)), ((3, 4), (3, 1)), ((4,), (2, 3, 4)), ((2, 1, 4), (3, 1)),
          ((), (2, 3)), ((2, 3), ()), ((0, 3), (1, 3)))
VALUES = (0.0, -0.0, 1.0 / 3.0, -3e38, math.inf, -math.inf, math.nan)
INT_DTYPES = {"i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}
ISEED = 6213


def int_values(dt):
    """The fill values of an integer dtype, all within its range."""
    lo, hi = torch.iinfo(dt).min, torch.iinfo(dt).max
    vals = [0.0, 2.7, float(lo), float(hi), lo + 0.75, hi - 0.75]
    if lo < 0:
        vals += [-1.0, -2.7]
    # the doubles nearest 2^63 - 1 and -2^63 are +-2^63: the largest double
    # below 2^63 stands for the maximum
    return [min(v, float.fromhex("0x1.fffffffffffffp62")) for v in vals]


def int_refusals(dt):
    lo, hi = torch.iinfo(dt).min, torch.iinfo(dt).max
    vals = [lo - 1.0, lo - 0.5, math.nan, math.inf, -math.inf, 1e300]
    if hi < 2**62:   # hi + 1 of int64 is 2^63, which torch 1.13 accepts
        vals += [hi + 1.0, hi + 0.5]
    if lo == -2**63:   # -2^63 - 1 rounds to -2^63; the next double below
        vals = [float.fromhex("-0x1.0000000000001p63")] + vals[2:]
    return vals


def int_cases(tensors, meta):
    gen = torch.Generator().manual_seed(ISEED)
    i = 0
    for name, dt in INT_DTYPES.items():
        for xs, ms in SHAPES:
            masks = (torch.rand(ms, generator=gen) < 0.5, torch.ones(ms, dtype=torch.bool),
                     torch.zeros(ms, dtype=torch.bool))
            for m, value in enumerate(int_values(dt)):
                x = int_tensor(dt, xs, gen)
                mask = masks[m % 3]
                y = x.masked_fill(mask, value)
                assert y.dtype == dt and not y.requires_grad
                p = "icase%d." % i
                for k, v in {"x": x, "mask": mask.to(torch.uint8), "y": y}.items():
                    tensors[p + k] = v.contiguous()
                meta.update({p + "dtype": name, p + "value": repr(value)})
                i += 1
    meta["icases"] = str(i)
    k = 0
    for name, dt in INT_DTYPES.items():
        x = torch.zeros(3, dtype=dt)
        mask = torch.tensor([True, False, True])
        for value in int_refusals(dt):
            try:
                x.masked_fill(mask, value)
            except RuntimeError as e:
                assert "without overflow" in str(e), str(e)
            else:
                raise AssertionError("torch accepted %r for %s" % (value, name))
            meta.update({"refuse%d.dtype" % k: name, "refuse%d.value" % k: repr(value)})
            k += 1
    meta["refusals"] = str(k)


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for xs, ms in SHAPES:
            for value in VALUES:
                x = torch.rand(xs, dtype=torch.float64) * 8 - 4
                flat = x.view(-1)
                for k, special in enumerate((math.nan, math.inf, -math.inf, -0.0)):
                    if k < flat.numel() - 1:
                        flat[k + 1] = special
                x = x.to(dt)
                mask = torch.rand(ms) < 0.5
                xr = x.clone().requires_grad_()
                y = xr.masked_fill(mask, value)
                g = torch.randn(y.shape, dtype=torch.float64).to(dt)
                (dx,) = torch.autograd.grad(y, (xr,), g)
                p = "case%d." % i
                t = {"x": x, "mask": mask.to(torch.uint8), "g": g, "y": y, "dx": dx}
                for k, v in t.items():
                    tensors[p + k] = v.detach().contiguous()
                meta.update({p + "dtype": name, p + "value": repr(value)})
                i += 1
    meta["cases"] = str(i)
    int_cases(tensors, meta)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
