#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_repeat_interleave(_tensor),
tg_tile, tg_rot90, tg_diff, tg_meshgrid, tg_cartesian_prod, tg_block_diag,
tg_triu_indices and tg_tril_indices (tests/test_shape_more.c):
tests/golden/shape_more.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_shape_more_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op, the
op's arguments as decimal strings (case<i>.dim, .repeats, .reps (comma
separated), .k, .dims, .n, .indexing, .row, .col, .offset, .count: the
number of input tensors in0, in1, ...) and tensors case<i>.in<j> (the
inputs; f64 ones are differentiated), case<i>.repeats (the tensor form),
case<i>.prepend / .append (diff), case<i>.y<j> (the results: one, or
meshgrid's n), case<i>.g<j> (their gradients' upstream) and
case<i>.d<j> (the inputs' gradients of sum_j sum(g_j * y_j)).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "shape_more.safetensors")
SEED = 7151


def rnd(*shape, dt=torch.float64):
    return (torch.randn(shape, dtype=torch.float64) * 2).to(dt)


def cases():
    """(op, meta, inputs, extra tensors, run) per case."""
    out = []
    x = rnd(2, 3, 4)
    for dim in (0, 1, -1):
        for r in (0, 1, 3):
            out.append(("repeat_interleave", {"dim": dim, "repeats": r}, [x.clone()], {},
                        lambda t, e, dim=dim, r=r: [torch.repeat_interleave(t[0], r, dim)]))
        n = x.shape[dim]
        reps = torch.randint(0, 4, (n,))
        out.append(("repeat_interleave_tensor", {"dim": dim}, [x.clone()], {"repeats": reps},
                    lambda t, e, dim=dim: [torch.repeat_interleave(t[0], e["repeats"], dim)]))
    out.append(("repeat_interleave_tensor", {"dim": 1}, [x.clone()],
                {"repeats": torch.tensor([2], dtype=torch.int32)},
                lambda t, e: [torch.repeat_interleave(t[0], e["repeats"], 1)]))
    for reps in ((2,), (1, 2), (2, 1, 3), (2, 1, 1, 2), ()):
        out.append(("tile", {"reps": ",".join(map(str, reps))}, [rnd(2, 3)], {},
                    lambda t, e, reps=reps: [torch.tile(t[0], reps)]))
    for k in range(-5, 6):
        for dims in ((0, 1), (1, 0), (2, 0), (-1, 1)):
            out.append(("rot90", {"k": k, "dims": "%d,%d" % dims}, [rnd(2, 3, 4)], {},
                        lambda t, e, k=k, dims=dims: [torch.rot90(t[0], k, dims)]))
    for n in (0, 1, 2, 3, 6):
        for dim in (0, -1):
            for side in ("", "pre", "app", "both"):
                xs = rnd(3, 5)
                extra = {}
                pshape = [3, 5]
                pshape[dim] = 2
                if side in ("pre", "both"):
                    extra["prepend"] = rnd(*pshape)
                if side in ("app", "both"):
                    pshape[dim] = 1
                    extra["append"] = rnd(*pshape)
                out.append(("diff", {"n": n, "dim": dim}, [xs], extra,
                            lambda t, e, n=n, dim=dim: [torch.diff(
                                t[0], n, dim, prepend=e.get("prepend"),
                                append=e.get("append"))]))
    out.append(("diff", {"n": 1, "dim": 0},
                [torch.tensor([1, 0, 7, 3], dtype=torch.uint8)], {},
                lambda t, e: [torch.diff(t[0])]))
    out.append(("diff", {"n": 2, "dim": 1}, [torch.randint(-9, 9, (2, 5), dtype=torch.int32)],
                {}, lambda t, e: [torch.diff(t[0], 2, 1)]))
    for indexing in ("ij", "xy"):
        for shapes in (((3,),), ((2,), (3,)), ((2,), (), (4,)), ((1,), (3,), (2,), (2,))):
            ins = [rnd(*s) for s in shapes]
            out.append(("meshgrid", {"indexing": indexing}, ins, {},
                        lambda t, e, ix=indexing: list(torch.meshgrid(*t, indexing=ix))))
    for shapes in (((3,),), ((2,), (3,)), ((2,), (1,), (3,))):
        out.append(("cartesian_prod", {}, [rnd(*s) for s in shapes], {},
                    lambda t, e: [torch.cartesian_prod(*t)]))
    for shapes in (((),), ((2, 3),), ((), (3,), (2, 2)), ((0, 2), (1,), (2, 0), (3, 1))):
        out.append(("block_diag", {}, [rnd(*s) for s in shapes], {},
                    lambda t, e: [torch.block_diag(*t)]))
    out.append(("block_diag", {}, [rnd(2), rnd(1, 2, dt=torch.float32)], {},
                lambda t, e: [torch.block_diag(*t)]))
    for row, col in ((3, 4), (4, 3), (0, 3), (5, 5), (1, 1)):
        for offset in (-7, -2, -1, 0, 1, 2, 9):
            for op in ("triu_indices", "tril_indices"):
                out.append((op, {"row": row, "col": col, "offset": offset}, [], {},
                            lambda t, e, op=op, r=row, c=col, o=offset:
                            [getattr(torch, op)(r, c, o)]))
    return out


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    for i, (op, m, ins, extra, run) in enumerate(cases()):
        p = "case%d." % i
        for t in ins:
            if t.dtype == torch.float64:
                t.requires_grad_()
        ys = run(ins, extra)
        diff = [t for t in ins if t.requires_grad]
        gs = [torch.randn(y.shape, dtype=torch.float64) for y in ys]
        if diff and ys[0].dtype == torch.float64:
            ds = torch.autograd.grad(ys, diff, gs, allow_unused=True)
            for j, d in enumerate(ds):
                tensors[p + "d%d" % j] = (d if d is not None
                                          else torch.zeros_like(diff[j])).contiguous()
        for j, t in enumerate(ins):
            tensors[p + "in%d" % j] = t.detach().contiguous()
        for j, (y, g) in enumerate(zip(ys, gs)):
            tensors[p + "y%d" % j] = y.detach().contiguous()
            tensors[p + "g%d" % j] = g
        for k, v in extra.items():
            tensors[p + k] = v.detach().contiguous()
        meta.update({p + "op": op, p + "count": str(len(ins)), p + "outs": str(len(ys))})
        meta.update({p + k: str(v) for k, v in m.items()})
        meta["cases"] = str(i + 1)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
