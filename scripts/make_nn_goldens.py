#!/usr/bin/python3
"""Writes the PyTorch golden files of tapegrad's nn modules (tests/test_nn.c).

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_nn_goldens.py

Each tests/golden/nn/<case>.safetensors holds, all f32 (num_batches_tracked i64):
  <prefix>.<state_dict key>   the module's state before the step, torch names
  x, grad_y                   the input and the output gradient
  y, grad_x                   forward output and d sum(y * grad_y) / dx
  grad.<prefix>.<key>         the gradient of every parameter
  after.<prefix>.<key>        (BatchNorm / generator) the state after the
                              training step: running stats, num_batches_tracked
  eval.y, eval.grad_x, eval.grad.<prefix>.<key>   (BatchNorm) the same in eval
                              mode, starting again from the state before
The module runs in f64 on f32-representable values and every result is rounded
once to f32, the tightest reference for an f32 implementation.
The metadata "prefix" gives the state prefix ("m" or "gen").
"""
import copy
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "golden", "nn")
SEED = 20240612


def f32(t):
    return t.detach().to(torch.float32) if t.is_floating_point() else t.detach().clone()


def rand32(*shape):
    """Uniform [-1, 1) values representable in f32, as f64."""
    return (torch.rand(*shape, dtype=torch.float32) * 2 - 1).to(torch.float64)


def state(prefix, module):
    return [("%s.%s" % (prefix, k), f32(v)) for k, v in module.state_dict().items()]


def run(module, x, gy, prefix, tag=""):
    """Forward + backward of sum(y * gy); returns the named results."""
    x = x.clone().requires_grad_(True)
    module.zero_grad(set_to_none=True)
    y = module(x)
    (y * gy).sum().backward()
    out = [(tag + "y", f32(y)), (tag + "grad_x", f32(x.grad))]
    for k, p in module.named_parameters():
        out.append(("%sgrad.%s.%s" % (tag, prefix, k), f32(p.grad)))
    return out


def randomize_state(module):
    """f32-representable parameters and (for BatchNorm) non-trivial stats."""
    with torch.no_grad():
        for k, v in module.state_dict().items():
            if k.endswith("num_batches_tracked"):
                v.fill_(3)
            elif k.endswith("running_var") or (k.endswith("weight") and v.dim() == 1):
                v.copy_(rand32(*v.shape).abs() + 0.5)
            else:
                v.copy_(rand32(*v.shape))


def case(name, module, x_shape, prefix="m", bn=False):
    module = module.double()
    randomize_state(module)
    x = rand32(*x_shape)
    with torch.no_grad():
        gy = rand32(*module.eval()(x).shape)   # eval: the probe changes no stats
    before = copy.deepcopy(module)
    tensors = state(prefix, module) + [("x", f32(x)), ("grad_y", f32(gy))]
    module.train()
    tensors += run(module, x, gy, prefix)
    if bn or any(isinstance(c, nn.modules.batchnorm._BatchNorm) for c in module.modules()):
        tensors += [("after." + k, v) for k, v in state(prefix, module)]
    if bn:
        before.eval()
        tensors += run(before, x, gy, prefix, "eval.")
    write_safetensors(os.path.join(OUT_DIR, name + ".safetensors"), tensors,
                      {"prefix": prefix, "module": repr(module).replace("\n", " ")})


class Gen(nn.Module):
    """A small DCGAN-like generator: z (N, 8) -> image (N, 1, 12, 12)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(8, 8 * 3 * 3), nn.Unflatten(1, (8, 3, 3)), nn.BatchNorm2d(8), nn.ReLU(),
            nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
            nn.ConvTranspose2d(4, 1, 4, stride=2, padding=1), nn.Tanh())

    def forward(self, z):
        return self.net(z)


def main():
    torch.manual_seed(SEED)
    os.makedirs(OUT_DIR, exist_ok=True)
    case("linear", nn.Linear(5, 4), (3, 5))
    case("conv2d", nn.Conv2d(3, 4, 3, padding=1), (2, 3, 5, 5))
    case("conv_transpose2d", nn.ConvTranspose2d(4, 3, 4, stride=2, padding=1), (2, 4, 3, 3))
    case("batchnorm1d_nc", nn.BatchNorm1d(3, momentum=0.2), (6, 3), bn=True)
    case("batchnorm1d_ncl", nn.BatchNorm1d(3), (4, 3, 5), bn=True)
    case("batchnorm2d", nn.BatchNorm2d(3, eps=1e-3), (2, 3, 4, 4), bn=True)
    case("generator", Gen(), (4, 8), prefix="gen")
    case("layernorm", nn.LayerNorm((4, 5), eps=1e-4), (3, 2, 4, 5))
    case("groupnorm", nn.GroupNorm(3, 6), (2, 6, 3, 4))
    case("conv_groupnorm", nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.GroupNorm(2, 4),
                                         nn.ReLU()), (2, 3, 5, 5))


if __name__ == "__main__":
    main()
