#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_take_along_dim, tg_index_fill,
tg_index_copy, tg_index_put and tg_masked_scatter (tests/test_index_more.c):
tests/golden/index_more.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_index_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.op
("take_along_dim", "take_along_dim_flat", "index_fill", "index_copy",
"index_put" or "masked_scatter"), case<i>.dtype (f32, f64, f16 or bf16),
case<i>.dim (as passed), case<i>.value (index_fill, a decimal string),
case<i>.n (index_put: the number of index tensors), case<i>.accumulate
("1" or "0", index_put), and tensors case<i>.x, case<i>.index (i64; for
index_put case<i>.index0 ...), case<i>.src (index_copy's src, index_put's
values, masked_scatter's source), case<i>.mask (u8, masked_scatter),
case<i>.g (the gradient of y), case<i>.y and case<i>.dx, case<i>.dsrc
(torch.autograd's gradients of sum(g * y)).

take_along_dim's indices broadcast against x (extents of 1 on either
side); index_fill takes negative indices; index_copy and index_put
without accumulate name each position once (torch leaves repeats
undefined), index_put with accumulate repeats positions; index_put's
index tensors broadcast together and its values broadcast to the indexed
shape, and some cases index with a bool mask (stored as u8) over x's
leading dims, alone or after an index tensor; masked_scatter's mask broadcasts against x and source has more
elements than the mask selects.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "index_more.safetensors")
SEED = 6131
DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
          "bf16": torch.bfloat16}
SHAPES = ((5,), (3, 4), (3, 4, 2))


def rnd(shape, dt):
    return (torch.randn(shape, dtype=torch.float64) * 2).to(dt)


def cases(dt):
    """(op, meta, inputs, run) for each case of dtype dt; inputs maps the
    names above to tensors, the float ones requiring grad."""
    out = []
    for shape in SHAPES:
        r = len(shape)
        for dim in range(-r, r):
            d = dim % r
            # take_along_dim: indices of extent 1 where x is not, and x of
            # extent 1 where the indices are not, at alternate dims
            ishape = [3 if k == d else (1 if k % 2 else shape[k]) for k in range(r)]
            xshape = list(shape)
            if r > 1:
                k = (d + 1) % r
                xshape[k], ishape[k] = 1, 3
            idx = torch.randint(0, xshape[d], ishape)
            out.append(("take_along_dim", {"dim": dim}, {"x": rnd(xshape, dt), "index": idx},
                        lambda t, dim=dim: torch.take_along_dim(t["x"], t["index"], dim)))
            L = 3
            fi = torch.randint(-shape[d], shape[d], (L,))
            value = round(float(torch.randn(())) * 3, 3)
            out.append(("index_fill", {"dim": dim, "value": repr(value)},
                        {"x": rnd(shape, dt), "index": fi},
                        lambda t, dim=dim, v=value: t["x"].index_fill(dim, t["index"], v)))
            ci = torch.randperm(shape[d])[:min(L, shape[d])]
            sshape = list(shape)
            sshape[d] = len(ci)
            out.append(("index_copy", {"dim": dim},
                        {"x": rnd(shape, dt), "index": ci, "src": rnd(sshape, dt)},
                        lambda t, dim=dim: t["x"].index_copy(dim, t["index"], t["src"])))
        x = rnd(shape, dt)
        out.append(("take_along_dim_flat", {}, {"x": x,
                    "index": torch.randint(0, x.numel(), (2, 3))},
                    lambda t: torch.take_along_dim(t["x"], t["index"])))
        for n in range(1, r + 1):
            for acc in (False, True):
                if acc:   # repeats, negative values, broadcast (4, 1) with (3,)
                    ix = [torch.randint(-shape[k], shape[k], (4, 1) if k == 0 else (3,))
                          for k in range(n)]
                    b = (4, 3) if n > 1 else (4, 1)
                else:     # distinct positions
                    flat = torch.randperm(int(torch.tensor(shape[:n]).prod()))[:3]
                    ix = list(torch.unravel_index(flat, shape[:n])) if hasattr(
                        torch, "unravel_index") else unravel(flat, shape[:n])
                    ix = [v - shape[k] * (k % 2) for k, v in enumerate(ix)]
                    b = (3,)
                vshape = (1,) + tuple(shape[n:]) if acc else b + tuple(shape[n:])
                inputs = {"x": rnd(shape, dt), "src": rnd(vshape, dt)}
                inputs.update({"index%d" % k: v for k, v in enumerate(ix)})
                out.append(("index_put", {"n": n, "accumulate": int(acc)}, inputs,
                            lambda t, n=n, acc=acc: t["x"].index_put(
                                tuple(t["index%d" % k] for k in range(n)), t["src"],
                                accumulate=acc)))
        for acc in (False, True):   # a bool mask over the first dims, alone or after an index
            for lead in ((0,), (1,)) if r > 1 else ((0,),):
                mdims = r - lead[0] if r < 3 else 2 - lead[0]
                mask = torch.rand(shape[lead[0]:lead[0] + mdims]) < 0.5
                ix = ([torch.randint(0, shape[0], (1,))] if lead[0] else []) + [mask]
                sel = int(mask.sum())
                vshape = (1,) + tuple(shape[lead[0] + mdims:])
                inputs = {"x": rnd(shape, dt), "src": rnd(vshape, dt)}
                inputs.update({"index%d" % k: v for k, v in enumerate(ix)})
                out.append(("index_put", {"n": len(ix), "accumulate": int(acc), "sel": sel},
                            inputs, lambda t, n=len(ix), acc=acc: t["x"].index_put(
                                tuple(t["index%d" % k] for k in range(n)), t["src"],
                                accumulate=acc)))
        mshape = (shape[-1],) if r > 1 else shape
        mask = torch.rand(mshape) < 0.5
        sel = int(mask.expand(shape).sum())
        out.append(("masked_scatter", {}, {"x": rnd(shape, dt), "mask": mask,
                    "src": rnd((sel + 2,), dt)},
                    lambda t: t["x"].masked_scatter(t["mask"], t["src"])))
    return out


def unravel(flat, shape):
    res = []
    for s in reversed(shape):
        res.append(flat % s)
        flat = flat // s
    return list(reversed(res))


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for name, dt in DTYPES.items():
        for op, m, inputs, run in cases(dt):
            for k in ("x", "src"):
                if k in inputs:
                    inputs[k].requires_grad_()
            y = run(inputs)
            g = torch.randn(y.shape, dtype=torch.float64).to(dt)
            wrt = [inputs[k] for k in ("x", "src") if k in inputs]
            grads = torch.autograd.grad(y, wrt, g)
            p = "case%d." % i
            res = dict(inputs)
            for k, v in res.items():   # torch's bool as u8
                if v.dtype == torch.bool:
                    res[k] = v.to(torch.uint8)
            res.update({"g": g, "y": y, "dx": grads[0]})
            if len(grads) > 1:
                res["dsrc"] = grads[1]
            for k, v in res.items():
                tensors[p + k] = v.detach().contiguous()
            meta.update({p + "op": op, p + "dtype": name})
            meta.update({p + k: str(v) for k, v in m.items()})
            i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
