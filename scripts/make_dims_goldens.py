#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_narrow, tg_movedim, tg_flatten,
tg_unflatten, tg_tensordot, tg_kron, tg_cross and tg_cdist
(tests/test_dims.c): tests/golden/dims.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_dims_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.fn,
case<i>.dtype (f32, f64, bf16, f16, i64), case<i>.a and case<i>.b (the
arguments: comma-separated integers, "-" for none; cdist's b is p), and
tensors case<i>.x (and case<i>.x2 for the products), case<i>.y; for float
inputs also case<i>.g (the gradient of y) and case<i>.dx (and
case<i>.dx2), torch.autograd's gradients of sum(g * y).

narrow, movedim, flatten and unflatten run on ranks 0 to 4 over dims,
starts and sizes inside and at the edges (negative ones too), empty
extents included; tensordot with dims as a count and as two lists, in
every order, also of integers of each dtype (wrapping); kron on ranks 0
to 8 of equal and unequal ranks; cross along
every dim of extent 3 with broadcast batch dims; cdist for p in 0, 0.5,
1, 1.5, 2, 3 and inf, with 25 rows or fewer (the difference of every pair)
and more (p = 2 through one product), batch dims broadcast, equal rows
(distance 0), and for p = inf small integers with tied largest
differences.  f16 and bf16 only where torch 1.13 has the op on the CPU.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "dims.safetensors")
SEED = 4721
DTYPES = {"f64": torch.float64, "f32": torch.float32, "bf16": torch.bfloat16,
          "f16": torch.float16, "i64": torch.int64}


def ints(v):
    if v is None:
        return "-"
    if isinstance(v, (int, float)):
        return repr(v)
    return ",".join(str(i) for i in v) if len(v) else ""


class Writer:
    def __init__(self):
        self.tensors, self.meta, self.n = {}, {}, 0

    def case(self, fn, dtname, xs, a, b, run):
        p = "case%d." % self.n
        self.n += 1
        is_float = xs[0].dtype.is_floating_point
        xr = [x.clone().requires_grad_(is_float) for x in xs]
        y = run(*xr)
        for name, x in zip(("x", "x2"), xs):
            self.tensors[p + name] = x.contiguous()
        self.tensors[p + "y"] = y.detach().contiguous()
        if is_float:
            g = torch.randn(y.shape, dtype=torch.float64).to(y.dtype)
            grads = torch.autograd.grad(y, xr, g)
            self.tensors[p + "g"] = g.contiguous()
            for name, d in zip(("dx", "dx2"), grads):
                self.tensors[p + name] = d.contiguous()
        self.meta.update({p + "fn": fn, p + "dtype": dtname, p + "a": ints(a),
                          p + "b": ints(b)})


def make(shape, dt):
    if dt.is_floating_point:
        return (torch.rand(shape, dtype=torch.float64) * 8 - 4).to(dt)
    return torch.randint(-50, 50, shape, dtype=torch.int64)


