#!/usr/bin/python3
"""Writes the PyTorch golden file of tapegrad's learning-rate schedulers.

Run from the repository root with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_sched_goldens.py

tests/golden/optim/lr_scheduler.safetensors, one entry per case of CASES:
  <case>.lr      f64 (STEPS + 1,): the optimizer's lr after the scheduler's
                 construction (its initial step, epoch 0), then after each of
                 STEPS calls of scheduler.step() (epochs 1..STEPS); for a
                 case of two param groups (an initial lr per group) f64
                 (STEPS + 1, 2), each group's lr
  metadata       <case> = the PyTorch code of the case; "torch" = its version.
Each case runs a dummy SGD optimizer on one parameter per param group;
optimizer.step() comes before each scheduler.step(), as PyTorch asks.  A
case with SET_LR[case] = (k, lr, g) sets param group g's lr to lr just
before the k-th scheduler.step(), to show the chainable formulas, which
start from the optimizer's current lr.  A case with ADD_GROUP[case] =
(k, lr) adds a second param group of that lr just before the k-th
scheduler.step(): the scheduler, made for one group, steps the new one with
the formulas that start from a group's lr and leaves it alone in those
zipped over base_lrs (LambdaLR, CosineAnnealingLR's restart branch, the
closed forms of SequentialLR's hand-over); the lrs are (STEPS + 1, 2), the
second group NaN before it exists.
tests/sched_cases.c builds the same cases in C.
"""
import os
import sys
import warnings

import torch
from torch.optim.lr_scheduler import (CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR,
                                      MultiStepLR, SequentialLR, StepLR)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "optim")
STEPS = 40


def pow095(epoch):
    return 0.95 ** epoch


def warmup5(epoch):
    return min(1.0, (epoch + 1) / 5)


# (name, initial lr, code building the scheduler from `o`, the optimizer).
# The code strings are evaluated, and stored as the case's description.
CASES = [
    ("step_7_half", 0.1, "StepLR(o, step_size=7, gamma=0.5)"),
    ("step_3_default", 0.05, "StepLR(o, step_size=3)"),
    ("step_1", 1.0, "StepLR(o, step_size=1, gamma=0.9)"),
    ("multistep", 0.1, "MultiStepLR(o, milestones=[5, 12, 30], gamma=0.3)"),
    ("multistep_repeated_unsorted", 0.2, "MultiStepLR(o, milestones=[20, 8, 8, 0], gamma=0.5)"),
    ("multistep_none", 0.3, "MultiStepLR(o, milestones=[])"),
    ("exponential", 0.1, "ExponentialLR(o, gamma=0.9)"),
    ("exponential_growing", 1e-3, "ExponentialLR(o, gamma=1.05)"),
    ("cosine_10", 0.1, "CosineAnnealingLR(o, T_max=10)"),
    ("cosine_13_eta", 0.05, "CosineAnnealingLR(o, T_max=13, eta_min=1e-3)"),
    ("cosine_1", 0.1, "CosineAnnealingLR(o, T_max=1, eta_min=0.01)"),
    ("cosine_40", 3e-4, "CosineAnnealingLR(o, T_max=40, eta_min=1e-6)"),
    ("linear_default", 0.1, "LinearLR(o)"),
    ("linear_warmup", 0.05, "LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=10)"),
    ("linear_to_zero", 0.1, "LinearLR(o, start_factor=1.0, end_factor=0.0, total_iters=20)"),
    # torch's rounding gives about -1e-18 at total_iters; tapegrad sets 0 there.
    ("linear_to_zero_third", 0.1, "LinearLR(o, start_factor=1/3, end_factor=0.0, total_iters=5)"),
    ("linear_down", 0.2, "LinearLR(o, start_factor=0.5, end_factor=0.25, total_iters=7)"),
    ("lambda_pow", 0.1, "LambdaLR(o, pow095)"),
    ("lambda_warmup", 0.02, "LambdaLR(o, warmup5)"),
    ("cosine_set_lr", 0.1, "CosineAnnealingLR(o, T_max=12, eta_min=0.002)"),
    ("linear_set_lr", 0.1, "LinearLR(o, start_factor=0.2, total_iters=10)"),
    ("exponential_set_lr", 0.1, "ExponentialLR(o, gamma=0.8)"),
    ("lambda_set_lr", 0.1, "LambdaLR(o, pow095)"),
    ("seq_warmup_cosine", 0.1,
     "SequentialLR(o, [LinearLR(o, start_factor=0.1, total_iters=5), "
     "CosineAnnealingLR(o, T_max=30, eta_min=1e-4)], milestones=[5])"),
    ("seq_three", 0.5,
     "SequentialLR(o, [ExponentialLR(o, gamma=0.9), StepLR(o, step_size=3, gamma=0.5), "
     "LambdaLR(o, pow095)], milestones=[4, 15])"),
    ("seq_multistep_zero", 0.2,
     "SequentialLR(o, [LinearLR(o, start_factor=0.5, total_iters=4), "
     "MultiStepLR(o, milestones=[0, 3, 3], gamma=0.5)], milestones=[6])"),
    ("seq_cosine_linear", 0.08,
     "SequentialLR(o, [CosineAnnealingLR(o, T_max=6, eta_min=0.01), "
     "LinearLR(o, start_factor=0.25, end_factor=0.75, total_iters=8)], milestones=[10])"),
    ("seq_unsorted_milestones", 0.3,
     "SequentialLR(o, [ExponentialLR(o, gamma=0.8), StepLR(o, step_size=2, gamma=0.5), "
     "CosineAnnealingLR(o, T_max=10)], milestones=[12, 6])"),
    ("seq_constant_exponential", 1.0,
     "SequentialLR(o, [LinearLR(o, start_factor=0.1, end_factor=0.1, total_iters=2), "
     "ExponentialLR(o, gamma=0.9)], milestones=[2])"),
    ("seq_single", 0.4, "SequentialLR(o, [StepLR(o, step_size=4, gamma=0.5)], milestones=[])"),
    # two param groups, each scheduled from its own base lr
    ("groups_cosine", (0.1, 0.02), "CosineAnnealingLR(o, T_max=10, eta_min=1e-3)"),
    ("groups_linear", (0.05, 0.5), "LinearLR(o, start_factor=0.1, total_iters=10)"),
    ("groups_step", (0.05, 1.0), "StepLR(o, step_size=3, gamma=0.5)"),
    ("groups_multistep", (0.3, 0.01), "MultiStepLR(o, milestones=[2, 9, 9], gamma=0.4)"),
    ("groups_lambda", (0.1, 0.3), "LambdaLR(o, warmup5)"),
    ("groups_lambda_per_group", (0.1, 0.3), "LambdaLR(o, [pow095, warmup5])"),
    ("groups_exponential_set_lr", (0.1, 0.2), "ExponentialLR(o, gamma=0.8)"),
    ("groups_seq_warmup_cosine", (0.1, 0.01),
     "SequentialLR(o, [LinearLR(o, start_factor=0.1, total_iters=5), "
     "CosineAnnealingLR(o, T_max=30, eta_min=1e-4)], milestones=[5])"),
    # a param group added after the scheduler was made (ADD_GROUP)
    ("added_step", 1.0, "StepLR(o, step_size=3, gamma=0.5)"),
    ("added_multistep", 0.2, "MultiStepLR(o, milestones=[2, 6, 6, 11], gamma=0.5)"),
    ("added_exponential", 0.1, "ExponentialLR(o, gamma=0.9)"),
    ("added_cosine", 0.1, "CosineAnnealingLR(o, T_max=4, eta_min=0.01)"),
    ("added_linear", 0.1, "LinearLR(o, start_factor=0.25, total_iters=8)"),
    ("added_lambda", 0.1, "LambdaLR(o, pow095)"),
    ("added_seq_warmup_cosine", 0.1,
     "SequentialLR(o, [LinearLR(o, start_factor=0.1, total_iters=5), "
     "CosineAnnealingLR(o, T_max=30, eta_min=1e-4)], milestones=[5])"),
    ("added_seq_exponential_linear", 0.4,
     "SequentialLR(o, [ExponentialLR(o, gamma=0.9), "
     "LinearLR(o, start_factor=0.5, total_iters=4)], milestones=[4])"),
]
# case: (k, lr, group): set param group `group`'s lr to lr before step k
SET_LR = {"cosine_set_lr": (5, 0.03, 0), "linear_set_lr": (4, 0.5, 0),
          "exponential_set_lr": (10, 1.0, 0), "lambda_set_lr": (6, 0.7, 0),
          "groups_exponential_set_lr": (10, 0.5, 1)}
