#!/usr/bin/python3
"""Writes the PyTorch golden files of two Sequentials of activation modules
between Linears (tests/test_nn.c): nn.Softplus, nn.LogSigmoid, nn.Identity,
nn.Softmax and nn.LogSoftmax in tests/golden/nn/act_modules.safetensors;
nn.SELU, nn.CELU, nn.Hardshrink, nn.Softshrink, nn.Threshold, nn.GLU,
nn.Softsign, nn.Tanhshrink and nn.Softmin in
tests/golden/nn/act_modules2.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_act_modules_goldens.py

The file has the layout of scripts/make_nn_goldens.py's cases (its `case`
writes it): m.<state_dict key> (only the Linears have state, under their
child index), x, grad_y, y, grad_x and grad.m.<key>, f32, computed in f64
on f32-representable values and rounded once.  Softplus(beta=2,
threshold=1) takes both of its branches on these values; Softmax(dim=0)
normalises over the batch, so a module that ignored its dim would differ.
In the second, the shrinks and Threshold zero or replace some values and
pass others, GLU(dim=1) halves the features and Softmin(dim=0) normalises
over the batch; CELU's alpha, the lambds and Threshold's numbers are not
torch's defaults, so a module that dropped one would differ.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_nn_goldens import OUT_DIR, case  # noqa: E402

SEED = 7351


def main():
    torch.manual_seed(SEED)
    os.makedirs(OUT_DIR, exist_ok=True)
    model = nn.Sequential(
        nn.Linear(6, 8), nn.Softplus(beta=2, threshold=1), nn.Linear(8, 8), nn.LogSigmoid(),
        nn.Identity(), nn.Linear(8, 5), nn.Softmax(dim=0), nn.Linear(5, 4),
        nn.LogSoftmax(dim=-1))
    case("act_modules", model, (4, 6))
    model = nn.Sequential(
        nn.Linear(6, 8), nn.SELU(), nn.Linear(8, 8), nn.CELU(alpha=0.5),
        nn.Hardshrink(lambd=0.3), nn.Linear(8, 8), nn.Softshrink(lambd=0.2),
        nn.Threshold(0.1, -0.5), nn.Linear(8, 10), nn.GLU(dim=1), nn.Softsign(),
        nn.Tanhshrink(), nn.Linear(5, 4), nn.Softmin(dim=0))
    case("act_modules2", model, (4, 6))


if __name__ == "__main__":
    main()
