#!/usr/bin/python3
"""Writes the PyTorch golden file of searching, counting and the ops with
data-dependent shapes (tests/test_search.c):
tests/golden/search.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_search_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.fn
(searchsorted, bucketize, unique, unique_consecutive, bincount, histc,
nonzero, argwhere, masked_select), case<i>.right and case<i>.int32
("0"/"1", searchsorted and bucketize), case<i>.n (bincount's minlength,
histc's bins), case<i>.min and case<i>.max (histc), and tensors: case<i>.a
(the first argument: the sorted sequence, x), case<i>.b (the second, when
there is one: values, boundaries, weights, mask; a bool mask as u8), the
result case<i>.y, searchsorted's case<i>.sorter when it has one,
unique's case<i>.inv and case<i>.cnt, and for
masked_select of a float x case<i>.g and case<i>.dx, torch.autograd's
gradient of sum(g * y).

unique runs also with NaNs, where torch 1.13's CPU unique gives each NaN
element a value of its own with count 0 and inverse 0, and leaves its
values in the order of its hash set, then of std::sort with NaN breaking
the comparison: f32 and f64 cases are stored as torch gives them (tapegrad
repeats that order); bf16 ones in tapegrad's order there, numbers
ascending and the NaNs last, torch's inverse and counts permuted
to match and the NaNs' kept (see canonical); unique runs without -0.0 in
bf16 (its hash table keeps -0.0 and 0.0 apart or together
by their hashes);
histc in f32 and f64 (its bf16 kernel puts a few elements next to an edge
into the neighbouring bin), without NaNs and over ranges whose
torch.linspace edges end exactly at min and max; unique does not run f16
(torch 1.13 has no f16 kernel for it).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "search.safetensors")
SEED = 5123
FLOATS = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16,
          "f16": torch.float16}
INTS = {"i64": torch.int64, "i32": torch.int32, "i8": torch.int8, "u8": torch.uint8}
ALL = dict(list(FLOATS.items()) + list(INTS.items()))
NAN = float("nan")


def ties(shape, dt, gen, nans=False, lo=-3, hi=4):
    """Few distinct values (many ties), -0.0 among the zeros of a float x
    and some NaNs when nans."""
    x = torch.randint(lo, hi, shape, generator=gen).to(torch.float64)
    if dt.is_floating_point and x.numel() > 0:
        flat = x.view(-1)
        flat[(flat == 0) & (torch.rand(flat.shape, generator=gen) < 0.5)] = -0.0
        if nans:
            pick = torch.randperm(flat.numel(), generator=gen)[: max(1, flat.numel() // 6)]
            flat[pick] = NAN
    if dt == torch.uint8:
        x = x - lo
    return x.to(dt)


class Writer:
    def __init__(self):
        self.tensors, self.meta, self.n = {}, {}, 0

    def case(self, fn, a, b=None, outs=(), **meta):
        p = "case%d." % self.n
        self.n += 1
        self.meta[p + "fn"] = fn
        for k, v in meta.items():
            self.meta[p + k] = str(v)
        self.tensors[p + "a"] = a.detach().contiguous()
        if b is not None:
            self.tensors[p + "b"] = (b.to(torch.uint8) if b.dtype == torch.bool else b).contiguous()
        for name, t in outs:
            self.tensors[p + name] = t.detach().contiguous()


def searches(w, gen):
    combos = [(d, d) for d in ALL] + [("f32", "f64"), ("f64", "f32"), ("i64", "f32"),
                                      ("bf16", "f16"), ("u8", "i32"), ("i8", "i64"),
                                      ("f16", "i32")]
    for sd, vd in combos:
        st, vt = ALL[sd], ALL[vd]
        nans = st.is_floating_point
        for n in (0, 1, 6, 33):
            seq = torch.sort(ties((n,), st, gen, nans))[0]
            for vshape in ((), (9,), (3, 5)):
                v = ties(vshape, vt, gen, vt.is_floating_point, lo=-4, hi=5)
                for right in (False, True):
                    i32 = n == 6 and right
                    y = torch.searchsorted(seq, v, right=right, out_int32=i32)
                    w.case("searchsorted", seq, v, [("y", y)], right=int(right),
                           int32=int(i32))
                if vshape == (9,) or n == 0:
                    y = torch.bucketize(v, seq, right=n % 2 == 1)
                    w.case("bucketize", v, seq, [("y", y)], right=int(n % 2 == 1), int32=0)
        # a batch of rows: values (2, 3, m) in sequences (2, 3, n)
        seq = torch.sort(ties((2, 3, 7), st, gen, nans), dim=-1)[0]
        v = ties((2, 3, 4), vt, gen, vt.is_floating_point, lo=-4, hi=5)
        for right in (False, True):
            y = torch.searchsorted(seq, v, right=right)
            w.case("searchsorted", seq, v, [("y", y)], right=int(right), int32=0)


def canonical(x, v, inv, cnt):
    """torch's unique results with its values sorted, NaNs last (torch.sort's
    order), the inverse of each number and the counts permuted to match; a
    NaN element's inverse stays 0."""
    perm = torch.sort(v, stable=True)[1]
    pos = torch.empty_like(perm)
    pos[perm] = torch.arange(perm.numel())
    nan = torch.isnan(x)
    inv = torch.where(nan, inv, pos[inv]) if inv.numel() else inv
    return v[perm], inv, cnt[perm]


