#!/usr/bin/python3
"""Writes the PyTorch golden file of the sorting and selection ops
(tests/test_sort.c): tests/golden/sort.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_sort_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.fn (sort,
argsort, topk, kthvalue, median_dim, nanmedian_dim, median, nanmedian),
case<i>.dtype (f32, f64, bf16, f16, i64, i32, u8), case<i>.dim,
case<i>.flag (sort's descending, topk's largest, kthvalue's and the
medians' keepdim: "0" or "1") and case<i>.k, and tensors: case<i>.x, its
values case<i>.y (none for argsort) and indices case<i>.i (i64; none for
the whole-tensor medians); for a float x also case<i>.g (the gradient of
y) and case<i>.dx, torch.autograd's gradient of sum(g * y).

sort and argsort (stable=True, as tapegrad's always are) run on rows with
repeated values and NaNs (their order among equal elements is checked here
against a stable sort of the values written out in Python); topk, kthvalue
and the medians on distinct values (torch picks among equal ones by
quickselect), the medians also with NaNs.  Cases torch 1.13 cannot run on
the CPU (the medians of f16) are left out.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "sort.safetensors")
SEED = 7411
FLOATS = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16,
          "f16": torch.float16}
INTS = {"i64": torch.int64, "i32": torch.int32, "u8": torch.uint8}
SHAPES = ((), (7,), (5, 19), (3, 4, 6), (2, 0, 3))


def distinct(shape, dt, gen):
    """Distinct values (a permutation of 0..n-1, shifted and scaled so
    that bf16 holds them exactly)."""
    n = 1
    for e in shape:
        n *= e
    p = torch.randperm(n, generator=gen).to(torch.float64)
    if dt == torch.uint8:
        p = p % 256
    elif not dt.is_floating_point:
        p = p - n // 2
    else:
        p = (p - n // 2) / 4
    return p.reshape(shape).to(dt)


def with_ties(shape, dt, gen, nans):
    """Few distinct values (many ties), some NaNs in a float x."""
    x = torch.randint(0, 5, shape, generator=gen).to(torch.float64) - 2
    if dt.is_floating_point and nans and x.numel() > 0:
        flat = x.view(-1)
        pick = torch.randperm(flat.numel(), generator=gen)[: max(1, flat.numel() // 7)]
        flat[pick] = float("nan")
    if dt == torch.uint8:
        x = x + 2
    return x.to(dt)


def stable_order(x, dim, descending):
    """The indices of a stable sort (NaN last ascending, first
    descending), computed without torch.sort."""
    xs = x.to(torch.float64).movedim(dim, -1)
    out = torch.empty(xs.shape, dtype=torch.int64)
    if xs.numel() == 0:
        return out.movedim(-1, dim)
    rows, n = xs.reshape(-1, xs.shape[-1]), xs.shape[-1]
    orows = out.view(-1, n)
    for r in range(rows.shape[0]):
        vals = rows[r].tolist()

        def key(j):
            v = vals[j]
            nan = v != v
            if descending:
                return (0 if nan else 1, 0.0 if nan else -v, j)
            return (1 if nan else 0, 0.0 if nan else v, j)
        orows[r] = torch.tensor(sorted(range(n), key=key), dtype=torch.int64)
    return out.movedim(-1, dim)


class Writer:
    def __init__(self):
        self.tensors, self.meta, self.n, self.skipped = {}, {}, 0, 0

    def case(self, fn, dtname, x, dim, flag, k, run):
        is_float = x.dtype.is_floating_point
        xr = x.clone().requires_grad_(is_float)
        try:
            y, i = run(xr)
        except RuntimeError as e:   # torch 1.13 has no f16 median on the CPU
            if "not implemented for 'Half'" in str(e):
                self.skipped += 1
                return
            raise
        p = "case%d." % self.n
        self.n += 1
        self.meta.update({p + "fn": fn, p + "dtype": dtname, p + "dim": str(dim),
                          p + "flag": "1" if flag else "0", p + "k": str(k)})
        self.tensors[p + "x"] = x.contiguous()
        if i is not None:
            self.tensors[p + "i"] = i.contiguous()
        if y is None:   # argsort
            return
        self.tensors[p + "y"] = y.detach().contiguous()
        if is_float:
            g = torch.randn(y.shape, dtype=torch.float64).to(x.dtype)
            (dx,) = torch.autograd.grad(y, (xr,), g, allow_unused=True)
            self.tensors[p + "g"] = g.contiguous()
            self.tensors[p + "dx"] = dx.contiguous()


def main():
    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    w = Writer()
    for dtname, dt in list(FLOATS.items()) + list(INTS.items()):
        for shape in SHAPES:
            r = len(shape)
            for dim in [0, -1] if r <= 1 else list(range(r)) + [-1]:
                for desc in (False, True):
                    x = with_ties(shape, dt, gen, nans=True)
                    want = stable_order(x, dim, desc) if r > 0 else torch.tensor(0)
                    si = torch.sort(x, dim=dim, descending=desc, stable=True)[1]
                    assert torch.equal(si, want), (shape, dim, desc)
                    w.case("sort", dtname, x, dim, desc, 0,
                           lambda t, d=dim, s=desc: torch.sort(t, dim=d, descending=s, stable=True))
                    w.case("argsort", dtname, x, dim, desc, 0,
                           lambda t, d=dim, s=desc: (None, torch.argsort(t, dim=d, descending=s,
                                                                   stable=True)))
                extent = shape[dim] if r > 0 else 1
                xd = distinct(shape, dt, gen)
                for k in sorted({0, min(1, extent), extent // 2, extent}):
                    for largest in (True, False):
                        w.case("topk", dtname, xd, dim, largest, k,
                               lambda t, d=dim, kk=k, lg=largest: torch.topk(t, kk, d, lg))
                if extent == 0:
                    continue
                for k in sorted({1, (extent + 1) // 2, extent}):
                    keep = k % 2 == 0
                    w.case("kthvalue", dtname, xd, dim, keep, k,
                           lambda t, d=dim, kk=k, kp=keep: torch.kthvalue(t, kk, d, kp))
                for keep in (False, True):
                    xm = xd.clone()
                    if dt.is_floating_point and xm.numel() > 2:
                        flat = xm.view(-1)   # a NaN or two in some rows
                        flat[1] = float("nan")
                        flat[-1] = float("nan")
                    w.case("median_dim", dtname, xm, dim, keep, 0,
                           lambda t, d=dim, kp=keep: torch.median(t, d, kp))
                    w.case("nanmedian_dim", dtname, xm, dim, keep, 0,
                           lambda t, d=dim, kp=keep: torch.nanmedian(t, d, kp))
            if 0 not in shape:
                xd = distinct(shape, dt, gen)
                w.case("median", dtname, xd, 0, False, 0, lambda t: (torch.median(t), None))
                w.case("nanmedian", dtname, xd, 0, False, 0,
                       lambda t: (torch.nanmedian(t), None))
                if dt.is_floating_point and xd.numel() > 1:
                    xn = xd.clone()
                    xn.view(-1)[0] = float("nan")
                    w.case("median", dtname, xn, 0, False, 0, lambda t: (torch.median(t), None))
                    w.case("nanmedian", dtname, xn, 0, False, 0,
                           lambda t: (torch.nanmedian(t), None))
        if dtname not in ("f32", "bf16", "i64"):
            continue
        # a long row of ties: the merge sort's runs and merges, stable
        x = with_ties((3, 300), dt, gen, nans=True)
        for desc in (False, True):
            assert torch.equal(torch.sort(x, dim=1, descending=desc, stable=True)[1],
                               stable_order(x, 1, desc))
            w.case("sort", dtname, x, 1, desc, 0,
                   lambda t, s=desc: torch.sort(t, dim=1, descending=s, stable=True))
    w.meta["cases"] = str(w.n)
    print("%d cases, %d that torch cannot run left out" % (w.n, w.skipped))
    write_safetensors(OUT, w.tensors, w.meta)


if __name__ == "__main__":
    main()
