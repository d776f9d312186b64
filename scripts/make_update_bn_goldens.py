#!/usr/bin/python3
"""Writes tests/golden/update_bn.safetensors: PyTorch 1.13's
torch.optim.swa_utils.update_bn on a small generator, which
tests/test_update_bn.c compares tapegrad's tg_update_bn with.

The generator, for D in f32, f64:
    Linear(6, 16) -> BatchNorm1d(16) -> Unflatten(1, (4, 2, 2))
    -> ConvTranspose2d(4, 3, 4, 2, 1) -> BatchNorm2d(3, momentum=0.3) -> ReLU
    -> ConvTranspose2d(3, 2, 4, 2, 1) -> Tanh
is run twice in training mode on noise (so that its running statistics are
not the defaults), put in eval mode, and given to update_bn with BATCHES
batches of noise, the last one smaller.
Keys:
  D.init.<name>     the state dict before update_bn
  D.batch<k>        the batches, k = 0..BATCHES-1
  D.after.<name>    the state dict after update_bn
  D.z, D.out        the model (in eval mode, as update_bn left it) on z

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_update_bn_goldens.py
"""
import os
import sys

import torch
import torch.nn as nn
from torch.optim.swa_utils import update_bn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "update_bn.safetensors")
SEED = 4113
BATCH_SIZES = (5, 5, 5, 3)


def generator():
    return nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.Unflatten(1, (4, 2, 2)),
                         nn.ConvTranspose2d(4, 3, 4, 2, 1), nn.BatchNorm2d(3, momentum=0.3),
                         nn.ReLU(), nn.ConvTranspose2d(3, 2, 4, 2, 1), nn.Tanh())


def state(prefix, module):
    return [("%s.%s" % (prefix, k), v.detach().clone()) for k, v in module.state_dict().items()]


def case(dt, name, gen):
    model = generator().to(dt)
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, 6, generator=gen, dtype=dt) * 3 + 1)
    model.eval()
    out = state(name + ".init", model)
    batches = [torch.randn(n, 6, generator=gen, dtype=dt) for n in BATCH_SIZES]
    out += [("%s.batch%d" % (name, k), b) for k, b in enumerate(batches)]
    update_bn(batches, model)
    assert not model.training
    out += state(name + ".after", model)
    z = torch.randn(4, 6, generator=gen, dtype=dt)
    with torch.no_grad():
        out += [(name + ".z", z), (name + ".out", model(z))]
    return out


def main():
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    out = []
    for dt, name in ((torch.float32, "f32"), (torch.float64, "f64")):
        out += case(dt, name, gen)
    write_safetensors(OUT, out, {"batches": str(len(BATCH_SIZES))})
    print("wrote %s: %d tensors" % (OUT, len(out)))


if __name__ == "__main__":
    main()
