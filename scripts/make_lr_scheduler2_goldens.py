#!/usr/bin/python3
"""Writes the PyTorch golden file of tapegrad's ConstantLR, MultiplicativeLR,
PolynomialLR, CosineAnnealingWarmRestarts and ChainedScheduler (and these
inside a SequentialLR).

Run from the repository root with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_lr_scheduler2_goldens.py

tests/golden/optim/lr_scheduler2.safetensors, one pair of entries per case
of CASES:
  <case>.lr          f64 (STEPS + 1, W): each param group's lr after the
                     scheduler's construction, then after each of STEPS
                     steps; W is 2 (two param groups of different lrs), or 3
                     for a case of ADD_GROUP, whose third group is NaN
                     before it exists
  <case>.last_epoch  f64 (STEPS + 1,): the scheduler's last_epoch at the same
                     points (NaN for a ChainedScheduler, which has none)
  metadata           <case> = the PyTorch code of the case; "torch" = its
                     version.
Each case runs a dummy SGD optimizer on one parameter per param group;
optimizer.step() comes before each scheduler.step().  A step of a case of
STEP_TO is scheduler.step(epoch) where its list has an epoch for it
(CosineAnnealingWarmRestarts' step to a possibly fractional epoch), else
scheduler.step().  SET_LR[case] = (k, lr, g) sets group g's lr to lr just
before step k; ADD_GROUP[case] = (k, lr) adds a third param group of that lr
just before step k.  tests/test_lr_scheduler_more.c builds the same cases
in C and compares the doubles bit for bit.
"""
import os
import sys
import warnings

import torch
from torch.optim.lr_scheduler import (ChainedScheduler, ConstantLR, CosineAnnealingLR,
                                      CosineAnnealingWarmRestarts, ExponentialLR, LinearLR,
                                      MultiplicativeLR, PolynomialLR, SequentialLR, StepLR)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "optim")
STEPS = 30
LRS = (0.1, 0.025)


def mul095(epoch):
    return 0.95


def mul_cycle(epoch):
    return 0.9 if epoch % 3 == 0 else 1.02


# (name, code building the scheduler from `o`, the optimizer).  The code
# strings are evaluated, and stored as the case's description.
CASES = [
    ("const_default", "ConstantLR(o)"),
    ("const_half_4", "ConstantLR(o, factor=0.5, total_iters=4)"),
    ("const_0_3_10", "ConstantLR(o, factor=0.3, total_iters=10)"),
    ("const_zero_iters", "ConstantLR(o, factor=0.7, total_iters=0)"),
    ("const_one", "ConstantLR(o, factor=1.0, total_iters=3)"),
    ("const_set_lr", "ConstantLR(o, factor=0.3, total_iters=6)"),
    ("mult_095", "MultiplicativeLR(o, mul095)"),
    ("mult_cycle", "MultiplicativeLR(o, mul_cycle)"),
    ("mult_per_group", "MultiplicativeLR(o, [mul095, mul_cycle])"),
    ("mult_set_lr", "MultiplicativeLR(o, mul_cycle)"),
    ("poly_default", "PolynomialLR(o)"),
    ("poly_10_2", "PolynomialLR(o, total_iters=10, power=2.0)"),
    ("poly_7_half", "PolynomialLR(o, total_iters=7, power=0.5)"),
    ("poly_1", "PolynomialLR(o, total_iters=1, power=1.0)"),
    ("poly_power0", "PolynomialLR(o, total_iters=4, power=0.0)"),
    ("poly_40_3", "PolynomialLR(o, total_iters=40, power=3.0)"),
    ("poly_set_lr", "PolynomialLR(o, total_iters=12, power=1.5)"),
    ("warm_5", "CosineAnnealingWarmRestarts(o, T_0=5)"),
    ("warm_3_2", "CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2)"),
    ("warm_2_3_eta", "CosineAnnealingWarmRestarts(o, T_0=2, T_mult=3, eta_min=1e-3)"),
    ("warm_1", "CosineAnnealingWarmRestarts(o, T_0=1, eta_min=0.01)"),
    ("warm_7_eta", "CosineAnnealingWarmRestarts(o, T_0=7, eta_min=0.005)"),
    ("warm_frac_3_2", "CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2)"),
    ("warm_frac_4_1", "CosineAnnealingWarmRestarts(o, T_0=4, eta_min=0.005)"),
    ("warm_mixed_3_2", "CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=1e-4)"),
    ("warm_mixed_1_3", "CosineAnnealingWarmRestarts(o, T_0=1, T_mult=3)"),
    ("seq_const_expo",
     "SequentialLR(o, [ConstantLR(o, factor=0.1, total_iters=2), ExponentialLR(o, gamma=0.9)], "
     "milestones=[2])"),
    ("seq_linear_poly",
     "SequentialLR(o, [LinearLR(o, start_factor=0.1, total_iters=5), "
     "PolynomialLR(o, total_iters=20, power=2.0)], milestones=[5])"),
    ("seq_poly_const",
     "SequentialLR(o, [PolynomialLR(o, total_iters=8), ConstantLR(o, factor=0.5, total_iters=6)], "
     "milestones=[10])"),
    ("seq_step_const_zero",
     "SequentialLR(o, [StepLR(o, step_size=2, gamma=0.5), "
     "ConstantLR(o, factor=0.3, total_iters=0)], milestones=[5])"),
    ("seq_expo_mult",
     "SequentialLR(o, [ExponentialLR(o, gamma=0.9), MultiplicativeLR(o, mul095)], "
     "milestones=[4])"),
    ("seq_linear_warm",
     "SequentialLR(o, [LinearLR(o, start_factor=0.2, total_iters=4), "
     "CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=1e-4)], milestones=[4])"),
    ("seq_warm_first",
     "SequentialLR(o, [CosineAnnealingWarmRestarts(o, T_0=4), StepLR(o, step_size=3, gamma=0.5)], "
     "milestones=[10])"),
    ("chain_const_expo",
     "ChainedScheduler([ConstantLR(o, factor=0.1, total_iters=2), ExponentialLR(o, gamma=0.9)])"),
    ("chain_linear_cos",
     "ChainedScheduler([LinearLR(o, start_factor=0.1, total_iters=5), "
     "CosineAnnealingLR(o, T_max=20, eta_min=1e-4)])"),
    ("chain_warm_const",
     "ChainedScheduler([CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2), "
     "ConstantLR(o, factor=0.5, total_iters=6)])"),
    ("chain_three",
     "ChainedScheduler([MultiplicativeLR(o, mul_cycle), PolynomialLR(o, total_iters=12, "
     "power=1.5), StepLR(o, step_size=5, gamma=0.5)])"),
    ("chain_single", "ChainedScheduler([ExponentialLR(o, gamma=0.8)])"),
    ("added_const", "ConstantLR(o, factor=0.4, total_iters=5)"),
    ("added_mult", "MultiplicativeLR(o, mul_cycle)"),
    ("added_poly", "PolynomialLR(o, total_iters=9, power=2.0)"),
    ("added_warm", "CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001)"),
    # lr * (1 / 0.9) is not lr / 0.9 for these lrs
    ("const_0_9_3", "ConstantLR(o, factor=0.9, total_iters=3)"),
]


