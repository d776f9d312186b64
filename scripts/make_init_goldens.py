#!/usr/bin/python3
"""Writes tests/golden/nn/init.safetensors: what PyTorch 1.13's
torch.nn.init computes before it draws, which tests/test_init.c compares
tapegrad's init functions with (the draws themselves come from another
generator and are checked statistically there).

  m<k>.fans      torch.nn.init._calculate_fan_in_and_fan_out(weight) of
                 module k (metadata "modules": "|"-separated entries
                 "linear:in:out" or "conv:n:c_in:c_out:k1xk2..:groups" or
                 "convT:..." the same for ConvTransposeNd), as i64
                 (fan_in, fan_out)
  gains          torch.nn.init.calculate_gain for each entry of "gains"
                 ("name" or "name:param")
  scales         the bound (uniform) or std (normal) each entry of
                 "inits" draws with: "fn;d0xd1x..;p1;p2;p3" where fn is
                 xavier_uniform / xavier_normal (p1 = gain) or
                 kaiming_uniform / kaiming_normal (p1 = a, p2 = mode,
                 p3 = nonlinearity).  Each is checked here against
                 torch's own draws of a large tensor with that fan.

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_init_goldens.py
"""
import math
import os
import sys

import torch
import torch.nn as nn
from torch.nn import init

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "nn", "init.safetensors")
SEED = 7951

MODULES = ["linear:5:3", "linear:1:7",
           "conv:1:4:6:3:1", "conv:2:4:6:3x2:2", "conv:3:2:4:2x3x1:1",
           "convT:1:4:6:3:1", "convT:2:4:6:3x2:2", "convT:3:6:4:2x1x2:2", "convT:2:3:5:1x1:1"]

GAINS = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
         "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "leaky_relu:0.2",
         "leaky_relu:0", "leaky_relu:-3", "selu"]

INITS = ["xavier_uniform;5x3;1", "xavier_uniform;6x2x3x2;2.5", "xavier_normal;7x4;1",
         "xavier_normal;4x6x3;0.5",
         "kaiming_uniform;3x5;2.23606797749979;fan_in;leaky_relu",
         "kaiming_uniform;6x2x3x2;0;fan_out;relu",
         "kaiming_normal;6x4x3;0;fan_in;leaky_relu",
         "kaiming_normal;4x3x2x1x2;0;fan_out;relu",
         "kaiming_normal;8x5;0.1;fan_in;tanh"]


def module(spec):
    f = spec.split(":")
    if f[0] == "linear":
        return nn.Linear(int(f[1]), int(f[2]))
    n, cin, cout = int(f[1]), int(f[2]), int(f[3])
    k = tuple(int(v) for v in f[4].split("x"))
    cls = {"conv": [nn.Conv1d, nn.Conv2d, nn.Conv3d],
           "convT": [nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d]}[f[0]][n - 1]
    return cls(cin, cout, k, groups=int(f[5]))


def gain(spec):
    name, _, p = spec.partition(":")
    return init.calculate_gain(name, float(p) if p else None)


def scale(spec):
    """torch's formulas, as torch/nn/init.py writes them."""
    f = spec.split(";")
    w = torch.empty([int(v) for v in f[1].split("x")])
    fan_in, fan_out = init._calculate_fan_in_and_fan_out(w)
    if f[0].startswith("xavier"):
        std = float(f[2]) * math.sqrt(2.0 / float(fan_in + fan_out))
    else:
        fan = fan_in if f[3] == "fan_in" else fan_out
        std = init.calculate_gain(f[4], float(f[2])) / math.sqrt(fan)
    return math.sqrt(3.0) * std if f[0].endswith("uniform") else std


def check_against_torch(spec, s):
    """torch's own draws into tensors of this shape, 200k elements in all,
    have the bound (uniform) or standard deviation (normal) s."""
    f = spec.split(";")
    shape = [int(v) for v in f[1].split("x")]
    fn = getattr(init, f[0] + "_")
    torch.manual_seed(SEED)
    vals = []
    for _ in range(200000 // math.prod(shape) + 1):
        t = torch.empty(shape)
        if f[0].startswith("xavier"):
            fn(t, gain=float(f[2]))
        else:
            fn(t, a=float(f[2]), mode=f[3], nonlinearity=f[4])
        vals.append(t.flatten())
    v = torch.cat(vals).double()
    if f[0].endswith("uniform"):
        assert 0.999 * s < v.abs().max() <= s, (spec, s, v.abs().max())
    else:
        assert abs(v.std().item() / s - 1) < 0.01, (spec, s, v.std().item())


def main():
    out, meta = [], {"torch": torch.__version__}
    for k, spec in enumerate(MODULES):
        fi, fo = init._calculate_fan_in_and_fan_out(module(spec).weight)
        out.append(("m%d.fans" % k, torch.tensor([fi, fo], dtype=torch.int64)))
    out.append(("gains", torch.tensor([gain(g) for g in GAINS], dtype=torch.float64)))
    scales = []
    for spec in INITS:
        s = scale(spec)
        check_against_torch(spec, s)
        scales.append(s)
    out.append(("scales", torch.tensor(scales, dtype=torch.float64)))
    meta["modules"] = "|".join(MODULES)
    meta["gains"] = "|".join(GAINS)
    meta["inits"] = "|".join(INITS)
    write_safetensors(OUT, out, meta)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
