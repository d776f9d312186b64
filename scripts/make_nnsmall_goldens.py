#!/usr/bin/python3
"""Writes the PyTorch golden file of tg_bilinear, tg_local_response_norm,
tg_channel_shuffle, the alpha dropouts' constants and their modules
(tests/test_bilinear.c, tests/test_local_response_norm.c,
tests/test_channel_shuffle.c, tests/test_alpha_dropout.c,
tests/test_distance_modules.c): tests/golden/nnsmall.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_nnsmall_goldens.py

Everything is f64 unless a case says otherwise.  Metadata "<group>.cases"
counts each group's cases; case "<group><i>" has:

bilinear<i>   tensors x1, x2, weight, bias (when meta bias is "1"), gy, y
              and the gradients of sum(y * gy): gx1, gx2, gweight, gbias.
lrn<i>        meta size, alpha, beta, k; tensors x, gy, y, gx.
shuffle<i>    meta groups; tensors x, y.
alpha<i>      meta p; tensors kept (the output at x = 0 where an element is
              kept: alpha' a p), dropped (alpha' a (p - 1)) and scale (a,
              the output at x = 1 less that at x = 0 where kept), each 0-d,
              read off torch's F.alpha_dropout; one = F.alpha_dropout of
              ones with p = 1 (torch's x * 0).
module.bilinear  nn.Bilinear(3, 5, 4): its state dict under "m.", x1
              (2, 3, 3), x2 (2, 3, 5), y, gy and the gradients gx1, gx2,
              "grad.m.weight", "grad.m.bias"; meta module.bilinear.in1 etc.
module.cos<i>, module.pdist<i>  nn.CosineSimilarity(dim, eps) and
              nn.PairwiseDistance(p, eps, keepdim): meta dim/eps or
              p/eps/keepdim; tensors x1, x2, y.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "nnsmall.safetensors")
SEED = 4243

# (x1 shape, x2 shape, out, bias): a batch, two batch dims, unbatched,
# an empty batch, one feature on each side; tapegrad contracts x2 first
# where out < in2 (cases 0, 2, 5, 6) and the outer products otherwise
BILINEAR = [
    ((4, 3), (4, 5), 2, True),
    ((2, 3, 4), (2, 3, 2), 3, False),
    ((3,), (5,), 4, True),
    ((0, 3), (0, 2), 2, True),
    ((5, 1), (5, 1), 3, True),
    ((3, 2, 6), (3, 2, 7), 1, True),
    ((0, 4), (0, 5), 1, False),
]
# (x shape, size, alpha, beta, k): torch's defaults, a large alpha so the
# normaliser matters, size above C, size 1, an even size, 5-d
LRN = [
    ((2, 5, 4), 3, 1e-4, 0.75, 1.0),
    ((2, 6, 3, 4), 4, 0.5, 0.6, 2.0),
    ((2, 3, 5), 7, 1.0, 0.75, 1.0),
    ((1, 4, 3), 1, 2.0, 1.5, 0.5),
    ((1, 4, 2, 2, 3), 2, 0.8, 0.75, 1.0),
]
SHUFFLE = [((2, 6, 3), 3), ((1, 8, 2, 2), 2), ((2, 4, 1, 2, 3), 4), ((1, 5, 2), 1),
           ((1, 6, 2), 6)]
ALPHA_P = [0.1, 0.5, 0.8]
COS = [(1, 1e-8), (-1, 1e-8), (0, 0.5)]
PDIST = [(2.0, 1e-6, False), (1.0, 1e-6, True), (3.0, 0.1, False)]


def grads_of(y, gy, inputs):
    return torch.autograd.grad(y, inputs, gy, allow_unused=True)


def bilinear_cases(t, meta):
    for i, (s1, s2, out, has_b) in enumerate(BILINEAR):
        c = "bilinear%d" % i
        x1 = torch.randn(*s1, dtype=torch.float64, requires_grad=True)
        x2 = torch.randn(*s2, dtype=torch.float64, requires_grad=True)
        w = torch.randn(out, s1[-1], s2[-1], dtype=torch.float64, requires_grad=True)
        b = torch.randn(out, dtype=torch.float64, requires_grad=True) if has_b else None
        y = F.bilinear(x1, x2, w, b)
        gy = torch.randn(y.shape, dtype=torch.float64)
        ins = [x1, x2, w] + ([b] if has_b else [])
        gs = grads_of(y, gy, ins)
        t.update({c + ".x1": x1, c + ".x2": x2, c + ".weight": w, c + ".gy": gy,
                  c + ".y": y, c + ".gx1": gs[0], c + ".gx2": gs[1], c + ".gweight": gs[2]})
        if has_b:
            t.update({c + ".bias": b, c + ".gbias": gs[3]})
        meta[c + ".bias"] = "1" if has_b else "0"
    meta["bilinear.cases"] = str(len(BILINEAR))


def lrn_cases(t, meta):
    for i, (shape, size, alpha, beta, k) in enumerate(LRN):
        c = "lrn%d" % i
        x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
        y = F.local_response_norm(x, size, alpha, beta, k)
        gy = torch.randn(y.shape, dtype=torch.float64)
        (gx,) = grads_of(y, gy, [x])
        t.update({c + ".x": x, c + ".gy": gy, c + ".y": y, c + ".gx": gx})
        meta.update({c + ".size": str(size), c + ".alpha": repr(alpha),
                     c + ".beta": repr(beta), c + ".k": repr(k)})
    meta["lrn.cases"] = str(len(LRN))


def shuffle_cases(t, meta):
    for i, (shape, g) in enumerate(SHUFFLE):
        c = "shuffle%d" % i
        x = torch.randn(*shape, dtype=torch.float64)
        t.update({c + ".x": x, c + ".y": F.channel_shuffle(x, g).contiguous()})
        meta[c + ".groups"] = str(g)
    meta["shuffle.cases"] = str(len(SHUFFLE))


def alpha_cases(t, meta):
    for i, p in enumerate(ALPHA_P):
        c = "alpha%d" % i
        n = 4000
        # the same mask for x = 0 and x = 1: the same generator state
        torch.manual_seed(SEED + i)
        y0 = F.alpha_dropout(torch.zeros(n, dtype=torch.float64), p, True)
        torch.manual_seed(SEED + i)
        y1 = F.alpha_dropout(torch.ones(n, dtype=torch.float64), p, True)
        scale = y1 - y0
        kept = scale != 0
        assert kept.any() and (~kept).any()
        t.update({c + ".kept": y0[kept][0].clone(), c + ".dropped": y0[~kept][0].clone(),
                  c + ".scale": scale[kept][0].clone()})
        assert (y0[kept] == y0[kept][0]).all() and (y0[~kept] == y0[~kept][0]).all()
        meta[c + ".p"] = repr(p)
    x = torch.tensor([1.5, -2.0, 0.0, float("inf"), float("nan")], dtype=torch.float64)
    t["alpha.one.x"] = x
    t["alpha.one.y"] = F.alpha_dropout(x, 1.0, True)
    meta["alpha.cases"] = str(len(ALPHA_P))


def module_cases(t, meta):
    m = nn.Bilinear(3, 5, 4).double()
    c = "module.bilinear"
    for k, v in m.state_dict().items():
        t[c + ".m." + k] = v
    x1 = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    x2 = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    y = m(x1, x2)
    gy = torch.randn(y.shape, dtype=torch.float64)
    gs = grads_of(y, gy, [x1, x2, m.weight, m.bias])
    t.update({c + ".x1": x1, c + ".x2": x2, c + ".y": y, c + ".gy": gy, c + ".gx1": gs[0],
              c + ".gx2": gs[1], c + ".grad.m.weight": gs[2], c + ".grad.m.bias": gs[3]})
    meta.update({c + ".in1": "3", c + ".in2": "5", c + ".out": "4"})
    for i, (dim, eps) in enumerate(COS):
        c = "module.cos%d" % i
        x1 = torch.randn(3, 4, 2, dtype=torch.float64)
        x2 = torch.randn(3, 1, 2, dtype=torch.float64)
        if eps > 0.1:
            x2 = x2 * 0.1   # small norms: the eps clamp decides
        y = nn.CosineSimilarity(dim, eps)(x1, x2)
        t.update({c + ".x1": x1, c + ".x2": x2, c + ".y": y})
        meta.update({c + ".dim": str(dim), c + ".eps": repr(eps)})
    meta["module.cos.cases"] = str(len(COS))
    for i, (p, eps, keepdim) in enumerate(PDIST):
        c = "module.pdist%d" % i
        x1 = torch.randn(4, 6, dtype=torch.float64)
        x2 = torch.randn(4, 6, dtype=torch.float64)
        y = nn.PairwiseDistance(p, eps, keepdim)(x1, x2)
        t.update({c + ".x1": x1, c + ".x2": x2, c + ".y": y})
        meta.update({c + ".p": repr(p), c + ".eps": repr(eps),
                     c + ".keepdim": "1" if keepdim else "0"})
    meta["module.pdist.cases"] = str(len(PDIST))


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    bilinear_cases(tensors, meta)
    lrn_cases(tensors, meta)
    shuffle_cases(tensors, meta)
    module_cases(tensors, meta)
    alpha_cases(tensors, meta)
    write_safetensors(OUT, {k: v.detach().contiguous() for k, v in tensors.items()}, meta)


if __name__ == "__main__":
    main()
