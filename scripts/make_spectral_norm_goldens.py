#!/usr/bin/python3
"""Writes tests/golden/spectral_norm.safetensors: PyTorch 1.13's
torch.nn.utils.spectral_norm on a Linear, a Conv2d and a ConvTranspose2d
(its default dim 1), which tests/test_spectral_norm.c compares tapegrad with.

For each case C (lin: Linear(5, 4); conv: Conv2d(3, 4, 3, stride 2,
padding 1); convt: ConvTranspose2d(4, 3, 3, stride 2, padding 1,
output_padding 1)), in f32:
  C.sd.<key>             the spectral-normed module's state dict before any
                         forward (weight_orig, bias, weight_u, weight_v):
                         seeded values, with u and v normalized
  C.x, C.g               an input and the upstream gradient of the output
  C.M.y                  the output of one forward in mode M, from that state
  C.M.u, C.M.v           weight_u and weight_v after it
  C.M.gw, C.M.gb         d sum(y * g) / d weight_orig and / d bias
M is train1 (training, n_power_iterations=1), train3 (training, 3) or eval
(no iteration: u and v stay).

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_spectral_norm_goldens.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "spectral_norm.safetensors")
SEED = 7919


def cases():
    """name -> (module factory, input shape)"""
    return {
        "lin": (lambda: torch.nn.Linear(5, 4), (3, 5)),
        "conv": (lambda: torch.nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 5, 5)),
        "convt": (lambda: torch.nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1,
                                                   output_padding=1), (2, 4, 3, 3)),
    }


def state(make, gen):
    """A seeded initial state dict of the spectral-normed module."""
    m = torch.nn.utils.spectral_norm(make())
    sd = {}
    for k, t in m.state_dict().items():
        r = torch.randn(t.shape, generator=gen)
        if k in ("weight_u", "weight_v"):
            r = F.normalize(r, dim=0, eps=1e-12)
        sd[k] = r
    return sd


def run(make, sd, x, g, mode):
    iters = 3 if mode == "train3" else 1
    m = torch.nn.utils.spectral_norm(make(), n_power_iterations=iters)
    m.load_state_dict(sd)
    m.train(mode != "eval")
    y = m(x)
    (y * g).sum().backward()
    return {"y": y, "u": m.weight_u, "v": m.weight_v,
            "gw": m.weight_orig.grad, "gb": m.bias.grad}


def main():
    gen = torch.Generator().manual_seed(SEED)
    out = []
    for name, (make, xshape) in cases().items():
        torch.manual_seed(SEED)
        sd = state(make, gen)
        for k, t in sd.items():
            out.append((f"{name}.sd.{k}", t))
        x = torch.randn(xshape, generator=gen)
        m = make()
        with torch.no_grad():
            gshape = m(x).shape
        g = torch.randn(gshape, generator=gen)
        out += [(f"{name}.x", x), (f"{name}.g", g)]
        for mode in ("train1", "train3", "eval"):
            for k, t in run(make, sd, x, g, mode).items():
                out.append((f"{name}.{mode}.{k}", t.detach().clone()))
    write_safetensors(OUT, out, {"torch": torch.__version__})


if __name__ == "__main__":
    main()
