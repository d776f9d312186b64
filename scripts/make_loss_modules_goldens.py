#!/usr/bin/python3
"""Writes the PyTorch golden file of the loss modules (tg_nn_*_loss_new,
tests/test_loss_modules.c): tests/golden/loss_modules.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_loss_modules_goldens.py

Case "case<i>", i < the metadata "cases", with metadata case<i>.cls (torch's
class name), case<i>.red ("mean", "sum", "none", "batchmean"), case<i>.a
(the constructor's numbers in the order of the C constructor's arguments,
comma-separated, "-" for none; booleans as 0 or 1) and case<i>.keys (the
module's state-dict keys joined by commas, "" for none); tensors
case<i>.x0, case<i>.x1 (and case<i>.x2): the forward's inputs in torch's
order, case<i>.y: torch.nn.<cls>(...)(inputs), and the state dict under
case<i>.state.<key> (weight, pos_weight).  Inputs are f64 (class indices
i64), so the C side can compare within a few units of f64 rounding.
"""
import os
import sys
import warnings

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "loss_modules.safetensors")
SEED = 6113
F64 = torch.float64
REDS = ("mean", "sum", "none")


class Writer:
    def __init__(self):
        self.tensors, self.meta, self.n = {}, {}, 0

    def case(self, cls, red, a, module, xs):
        p = "case%d." % self.n
        self.n += 1
        y = module(*xs)
        for i, x in enumerate(xs):
            self.tensors[p + "x%d" % i] = x.contiguous()
        self.tensors[p + "y"] = y.detach().contiguous()
        sd = module.state_dict()
        for k, v in sd.items():
            self.tensors[p + "state." + k] = v.contiguous()
        self.meta.update({p + "cls": cls, p + "red": red,
                          p + "a": ",".join(repr(float(v)) for v in a) if a else "-",
                          p + "keys": ",".join(sd.keys())})


def rnd(*shape):
    return torch.rand(shape, dtype=F64) * 4 - 2


def signs(*shape):
    return torch.randint(0, 2, shape).to(F64) * 2 - 1


def pointwise(w):
    x, t = rnd(3, 4), rnd(3, 4)
    p, q = torch.rand(3, 4, dtype=F64) * 0.98 + 0.01, torch.rand(3, 4, dtype=F64)
    bw = torch.rand(4, dtype=F64) + 0.5
    for red in REDS:
        w.case("MSELoss", red, [], nn.MSELoss(reduction=red), [x, t])
        w.case("L1Loss", red, [], nn.L1Loss(reduction=red), [x, t])
        w.case("HuberLoss", red, [0.5], nn.HuberLoss(reduction=red, delta=0.5), [x, t])
        w.case("SmoothL1Loss", red, [0.7], nn.SmoothL1Loss(reduction=red, beta=0.7), [x, t])
        w.case("BCELoss", red, [], nn.BCELoss(reduction=red), [p, q])
        w.case("BCELoss", red, [], nn.BCELoss(weight=bw, reduction=red), [p, q])
        w.case("BCEWithLogitsLoss", red, [], nn.BCEWithLogitsLoss(reduction=red), [x, q])
        w.case("BCEWithLogitsLoss", red, [],
               nn.BCEWithLogitsLoss(weight=bw, reduction=red, pos_weight=bw.flip(0) * 2),
               [x, q])
        w.case("BCEWithLogitsLoss", red, [],
               nn.BCEWithLogitsLoss(reduction=red, pos_weight=bw), [x, q])
        w.case("SoftMarginLoss", red, [], nn.SoftMarginLoss(reduction=red), [x, signs(3, 4)])
        lp = torch.log_softmax(x, 1)
        for log_target in (False, True):
            tt = torch.log_softmax(t, 1) if log_target else torch.softmax(t, 1)
            for r in (red, "batchmean") if red == "mean" else (red,):
                w.case("KLDivLoss", r, [float(log_target)],
                       nn.KLDivLoss(reduction=r, log_target=log_target), [lp, tt])
        for log_input, full in ((True, False), (False, True)):
            xin = x if log_input else x.abs() + 0.1
            w.case("PoissonNLLLoss", red, [float(log_input), float(full), 1e-8],
                   nn.PoissonNLLLoss(log_input=log_input, full=full, reduction=red),
                   [xin, q * 4])
        var = torch.rand(3, 1, dtype=F64) + 0.2
        w.case("GaussianNLLLoss", red, [1.0, 1e-6],
               nn.GaussianNLLLoss(full=True, reduction=red), [x, t, var])


