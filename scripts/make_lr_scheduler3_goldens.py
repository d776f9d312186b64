#!/usr/bin/python3
"""Writes the PyTorch golden file of tapegrad's cyclic and metric-driven
learning-rate schedulers: OneCycleLR, ReduceLROnPlateau, CyclicLR and
torch.optim.swa_utils.SWALR.

Run from the repository root with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_lr_scheduler3_goldens.py

tests/golden/optim/lr_scheduler3.safetensors, one group of entries per case
of CASES, every case on an optimizer of two param groups (one parameter
each, initial lrs LRS):
  <case>.lr        f64 (n + 1, 2): each group's lr after the scheduler's
                   construction (for ReduceLROnPlateau, which takes no
                   initial step, the lr it was made with), then after each
                   of the case's n calls of scheduler.step()
  <case>.momentum  f64 (n + 1, 2), for a case that cycles momentum: each
                   group's momentum (SGD, RMSprop) or beta1 (Adam, AdamW) at
                   the same points
  <case>.state     f64 (n + 1, 3), for ReduceLROnPlateau: best,
                   num_bad_epochs and cooldown_counter at the same points
  metrics          f64 (STEPS,): the metric given to ReduceLROnPlateau's
                   step k (k = 1..STEPS), plateaus, improvements inside the
                   threshold and a NaN; metrics_max the same for mode max
  metadata         <case> = the PyTorch code of the case; "torch" = its
                   version.
optimizer.step() (without gradients) comes before each scheduler.step(), as
PyTorch asks.  n is STEPS, except for OneCycleLR, stepped total_steps times
(its last_epoch reaches total_steps; one step more raises).  A linear
OneCycleLR's last step extrapolates past min_lr and can give a negative lr;
tapegrad sets 0 there, as for its other schedulers.
tests/test_lr_scheduler_cyclic.c builds the same cases in C.
"""
import os
import sys
import warnings

import torch
from torch.optim import SGD, Adam, AdamW, RMSprop
from torch.optim.lr_scheduler import (CosineAnnealingLR, CyclicLR, ExponentialLR, LinearLR,
                                      OneCycleLR, ReduceLROnPlateau, SequentialLR)
from torch.optim.swa_utils import SWALR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "optim")
STEPS = 40
LRS = (0.1, 0.02)
NAN = float("nan")

# Mode min: falls, plateaus, improvements smaller than 1e-2 relative (and
# than 0.05 absolute), a NaN, a rise, falls again.
METRICS = [1.0, 0.9, 0.8, 0.8, 0.799, 0.8, 0.81, 0.7, 0.6999, 0.6995, 0.69, 0.5, 0.5, NAN,
           0.5, 0.45, 0.44, 0.449, 0.46, 0.3, 0.3, 0.3, 0.3, 0.2999, 0.29, 0.25, 0.26, 0.27,
           NAN, NAN, 0.1, 0.1, 0.099, 0.05, 0.05, 0.05, 0.06, 0.04, 0.04, 0.04]
METRICS_MAX = [-m for m in METRICS]

