#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_scatter, tg_scatter_value and
tg_scatter_reduce (tests/test_scatter.c): tests/golden/scatter.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_scatter_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op
("scatter", "scatter_value" or "scatter_reduce"), case<i>.dtype (f32, f64,
f16 or bf16), case<i>.dim (as passed: negative dims too), case<i>.reduce
(torch's string, scatter_reduce), case<i>.include_self ("1" or "0"),
case<i>.value (scatter_value, as a decimal string), and tensors case<i>.x,
case<i>.index (i64), case<i>.src (not scatter_value), case<i>.g (the
gradient of y), case<i>.y (the op's result) and case<i>.dx, case<i>.dsrc
(torch.autograd's gradients of sum(g * y)).

x has ranks 1 to 4 (f16 and bf16: 1 to 3), each dim in turn, positive and negative; the index
has more values than x's extent at dim, so elements get several terms
(scatter: the last stays), and is smaller than x at the other dims where
x's extent is above 1.  For amax and amin every other case draws x and
src from a few integers, so that equal values (ties) share the gradient,
and the others from -1, 1 and zeros of both signs (the earlier of equal
values stays); for prod every other case puts zeros into x and src.
"""
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "scatter.safetensors")
SEED = 5813
DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
          "bf16": torch.bfloat16}
SHAPES = ((4,), (3, 4), (3, 4, 2), (2, 3, 2, 3))
PICKED = 6   # index values per line at dim: more than any extent, so repeats
REDUCES = ("sum", "prod", "mean", "amax", "amin")


def index_for(xshape, d):
    ishape = [PICKED if k == d else max(1, s - (k % 2)) for k, s in enumerate(xshape)]
    return torch.randint(0, xshape[d], ishape, dtype=torch.int64)


def values(shape, dt, kind):
    """Normal values, small integers (ties) or normal values with zeros."""
    if kind == "ties":
        return torch.randint(-2, 3, shape).to(torch.float64).to(dt)
    if kind == "signed":   # -1, 1 and zeros of both signs
        v = torch.randint(-1, 2, shape).to(torch.float64)
        return torch.where(torch.rand(shape) < 0.5, -v, v).to(dt)
    v = torch.randn(shape, dtype=torch.float64) * 2
    if kind == "zeros":
        v = v * (torch.rand(shape) > 0.3).to(torch.float64)
    return v.to(dt)


def main():
    warnings.filterwarnings("ignore")
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    plan = [("scatter", None, True), ("scatter_value", None, True)]
    plan += [("scatter_reduce", r, inc) for r in REDUCES for inc in (True, False)]
    for name, dt in DTYPES.items():
        for op, reduce, inc in plan:
            for shape in SHAPES if dt in (torch.float32, torch.float64) else SHAPES[:3]:
                r = len(shape)
                for dim in range(-r, r):
                    kind = "plain"
                    if reduce in ("amax", "amin"):
                        kind = "ties" if dim % 2 == 0 else "signed"
                    if reduce == "prod" and dim % 2 == 0:
                        kind = "zeros"
                    index = index_for(shape, dim % r)
                    x = values(shape, dt, kind).requires_grad_()
                    src = values(index.shape, dt, kind).requires_grad_()
                    value = round(float(torch.randn(())) * 3, 3)
                    if op == "scatter":
                        y = torch.scatter(x, dim, index, src)
                    elif op == "scatter_value":
                        y = torch.scatter(x, dim, index, value)
                    else:
                        y = torch.scatter_reduce(x, dim, index, src, reduce, include_self=inc)
                    g = torch.randn(y.shape, dtype=torch.float64).to(dt)
                    wrt = (x,) if op == "scatter_value" else (x, src)
                    grads = torch.autograd.grad(y, wrt, g)
                    p = "case%d." % i
                    out = {"x": x, "index": index, "g": g, "y": y, "dx": grads[0]}
                    if op != "scatter_value":
                        out.update({"src": src, "dsrc": grads[1]})
                    for k, v in out.items():
                        tensors[p + k] = v.detach().contiguous()
                    meta.update({p + "op": op, p + "dtype": name, p + "dim": str(dim),
                                 p + "reduce": reduce or "", p + "include_self": str(int(inc)),
                                 p + "value": repr(value)})
                    i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