def classification(w):
    n, c = 5, 4
    x = rnd(n, c)
    t = torch.tensor([0, 3, 1, 1, 2])
    cw = torch.rand(c, dtype=F64) + 0.5
    x3, t3 = rnd(2, c, 3), torch.tensor([[0, -100, 2], [3, 1, -100]])
    for red in REDS:
        ce = [([-100, 0.0], {}, x, t),
              ([-100, 0.0], {"weight": cw}, x, t),
              ([-100, 0.1], {"label_smoothing": 0.1}, x, t),
              ([1, 0.2], {"weight": cw, "ignore_index": 1, "label_smoothing": 0.2}, x, t),
              ([1, 0.3], {"ignore_index": 1, "label_smoothing": 0.3}, x, t),
              ([-100, 0.15], {"weight": cw, "label_smoothing": 0.15}, x3, t3),
              ([-100, 0.25], {"label_smoothing": 0.25}, x[0], t[1])]
        pt = torch.softmax(rnd(n, c), 1)
        ce += [([-100, 0.0], {}, x, pt),
               ([-100, 0.2], {"weight": cw, "label_smoothing": 0.2}, x, pt),
               ([-100, 0.1], {"label_smoothing": 0.1}, x3, torch.softmax(rnd(2, c, 3), 1))]
        for a, kw, xi, ti in ce:
            w.case("CrossEntropyLoss", red, a, nn.CrossEntropyLoss(reduction=red, **kw),
                   [xi, ti])
        lp = torch.log_softmax(x, 1)
        w.case("NLLLoss", red, [-100], nn.NLLLoss(reduction=red), [lp, t])
        w.case("NLLLoss", red, [3], nn.NLLLoss(weight=cw, ignore_index=3, reduction=red),
               [lp, t])
        w.case("MultiMarginLoss", red, [1, 1.0], nn.MultiMarginLoss(reduction=red), [x, t])
        w.case("MultiMarginLoss", red, [2, 0.8],
               nn.MultiMarginLoss(p=2, margin=0.8, weight=cw, reduction=red), [x, t])
        mt = torch.tensor([[3, 0, -1, 1], [1, 2, 3, -1], [0, -1, 2, 2],
                           [2, 1, 0, 3], [-1, 0, 1, 2]])
        w.case("MultiLabelMarginLoss", red, [], nn.MultiLabelMarginLoss(reduction=red),
               [x, mt])
        lt = torch.randint(0, 2, (n, c)).to(F64)
        w.case("MultiLabelSoftMarginLoss", red, [],
               nn.MultiLabelSoftMarginLoss(reduction=red), [x, lt])
        w.case("MultiLabelSoftMarginLoss", red, [],
               nn.MultiLabelSoftMarginLoss(weight=cw, reduction=red), [x, lt])


def embedding(w):
    for red in REDS:
        a, b = rnd(6), rnd(6)
        w.case("MarginRankingLoss", red, [0.3], nn.MarginRankingLoss(0.3, reduction=red),
               [a, b, signs(6)])
        w.case("HingeEmbeddingLoss", red, [1.5], nn.HingeEmbeddingLoss(1.5, reduction=red),
               [a, signs(6)])
        e1, e2 = rnd(4, 5), rnd(4, 5)
        w.case("CosineEmbeddingLoss", red, [0.2], nn.CosineEmbeddingLoss(0.2, reduction=red),
               [e1, e2, signs(4)])
        for margin, p, eps, swap in ((1.0, 2.0, 1e-6, False), (0.5, 1.0, 1e-4, True)):
            w.case("TripletMarginLoss", red, [margin, p, eps, float(swap)],
                   nn.TripletMarginLoss(margin, p, eps, swap, reduction=red),
                   [e1, e2, rnd(4, 5)])


def main():
    warnings.filterwarnings("ignore", "reduction: .mean. divides")
    torch.manual_seed(SEED)
    w = Writer()
    pointwise(w)
    classification(w)
    embedding(w)
    w.meta["cases"] = str(w.n)
    write_safetensors(OUT, w.tensors, w.meta)
    print("%d cases" % w.n)


if __name__ == "__main__":
    main()