# case: (k, lr): add a param group of lr before step k
ADD_GROUP = {"added_step": (4, 0.2), "added_multistep": (5, 0.3), "added_exponential": (3, 0.5),
             "added_cosine": (2, 0.5), "added_linear": (3, 0.4), "added_lambda": (2, 0.3),
             "added_seq_warmup_cosine": (3, 0.05), "added_seq_exponential_linear": (2, 0.6)}


def run(name, lr, code):
    """The lrs of a case: (STEPS + 1,), or (STEPS + 1, 2) for two groups."""
    groups = lr if isinstance(lr, tuple) else (lr,)
    ps = [torch.zeros(1, requires_grad=True) for _ in groups]
    o = torch.optim.SGD([{"params": [p], "lr": g} for p, g in zip(ps, groups)], lr=groups[0])
    sched = eval(code, globals(), {"o": o})
    width = 2 if name in ADD_GROUP else len(groups)

    def row():
        lrs = [g["lr"] for g in o.param_groups]
        assert sched.get_last_lr() == lrs
        return lrs + [float("nan")] * (width - len(lrs))

    lrs = [row()]
    for k in range(1, STEPS + 1):
        o.step()
        if name in SET_LR and SET_LR[name][0] == k:
            o.param_groups[SET_LR[name][2]]["lr"] = SET_LR[name][1]
        if name in ADD_GROUP and ADD_GROUP[name][0] == k:
            o.add_param_group({"params": [torch.zeros(1, requires_grad=True)],
                               "lr": ADD_GROUP[name][1]})
        sched.step()
        lrs.append(row())
    if name in ADD_GROUP:
        assert len(getattr(sched, "base_lrs", [0])) == 1 and len(sched.get_last_lr()) == 2
    t = torch.tensor(lrs, dtype=torch.float64)
    return t if width > 1 else t[:, 0]


def main():
    warnings.simplefilter("ignore")   # SequentialLR's step(0): the epoch argument is deprecated
    os.makedirs(OUT, exist_ok=True)
    tensors, meta = [], {"torch": torch.__version__}
    for name, lr, code in CASES:
        tensors.append((name + ".lr", run(name, lr, code)))
        setting = (" (group %d's lr set to %r before step %d)" % SET_LR[name][::-1]
                   if name in SET_LR else "")
        if name in ADD_GROUP:
            setting = " (a param group of lr %r added before step %d)" % ADD_GROUP[name][::-1]
        opt = ("SGD(lr=%r)" % lr if not isinstance(lr, tuple) else
               "SGD([{params: [p], lr: %r}, {params: [q], lr: %r}])" % lr)
        meta[name] = "%s; %s%s" % (opt, code, setting)
    write_safetensors(os.path.join(OUT, "lr_scheduler.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
