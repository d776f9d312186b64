#!/usr/bin/python3
"""Writes the PyTorch golden file of the distance, margin, embedding and
likelihood losses (tests/test_losses2.c): tests/golden/losses2.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_losses2_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.fn (the
function: cosine_similarity, pairwise_distance, margin_ranking_loss,
hinge_embedding_loss, soft_margin_loss, cosine_embedding_loss,
triplet_margin_loss, gaussian_nll_loss, poisson_nll_loss,
multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss;
a weight=, when given, is the last tensor argument), case<i>.dtype
(f32 or f64), case<i>.red ("mean", "sum", "none"; "none" for the two
distances, which have no reduction), case<i>.n (the number of tensor
arguments), case<i>.grads (the indices of the arguments torch gives a
gradient, as "0,1", "" for none) and the function's other arguments as
text: case<i>.dim, .eps, .p, .keepdim, .margin, .swap, .full, .log_input
("0"/"1" for booleans, repr of a float otherwise; only those the function
takes).  Tensors: case<i>.a<k> (argument k, in the case's dtype, or i64 for
an integer target), case<i>.g (the gradient of the result), case<i>.y (the
result) and case<i>.d<k> for k in grads (torch.autograd's gradient of
sum(g * y) in argument k).

Edge cases: zero vectors and vectors shorter than eps (cosine_similarity,
pairwise_distance with eps 0, cosine_embedding_loss), broadcast shapes
(stretched along the reduced dim too), 0-d arguments, margins hit exactly
(a loss of 0 whose gradient passes, as clamp_min's), hinge targets that are
neither 1 nor -1 and of dtype i64, var below eps and of each allowed shape,
Poisson targets of 0, 1 and above 1 with full, multi-label targets ended
by -1 early, late or not at all and listing a class twice, and samples of
one class (0-d inputs).
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "losses2.safetensors")
SEED = 7219
DTYPES = {"f32": torch.float32, "f64": torch.float64}
REDS = ("mean", "sum", "none")
D = torch.float64


def rn(*shape):
    return torch.randn(*shape, dtype=D)


def sign(*shape):
    return torch.randint(0, 2, shape).to(D) * 2 - 1


def fmt(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    return repr(float(v)) if isinstance(v, float) else str(v)


class Cases:
    def __init__(self):
        self.tensors, self.meta, self.i = {}, {}, 0

    def add(self, fn, args, red="none", nograd=(), weight=None, **kw):
        """fn's name, its tensor arguments (f64; i64 stays), the reduction
        and its other keyword arguments; nograd: the arguments torch
        refuses a gradient (soft_margin_loss's target, multi_margin_loss's
        weight); weight: a tensor passed as weight=, the last argument."""
        if weight is not None:
            args = list(args) + [weight]
        for name, dt in DTYPES.items():
            xs = [a.to(dt).requires_grad_(a.is_floating_point() and k not in nograd)
                  if a.is_floating_point() else a for k, a in enumerate(args)]
            f = getattr(F, fn)
            if fn in ("cosine_similarity", "pairwise_distance"):
                y = f(*xs, **kw)
            elif weight is not None:
                y = f(*xs[:-1], weight=xs[-1], reduction=red, **kw)
            else:
                y = f(*xs, reduction=red, **kw)
            g = torch.randn(y.shape, dtype=D).to(dt)
            want = [k for k, a in enumerate(xs) if a.requires_grad]
            ds = torch.autograd.grad(y, [xs[k] for k in want], g, allow_unused=True)
            p = "case%d." % self.i
            grads = []
            for k, d in zip(want, ds):
                if d is not None:
                    self.tensors[p + "d%d" % k] = d.detach().contiguous()
                    grads.append(str(k))
            for k, a in enumerate(xs):
                self.tensors[p + "a%d" % k] = a.detach().contiguous()
            self.tensors[p + "g"] = g.contiguous()
            self.tensors[p + "y"] = y.detach().contiguous()
            self.meta.update({p + "fn": fn, p + "dtype": name, p + "red": red,
                              p + "n": str(len(xs)), p + "grads": ",".join(grads)})
            for k, v in kw.items():
                self.meta[p + k] = fmt(v)
            self.i += 1


def distances(c):
    for dim in (1, 0, -1):
        c.add("cosine_similarity", [rn(5, 4), rn(5, 4)], dim=dim, eps=1e-8)
    # zero rows, a row shorter than eps (the clamp holds), a row of each
    x1, x2 = rn(5, 3), rn(5, 3)
    x1[0] = 0.0
    x2[1] = 0.0
    x1[2] = 0.0
    x2[2] = 0.0
    x1[3] = torch.tensor([1e-5, 0.0, 2e-5], dtype=D)
    x2[4] = torch.tensor([-3e-4, 4e-4, 0.0], dtype=D)
    c.add("cosine_similarity", [x1, x2], dim=1, eps=1e-3)
    c.add("cosine_similarity", [x1, x2], dim=1, eps=1e-8)
    c.add("cosine_similarity", [rn(4, 3), rn(3)], dim=-1, eps=1e-8)
    c.add("cosine_similarity", [rn(2, 1, 3), rn(4, 3)], dim=-1, eps=1e-8)
    c.add("cosine_similarity", [rn(1, 3), rn(4, 3)], dim=0, eps=1e-8)  # stretched
    c.add("cosine_similarity", [rn(4, 1), rn(4, 3)], dim=1, eps=1e-8)
    c.add("cosine_similarity", [torch.tensor(2.0, dtype=D), torch.tensor(-3.0, dtype=D)],
          dim=0, eps=1e-8)
    for p in (2.0, 1.0, 3.0, math.inf, 0.5, -1.0, 0.0):
        for keepdim in (False, True):
            c.add("pairwise_distance", [rn(4, 5), rn(4, 5)], p=p, eps=1e-6, keepdim=keepdim)
    c.add("pairwise_distance", [rn(4, 3), rn(3)], p=2.0, eps=1e-6, keepdim=False)
    c.add("pairwise_distance", [rn(2, 1, 3), rn(4, 3)], p=1.0, eps=1e-6, keepdim=True)
    c.add("pairwise_distance", [rn(3), rn(3)], p=2.0, eps=1e-6, keepdim=False)
    c.add("pairwise_distance", [rn(3), rn(3)], p=2.0, eps=1e-6, keepdim=True)
    c.add("pairwise_distance", [torch.tensor(1.0, dtype=D), torch.tensor(3.0, dtype=D)],
          p=2.0, eps=1e-6, keepdim=False)
    x1, x2 = rn(3, 4), rn(3, 4)
    x2[1] = x1[1]   # a zero difference with eps 0: distance 0, gradient 0
    c.add("pairwise_distance", [x1, x2], p=2.0, eps=0.0, keepdim=False)


def margins(c):
    for red in REDS:
        for margin in (0.0, 0.5):
            c.add("margin_ranking_loss", [rn(6), rn(6), sign(6)], red, margin=margin)
        # -y (x1 - x2) + margin = 0 exactly in the first two
        x1 = torch.tensor([1.0, 0.25, 2.0, -1.0], dtype=D)
        x2 = torch.tensor([0.5, 0.75, 0.0, 1.0], dtype=D)
        y = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=D)
        c.add("margin_ranking_loss", [x1, x2, y], red, margin=0.5)
        c.add("margin_ranking_loss", [rn(3, 1), rn(1, 3), sign(3, 3)], red, margin=0.25)
        for margin in (1.0, 0.5):
            y = sign(7)
            y[5] = 2.0   # neither: both terms
            x = rn(7)
            x[0], y[0] = 1.0, -1.0   # margin - x = 0 exactly (margin 1)
            c.add("hinge_embedding_loss", [x, y], red, margin=margin)
        c.add("hinge_embedding_loss", [rn(5), torch.tensor([1, -1, 1, 0, -1])], red, margin=1.0)
        c.add("hinge_embedding_loss", [rn(3, 1), sign(1, 3)], red, margin=1.0)
        c.add("soft_margin_loss", [rn(4, 5), sign(4, 5)], red, nograd=(1,))
        c.add("soft_margin_loss", [rn(4, 5), rn(1, 5)], red, nograd=(1,))
        c.add("soft_margin_loss", [torch.tensor(0.5, dtype=D), torch.tensor(-1.0, dtype=D)], red,
              nograd=(1,))


def embeddings(c):
    for red in REDS:
        for margin in (0.0, 0.3):
            c.add("cosine_embedding_loss", [rn(4, 5), rn(4, 5), sign(4)], red, margin=margin)
        x1, x2 = rn(4, 5), rn(4, 5)
        x1[1] = 0.0   # a zero vector: cos 0 (the 1e-12 keeps it finite)
        x2[2] = 0.0
        c.add("cosine_embedding_loss", [x1, x2, torch.tensor([1, -1, -1, 1])], red, margin=-0.5)
        c.add("cosine_embedding_loss", [rn(5), rn(5), torch.tensor(-1.0, dtype=D)], red,
              margin=-0.2)
        c.add("cosine_embedding_loss", [rn(3, 5), rn(1, 5), torch.tensor([1.0])], red,
              margin=0.0)
        for swap in (False, True):
            for p in (2.0, 1.0):
                c.add("triplet_margin_loss", [rn(4, 5), rn(4, 5), rn(4, 5)], red, margin=1.0,
                      p=p, eps=1e-6, swap=swap)
        c.add("triplet_margin_loss", [rn(5), rn(5), rn(5)], red, margin=2.0, p=2.0, eps=1e-6,
              swap=True)
        c.add("triplet_margin_loss", [rn(2, 3, 4), rn(1, 3, 4), rn(2, 3, 4)], red, margin=0.5,
              p=3.0, eps=1e-6, swap=False)
        a, p_, n = rn(3, 4), rn(3, 4), rn(3, 4)
        c.add("triplet_margin_loss", [a, p_, n], red, margin=0.0, p=2.0, eps=0.0, swap=False)


def likelihoods(c):
    for red in REDS:
        for full in (False, True):
            var = torch.rand(4, 3, dtype=D) + 0.1
            var[0, 0] = 0.0     # clamped to eps
            var[1, 2] = 1e-8
            c.add("gaussian_nll_loss", [rn(4, 3), rn(4, 3), var], red, full=full, eps=1e-6)
        c.add("gaussian_nll_loss", [rn(4, 3), rn(4, 3), torch.rand(4, dtype=D) + 0.1], red,
              full=False, eps=1e-6)
        c.add("gaussian_nll_loss", [rn(4, 3), rn(4, 3), torch.rand(4, 1, dtype=D) + 0.1], red,
              full=True, eps=1e-6)
        c.add("gaussian_nll_loss", [rn(4, 3), rn(3), torch.rand(4, 3, dtype=D) + 0.1], red,
              full=False, eps=0.5)
        for log_input in (True, False):
            for full in (False, True):
                t = torch.tensor([[0.0, 0.5, 1.0, 2.0, 5.0], [3.0, 0.0, 1.5, 7.0, 1.0]],
                                 dtype=D)
                x = rn(2, 5) if log_input else torch.rand(2, 5, dtype=D) * 3 + 0.05
                c.add("poisson_nll_loss", [x, t], red, log_input=log_input, full=full,
                      eps=1e-8)
        c.add("poisson_nll_loss", [torch.rand(3, 4, dtype=D) + 0.1,
                                   torch.rand(4, dtype=D) * 4 + 1.5], red,
              log_input=False, full=True, eps=0.25)


def multis(c):
    for red in REDS:
        for p in (1, 2):
            for margin in (1.0, 0.5):
                c.add("multi_margin_loss", [rn(5, 4), torch.randint(0, 4, (5,))], red, p=p,
                      margin=margin)
            c.add("multi_margin_loss", [rn(5, 4), torch.randint(0, 4, (5,))], red, p=p,
                  margin=1.0, weight=torch.rand(4, dtype=D) + 0.5, nograd=(2,))
            # margin - x[y] + x[i] = 0 exactly for i = 0 (no gradient there)
            x = torch.tensor([[0.5, 1.5, 0.0, -2.0], [2.0, -1.0, 0.25, 0.0]], dtype=D)
            c.add("multi_margin_loss", [x, torch.tensor([1, 2])], red, p=p, margin=1.0)
            c.add("multi_margin_loss", [rn(4), torch.tensor(2)], red, p=p, margin=1.0)
            c.add("multi_margin_loss", [rn(4), torch.tensor([3])], red, p=p, margin=0.5)
            c.add("multi_margin_loss", [torch.tensor(0.3, dtype=D), torch.tensor(0)], red, p=p,
                  margin=1.0)
        t = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 0, 4], [2, 2, -1, -1, -1],
                          [-1, 0, 1, 2, 3]])
        c.add("multilabel_margin_loss", [rn(4, 5) * 0.5, t], red)
        x = torch.tensor([[1.0, 0.5, 0.0, 0.0, 0.0]], dtype=D)   # 1 - x[0] + x[1] = 0.5
        x[0, 2] = 0.0
        c.add("multilabel_margin_loss", [x, torch.tensor([[0, 3, -1, 0, 0]])], red)
        # 1 - x[j] + x[i] = 0 exactly for j = 0, i = 1
        x = torch.tensor([[1.5, 0.5, -1.0, 0.25]], dtype=D)
        c.add("multilabel_margin_loss", [x, torch.tensor([[0, 2, -1, 3]])], red)
        c.add("multilabel_margin_loss", [rn(5), torch.tensor([4, 1, -1, 0, 0])], red)
        c.add("multilabel_margin_loss", [torch.tensor(0.7, dtype=D), torch.tensor(0)], red)
        c.add("multilabel_soft_margin_loss", [rn(4, 5), torch.rand(4, 5, dtype=D)], red)
        c.add("multilabel_soft_margin_loss", [rn(4, 5), torch.randint(0, 2, (4, 5)).to(D)],
              red, weight=torch.rand(5, dtype=D))
        c.add("multilabel_soft_margin_loss", [rn(4, 5), torch.rand(5, dtype=D)], red,
              weight=torch.rand(4, 5, dtype=D))
        c.add("multilabel_soft_margin_loss", [rn(2, 3, 4), torch.rand(2, 3, 4, dtype=D)], red)
        c.add("multilabel_soft_margin_loss", [rn(5), torch.rand(5, dtype=D)], red)


def main():
    torch.manual_seed(SEED)
    c = Cases()
    distances(c)
    margins(c)
    embeddings(c)
    likelihoods(c)
    multis(c)
    c.meta["cases"] = str(c.i)
    write_safetensors(OUT, c.tensors, c.meta)


if __name__ == "__main__":
    main()
