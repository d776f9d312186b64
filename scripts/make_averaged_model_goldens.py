#!/usr/bin/python3
"""Writes tests/golden/averaged_model.safetensors: PyTorch 1.13's
torch.optim.swa_utils.AveragedModel over a few SGD steps of a small
generator, which tests/test_averaged_model.c compares tapegrad with.

The generator, for D in f32, f64:
    Linear(6, 16) -> Unflatten(1, (4, 2, 2)) -> ConvTranspose2d(4, 3, 4, 2, 1)
    -> BatchNorm2d(3) -> ReLU -> ConvTranspose2d(3, 2, 4, 2, 1) -> Tanh
trained with SGD(lr 0.1, momentum 0.5) on mse_loss(gen(z), target), z (5, 6),
target (5, 2, 8, 8); after each step k = 1..STEPS every averaged model A is
updated (update_parameters).  A is one of
  equal        AveragedModel(gen)                        (the equal average)
  ema0.9       avg_fn = 0.9 * a + 0.1 * p
  ema0.999     avg_fn = 0.999 * a + 0.001 * p
  ema0.9buf    ema0.9 with use_buffers=True
  equalbuf     equal with use_buffers=True
Keys:
  D.init.<name>           the generator's state dict before training
  D.z, D.target           the data
  D.step<k>.<name>        the generator's state dict after step k
  D.A.step<k>.<name>      A's state dict after update k (n_averaged,
                          module.<name>)
  D.A.out                 A in eval mode applied to z after the last update
The half cases: Linear(5, 3) in dt = f16, bf16 whose parameters are set to
half.dt.model<k>.<name> (k = 0..HALF_STEPS, seeded values) before update k
of each of equal and ema0.9, made at k = 0:
  half.dt.model<k>.<name>, half.dt.A.step<k>.<name>

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_averaged_model_goldens.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "averaged_model.safetensors")
SEED = 7919
STEPS = 4
HALF_STEPS = 3


def generator():
    return nn.Sequential(nn.Linear(6, 16), nn.Unflatten(1, (4, 2, 2)),
                         nn.ConvTranspose2d(4, 3, 4, 2, 1), nn.BatchNorm2d(3), nn.ReLU(),
                         nn.ConvTranspose2d(3, 2, 4, 2, 1), nn.Tanh())


def ema(decay):
    return lambda a, p, n: decay * a + (1 - decay) * p


def averaged(model):
    return {"equal": AveragedModel(model),
            "ema0.9": AveragedModel(model, avg_fn=ema(0.9)),
            "ema0.999": AveragedModel(model, avg_fn=ema(0.999)),
            "ema0.9buf": AveragedModel(model, avg_fn=ema(0.9), use_buffers=True),
            "equalbuf": AveragedModel(model, use_buffers=True)}


def state(prefix, module):
    return [("%s.%s" % (prefix, k), v.detach().clone()) for k, v in module.state_dict().items()]


def training_case(dt, name, gen):
    out = []
    model = generator().to(dt)
    z = torch.randn(5, 6, generator=gen, dtype=dt)
    target = torch.rand(5, 2, 8, 8, generator=gen, dtype=dt) * 2 - 1
    out += state(name + ".init", model) + [(name + ".z", z), (name + ".target", target)]
    avgs = averaged(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    for k in range(1, STEPS + 1):
        opt.zero_grad()
        F.mse_loss(model(z), target).backward()
        opt.step()
        out += state("%s.step%d" % (name, k), model)
        for a, swa in avgs.items():
            swa.update_parameters(model)
            out += state("%s.%s.step%d" % (name, a, k), swa)
    for a, swa in avgs.items():
        swa.eval()
        with torch.no_grad():
            out.append(("%s.%s.out" % (name, a), swa(z)))
    return out


def half_case(dt, name, gen):
    out = []
    model = nn.Linear(5, 3).to(dt)
    avgs = {"equal": AveragedModel(model), "ema0.9": AveragedModel(model, avg_fn=ema(0.9))}
    for k in range(HALF_STEPS + 1):
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * 2)
        out += state("%s.model%d" % (name, k), model)
        for a, swa in avgs.items():
            swa.update_parameters(model)
            out += state("%s.%s.step%d" % (name, a, k), swa)
    return out


def main():
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    out = []
    for dt, name in ((torch.float32, "f32"), (torch.float64, "f64")):
        out += training_case(dt, name, gen)
    for dt, name in ((torch.float16, "half.f16"), (torch.bfloat16, "half.bf16")):
        out += half_case(dt, name, gen)
    meta = {"steps": str(STEPS), "half_steps": str(HALF_STEPS)}
    write_safetensors(OUT, out, meta)
    print("wrote %s: %d tensors" % (OUT, len(out)))


if __name__ == "__main__":
    main()