def sorters(w):
    """searchsorted with a sorter: unsorted rows (ties, NaNs in floats)
    and torch.argsort's indices (NaNs last), 1-d and batched, from a
    generator of their own."""
    gen = torch.Generator().manual_seed(SEED + 2)
    for sd, vd in [(d, d) for d in ("f32", "f64", "bf16", "i64", "i32", "u8")] + \
            [("f32", "f64"), ("i64", "f32")]:
        st, vt = ALL[sd], ALL[vd]
        for sshape, vshape in (((0,), (4,)), ((1,), (3,)), ((6,), (9,)), ((33,), (3, 5)),
                               ((6,), ()), ((2, 3, 7), (2, 3, 4))):
            seq = ties(sshape, st, gen, st.is_floating_point)
            srt = torch.argsort(seq, dim=-1, stable=True)
            v = ties(vshape, vt, gen, vt.is_floating_point, lo=-4, hi=5)
            for right in (False, True):
                y = torch.searchsorted(seq, v, right=right, sorter=srt)
                w.case("searchsorted", seq, v, [("y", y), ("sorter", srt)], right=int(right),
                       int32=0)


def uniques(w, gen):
    # the NaN cases draw from a generator of their own, leaving the other
    # cases' draws as they are
    gen_nan = torch.Generator().manual_seed(SEED + 1)
    shapes = ((), (0,), (2, 0), (7,), (5, 19), (3, 4, 6))
    for dtname, dt in ALL.items():
        for shape in shapes:
            x = ties(shape, dt, gen, nans=False)
            if dtname == "bf16":   # -0.0 and 0.0 apart or not by its hash table
                x = x + 0.0
            if dtname != "f16":
                v, inv, cnt = torch.unique(x, sorted=True, return_inverse=True,
                                           return_counts=True)
                w.case("unique", x, None, [("y", v), ("inv", inv), ("cnt", cnt)])
            if dt.is_floating_point and dtname != "f16" and len(shape) and x.numel():
                xn = ties(shape, dt, gen_nan, nans=True)
                if dtname == "bf16":
                    xn = xn + 0.0
                v, inv, cnt = torch.unique(xn, sorted=True, return_inverse=True,
                                           return_counts=True)
                if dtname == "bf16":   # tapegrad's order there: see the top
                    v, inv, cnt = canonical(xn, v, inv, cnt)
                w.case("unique", xn, None, [("y", v), ("inv", inv), ("cnt", cnt)])
            xc = ties(shape, dt, gen, nans=True, lo=-1, hi=2)
            if dtname != "f16":
                v, inv, cnt = torch.unique_consecutive(xc, return_inverse=True,
                                                       return_counts=True)
                w.case("unique_consecutive", xc, None, [("y", v), ("inv", inv), ("cnt", cnt)])