def shape_cases(w, dtname, dt):
    for shape in ((), (5,), (3, 4), (2, 3, 4), (2, 0, 3, 2)):
        r = len(shape)
        for d in range(-r, r):
            n = shape[d]
            for start, length in ((0, n), (1, n - 1), (-2, 2), (n, 0), (-n, 1)):
                if start < -n or start > n or length < 0 or \
                        (start % max(n, 1) if start < 0 else start) + length > n:
                    continue
                w.case("narrow", dtname, [make(shape, dt)], (d, start, length), None,
                       lambda t, d=d, s=start, ln=length: torch.narrow(t, d, s, ln))
        span = max(r, 1)
        moves = [((0,), (span - 1,)), ((-1,), (0,)), ((), ())]
        if r >= 2:
            moves += [((0, 1), (1, 0)), ((0, -1), (-1, -2)), ((1,), (-1,))]
        if r >= 3:
            moves += [((2, 0, 1), (0, 1, 2)), ((0, 2), (2, 0))]
        for src, dst in moves:
            w.case("movedim", dtname, [make(shape, dt)], src, dst,
                   lambda t, s=src, d=dst: torch.movedim(t, s, d))
        for lo in range(-span, span):
            for hi in range(-span, span):
                if (lo % span) <= (hi % span):
                    w.case("flatten", dtname, [make(shape, dt)], (lo, hi), None,
                           lambda t, lo=lo, hi=hi: torch.flatten(t, lo, hi))
        for d in range(-r, r):
            n = shape[d]
            for sizes in ((n,), (1, n, 1), (-1,), (n, -1)) + \
                    (((2, n // 2), (-1, 2)) if n % 2 == 0 else ()):
                if n == 0 and -1 in sizes:
                    continue
                w.case("unflatten", dtname, [make(shape, dt)], (d,), sizes,
                       lambda t, d=d, s=sizes: torch.unflatten(t, d, s))


def product_cases(w, dtname, dt):
    if dt != torch.float16:
        for sa, sb, dims in (((3, 4), (4, 5), 1), ((2, 3, 4), (3, 4, 2), 2), ((3,), (2,), 0),
                             ((2, 3, 4), (4, 3), ([1, 2], [1, 0])),
                             ((3, 4, 2), (2, 3), ([0, 2], [1, 0])),
                             ((2, 0, 3), (3, 2), 1), ((4, 3), (4, 3), ([-2, -1], [0, 1])),
                             ((5, 2), (5,), ([0], [0]))):
            a = list(dims[0]) if isinstance(dims, tuple) else dims
            b = list(dims[1]) if isinstance(dims, tuple) else None
            w.case("tensordot", dtname, [make(sa, dt), make(sb, dt)], a, b,
                   lambda x, y, d=dims: torch.tensordot(x, y, dims=d))
    for sa, sb in (((), ()), ((3,), (2,)), ((2, 3), (3, 2)), ((2,), (2, 3)), ((2, 1, 3), (2, 2)),
                   ((0, 2), (3, 1)), ((2, 2, 2), (1, 3, 2)), ((2, 1, 2, 1, 3), (1, 2, 1, 3, 1)),
                   ((2, 3), (2, 1, 1, 2, 2)), ((1, 2, 1, 2, 1, 2), (2, 1, 2, 1, 2, 1)),
                   ((2, 1, 1, 2, 1, 1, 2), (1, 2, 1, 1, 1, 2)),
                   ((1, 2, 1, 1, 2, 1, 1, 2), (2, 1, 1, 2, 1, 1, 2, 1)),
                   ((2, 0, 1, 1, 2), (1, 2, 1, 2, 1))):
        w.case("kron", dtname, [make(sa, dt), make(sb, dt)], None, None, torch.kron)
    if dt != torch.float16:
        for sa, sb, d in (((3,), (3,), 0), ((4, 3), (4, 3), -1), ((3, 4), (3, 1), 0),
                          ((2, 3, 5), (1, 3, 5), 1), ((2, 1, 3), (1, 4, 3), -1), ((0, 3), (1, 3), 1)):
            w.case("cross", dtname, [make(sa, dt), make(sb, dt)], (d,), None,
                   lambda x, y, d=d: torch.linalg.cross(x, y, dim=d))


INT_DTYPES = {"i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}


def int_tensordot_cases(w):
    """Integer tensordot over each integer dtype's whole range, so that the
    products and sums wrap modulo 2^bits as torch's integer mm."""
    for dtname, dt in INT_DTYPES.items():
        info = torch.iinfo(dt)
        for sa, sb, dims in (((3, 4), (4, 5), 1), ((2, 3, 4), (4, 3), ([1, 2], [1, 0])),
                             ((3,), (2,), 0), ((5,), (5,), 1), ((2, 0), (0, 3), 1)):
            x = torch.randint(info.min, info.max, sa, dtype=dt)
            y = torch.randint(info.min, info.max, sb, dtype=dt)
            a = list(dims[0]) if isinstance(dims, tuple) else dims
            b = list(dims[1]) if isinstance(dims, tuple) else None
            w.case("tensordot", dtname, [x, y], a, b,
                   lambda x, y, d=dims: torch.tensordot(x, y, dims=d))


def cdist_cases(w, dtname, dt):
    for sa, sb in (((4, 3), (5, 3)), ((2, 4, 3), (5, 3)), ((2, 1, 3, 2), (4, 5, 2)),
                   ((30, 4), (6, 4)), ((3, 4), (27, 4)), ((2, 30, 3), (2, 4, 3)),
                   ((0, 3), (2, 3)), ((3, 0), (2, 0))):
        for p in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")):
            x1, x2 = make(sa, dt), make(sb, dt)
            # a distance of 0, where the difference of every pair is taken
            # (through the product it is cancellation noise, as its gradient)
            if x1.numel() and x2.numel() and x1.dim() == 2 and x2.dim() == 2 and \
                    max(sa[0], sb[0]) <= 25:
                x2[1] = x1[0]
            w.case("cdist", dtname, [x1, x2], None, p,
                   lambda x, y, p=p: torch.cdist(x, y, p=p))
    # small integers: many tied largest |differences|, each of which gets
    # the whole gradient at p = inf
    for sa, sb in (((4, 5), (3, 5)), ((2, 3, 4), (3, 4)), ((6, 2), (5, 2))):
        x1 = torch.randint(-2, 3, sa).to(dt)
        x2 = torch.randint(-2, 3, sb).to(dt)
        w.case("cdist", dtname, [x1, x2], None, float("inf"),
               lambda x, y: torch.cdist(x, y, p=float("inf")))


def main():
    torch.manual_seed(SEED)
    w = Writer()
    for dtname, dt in DTYPES.items():
        shape_cases(w, dtname, dt)
        product_cases(w, dtname, dt)
        if dt in (torch.float64, torch.float32):
            cdist_cases(w, dtname, dt)
    int_tensordot_cases(w)
    w.meta["cases"] = str(w.n)
    write_safetensors(OUT, w.tensors, w.meta)
    print("%d cases" % w.n)


if __name__ == "__main__":
    main()