# (name, optimizer, code building the scheduler from `o`).  The optimizer
# string is evaluated with `groups` (the two param groups); the code with
# `o`.  Both are stored as the case's description.
SGD_M = "SGD(groups, lr=0.1, momentum=0.9)"
CASES = [
    ("oc_cos", SGD_M, "OneCycleLR(o, max_lr=[0.1, 0.05], total_steps=30)"),
    ("oc_linear", SGD_M,
     "OneCycleLR(o, max_lr=[0.2, 0.05], total_steps=40, pct_start=0.25, "
     "anneal_strategy='linear', div_factor=10.0, final_div_factor=100.0, "
     "base_momentum=0.8, max_momentum=0.9)"),
    ("oc_three_phase", SGD_M, "OneCycleLR(o, max_lr=0.3, total_steps=25, three_phase=True)"),
    ("oc_three_phase_linear", SGD_M,
     "OneCycleLR(o, max_lr=[0.05, 0.5], epochs=4, steps_per_epoch=7, pct_start=0.4, "
     "anneal_strategy='linear', three_phase=True)"),
    ("oc_adam", "Adam(groups, lr=1e-3)",
     "OneCycleLR(o, max_lr=0.01, total_steps=20, base_momentum=0.8, max_momentum=0.9)"),
    ("oc_adamw_three_phase", "AdamW(groups, lr=1e-3, betas=(0.5, 0.99))",
     "OneCycleLR(o, max_lr=[0.01, 0.002], total_steps=17, three_phase=True, "
     "anneal_strategy='linear')"),
    ("oc_rmsprop", "RMSprop(groups, lr=0.01, momentum=0.5)",
     "OneCycleLR(o, max_lr=0.02, total_steps=12)"),
    ("oc_no_momentum", "SGD(groups, lr=0.1)",
     "OneCycleLR(o, max_lr=[1.0, 0.1], total_steps=15, cycle_momentum=False)"),
    ("oc_pct_zero", SGD_M, "OneCycleLR(o, max_lr=0.1, total_steps=10, pct_start=0.0)"),
    ("oc_pct_one", SGD_M,
     "OneCycleLR(o, max_lr=0.1, total_steps=12, pct_start=1.0, three_phase=True)"),
    # step 2 ends phase 1 exactly; phase 2's value there rounds differently
    ("oc_phase_end", SGD_M,
     "OneCycleLR(o, max_lr=[0.3, 0.7], total_steps=4, pct_start=0.5, three_phase=True, "
     "anneal_strategy='linear')"),
    ("oc_total_1", SGD_M, "OneCycleLR(o, max_lr=0.1, total_steps=1)"),
    ("oc_total_2_linear", SGD_M,
     "OneCycleLR(o, max_lr=0.1, total_steps=2, anneal_strategy='linear')"),
    ("plateau_min_rel", "SGD(groups, lr=0.1)",
     "ReduceLROnPlateau(o, factor=0.5, patience=2, threshold=1e-2, min_lr=[1e-3, 1e-3])"),
    ("plateau_min_abs_cooldown", "SGD(groups, lr=0.1)",
     "ReduceLROnPlateau(o, factor=0.3, patience=1, threshold=0.05, threshold_mode='abs', "
     "cooldown=2, min_lr=0.005)"),
    ("plateau_max_rel", "SGD(groups, lr=0.1)",
     "ReduceLROnPlateau(o, mode='max', factor=0.7, patience=0, threshold=1e-3)"),
    ("plateau_max_abs_eps", "SGD(groups, lr=0.1)",
     "ReduceLROnPlateau(o, mode='max', factor=0.9, patience=1, threshold=0.0, "
     "threshold_mode='abs', min_lr=[0.05, 0.015], eps=2e-3)"),
    ("plateau_defaults", "SGD(groups, lr=0.1)", "ReduceLROnPlateau(o)"),
    ("plateau_cooldown_zero_factor", "SGD(groups, lr=0.1)",
     "ReduceLROnPlateau(o, factor=0.0, patience=3, cooldown=5, min_lr=[0.0, 0.01])"),
    # group 0's reduction 0.1 -> 0.05 is exactly eps: not made
    ("plateau_eps_equal", "SGD(groups, lr=0.1)",
     "ReduceLROnPlateau(o, factor=0.5, patience=0, eps=0.05)"),
    ("swa_cos", "SGD(groups, lr=0.1)", "SWALR(o, swa_lr=0.05, anneal_epochs=10)"),
    ("swa_linear", "SGD(groups, lr=0.1)",
     "SWALR(o, swa_lr=[0.01, 0.005], anneal_epochs=5, anneal_strategy='linear')"),
    ("swa_zero_epochs", "SGD(groups, lr=0.1)", "SWALR(o, swa_lr=0.2, anneal_epochs=0)"),
    ("swa_one_epoch", "SGD(groups, lr=0.1)",
     "SWALR(o, swa_lr=[0.3, 0.001], anneal_epochs=1, anneal_strategy='linear')"),
    ("cy_triangular", SGD_M, "CyclicLR(o, base_lr=[0.01, 0.001], max_lr=[0.1, 0.01], "
     "step_size_up=5)"),
    ("cy_triangular2", SGD_M, "CyclicLR(o, base_lr=0.001, max_lr=[0.1, 0.05], "
     "step_size_up=4, step_size_down=6, mode='triangular2', base_momentum=0.85, "
     "max_momentum=0.95)"),
    ("cy_exp_range", SGD_M, "CyclicLR(o, base_lr=[0.01, 0.002], max_lr=0.1, step_size_up=3, "
     "step_size_down=5, mode='exp_range', gamma=0.95)"),
    ("cy_adam_no_momentum", "Adam(groups, lr=1e-3)",
     "CyclicLR(o, base_lr=1e-4, max_lr=[1e-3, 5e-3], step_size_up=7, step_size_down=2, "
     "cycle_momentum=False)"),
    ("cy_rmsprop", "RMSprop(groups, lr=0.01, momentum=0.3)",
     "CyclicLR(o, base_lr=0.001, max_lr=0.01, step_size_up=2, step_size_down=1)"),
    ("seq_linear_one_cycle", SGD_M,
     "SequentialLR(o, [LinearLR(o, start_factor=0.5, total_iters=4), "
     "OneCycleLR(o, max_lr=[0.1, 0.05], total_steps=35)], milestones=[5])"),
    ("seq_one_cycle_exponential", SGD_M,
     "SequentialLR(o, [OneCycleLR(o, max_lr=0.1, total_steps=20, anneal_strategy='linear'), "
     "ExponentialLR(o, gamma=0.9)], milestones=[21])"),
    ("seq_cosine_swa", "SGD(groups, lr=0.1)",
     "SequentialLR(o, [CosineAnnealingLR(o, T_max=10), "
     "SWALR(o, swa_lr=[0.01, 0.004], anneal_epochs=5)], milestones=[10])"),
    ("seq_swa_exponential", "SGD(groups, lr=0.1)",
     "SequentialLR(o, [SWALR(o, swa_lr=0.05, anneal_epochs=4, anneal_strategy='linear'), "
     "ExponentialLR(o, gamma=0.8)], milestones=[6])"),
    ("seq_linear_cyclic", SGD_M,
     "SequentialLR(o, [LinearLR(o, start_factor=0.25, total_iters=3), "
     "CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4)], milestones=[3])"),
]