def bincounts(w, gen):
    for dtname, dt in INTS.items():
        for n in (0, 1, 10, 300):
            x = torch.randint(0, 12, (n,), generator=gen).to(dt)
            for minlength in (0, 5, 20):
                w.case("bincount", x, None, [("y", torch.bincount(x, minlength=minlength))],
                       n=minlength)
            for wd in ("f32", "f64", "bf16", "f16", "i32"):
                wt = (torch.randn(n, generator=gen) * 4).to(ALL[wd])
                y = torch.bincount(x, wt, minlength=3)
                w.case("bincount", x, wt, [("y", y)], n=3)


def histcs(w, gen):
    for dtname in ("f32", "f64"):
        dt = FLOATS[dtname]
        for shape in ((), (0,), (7,), (5, 19), (3, 4, 6)):
            x = (torch.randn(shape, generator=gen) * 2).to(dt)
            if x.numel() > 3:
                flat = x.view(-1)
                flat[0], flat[1], flat[2] = -1.0, 2.0, 0.25   # on edges
            for bins in (1, 3, 4, 10, 16):
                for lo, hi in ((-1.0, 2.0), (0.0, 3.0), (-2.5, 3.5), (0.0, 0.0), (1.0, 1.0)):
                    if lo != hi:
                        e = torch.linspace(lo, hi, bins + 1, dtype=dt)
                        assert e[0].item() == lo and e[-1].item() == hi, (bins, lo, hi, dt)
                    y = torch.histc(x, bins=bins, min=lo, max=hi)
                    w.case("histc", x, None, [("y", y)], n=bins, min=repr(lo), max=repr(hi))
        x = torch.full((5,), 1.5, dtype=dt)   # one value: [v - 1, v + 1]
        w.case("histc", x, None, [("y", torch.histc(x, bins=4))], n=4, min="0.0", max="0.0")


def selects(w, gen):
    for dtname, dt in ALL.items():
        for shape in ((), (0,), (2, 0), (7,), (3, 4), (2, 3, 4)):
            x = ties(shape, dt, gen, nans=dt.is_floating_point, lo=-1, hi=2)
            w.case("nonzero", x, None, [("y", torch.nonzero(x))])
            w.case("argwhere", x, None, [("y", torch.argwhere(x))])
        pairs = (((), ()), ((7,), (7,)), ((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4)),
                 ((2, 1, 4), (3, 1)), ((), (2, 3)), ((2, 0), (2, 1)), ((1, 5), ()))
        for xs, ms in pairs:
            x = ties(xs, dt, gen, nans=dt.is_floating_point)
            m = torch.rand(ms, generator=gen) < 0.5
            is_float = dt.is_floating_point
            xr = x.clone().requires_grad_(is_float)
            y = torch.masked_select(xr, m)
            outs = [("y", y)]
            if is_float:
                g = torch.randn(y.shape, generator=gen).to(dt)
                (dx,) = torch.autograd.grad(y, (xr,), g, allow_unused=True)
                dx = torch.zeros_like(x) if dx is None else dx
                outs += [("g", g), ("dx", dx)]
            w.case("masked_select", x, m, outs)


def main():
    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    w = Writer()
    searches(w, gen)
    uniques(w, gen)
    sorters(w)
    bincounts(w, gen)
    histcs(w, gen)
    selects(w, gen)
    w.meta["cases"] = str(w.n)
    print("%d cases" % w.n)
    write_safetensors(OUT, w.tensors, w.meta)


if __name__ == "__main__":
    main()
