#!/usr/bin/python3
"""Writes the PyTorch golden file of tapegrad's CyclicLR with a custom
scale_fn and an explicit step_size_down=0, CyclicLR and OneCycleLR with
momenta given as lists, and ChainedSchedulers that nest or repeat
schedulers or hold a SequentialLR.

Run from the repository root with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_lr_scheduler4_goldens.py

tests/golden/optim/lr_scheduler4.safetensors, one group of entries per case
of CASES, every case on an optimizer of two param groups (one parameter
each, initial lrs LRS):
  <case>.lr        f64 (n + 1, 2): each group's lr after the schedulers'
                   construction, then after each of the case's n calls of
                   scheduler.step()
  <case>.momentum  f64 (n + 1, 2), for a case that cycles momentum: each
                   group's momentum (SGD, RMSprop) or beta1 (Adam) at the
                   same points
  metadata         <case> = the PyTorch code of the case; "torch" = its
                   version.
optimizer.step() (without gradients) comes before each scheduler.step(), as
PyTorch asks.  n is STEPS, except for a OneCycleLR, stepped total_steps
times.  The scale functions are written so that C computes them with the
same double operations.  tests/test_lr_scheduler_custom.c builds the same
cases in C.
"""
import os
import sys
import warnings

import torch
from torch.optim import SGD, Adam, RMSprop
from torch.optim.lr_scheduler import (ChainedScheduler, ConstantLR, CosineAnnealingLR,
                                      CosineAnnealingWarmRestarts, CyclicLR, ExponentialLR,
                                      LinearLR, MultiStepLR, OneCycleLR, SequentialLR, StepLR)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "optim")
STEPS = 30
LRS = (0.1, 0.02)


def halving(x):
    return 1 / (0.5 * x + 0.5)


def decay(x):
    return 0.97 ** x


SGD_M = "SGD(groups, lr=0.1, momentum=0.9)"
# (name, optimizer, code building the scheduler from `o`): the optimizer
# string is evaluated with `groups` (the two param groups), the code with
# `o`; both are stored as the case's description.
CASES = [
    ("cy_scale_cycle", SGD_M,
     "CyclicLR(o, base_lr=[0.01, 0.002], max_lr=[0.1, 0.05], step_size_up=3, "
     "step_size_down=4, scale_fn=halving, base_momentum=[0.8, 0.7], "
     "max_momentum=[0.9, 0.95])"),
    ("cy_scale_iterations", SGD_M,
     "CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.05], step_size_up=2, step_size_down=5, "
     "mode='triangular2', scale_fn=decay, scale_mode='iterations', "
     "base_momentum=[0.85, 0.5])"),
    ("cy_down_zero", SGD_M,
     "CyclicLR(o, base_lr=[0.01, 0.005], max_lr=0.1, step_size_up=4, step_size_down=0, "
     "mode='exp_range', gamma=0.99, max_momentum=[0.95, 0.9])"),
    ("cy_down_zero_triangular2", "RMSprop(groups, lr=0.01, momentum=0.3)",
     "CyclicLR(o, base_lr=0.001, max_lr=[0.01, 0.02], step_size_up=3, step_size_down=0, "
     "mode='triangular2', base_momentum=[0.1, 0.2], max_momentum=[0.6, 0.4])"),
    ("oc_momentum_lists", SGD_M,
     "OneCycleLR(o, max_lr=[0.1, 0.05], total_steps=30, base_momentum=[0.85, 0.6], "
     "max_momentum=[0.95, 0.9])"),
    ("oc_adam_momentum_lists", "Adam(groups, lr=1e-3)",
     "OneCycleLR(o, max_lr=0.01, total_steps=20, three_phase=True, anneal_strategy='linear', "
     "base_momentum=[0.8, 0.7], max_momentum=0.9)"),
    ("ch_repeat", "SGD(groups, lr=0.1)",
     "(lambda e: ChainedScheduler([e, ConstantLR(o, factor=0.5, total_iters=3), e]))"
     "(ExponentialLR(o, gamma=0.9))"),
    ("ch_nested", "SGD(groups, lr=0.1)",
     "ChainedScheduler([ChainedScheduler([StepLR(o, step_size=3, gamma=0.5), "
     "ExponentialLR(o, gamma=0.95)]), LinearLR(o, start_factor=0.5, total_iters=4)])"),
    ("ch_nested_repeat", SGD_M,
     "(lambda inner: ChainedScheduler([inner, ExponentialLR(o, gamma=0.9), inner]))"
     "(ChainedScheduler([CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4), "
     "MultiStepLR(o, milestones=[2, 5, 9], gamma=0.5)]))"),
    ("ch_warm_repeat", "SGD(groups, lr=0.1)",
     "(lambda w: ChainedScheduler([w, ExponentialLR(o, gamma=0.9), w]))"
     "(CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2))"),
    ("ch_sequential", "SGD(groups, lr=0.1)",
     "ChainedScheduler([SequentialLR(o, [ConstantLR(o, factor=0.1, total_iters=2), "
     "ExponentialLR(o, gamma=0.9)], milestones=[2]), ExponentialLR(o, gamma=0.95)])"),
    ("ch_sequential_nested", SGD_M,
     "ChainedScheduler([ChainedScheduler([MultiStepLR(o, milestones=[4, 11], gamma=0.5), "
     "SequentialLR(o, [LinearLR(o, start_factor=0.2, total_iters=3), "
     "CosineAnnealingLR(o, T_max=8), StepLR(o, step_size=4, gamma=0.7)], "
     "milestones=[5, 14])]), CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=5)])"),
]


def momentum(g):
    return g["betas"][0] if "betas" in g else g["momentum"]


def run(name, opt_code, code):
    ps = [torch.zeros(1, requires_grad=True) for _ in LRS]
    groups = [{"params": [p], "lr": lr} for p, lr in zip(ps, LRS)]
    o = eval(opt_code, globals(), {"groups": groups})
    sched = eval(code, dict(globals(), o=o))
    cycled = name.startswith(("cy_", "oc_")) or "CyclicLR" in code
    n = sched.total_steps if isinstance(sched, OneCycleLR) else STEPS
    lrs, moms = [], []

    def row():
        lrs.append([g["lr"] for g in o.param_groups])
        moms.append([momentum(g) for g in o.param_groups])
        assert sched.get_last_lr() == lrs[-1]

    row()
    for _ in range(n):
        o.step()
        sched.step()
        row()
    out = [(name + ".lr", torch.tensor(lrs, dtype=torch.float64))]
    if cycled:
        out.append((name + ".momentum", torch.tensor(moms, dtype=torch.float64)))
    return out


def main():
    warnings.simplefilter("ignore")
    os.makedirs(OUT, exist_ok=True)
    tensors = []
    meta = {"torch": torch.__version__,
            "scale_fns": "halving(x) = 1 / (0.5 * x + 0.5); decay(x) = 0.97 ** x"}
    for name, opt_code, code in CASES:
        tensors += run(name, opt_code, code)
        meta[name] = "%s with param groups of lr %r; %s" % (opt_code, LRS, code)
    write_safetensors(os.path.join(OUT, "lr_scheduler4.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
