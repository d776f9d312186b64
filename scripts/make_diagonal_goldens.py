#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_diagonal, tg_diag_embed, tg_diag
and tg_trace (tests/test_diagonal.c): tests/golden/diagonal.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_diagonal_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.fn
(diagonal, diag_embed, diag, trace), case<i>.dtype (f32, f64, bf16, i64),
case<i>.offset, case<i>.dim1 and case<i>.dim2, and tensors case<i>.x and
case<i>.y = fn(x); for a float x also case<i>.g (the gradient of y) and
case<i>.dx, torch.autograd's gradient of sum(g * y).

diagonal runs on ranks 2 to 4 along every pair of dims in both orders
(negative dims too) at offsets inside, at the edge of and past the
matrix; diag_embed on ranks 1 to 3 at several dims and offsets; diag on a
vector and on square and oblong matrices (offsets within them: past
them torch 1.13 overflows); trace on square and wide
matrices (not bf16, which torch 1.13's trace lacks; not taller than wide,
where its gradient is wrong: tests/test_diagonal.c checks those).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "diagonal.safetensors")
SEED = 3119
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16,
          "i64": torch.int64}


class Writer:
    def __init__(self):
        self.tensors, self.meta, self.n = {}, {}, 0

    def case(self, fn, dtname, x, offset, dim1, dim2, run):
        p = "case%d." % self.n
        self.n += 1
        is_float = x.dtype.is_floating_point
        xr = x.clone().requires_grad_(is_float)
        y = run(xr)
        self.tensors[p + "x"] = x.contiguous()
        self.tensors[p + "y"] = y.detach().contiguous()
        if is_float:
            g = torch.randn(y.shape, dtype=torch.float64).to(x.dtype)
            (dx,) = torch.autograd.grad(y, (xr,), g)
            self.tensors[p + "g"] = g.contiguous()
            self.tensors[p + "dx"] = dx.contiguous()
        self.meta.update({p + "fn": fn, p + "dtype": dtname, p + "offset": str(offset),
                          p + "dim1": str(dim1), p + "dim2": str(dim2)})


def make(shape, dt):
    if dt.is_floating_point:
        return (torch.rand(shape, dtype=torch.float64) * 8 - 4).to(dt)
    return torch.randint(-50, 50, shape, dtype=torch.int64)


def main():
    torch.manual_seed(SEED)
    w = Writer()
    for dtname, dt in DTYPES.items():
        for shape in ((3, 5), (4, 4), (2, 3, 4), (2, 3, 2, 3), (0, 3)):
            r = len(shape)
            pairs = [(a, b) for a in range(r) for b in range(r) if a != b]
            pairs.append((-1, -2))
            for d1, d2 in pairs:
                for off in (0, 1, -1, 3, -4):
                    w.case("diagonal", dtname, make(shape, dt), off, d1, d2,
                           lambda t, o=off, a=d1, b=d2: torch.diagonal(t, o, a, b))
        for shape in ((3,), (2, 3), (2, 0, 2)):
            r = len(shape) + 1
            for d1, d2 in ((-2, -1), (0, 1), (1, 0), (0, r - 1)):
                for off in (0, 2, -1):
                    w.case("diag_embed", dtname, make(shape, dt), off, d1, d2,
                           lambda t, o=off, a=d1, b=d2: torch.diag_embed(t, o, a, b))
        for shape in ((4,), (3, 3), (2, 5), (5, 2)):
            # torch 1.13's diag of a matrix fails past its corner
            for off in (0, 1, -2) + ((6,) if len(shape) == 1 else ()):
                w.case("diag", dtname, make(shape, dt), off, 0, 1,
                       lambda t, o=off: torch.diag(t, o))
        if dt != torch.bfloat16:
            # torch 1.13's trace backward puts g at every (columns + 1)-th
            # element, wrong for a matrix taller than wide: none here
            for shape in ((3, 3), (2, 5), (1, 4), (0, 2)):
                w.case("trace", dtname, make(shape, dt), 0, 0, 1, torch.trace)
    w.meta["cases"] = str(w.n)
    write_safetensors(OUT, w.tensors, w.meta)
    print("%d cases" % w.n)


if __name__ == "__main__":
    main()
