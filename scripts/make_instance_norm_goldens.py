#!/usr/bin/python3
"""Writes the PyTorch golden files of the InstanceNorm{1,2,3}d modules
(tests/test_instance_norm.c): tests/golden/instance_norm.safetensors
(track_running_stats=False) and tests/golden/instance_norm_running.safetensors
(track_running_stats=True).

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_instance_norm_goldens.py

Case "case<i>", i < the metadata "cases", with metadata
  case<i>.ns        1, 2 or 3 (InstanceNorm1d, 2d, 3d)
  case<i>.affine    "0" or "1"
  case<i>.eps       eps
  case<i>.train     "1" training, "0" eval (the same numbers, as
                    track_running_stats is False)
and tensors of the case's dtype (f64 or f32):
  case<i>.x, case<i>.gy   input and upstream gradient
  case<i>.w, case<i>.b    the module's weight and bias (affine only), set
                          to random values so that a mix-up shows
  case<i>.y               the module's output
  case<i>.gx, case<i>.gw, case<i>.gb   d sum(y * gy) / d(x, w, b)
Inputs are off-centre (mean 1.5) so that the mean matters.

instance_norm_running.safetensors: case "run<i>", i < the metadata "cases",
with metadata
  run<i>.ns, run<i>.affine, run<i>.eps   as above
  run<i>.momentum   momentum
  run<i>.steps      the number K of training forwards
and tensors of the case's dtype (f64 or f32):
  run<i>.w, run<i>.b      weight and bias (affine only), random
  run<i>.rm0, run<i>.rv0  the running statistics set before the first
                          forward (random, away from torch's 0 and 1)
  run<i>.nbt              num_batches_tracked (i64), set to 5 before the
                          first forward and left there by every forward
  run<i>.t<k>.x, .gy, .y, .gx, .gw, .gb   training forward k < K, as above
                          (the gradients of that forward alone)
  run<i>.t<k>.rm, .rv     the running statistics after training forward k
  run<i>.e.x, .gy, .y, .gx, .gw, .gb      then one eval forward, which
                          normalises with the running statistics of step K-1
and the state dict of run1's module after its eval forward under torch's
keys, prefixed "sd." (sd.weight, sd.bias, sd.running_mean, sd.running_var,
sd.num_batches_tracked), as torch.save would hold it.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "instance_norm.safetensors")
OUT_RUNNING = os.path.join(ROOT, "tests", "golden", "instance_norm_running.safetensors")
SEED = 7919
SEED_RUNNING = 7927
F64, F32 = torch.float64, torch.float32
CLS = {1: torch.nn.InstanceNorm1d, 2: torch.nn.InstanceNorm2d, 3: torch.nn.InstanceNorm3d}

# (ns, x shape, affine, eps, train, dtype)
CASES = [
    (1, (2, 3, 7), False, 1e-5, True, F64),
    (1, (2, 3, 7), True, 1e-5, True, F64),
    (1, (4, 9), True, 1e-3, True, F64),          # unbatched
    (2, (2, 4, 5, 6), False, 1e-5, True, F64),
    (2, (2, 4, 5, 6), True, 1e-5, False, F64),   # eval: the same statistics
    (2, (3, 6, 5), True, 1e-5, True, F64),       # unbatched
    (3, (2, 2, 3, 4, 5), True, 1e-5, True, F64),
    (2, (2, 8, 16, 16), True, 1e-5, True, F32),
    (1, (3, 5, 300), False, 1e-5, True, F32),
]


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    for i, (ns, shape, affine, eps, train, dt) in enumerate(CASES):
        k = "case%d" % i
        c = shape[-ns - 1]
        m = CLS[ns](c, eps=eps, affine=affine).to(dt)
        m.train(train)
        if affine:
            with torch.no_grad():
                m.weight.copy_(torch.randn(c, dtype=F64) * 0.5 + 1)
                m.bias.copy_(torch.randn(c, dtype=F64))
        x = (torch.randn(*shape, dtype=F64) + 1.5).to(dt).requires_grad_(True)
        y = m(x)
        gy = torch.randn(*y.shape, dtype=F64).to(dt)
        (y * gy).sum().backward()
        tensors.update({k + ".x": x.detach(), k + ".gy": gy, k + ".y": y.detach(),
                        k + ".gx": x.grad})
        if affine:
            tensors.update({k + ".w": m.weight.detach(), k + ".b": m.bias.detach(),
                            k + ".gw": m.weight.grad, k + ".gb": m.bias.grad})
        meta.update({k + ".ns": str(ns), k + ".affine": str(int(affine)), k + ".eps": repr(eps),
                     k + ".train": str(int(train))})
    meta["cases"] = str(len(CASES))
    write_safetensors(OUT, tensors, meta)


# track_running_stats=True: (ns, x shape, affine, eps, momentum, steps, dtype)
RUNNING = [
    (1, (3, 4, 6), False, 1e-5, 0.1, 3, F64),
    (2, (2, 3, 4, 5), True, 1e-5, 0.3, 3, F64),
    (1, (4, 9), True, 1e-3, 0.1, 2, F64),              # unbatched
    (3, (2, 2, 3, 3, 2), True, 1e-5, 1.0, 2, F64),     # momentum 1: the last batch's
    (2, (3, 5, 6), False, 1e-5, 0.0, 2, F64),          # unbatched, momentum 0: never moves
    (2, (4, 8, 8, 8), True, 1e-5, 0.1, 3, F32),
    (1, (3, 5, 40), False, 1e-5, 0.2, 3, F32),
    (3, (3, 4, 3, 2), True, 1e-5, 0.5, 2, F32),        # unbatched
]


def forward_case(m, shape, dt, k, tensors):
    """One forward of m on a fresh x; the output and the gradients of
    sum(y * gy) under "<k>.<what>"."""
    x = (torch.randn(*shape, dtype=F64) + 1.5).to(dt).requires_grad_(True)
    y = m(x)
    gy = torch.randn(*y.shape, dtype=F64).to(dt)
    wrt = [x] + ([m.weight, m.bias] if m.affine else [])
    grads = torch.autograd.grad((y * gy).sum(), wrt)
    tensors.update({k + ".x": x.detach(), k + ".gy": gy, k + ".y": y.detach(),
                    k + ".gx": grads[0]})
    if m.affine:
        tensors.update({k + ".gw": grads[1], k + ".gb": grads[2]})


def main_running():
    torch.manual_seed(SEED_RUNNING)
    tensors, meta = {}, {}
    for i, (ns, shape, affine, eps, mom, steps, dt) in enumerate(RUNNING):
        k = "run%d" % i
        c = shape[-ns - 1]
        m = CLS[ns](c, eps=eps, momentum=mom, affine=affine, track_running_stats=True).to(dt)
        with torch.no_grad():
            if affine:
                m.weight.copy_(torch.randn(c, dtype=F64) * 0.5 + 1)
                m.bias.copy_(torch.randn(c, dtype=F64))
                tensors.update({k + ".w": m.weight.detach().clone(),
                                k + ".b": m.bias.detach().clone()})
            m.running_mean.copy_(torch.randn(c, dtype=F64))
            m.running_var.copy_(torch.rand(c, dtype=F64) * 2 + 0.5)
            m.num_batches_tracked.fill_(5)
        tensors.update({k + ".rm0": m.running_mean.clone(), k + ".rv0": m.running_var.clone()})
        m.train()
        for t in range(steps):
            forward_case(m, shape, dt, "%s.t%d" % (k, t), tensors)
            tensors.update({"%s.t%d.rm" % (k, t): m.running_mean.clone(),
                            "%s.t%d.rv" % (k, t): m.running_var.clone()})
        m.eval()
        forward_case(m, shape, dt, k + ".e", tensors)
        assert m.num_batches_tracked.item() == 5
        tensors[k + ".nbt"] = m.num_batches_tracked.clone()
        if i == 1:
            for name, v in m.state_dict().items():
                tensors["sd." + name] = v.clone()
        meta.update({k + ".ns": str(ns), k + ".affine": str(int(affine)), k + ".eps": repr(eps),
                     k + ".momentum": repr(mom), k + ".steps": str(steps)})
    meta["cases"] = str(len(RUNNING))
    write_safetensors(OUT_RUNNING, tensors, meta)


if __name__ == "__main__":
    main()
    main_running()
