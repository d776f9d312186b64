#!/usr/bin/python3
"""Writes tests/golden/reduce.safetensors: PyTorch 1.13's values, indices
and gradients of the reductions that tests/test_stats.c compares tapegrad
with: torch.max / torch.min over a dim, argmax / argmin, amax / amin, max /
min of the whole tensor, and torch.var / torch.std.

Inputs, each in several dtypes (metadata "cases", each case's input x
under "<case>.x"): values drawn from a few integers so that rows have ties,
rows with NaN, +-inf and -0.0, continuous random values, a 0-d tensor, and
i64 and u8 tensors.

Calls (metadata "calls": entries "case;fn;dims;keepdim;correction"
separated by "|", call k's tensors under "c<k>."):
  fn       max_dim, min_dim (dims: one dim), argmax_dim, argmin_dim,
           amax, amin, var_dims, std_dims (dims: a comma-separated list),
           max, min, argmax, argmin, var, std (the whole tensor; dims
           empty); correction is var's and std's (torch's unbiased=True is
           1), 0 for the others
  c<k>.y   the values (argmax: the indices)
  c<k>.i   the indices of max_dim / min_dim
  c<k>.w   for float inputs of a differentiable fn: the upstream gradient
  c<k>.gx  d sum(y * w) / dx
var and std are also called with N - correction <= 0 (inf and NaN
values); no gradient is recorded for those, where torch's gradient over a
dim list divides by the negative N - correction (finite) while its value
divides by 0.

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_reduce_goldens.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "reduce.safetensors")
SEED = 8053
D = torch.float64
INF, NAN = float("inf"), float("nan")
SUFFIX = {torch.float64: "f64", torch.float32: "f32", torch.bfloat16: "bf16",
          torch.float16: "f16", torch.int64: "i64", torch.uint8: "u8"}


def inputs(gen):
    """name -> x in f64; each is written in several dtypes below."""
    ties = torch.randint(0, 4, (3, 4, 5), generator=gen).to(D)
    nan = ties.clone()
    nan[0, 1, 2] = NAN
    nan[1, :, 3] = NAN
    nan[2, 3, 0] = NAN
    nan[2, 3, 4] = NAN
    special = torch.tensor([[-INF, -INF, -INF, -INF],
                            [INF, 0.0, INF, 2.0],
                            [-0.0, 0.0, -0.0, -1.0],
                            [1.0, NAN, 2.0, NAN],
                            [5.0, 5.0, 5.0, 5.0]], dtype=D)
    rand = torch.randn(4, 6, generator=gen, dtype=D) * 3
    return {"ties": ties, "nan": nan, "special": special, "rand": rand,
            "scalar": torch.tensor(2.5, dtype=D),
            "int": torch.randint(-50, 50, (4, 5), generator=gen).to(D),
            "byte": torch.randint(0, 6, (3, 5), generator=gen).to(D)}


CASES = [("ties", torch.float64), ("nan", torch.float64), ("special", torch.float64),
         ("rand", torch.float64), ("scalar", torch.float64), ("ties", torch.float32),
         ("nan", torch.float32), ("special", torch.float32), ("rand", torch.bfloat16),
         ("nan", torch.bfloat16), ("ties", torch.float16), ("int", torch.int64),
         ("byte", torch.uint8)]

# fn -> the dims specs it is called with, per input rank (0-d: dim 0 and -1).
ONE_DIM = {0: [0, -1], 2: [0, 1, -1], 3: [0, 1, 2, -2]}
DIM_LISTS = {0: [[0]], 2: [[0], [1], [0, 1], [-1, 0]], 3: [[0], [2], [0, 2], [1, -1, 0]]}


def call(fn, x, dims, keepdim, correction=0):
    """(values, indices or None) of torch's fn."""
    if fn in ("var_dims", "std_dims"):
        f = torch.var if fn == "var_dims" else torch.std
        return f(x, dims, correction=correction, keepdim=keepdim), None
    if fn in ("var", "std"):
        f = torch.var if fn == "var" else torch.std
        return f(x, list(range(x.dim())), correction=correction), None
    if fn in ("max_dim", "min_dim"):
        r = (torch.max if fn == "max_dim" else torch.min)(x, dims[0], keepdim)
        return r.values, r.indices
    if fn in ("argmax_dim", "argmin_dim"):
        return (torch.argmax if fn == "argmax_dim" else torch.argmin)(x, dims[0], keepdim), None
    if fn in ("amax", "amin"):
        return (torch.amax if fn == "amax" else torch.amin)(x, dims, keepdim), None
    if fn in ("max", "min"):
        return (torch.max if fn == "max" else torch.min)(x), None
    return (torch.argmax if fn == "argmax" else torch.argmin)(x), None


def specs(rank, is_float):
    """(fn, dims, keepdim, correction) of every call made on an input of
    this rank."""
    out = []
    for d in ONE_DIM[rank]:
        for fn in ("max_dim", "min_dim", "argmax_dim", "argmin_dim"):
            out.append((fn, [d], d == 1 or rank == 0, 0))
    for dl in DIM_LISTS[rank]:
        for fn in ("amax", "amin"):
            out.append((fn, dl, len(dl) == 2, 0))
    for fn in ("max", "min", "argmax", "argmin"):
        out.append((fn, [], False, 0))
    if is_float:
        for k, dl in enumerate(DIM_LISTS[rank]):
            for fn in ("var_dims", "std_dims"):
                out.append((fn, dl, k % 2 == 1, k % 3))
        for fn in ("var", "std"):
            for c in (0, 1):
                out.append((fn, [], False, c))
        if rank > 0:   # N - correction <= 0: 4 or 5 elements per row at most here
            for fn in ("var_dims", "std_dims"):
                out.append((fn, [0], False, 5))
    return out


def dof(x, fn, dims, correction):
    n = x.numel() if fn in ("var", "std") else 1
    for d in dims:
        n *= x.shape[d] if x.dim() > 0 else 1
    return n - correction


def main():
    gen = torch.Generator().manual_seed(SEED)
    out, meta = [], {"torch": torch.__version__}
    names, calls = [], []
    base = inputs(gen)
    for case, dt in CASES:
        name = "%s_%s" % (case, SUFFIX[dt])
        x = base[case].to(dt)
        out.append(("%s.x" % name, x))
        names.append(name)
        for fn, dims, keepdim, c in specs(x.dim(), dt.is_floating_point):
            k = len(calls)
            differentiable = dt.is_floating_point and not fn.startswith("arg")
            if fn.startswith(("var", "std")) and dof(x, fn, dims, c) <= 0:
                differentiable = False
            xi = x.clone().requires_grad_(differentiable)
            y, i = call(fn, xi, dims, keepdim, c)
            out.append(("c%d.y" % k, y.detach()))
            if i is not None:
                out.append(("c%d.i" % k, i))
            if differentiable:
                w = torch.randn(y.shape, generator=gen, dtype=D).to(dt)
                y.backward(w)
                out += [("c%d.w" % k, w), ("c%d.gx" % k, xi.grad)]
            calls.append("%s;%s;%s;%d;%d" % (name, fn, ",".join(str(d) for d in dims),
                                             int(keepdim), c))
    meta["cases"] = ",".join(names)
    meta["calls"] = "|".join(calls)
    write_safetensors(OUT, out, meta)
    print("wrote", OUT, len(calls), "calls")


if __name__ == "__main__":
    main()
