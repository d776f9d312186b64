#!/usr/bin/python3
"""Writes the PyTorch golden file of the indexing ops on integer data
(tests/test_int_index.c): tests/golden/int_index.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_int_index_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op (gather,
index_select, scatter_add, index_add, scatter, scatter_value,
scatter_reduce, take_along_dim, index_fill, index_copy, index_put,
masked_scatter), case<i>.dtype (i8, u8, i32 or i64), case<i>.dim,
case<i>.value (scatter_value, index_fill: a decimal string),
case<i>.reduce and case<i>.include_self ("1"/"0", scatter_reduce),
case<i>.accumulate ("1"/"0", index_put), and tensors case<i>.x,
case<i>.index (i64), case<i>.src (src, values or source; x's dtype),
case<i>.mask (u8, masked_scatter) and case<i>.y, torch's result.

x and src take values over the dtype's whole range, so the sums and
products wrap modulo 2^bits; the indices of the adds and reductions repeat
positions; index_fill and index_put take negative indices; the small
cases of scatter_reduce repeat each position over a few terms of small
values, so that mean's floor division of a negative sum shows.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "int_index.safetensors")
SEED = 7411
DTYPES = {"i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}
REDUCES = ("sum", "prod", "mean", "amax", "amin")


def full(shape, dt):
    """Values over dt's whole range."""
    info = torch.iinfo(dt)
    return torch.randint(info.min, info.max, shape, dtype=torch.int64).to(dt)


def small(shape, dt):
    """Values in [-9, 9] (u8: [0, 9])."""
    lo = 0 if dt == torch.uint8 else -9
    return torch.randint(lo, 10, shape, dtype=torch.int64).to(dt)


def cases(dt):
    out = []
    for shape in ((6,), (3, 4), (2, 3, 4)):
        r = len(shape)
        for d in range(r):
            ishape = list(shape)
            ishape[d] = 5   # more positions than the extent: repeats
            idx = torch.randint(0, shape[d], ishape)
            for vals in (full, small):
                x, src = vals(shape, dt), vals(ishape, dt)
                out.append(("gather", {"dim": d}, {"x": x, "index": idx},
                            lambda t, d=d: t["x"].gather(d, t["index"])))
                out.append(("scatter_add", {"dim": d}, {"x": x, "index": idx, "src": src},
                            lambda t, d=d: t["x"].scatter_add(d, t["index"], t["src"])))
                for red in REDUCES:
                    for inc in (True, False):
                        out.append(("scatter_reduce",
                                    {"dim": d, "reduce": red, "include_self": int(inc)},
                                    {"x": x, "index": idx, "src": src},
                                    lambda t, d=d, red=red, inc=inc: t["x"].scatter_reduce(
                                        d, t["index"], t["src"], red, include_self=inc)))
            # scatter: distinct positions along dim (torch leaves repeats undefined)
            perm = torch.stack([torch.randperm(shape[d])[:2] for _ in range(
                int(torch.tensor(shape).prod()) // shape[d])])
            sshape = [shape[k] for k in range(r) if k != d] + [2]
            sidx = perm.reshape(sshape).movedim(-1, d).contiguous()
            x = full(shape, dt)
            out.append(("scatter", {"dim": d}, {"x": x, "index": sidx,
                                                "src": full(list(sidx.shape), dt)},
                        lambda t, d=d: t["x"].scatter(d, t["index"], t["src"])))
            value = -7.75 if dt != torch.uint8 else 200.5
            out.append(("scatter_value", {"dim": d, "value": repr(value)},
                        {"x": x, "index": sidx},
                        lambda t, d=d, v=value: t["x"].scatter(d, t["index"], v)))
            # the 1-d index ops: repeats for the adds and selects
            li = torch.randint(0, shape[d], (5,))
            ashape = list(shape)
            ashape[d] = 5
            out.append(("index_select", {"dim": d}, {"x": x, "index": li},
                        lambda t, d=d: t["x"].index_select(d, t["index"])))
            out.append(("index_add", {"dim": d}, {"x": x, "index": li, "src": full(ashape, dt)},
                        lambda t, d=d: t["x"].index_add(d, t["index"], t["src"])))
            fi = torch.randint(-shape[d], shape[d], (3,))
            out.append(("index_fill", {"dim": d, "value": repr(value)}, {"x": x, "index": fi},
                        lambda t, d=d, v=value: t["x"].index_fill(d, t["index"], v)))
            ci = torch.randperm(shape[d])[:2]
            cshape = list(shape)
            cshape[d] = 2
            out.append(("index_copy", {"dim": d}, {"x": x, "index": ci, "src": full(cshape, dt)},
                        lambda t, d=d: t["x"].index_copy(d, t["index"], t["src"])))
            tshape = list(shape)
            tshape[d] = 3
            out.append(("take_along_dim", {"dim": d},
                        {"x": x, "index": torch.randint(0, shape[d], tshape)},
                        lambda t, d=d: torch.take_along_dim(t["x"], t["index"], d)))
        x = full(shape, dt)
        for acc in (False, True):
            # index_put on the first dim: repeats (accumulate) or distinct rows,
            # negative values
            n0 = shape[0]
            pi = (torch.randint(-n0, n0, (5,)) if acc
                  else torch.randperm(n0)[:2] - n0 * torch.tensor([0, 1]))
            vshape = (len(pi),) + tuple(shape[1:])
            out.append(("index_put", {"accumulate": int(acc)},
                        {"x": x, "index": pi, "src": full(vshape, dt)},
                        lambda t, acc=acc: t["x"].index_put((t["index"],), t["src"],
                                                            accumulate=acc)))
        mask = torch.rand(shape) < 0.5
        out.append(("masked_scatter", {}, {"x": x, "mask": mask,
                    "src": full((int(mask.sum()) + 2,), dt)},
                    lambda t: t["x"].masked_scatter(t["mask"], t["src"])))
    return out


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for op, m, inputs, run in cases(dt):
            y = run(inputs)
            assert y.dtype == dt and not y.requires_grad
            p = "case%d." % i
            res = dict(inputs)
            if "mask" in res:   # torch's bool as u8
                res["mask"] = res["mask"].to(torch.uint8)
            res["y"] = y
            for k, v in res.items():
                tensors[p + k] = v.contiguous()
            meta.update({p + "op": op, p + "dtype": name})
            meta.update({p + k: str(v) for k, v in m.items()})
            i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