def momentum(g):
    return g["betas"][0] if "betas" in g else g["momentum"]


def one_cycle_of(sched):
    if isinstance(sched, OneCycleLR):
        return sched
    if isinstance(sched, SequentialLR):
        for s in sched._schedulers:
            if isinstance(s, OneCycleLR):
                return s
    return None


def run(name, opt_code, code):
    ps = [torch.zeros(1, requires_grad=True) for _ in LRS]
    groups = [{"params": [p], "lr": lr} for p, lr in zip(ps, LRS)]
    o = eval(opt_code, globals(), {"groups": groups})
    sched = eval(code, globals(), {"o": o})
    plateau = isinstance(sched, ReduceLROnPlateau)
    one_cycle = one_cycle_of(sched)
    cycled = ("cycle_momentum=False" not in code and
              (one_cycle is not None or "CyclicLR" in code))
    n = STEPS
    if isinstance(sched, OneCycleLR):
        n = sched.total_steps
    lrs, moms, states = [], [], []

    def row():
        lrs.append([g["lr"] for g in o.param_groups])
        moms.append([momentum(g) for g in o.param_groups])
        if plateau:
            states.append([sched.best, sched.num_bad_epochs, sched.cooldown_counter])
        else:
            assert sched.get_last_lr() == lrs[-1]

    row()
    for k in range(1, n + 1):
        o.step()
        if plateau:
            sched.step(METRICS_MAX[k - 1] if sched.mode == "max" else METRICS[k - 1])
        else:
            sched.step()
        row()
    if isinstance(sched, OneCycleLR):
        try:
            sched.step()
            raise AssertionError("OneCycleLR stepped past total_steps")
        except ValueError as e:
            assert "Tried to step %d times" % (n + 2) in str(e), str(e)
    out = [(name + ".lr", torch.tensor(lrs, dtype=torch.float64))]
    if cycled:
        out.append((name + ".momentum", torch.tensor(moms, dtype=torch.float64)))
    if plateau:
        out.append((name + ".state", torch.tensor(states, dtype=torch.float64)))
    return out


def main():
    warnings.simplefilter("ignore")   # SequentialLR's step(0): the epoch argument is deprecated
    os.makedirs(OUT, exist_ok=True)
    tensors = [("metrics", torch.tensor(METRICS, dtype=torch.float64)),
               ("metrics_max", torch.tensor(METRICS_MAX, dtype=torch.float64))]
    meta = {"torch": torch.__version__}
    for name, opt_code, code in CASES:
        tensors += run(name, opt_code, code)
        meta[name] = "%s with param groups of lr %r; %s" % (opt_code, LRS, code)
    write_safetensors(os.path.join(OUT, "lr_scheduler3.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
