#!/usr/bin/python3
"""Writes the PyTorch golden files of tg_where (tests/test_where.c):
tests/golden/where.safetensors (a and b of one dtype) and
tests/golden/where_promote.safetensors (a and b of two dtypes).

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_where_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.dtype (i8,
u8, i32, i64, f32, f64, f16 or bf16) and the tensors case<i>.cond (u8 0/1,
torch's bool), case<i>.a and case<i>.b (in that dtype) and case<i>.y =
torch.where(cond.bool(), a, b).  A float case also holds case<i>.g (the
gradient of y) and case<i>.da, case<i>.db, torch.autograd's gradients of
sum(g * y); an integer result is not differentiable.

The (cond, a, b) shapes: all equal, a cond that broadcasts, a 0-d a, a 0-d
b, all three broadcast (y larger than each), a 0-d cond, an empty extent;
each with a random, an all-true and an all-false cond.  An integer a or b
holds its dtype's minimum and maximum among random values; a float one
NaN, +-inf and -0.0.

where_promote.safetensors: case "case<i>", i < the metadata "cases", for
every ordered pair of two different dtypes and each of PROMOTE_SHAPES
(both with dims, a 0-d b, a 0-d a, both 0-d, broadcast), with metadata
case<i>.a_dtype, case<i>.b_dtype and case<i>.y_dtype, the dtype of
torch.where(cond, a, b) (checked to be torch.result_type(a, b)).  When
y_dtype is int16 (i8 with u8, which tapegrad does not have) the case holds
cond, a and b only.  Otherwise it holds y too, and when y is a float:
case<i>.g and torch.autograd's gradient of sum(g * y) for each float
operand, case<i>.da and/or case<i>.db (in the operand's dtype); an integer
operand has none.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_cases import int_tensor  # noqa: E402
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "where.safetensors")
OUT_PROMOTE = os.path.join(ROOT, "tests", "golden", "where_promote.safetensors")
SEED = 6214
SEED_PROMOTE = 6215
DTYPES = {"i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64,
          "f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
          "bf16": torch.bfloat16}
SHAPES = (((3, 4), (3, 4), (3, 4)), ((3, 1), (3, 4), (3, 4)), ((2, 3), (), (2, 3)),
          ((2, 3), (2, 3), ()), ((2, 1, 4), (3, 1), (1, 3, 1)), ((), (2, 3), (2, 3)),
          ((0, 3), (1, 3), (0, 1)))
PROMOTE_SHAPES = (((3, 4), (3, 4), (3, 4)), ((2, 3), (2, 3), ()), ((2, 3), (), (2, 3)),
                  ((2,), (), ()), ((2, 1, 4), (3, 1), (1, 3, 1)))
NAMES = {v: k for k, v in DTYPES.items()}


def values(dt, shape, gen):
    """Random elements of dtype dt: an integer dtype's minimum and maximum
    among them, a float dtype's NaN, +-inf and -0.0."""
    if dt.is_floating_point:
        x = torch.rand(shape, generator=gen, dtype=torch.float64) * 8 - 4
        flat = x.view(-1)
        for k, special in enumerate((math.nan, math.inf, -math.inf, -0.0)):
            if k < flat.numel() - 1:
                flat[k + 1] = special
        return x.to(dt)
    return int_tensor(dt, shape, gen)


def promote_case(cond, a, b, gen):
    """The tensors of one where_promote case and y's dtype name."""
    t = {"cond": cond.to(torch.uint8), "a": a, "b": b}
    want = torch.result_type(a, b)
    if want == torch.int16:
        y = torch.where(cond, a, b)   # torch accepts the pair; tapegrad cannot
        assert y.dtype == torch.int16
        return t, "int16"
    fl = [x.dtype.is_floating_point for x in (a, b)]
    ab = [x.clone().requires_grad_() if f else x for x, f in zip((a, b), fl)]
    y = torch.where(cond, *ab)
    assert y.dtype == want, (a.dtype, b.dtype, y.dtype, want)
    t["y"] = y
    if y.dtype.is_floating_point:
        g = torch.randn(y.shape, generator=gen, dtype=torch.float64).to(y.dtype)
        grads = torch.autograd.grad(y, [x for x, f in zip(ab, fl) if f], g)
        t["g"] = g
        for name, x, f in zip(("da", "db"), ab, fl):
            if f:
                t[name], grads = grads[0], grads[1:]
                assert t[name].dtype == x.dtype
    else:
        assert not y.requires_grad
    return t, NAMES[y.dtype]


def main_promote():
    gen = torch.Generator().manual_seed(SEED_PROMOTE)
    tensors, meta = {}, {}
    i = 0
    for an, adt in DTYPES.items():
        for bn, bdt in DTYPES.items():
            if adt == bdt:
                continue
            for cs, as_, bs in PROMOTE_SHAPES:
                cond = torch.rand(cs, generator=gen) < 0.5
                a, b = values(adt, as_, gen), values(bdt, bs, gen)
                t, yn = promote_case(cond, a, b, gen)
                p = "case%d." % i
                for k, v in t.items():
                    tensors[p + k] = v.detach().contiguous()
                meta.update({p + "a_dtype": an, p + "b_dtype": bn, p + "y_dtype": yn})
                i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT_PROMOTE, tensors, meta)


def main():
    gen = torch.Generator().manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for cs, as_, bs in SHAPES:
            conds = (torch.rand(cs, generator=gen) < 0.5, torch.ones(cs, dtype=torch.bool),
                     torch.zeros(cs, dtype=torch.bool))
            for cond in conds:
                a, b = values(dt, as_, gen), values(dt, bs, gen)
                t = {"cond": cond.to(torch.uint8), "a": a, "b": b}
                if dt.is_floating_point:
                    ar, br = a.clone().requires_grad_(), b.clone().requires_grad_()
                    y = torch.where(cond, ar, br)
                    g = torch.randn(y.shape, generator=gen, dtype=torch.float64).to(dt)
                    da, db = torch.autograd.grad(y, (ar, br), g)
                    t.update({"y": y, "g": g, "da": da, "db": db})
                else:
                    y = torch.where(cond, a, b)
                    assert y.dtype == dt and not y.requires_grad
                    t["y"] = y
                p = "case%d." % i
                for k, v in t.items():
                    tensors[p + k] = v.detach().contiguous()
                meta[p + "dtype"] = name
                i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)
    main_promote()


if __name__ == "__main__":
    main()