def frac(k, step):
    return [step * i for i in range(1, k + 1)]


# case: the epoch of each step 1..STEPS (None: step())
STEP_TO = {
    "warm_frac_3_2": frac(STEPS, 0.37),
    "warm_frac_4_1": frac(STEPS, 0.3),
    # step() and step(epoch) interleaved; 9.0, 21.0 and 45.0 are restarts
    # (log(epoch / T_0 + 1, 2) = 2, 3, 4), 13.5 inside a cycle
    "warm_mixed_3_2": [None] * 5 + [26, None, None, 2.5, None, 9.0, None, 21.0, 13.5, None,
                                   None, 45.0, None, 0.0, None] + [None] * 10,
    # 121 = 1 + 3 + 9 + 27 + 81 is a restart, but math.log(243, 3) is
    # 4.999999999999999: torch's n is 4, T_cur = T_i = 81
    "warm_mixed_1_3": [None] * 3 + [121.0, None, 40.0, 39.5, None, 0.25, None, 13.0]
    + [None] * 19,
}
SET_LR = {"const_set_lr": (3, 0.5, 1), "mult_set_lr": (5, 0.07, 0),
          "poly_set_lr": (4, 0.2, 1)}
ADD_GROUP = {"added_const": (3, 0.5), "added_mult": (2, 0.3), "added_poly": (4, 0.2),
             "added_warm": (3, 0.5)}


def run(name, code):
    """The lrs (STEPS + 1, W) and last_epochs (STEPS + 1,) of a case."""
    ps = [torch.zeros(1, requires_grad=True) for _ in LRS]
    o = torch.optim.SGD([{"params": [p], "lr": g} for p, g in zip(ps, LRS)], lr=LRS[0])
    sched = eval(code, globals(), {"o": o})
    width = 3 if name in ADD_GROUP else 2

    def row():
        lrs = [g["lr"] for g in o.param_groups]
        assert sched.get_last_lr() == lrs
        return lrs + [float("nan")] * (width - len(lrs))

    lrs, epochs = [row()], [float(getattr(sched, "last_epoch", float("nan")))]
    for k in range(1, STEPS + 1):
        o.step()
        if name in SET_LR and SET_LR[name][0] == k:
            o.param_groups[SET_LR[name][2]]["lr"] = SET_LR[name][1]
        if name in ADD_GROUP and ADD_GROUP[name][0] == k:
            o.add_param_group({"params": [torch.zeros(1, requires_grad=True)],
                               "lr": ADD_GROUP[name][1]})
        to = STEP_TO[name][k - 1] if name in STEP_TO else None
        if to is None:
            sched.step()
        else:
            sched.step(to)
        lrs.append(row())
        epochs.append(float(getattr(sched, "last_epoch", float("nan"))))
    return torch.tensor(lrs, dtype=torch.float64), torch.tensor(epochs, dtype=torch.float64)


def main():
    warnings.simplefilter("ignore")   # SequentialLR's step(0): the epoch argument is deprecated
    os.makedirs(OUT, exist_ok=True)
    tensors, meta = [], {"torch": torch.__version__}
    for name, code in CASES:
        lrs, epochs = run(name, code)
        tensors += [(name + ".lr", lrs), (name + ".last_epoch", epochs)]
        setting = ""
        if name in SET_LR:
            setting = " (group %d's lr set to %r before step %d)" % SET_LR[name][::-1]
        if name in ADD_GROUP:
            setting = " (a param group of lr %r added before step %d)" % ADD_GROUP[name][::-1]
        if name in STEP_TO:
            setting = " (steps to epochs %r, None: step())" % (STEP_TO[name],)
        meta[name] = "SGD([{params: [p], lr: %r}, {params: [q], lr: %r}]); %s%s" % (
            LRS + (code, setting))
    write_safetensors(os.path.join(OUT, "lr_scheduler2.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
