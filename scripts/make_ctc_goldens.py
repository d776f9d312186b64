#!/usr/bin/python3
"""Writes the PyTorch golden file of the CTC loss (tests/test_ctc_loss.c):
tests/golden/ctc_loss.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_ctc_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.name (the
shape's name below), case<i>.dtype (f32 or f64), case<i>.red ("mean",
"sum", "none"), case<i>.blank and case<i>.zero_infinity ("0"/"1").
Tensors: case<i>.lp (log_probs, (T, N, C) or unbatched (T, C), in the
case's dtype), case<i>.targets (padded (N, S) or concatenated
(sum(target_lengths)); i64, or i32 where named), case<i>.il and case<i>.tl
(input_lengths and target_lengths: (N), or 0-d for the unbatched case;
i64 or i32), case<i>.y (F.ctc_loss's result), case<i>.g (a random gradient
of y) and case<i>.d (torch.autograd's gradient of sum(g * y) in lp).

Every shape runs in both dtypes, with each reduction and with zero_infinity
off and on.  The shapes: padded and concatenated targets, repeated labels
that need the blank between them (input lengths just long enough), empty
targets, input lengths shorter than T, targets that no alignment of the
input length reaches (loss inf: NaN gradient without zero_infinity, 0 with
it), blanks other than 0, padding values that are not labels (never read),
a target holding the blank label, unbatched input, i32 targets and
lengths, and log_probs that are not normalised (torch's gradient formula,
exp(lp) - ..., is then not the derivative in lp; the tests compare it as
it is).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "ctc_loss.safetensors")
SEED = 5309
DTYPES = {"f32": torch.float32, "f64": torch.float64}
REDS = ("mean", "sum", "none")
D = torch.float64


def logp(*shape, normalised=True):
    x = torch.randn(*shape, dtype=D) * 1.5
    return x.log_softmax(-1) if normalised else x


def L(*v, dtype=torch.int64):
    return torch.tensor(v, dtype=dtype)


def padded(rows, S, pad=0):
    """The (N, S) padded form of rows (lists of labels), pad after each."""
    t = torch.full((len(rows), S), pad, dtype=torch.int64)
    for i, r in enumerate(rows):
        t[i, :len(r)] = torch.tensor(r, dtype=torch.int64)
    return t


def concat(rows):
    return torch.tensor([v for r in rows for v in r], dtype=torch.int64)


class Cases:
    def __init__(self):
        self.tensors, self.meta, self.i = {}, {}, 0

    def add(self, name, lp, targets, il, tl, blank=0):
        for dname, dt in DTYPES.items():
            for red in REDS:
                for zi in (False, True):
                    x = lp.to(dt).requires_grad_()
                    y = F.ctc_loss(x, targets, il, tl, blank=blank, reduction=red,
                                   zero_infinity=zi)
                    g = torch.randn(y.shape, dtype=D).to(dt)
                    (d,) = torch.autograd.grad(y, x, g)
                    p = "case%d." % self.i
                    self.tensors.update({p + "lp": x.detach(), p + "targets": targets,
                                         p + "il": il, p + "tl": tl, p + "y": y.detach(),
                                         p + "g": g, p + "d": d})
                    self.meta.update({p + "name": name, p + "dtype": dname, p + "red": red,
                                      p + "blank": str(blank),
                                      p + "zero_infinity": "1" if zi else "0"})
                    self.i += 1


def shapes(c):
    # padded (N, S) targets: an empty one, input lengths below T
    rows = [[1, 3, 2, 4], [2, 2], []]
    lp = logp(7, 3, 5)
    c.add("padded", lp, padded(rows, 4), L(7, 5, 3), L(4, 2, 0))
    c.add("concat", lp, concat(rows), L(7, 5, 3), L(4, 2, 0))
    # repeated labels: T must cover the labels and a blank between each pair
    # of equal neighbours (1 1 2 2: 4 + 2 = 6 steps; 3 3 3: 5; 2 2: 3)
    rows = [[1, 1, 2, 2], [3, 3, 3], [2, 2], [4, 1, 4]]
    lp = logp(6, 4, 5)
    c.add("repeats", lp, padded(rows, 4), L(6, 5, 3, 6), L(4, 3, 2, 3))
    c.add("repeats_concat", lp, concat(rows), L(6, 5, 3, 6), L(4, 3, 2, 3))
    # infeasible targets: 1 1 1 needs 5 steps (given 4), 1 2 3 4 needs 4
    # (given 3): loss inf; the third is feasible
    rows = [[1, 1, 1], [1, 2, 3, 4], [2]]
    c.add("infeasible", logp(5, 3, 5), padded(rows, 4), L(4, 3, 4), L(3, 4, 1))
    c.add("infeasible_concat", logp(5, 3, 5), concat(rows), L(4, 3, 4), L(3, 4, 1))
    # input length 1: an empty target, a one-label one and an infeasible one
    rows = [[], [3], [1, 2]]
    c.add("one_step", logp(3, 3, 4), padded(rows, 2), L(1, 1, 1), L(0, 1, 2))
    # blank not 0: the middle class, and the last; labels include 0
    rows = [[0, 1, 1, 3], [3, 0], [1]]
    c.add("blank2", logp(8, 3, 4), padded(rows, 4), L(8, 6, 2), L(4, 2, 1), blank=2)
    rows = [[0, 0, 4], [2, 1, 0, 3, 3], []]
    c.add("blank_last", logp(9, 3, 6), concat(rows), L(9, 9, 4), L(3, 5, 0), blank=5)
    # a target holding the blank label itself (torch runs it as any label)
    rows = [[0, 2], [1, 0, 0]]
    c.add("label_is_blank", logp(6, 2, 3), padded(rows, 3), L(6, 6), L(2, 3))
    # padding that is not a label: never read
    rows = [[5, 1, 7, 7, 2, 9, 3, 3, 3, 1, 11, 4], [2, 4, 6], [8] * 6, [1, 2]]
    c.add("long_padded", logp(40, 4, 12), padded(rows, 14, pad=-1),
          L(40, 33, 20, 2), L(12, 3, 6, 2))
    # unbatched: (T, C), 1-d targets, 0-d lengths
    c.add("unbatched", logp(7, 6), L(1, 5, 5), torch.tensor(7), torch.tensor(3))
    c.add("unbatched_short", logp(7, 6), L(2, 3), torch.tensor(4), torch.tensor(2))
    # i32 targets and lengths
    rows = [[1, 2, 1], [3]]
    c.add("int32", logp(5, 2, 4), padded(rows, 3).int(), L(5, 4, dtype=torch.int32),
          L(3, 1, dtype=torch.int32))
    # log_probs not normalised
    rows = [[1, 2], [2, 2, 1]]
    c.add("unnormalised", logp(6, 2, 3, normalised=False), padded(rows, 3), L(6, 6),
          L(2, 3))


def main():
    torch.manual_seed(SEED)
    c = Cases()
    shapes(c)
    c.meta["cases"] = str(c.i)
    write_safetensors(OUT, c.tensors, c.meta)
    print("%d cases -> %s" % (c.i, OUT))


if __name__ == "__main__":
    main()
