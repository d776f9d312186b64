#!/usr/bin/python3
"""Writes tests/golden/weight_norm.safetensors: PyTorch 1.13's
torch.nn.utils.weight_norm and remove_weight_norm on a Linear, a Conv1d, a
ConvTranspose1d (HiFi-GAN's upsampling layer) and a ConvTranspose2d, at
dim 0, 1 and None, and remove_spectral_norm on a Linear, which
tests/test_weight_norm.c compares tapegrad with.

For each dtype T (f32, f64) and case C (lin: Linear(5, 4); conv1d:
Conv1d(3, 4, 3, stride 2, padding 1); convt1d: ConvTranspose1d(4, 3, 4,
stride 2, padding 1); convt2d: ConvTranspose2d(4, 3, 3, stride 2,
padding 1, output_padding 1)):
  T.C.w0.weight, T.C.w0.bias   the plain module's seeded state
  T.C.x, T.C.gy                an input and the upstream gradient of the output
and for each dim D (d0: 0, d1: 1, dn: None):
  T.C.D.init.<key>   the state dict right after weight_norm(m, dim=D)
                     (bias, weight_g, weight_v: torch's initial g = norm)
  T.C.D.sd.<key>     the state of the run: init with weight_g scaled by
                     seeded factors in [0.5, 1.5), so g is not the norm
  T.C.D.y, T.C.D.w   the output of one forward from it, and the weight it
                     computed
  T.C.D.grad.<key>   d sum(y * gy) / d bias, weight_g, weight_v
  T.C.D.step.<key>   the state dict after one SGD step (lr 0.1) on them
  T.C.D.removed.<key> the state dict after remove_weight_norm then
                     (bias, weight)
  f32.sn.sd.<key>, f32.sn.removed.<key>  a spectral-normed Linear(5, 4)'s
                     seeded state (weight_orig, bias, weight_u, weight_v)
                     and its state dict after remove_spectral_norm

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_weight_norm_goldens.py
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.utils import (remove_spectral_norm, remove_weight_norm,
                            spectral_norm, weight_norm)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "weight_norm.safetensors")
SEED = 4099
DIMS = {"d0": 0, "d1": 1, "dn": None}


def cases():
    """name -> (module factory, input shape)"""
    nn = torch.nn
    return {
        "lin": (lambda: nn.Linear(5, 4), (3, 5)),
        "conv1d": (lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 7)),
        "convt1d": (lambda: nn.ConvTranspose1d(4, 3, 4, stride=2, padding=1), (2, 4, 5)),
        "convt2d": (lambda: nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1,
                                               output_padding=1), (2, 4, 3, 3)),
    }


def randn(shape, gen, dtype):
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)


def run(make, dtype, w0, x, gy, dim, gen, pre):
    out = []
    m = make().to(dtype)
    m.load_state_dict(w0)
    weight_norm(m, dim=dim)
    for k, t in m.state_dict().items():
        out.append((f"{pre}.init.{k}", t.clone()))
    with torch.no_grad():
        scale = torch.rand(m.weight_g.shape, generator=gen, dtype=torch.float64) + 0.5
        m.weight_g.mul_(scale.to(dtype))
    for k, t in m.state_dict().items():
        out.append((f"{pre}.sd.{k}", t.clone()))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    y = m(x)
    out += [(f"{pre}.y", y.detach().clone()), (f"{pre}.w", m.weight.detach().clone())]
    (y * gy).sum().backward()
    for k in ("bias", "weight_g", "weight_v"):
        out.append((f"{pre}.grad.{k}", getattr(m, k).grad.clone()))
    opt.step()
    for k, t in m.state_dict().items():
        out.append((f"{pre}.step.{k}", t.clone()))
    remove_weight_norm(m)
    for k, t in m.state_dict().items():
        out.append((f"{pre}.removed.{k}", t.clone()))
    return out


def spectral(gen):
    m = spectral_norm(torch.nn.Linear(5, 4))
    sd = {}
    for k, t in m.state_dict().items():
        r = torch.randn(t.shape, generator=gen)
        if k in ("weight_u", "weight_v"):
            r = F.normalize(r, dim=0, eps=1e-12)
        sd[k] = r
    m.load_state_dict(sd)
    out = [(f"f32.sn.sd.{k}", t.clone()) for k, t in m.state_dict().items()]
    remove_spectral_norm(m)
    out += [(f"f32.sn.removed.{k}", t.clone()) for k, t in m.state_dict().items()]
    return out


def main():
    gen = torch.Generator().manual_seed(SEED)
    out = []
    for tname, dtype in (("f32", torch.float32), ("f64", torch.float64)):
        for name, (make, xshape) in cases().items():
            m = make()
            w0 = {k: 0.5 * randn(t.shape, gen, dtype) for k, t in m.state_dict().items()}
            x = randn(xshape, gen, dtype)
            with torch.no_grad():
                yshape = m(x.float()).shape
            gy = randn(yshape, gen, dtype)
            pre = f"{tname}.{name}"
            out += [(f"{pre}.w0.{k}", t) for k, t in w0.items()]
            out += [(f"{pre}.x", x), (f"{pre}.gy", gy)]
            for dname, dim in DIMS.items():
                out += run(make, dtype, w0, x, gy, dim, gen, f"{pre}.{dname}")
    out += spectral(gen)
    write_safetensors(OUT, out, {"torch": torch.__version__})


if __name__ == "__main__":
    main()
