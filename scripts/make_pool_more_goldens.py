#!/usr/bin/python3
"""Writes the PyTorch golden files of tg_max_unpool, tg_lp_pool,
tg_fractional_max_pool and tg_embedding_bag:
  tests/golden/pool/unpool_lppool.safetensors   (tests/test_unpool_lppool.c)
  tests/golden/pool/fractional_max_pool.safetensors
                                              (tests/test_fractional_pool.c)
  tests/golden/embedding_bag.safetensors      (tests/test_embedding_bag.c)

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_pool_more_goldens.py

Every file holds cases "case<i>", i < the metadata "cases", in f64 and f32,
each with its inputs, PyTorch's result y, a random output gradient grad_y
and the gradients of sum(y * grad_y) with respect to the float inputs.

unpool_lppool: metadata case<i>.op ("unpool" or "lppool"), .ns, .kernel,
.stride, .padding (unpool), .output_size (unpool, "" for None), .norm_type
and .ceil_mode (lppool); tensors .x, .indices (unpool: from
F.max_pool<ns>d(.pool_x, return_indices=True), overlapping windows give
repeated indices), .pool_x (unpool), .y, .grad_y, .grad_x.

fractional_max_pool: metadata .ns, .kernel, .output_size (as given, "" when
the ratio is), .output_ratio ("" when the size is), .fill ("randn", "ties",
"nan", or "rounding": samples whose windows differ when the starts are
computed in double rather than in f32); tensors .x, .samples (torch.rand, x's dtype), .y, .indices, .grad_y,
.grad_x.

embedding_bag: metadata .mode, .padding_idx ("none" or the integer given),
.include_last_offset ("0", "1"), .psw ("0", "1"), .offsets ("0", "1");
tensors .weight (every other max case integers in [-2, 2], so that bags
tie), .input (i64 or i32), .offsets (when given), .psw (when given), .y,
.grad_y, .grad_weight, .grad_psw (when given).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLD = os.path.join(ROOT, "tests", "golden")
SEED = 7411
F64, F32 = torch.float64, torch.float32
MAXPOOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
UNPOOL = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}
LPPOOL = {1: F.lp_pool1d, 2: F.lp_pool2d}
FRAC = {2: F.fractional_max_pool2d, 3: F.fractional_max_pool3d}


def ints(v):
    return "" if v is None else ",".join(str(int(a)) for a in v)


def floats(v):
    return "" if v is None else ",".join(repr(float(a)) for a in v)


def grads(y, dt, inputs):
    gy = torch.randn(*y.shape, dtype=F64).to(dt)
    gs = torch.autograd.grad((y * gy).sum(), inputs)
    return gy, gs


# (x shape, kernel, stride, padding, output_size or None)
UNPOOL_CASES = [
    ((2, 3, 8), (2,), (2,), (0,), None),
    ((2, 2, 9), (3,), (2,), (1,), None),
    ((3, 7), (2,), (1,), (0,), None),                   # unbatched, repeated indices
    ((1, 2, 10), (3,), (3,), (0,), (11,)),              # output_size above the default
    ((2, 3, 6, 8), (2, 2), (2, 2), (0, 0), None),
    ((1, 2, 7, 9), (3, 2), (2, 1), (1, 0), None),       # repeated indices
    ((2, 5, 6), (2, 3), (2, 3), (0, 1), (5, 6)),        # unbatched, output_size
    ((2, 2, 5, 5), (2, 2), (2, 2), (0, 0), (1, 2, 5, 5)),   # output_size with N + 2 entries
    ((1, 2, 4, 6, 6), (2, 2, 2), (2, 2, 2), (0, 0, 0), None),
    ((2, 1, 5, 4, 6), (3, 2, 2), (2, 2, 1), (1, 0, 1), None),
    ((2, 4, 4, 4), (2, 2, 2), (2, 2, 2), (0, 0, 0), (5, 4, 5)),   # unbatched
]
# (x shape, norm_type, kernel, stride or None, ceil_mode, positive x)
LP_CASES = [
    ((2, 3, 9), 2.0, (3,), None, False, False),
    ((2, 3, 10), 1.0, (2,), (1,), False, False),
    ((3, 11), 3.0, (4,), (3,), True, True),
    ((2, 2, 7), 1.5, (3,), (2,), True, True),
    ((2, 3, 8, 7), 2.0, (2, 3), None, False, False),
    ((1, 2, 9, 9), 3.0, (3, 2), (2, 2), True, True),
    ((3, 6, 8), 4.0, (2, 2), (1, 2), False, False),
    ((2, 2, 7, 6), 2.5, (3, 3), (2, 2), False, True),
]
# (x shape, kernel, output_size or None, output_ratio or None)
FRAC_CASES = [
    ((2, 3, 9, 10), (2, 2), (4, 5), None),
    ((1, 2, 7, 11), (3, 2), (3, 6), None),
    ((3, 8, 8), (2, 2), None, (0.5, 0.7)),               # unbatched
    ((2, 2, 10, 7), (2, 3), (1, 5), None),
    ((2, 2, 5, 5), (1, 1), (4, 2), None),
    ((1, 2, 6, 7, 8), (2, 2, 2), (3, 4, 5), None),
    ((2, 1, 5, 9, 6), (2, 3, 2), None, (0.5, 0.6, 0.75)),
    ((2, 6, 5, 7), (2, 1, 3), (4, 4, 2), None),          # unbatched
]


def draw_frac(shape, fill):
    if fill == "ties":
        return torch.randint(-2, 3, shape).to(F64)
    x = torch.randn(*shape, dtype=F64)
    if fill == "nan":
        x[torch.rand(*shape) < 0.2] = float("nan")
    return x


def unpool_lppool():
    tensors, meta, n = {}, {}, 0
    for dt in (F64, F32):
        for shape, k, s, p, osz in UNPOOL_CASES:
            ns = len(k)
            c = "case%d" % n
            n += 1
            x0 = torch.randn(*shape, dtype=F64).to(dt)
            _, idx = MAXPOOL[ns](x0, k, s, p, return_indices=True)
            x = torch.randn(*idx.shape, dtype=F64).to(dt).requires_grad_(True)
            y = UNPOOL[ns](x, idx, k, s, p, osz)
            gy, (gx,) = grads(y, dt, [x])
            tensors.update({c + ".x": x.detach(), c + ".indices": idx, c + ".y": y.detach(),
                            c + ".grad_y": gy, c + ".grad_x": gx, c + ".pool_x": x0})
            osz_meta = None if osz is None else osz[-ns:]
            meta.update({c + ".op": "unpool", c + ".ns": str(ns), c + ".kernel": ints(k),
                         c + ".stride": ints(s), c + ".padding": ints(p),
                         c + ".output_size": ints(osz_meta)})
        for shape, pn, k, s, ceil, pos in LP_CASES:
            ns = len(k)
            c = "case%d" % n
            n += 1
            x = torch.randn(*shape, dtype=F64)
            if pos:
                x = x.abs() + 0.1
            x = x.to(dt).requires_grad_(True)
            ker = k[0] if ns == 1 else k
            st = None if s is None else (s[0] if ns == 1 else s)
            y = LPPOOL[ns](x, pn, ker, st, ceil)
            gy, (gx,) = grads(y, dt, [x])
            tensors.update({c + ".x": x.detach(), c + ".y": y.detach(), c + ".grad_y": gy,
                            c + ".grad_x": gx})
            meta.update({c + ".op": "lppool", c + ".ns": str(ns), c + ".kernel": ints(k),
                         c + ".stride": ints(s if s is not None else (0,) * ns),
                         c + ".norm_type": repr(pn), c + ".ceil_mode": str(int(ceil))})
    meta["cases"] = str(n)
    write_safetensors(os.path.join(GOLD, "pool", "unpool_lppool.safetensors"),
                      {k: v.contiguous() for k, v in tensors.items()}, meta)


def fractional():
    tensors, meta, n = {}, {}, 0
    for dt in (F64, F32):
        for shape, k, osz, ratio in FRAC_CASES:
            ns = len(k)
            for fill in ("randn", "ties", "nan"):
                c = "case%d" % n
                n += 1
                x = draw_frac(shape, fill).to(dt).requires_grad_(True)
                nb = 1 if len(shape) == ns + 1 else shape[0]
                u = torch.rand(nb, shape[-ns - 1], ns, dtype=dt)
                y, idx = FRAC[ns](x, k, osz, ratio, return_indices=True, _random_samples=u)
                gy, (gx,) = grads(y, dt, [x])
                tensors.update({c + ".x": x.detach(), c + ".samples": u, c + ".y": y.detach(),
                                c + ".indices": idx, c + ".grad_y": gy, c + ".grad_x": gx})
                meta.update({c + ".ns": str(ns), c + ".kernel": ints(k),
                             c + ".output_size": ints(osz), c + ".output_ratio": floats(ratio),
                             c + ".fill": fill})
    # samples whose windows differ when the starts are computed in double
    # rather than in f32, as torch does for f32 (found by a search)
    for dt in (F64, F32):
        c = "case%d" % n
        n += 1
        x = torch.randn(1, 2, 29, 26, dtype=F64).to(dt).requires_grad_(True)
        u = torch.tensor([[[0.5000000596046448, 0.03703641891479492]] * 2], dtype=dt)
        y, idx = F.fractional_max_pool2d(x, (2, 2), (23, 20), return_indices=True,
                                         _random_samples=u)
        gy, (gx,) = grads(y, dt, [x])
        tensors.update({c + ".x": x.detach(), c + ".samples": u, c + ".y": y.detach(),
                        c + ".indices": idx, c + ".grad_y": gy, c + ".grad_x": gx})
        meta.update({c + ".ns": "2", c + ".kernel": "2,2", c + ".output_size": "23,20",
                     c + ".output_ratio": "", c + ".fill": "rounding"})
    meta["cases"] = str(n)
    write_safetensors(os.path.join(GOLD, "pool", "fractional_max_pool.safetensors"),
                      {k: v.contiguous() for k, v in tensors.items()}, meta)


# (V, D, input (list, or list of lists for 2-d), offsets or None, mode,
#  padding_idx, include_last_offset, per_sample_weights, index dtype)
BAG_CASES = [
    (10, 3, [1, 2, 4, 5, 4, 3, 2, 9], [0, 4], "sum", None, False, False, torch.int64),
    (10, 3, [1, 2, 4, 5, 4, 3, 2, 9], [0, 4], "mean", None, False, False, torch.int64),
    (10, 3, [1, 2, 4, 5, 4, 3, 2, 9], [0, 4], "max", None, False, False, torch.int64),
    (8, 4, [0, 7, 7, 1, 3, 3, 5], [0, 2, 2, 5, 7], "sum", None, False, True, torch.int64),
    (8, 4, [0, 7, 7, 1, 3, 3, 5], [0, 2, 2, 5, 7], "mean", None, False, False, torch.int32),
    (8, 4, [0, 7, 7, 1, 3, 3, 5], [0, 2, 2, 5, 7], "max", None, False, False, torch.int64),
    (6, 5, [2, 0, 2, 4, 1, 0], [0, 1, 3, 6], "sum", 0, True, False, torch.int64),
    (6, 5, [2, 0, 2, 4, 1, 0], [0, 1, 3, 6], "mean", 0, True, False, torch.int64),
    (6, 5, [2, 0, 2, 4, 1, 0], [0, 1, 3, 6], "max", 0, True, False, torch.int64),
    (6, 5, [0, 0, 5, 3, 5], [0, 2, 3], "mean", -1, False, False, torch.int64),
    (6, 5, [0, 0, 5, 3, 5], [0, 2, 3], "sum", -1, False, True, torch.int64),
    (7, 3, [[1, 2, 3], [6, 0, 0], [4, 4, 2]], None, "sum", None, False, True, torch.int64),
    (7, 3, [[1, 2, 3], [6, 0, 0], [4, 4, 2]], None, "mean", 0, False, False, torch.int64),
    (7, 3, [[1, 2, 3], [6, 0, 0], [4, 4, 2]], None, "max", None, False, False, torch.int32),
    (20, 6, list(range(19, -1, -1)) * 3, [0, 7, 7, 30, 31, 45], "sum", 3, False, False,
     torch.int64),
    (20, 6, list(range(19, -1, -1)) * 3, [0, 7, 7, 30, 31, 45], "max", 3, False, False,
     torch.int64),
]


def embedding_bag():
    tensors, meta, n = {}, {}, 0
    for dt in (F64, F32):
        for V, D, inp, offs, mode, pad, last, psw, idt in BAG_CASES:
            c = "case%d" % n
            n += 1
            w = torch.randn(V, D, dtype=F64)
            if mode == "max" and n % 2:
                w = torch.randint(-2, 3, (V, D)).to(F64)   # ties: the first row wins
            w = w.to(dt).requires_grad_(True)
            x = torch.tensor(inp, dtype=idt)
            o = None if offs is None else torch.tensor(offs, dtype=idt)
            ps = None
            if psw:
                ps = torch.randn(*x.shape, dtype=F64).to(dt).requires_grad_(True)
            y = F.embedding_bag(x, w, o, mode=mode, padding_idx=pad, include_last_offset=last,
                                per_sample_weights=ps)
            ins = [w] + ([ps] if psw else [])
            gy, gs = grads(y, dt, ins)
            tensors.update({c + ".weight": w.detach(), c + ".input": x, c + ".y": y.detach(),
                            c + ".grad_y": gy, c + ".grad_weight": gs[0]})
            if o is not None:
                tensors[c + ".offsets"] = o
            if psw:
                tensors.update({c + ".psw": ps.detach(), c + ".grad_psw": gs[1]})
            meta.update({c + ".mode": mode, c + ".padding_idx": "none" if pad is None
                         else str(pad), c + ".include_last_offset": str(int(last)),
                         c + ".psw": str(int(psw)), c + ".offsets": str(int(o is not None))})
    meta["cases"] = str(n)
    write_safetensors(os.path.join(GOLD, "embedding_bag.safetensors"),
                      {k: v.contiguous() for k, v in tensors.items()}, meta)


def main():
    torch.manual_seed(SEED)
    unpool_lppool()
    fractional()
    embedding_bag()


if __name__ == "__main__":
    main()
