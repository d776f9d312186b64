#!/usr/bin/python3
"""Writes the PyTorch golden file of the products and running reductions
(tests/test_cumprod.c): tests/golden/cumprod.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_cumprod_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.fn
(cumprod, prod, prod_dim, cummax, cummin, logcumsumexp), case<i>.dtype
(f64, f32, bf16, f16, i64, i32, u8), case<i>.dim, case<i>.keepdim ("0" or
"1", prod_dim's) and case<i>.kind (how x was made: plain, one_zero,
two_zeros, end_zeros, zero_run, nonfinite, ties), and tensors: case<i>.x, the result
case<i>.y, cummax's and cummin's indices case<i>.i (i64), and for a float
x the upstream gradient case<i>.g and x's gradient case<i>.dx; for an f64
x with a gradient also case<i>.h and case<i>.ddx, the gradient of
sum(h * dx) with respect to x, dx taken with create_graph.

torch 1.13 has none of these ops for f16 on the CPU, nor prod for bf16:
the half cases (every bf16 one too, to treat both alike) are computed
from x converted to f64 and the results rounded to the half dtype, which
is what tapegrad computes (in double, rounded once).  f32 and f64 cases
are torch's own kernels.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "cumprod.safetensors")
SEED = 9113
FLOATS = {"f64": torch.float64, "f32": torch.float32, "bf16": torch.bfloat16,
          "f16": torch.float16}
INTS = {"i64": torch.int64, "i32": torch.int32, "u8": torch.uint8}
SHAPES = ((), (7,), (5, 6), (3, 4, 5), (2, 0, 3))
HALF = (torch.bfloat16, torch.float16)


def run(fn, t, dim, keep):
    """fn on t: (values, indices or None)."""
    if fn == "cumprod":
        return torch.cumprod(t, dim), None
    if fn == "prod":
        return torch.prod(t), None
    if fn == "prod_dim":
        return torch.prod(t, dim, keep), None
    if fn == "cummax":
        return tuple(torch.cummax(t, dim))
    if fn == "cummin":
        return tuple(torch.cummin(t, dim))
    return torch.logcumsumexp(t, dim), None


def make_x(kind, shape, dt, dim, gen):
    """x of kind: values near +-1 (products stay in range), with zeros
    placed per line (one in the middle, two at random, at both ends),
    NaNs and infinities, or few distinct values (ties)."""
    if not dt.is_floating_point:
        lo, hi = (0, 4) if dt == torch.uint8 else (-2, 3)
        x = torch.randint(lo, hi, shape, generator=gen).to(torch.float64)
        if kind == "plain" and x.numel() > 0:
            x[x == 0] = 1
        return x.to(dt)
    if kind == "ties":
        x = torch.randint(-2, 3, shape, generator=gen).to(torch.float64) / 2
    else:
        mag = 0.5 + torch.rand(shape, generator=gen, dtype=torch.float64)
        sign = torch.randint(0, 2, shape, generator=gen).to(torch.float64) * 2 - 1
        x = mag * sign
    n = shape[dim] if len(shape) > 0 else 1
    if len(shape) > 0 and n > 0 and x.numel() > 0:
        if kind == "one_zero":
            x.narrow(dim, n // 2, 1).zero_()
        elif kind == "end_zeros":
            x.narrow(dim, 0, 1).zero_()
            x.narrow(dim, n - 1, 1).zero_()
        elif kind == "two_zeros" and n >= 2:
            a, b = torch.randperm(n, generator=gen)[:2].tolist()
            x.narrow(dim, a, 1).zero_()
            x.narrow(dim, b, 1).zero_()
    if kind == "nonfinite" and x.numel() > 2:
        flat = x.view(-1)
        flat[0] = float("inf")
        flat[flat.numel() // 2] = float("nan")
        flat[-1] = float("-inf")
    if len(shape) == 0 and kind in ("one_zero", "end_zeros", "two_zeros"):
        x = torch.zeros(shape, dtype=torch.float64)
    return x.to(dt)


class Writer:
    def __init__(self):
        self.tensors, self.meta, self.n = {}, {}, 0

    def case(self, fn, dtname, kind, x, dim, keep, gen):
        dt = x.dtype
        is_float = dt.is_floating_point
        grad = is_float and kind != "nonfinite"
        xc = x.to(torch.float64) if dt in HALF else x
        xr = xc.clone().requires_grad_(is_float)
        y, i = run(fn, xr, dim, keep)
        p = "case%d." % self.n
        self.n += 1
        self.meta.update({p + "fn": fn, p + "dtype": dtname, p + "dim": str(dim),
                          p + "keepdim": "1" if keep else "0", p + "kind": kind})
        self.tensors[p + "x"] = x.contiguous()
        self.tensors[p + "y"] = y.detach().to(y.dtype if not is_float else dt).contiguous()
        if i is not None:
            self.tensors[p + "i"] = i.contiguous()
        if not grad:
            return
        g = torch.randn(y.shape, generator=gen, dtype=torch.float64).to(dt)
        second = dt == torch.float64
        (dx,) = torch.autograd.grad(y, (xr,), g.to(xc.dtype), create_graph=second)
        self.tensors[p + "g"] = g.contiguous()
        self.tensors[p + "dx"] = dx.detach().to(dt).contiguous()
        if second and dx.requires_grad:
            h = torch.randn(x.shape, generator=gen, dtype=torch.float64)
            (ddx,) = torch.autograd.grad(dx, (xr,), h, allow_unused=True)
            if ddx is None:
                ddx = torch.zeros_like(x)
            self.tensors[p + "h"] = h.contiguous()
            self.tensors[p + "ddx"] = ddx.contiguous()


def main():
    gen = torch.Generator().manual_seed(SEED)
    w = Writer()
    fns = ("cumprod", "prod", "prod_dim", "cummax", "cummin", "logcumsumexp")
    for dtname, dt in list(FLOATS.items()) + list(INTS.items()):
        for fn in fns:
            if fn == "logcumsumexp" and not dt.is_floating_point:
                continue
            if fn in ("cumprod", "prod", "prod_dim"):
                kinds = ("plain", "one_zero", "two_zeros", "end_zeros", "nonfinite")
            elif fn in ("cummax", "cummin"):
                kinds = ("plain", "ties", "nonfinite")
            else:
                kinds = ("plain", "end_zeros", "nonfinite")
            if not dt.is_floating_point:
                kinds = ("plain", "ties")
            for shape in SHAPES:
                r = len(shape)
                dims = [0, -1] if r <= 1 else list(range(r)) + [-1]
                if fn == "prod":
                    dims = [0]
                for dim in dims:
                    for kind in kinds:
                        x = make_x(kind, shape, dt, dim if r > 0 else 0, gen)
                        w.case(fn, dtname, kind, x, dim, (dim + r) % 2 == 1, gen)
    # a -inf line start for logcumsumexp: torch's gradient is NaN there and
    # finite after the first finite element
    for dtname in ("f64", "f32"):
        x = torch.tensor([[float("-inf"), float("-inf"), 1.0, float("-inf"), 0.5],
                          [2.0, float("-inf"), -1.0, 3.0, float("-inf")]], dtype=FLOATS[dtname])
        w.case("logcumsumexp", dtname, "neg_inf", x, 1, False, gen)
    # cumprod with runs of zeros in a line (two and three in a row, one at
    # each end of a run, a line that ends in a run), and long lines of 600
    # with several runs: torch's exact paths for inputs with zeros
    for dtname in ("f64", "f32"):
        for shape, dim in (((3, 9), 1), ((9, 3), 0), ((2, 600), 1)):
            x = make_x("plain", shape, FLOATS["f64"], dim, gen)
            n = shape[dim]
            for lo, hi in ((2, 4), (5, 8)) if n < 20 else ((3, 5), (100, 103), (590, 600)):
                x.narrow(dim, lo, hi - lo).zero_()
            x.select(1 - dim, 1).narrow(0, n - 2, 2).zero_()
            w.case("cumprod", dtname, "zero_run", x.to(FLOATS[dtname]), dim, False, gen)
    w.meta["cases"] = str(w.n)
    print("%d cases" % w.n)
    write_safetensors(OUT, w.tensors, w.meta)


if __name__ == "__main__":
    main()
