#!/usr/bin/python3
"""PyTorch interchange check for the DCGAN generator, both directions.

1. ours -> torch: loads our generator state dict (OUT/generator.safetensors,
   written by examples/dcgan or by `dcgan_load --export OUT`) into the same
   architecture written in PyTorch with load_state_dict(strict=True), runs the
   latent batch stored in OUT/latents.safetensors in eval mode and compares the
   images with the ones our side stored next to the latents.
2. torch -> ours: saves a randomly initialised PyTorch generator (torch's
   default init, BatchNorm running statistics moved by a few training-mode forwards) and a
   latent batch as safetensors, runs our `dcgan_load` on them and compares the
   images it writes with PyTorch's.

    /usr/bin/python3 examples/dcgan_torch.py --dir out --loader build/examples/dcgan_load

Exit status 0 when both directions agree within --tol (max abs difference).

With --export-onnx PATH it only loads OUT/generator.safetensors into the
PyTorch generator and writes it with torch.onnx.export (opset 17, input
"input" (batch, nz), output "output", batch dim dynamic): the file that
`tapegrad export --onnx` should match under ONNX Runtime (tests/test_onnx.c).

Training mode (--train): the same DCGAN trained by PyTorch as examples/dcgan
trains it (model.h's architecture and DCGAN init, non-saturating BCE loss,
Adam with lr 4e-4 and betas (0.5, 0.999), batch 32, shuffled epochs without the
last partial batch, pixels p / 127.5 - 1; with --spectral-norm, SN-GAN's
discriminator as examples/dcgan --spectral-norm builds it: no BatchNorm, both
Conv2d layers under nn.utils.spectral_norm), for --time-budget seconds, writing
the generator as DIR/generator.safetensors at the end and
DIR/generator_<T>s.safetensors every --snapshot-every seconds, with the keys
examples/dcgan writes ("gen.net.0.weight", ...), so that `tapegrad fid` scores
both alike (bench/quality.py):

    /usr/bin/python3 examples/dcgan_torch.py --train --dir out_torch --threads 2
"""
import argparse
import glob
import gzip
import os
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from stfile import read_safetensors, write_safetensors  # noqa: E402

LATENT_KEYS = ("z", "latents", "fixed_z", "noise")
IMAGE_KEYS = ("images", "samples", "x")


class Generator(nn.Module):
    """The exact PyTorch equivalent given in examples/dcgan/model.h."""

    def __init__(self, nz=64, C=128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(nz, C * 7 * 7, bias=False),                # net.0  (N, C*49)
            nn.Unflatten(1, (C, 7, 7)),                          # net.1  (N, C, 7, 7)
            nn.BatchNorm2d(C),                                   # net.2
            nn.ReLU(),                                           # net.3
            nn.ConvTranspose2d(C, C // 2, 4, 2, 1, bias=False),  # net.4  (N, C/2, 14, 14)
            nn.BatchNorm2d(C // 2),                              # net.5
            nn.ReLU(),                                           # net.6
            nn.ConvTranspose2d(C // 2, 1, 4, 2, 1),              # net.7  (N, 1, 28, 28)
            nn.Tanh())                                           # net.8

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    """The discriminator of examples/dcgan/model.h."""

    def __init__(self, D=64, batchnorm=True):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, D, 4, 2, 1),                            # net.0  (N, D, 14, 14)
            nn.LeakyReLU(0.2),                                   # net.1
            nn.Conv2d(D, 2 * D, 4, 2, 1, bias=not batchnorm),    # net.2  (N, 2D, 7, 7)
            nn.BatchNorm2d(2 * D) if batchnorm else nn.Identity(),  # net.3
            nn.LeakyReLU(0.2),                                   # net.4
            nn.Flatten(),                                        # net.5  (N, 2D*49)
            nn.Linear(2 * D * 7 * 7, 1))                         # net.6  (N, 1) logits

    def forward(self, x):
        return self.net(x)


def dcgan_init(m):
    """DCGAN's weights_init, as tg_nn_init_normal(m, 0, 0.02)."""
    for mod in m.modules():
        if isinstance(mod, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(mod.weight, 0.0, 0.02)
        elif isinstance(mod, nn.BatchNorm2d):
            nn.init.normal_(mod.weight, 1.0, 0.02)
            nn.init.zeros_(mod.bias)


def load_images(folder):
    """Fashion-MNIST's training images (N, 1, 28, 28) in [-1, 1] from the IDX file."""
    path = os.path.join(folder, "train-images-idx3-ubyte.gz")
    with gzip.open(path, "rb") as f:
        raw = f.read()
    n, h, w = (int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(3))
    x = torch.frombuffer(bytearray(raw[16:16 + n * h * w]), dtype=torch.uint8)
    return x.view(n, 1, h, w).float() / 127.5 - 1.0


def save_generator(g, path):
    write_safetensors(path, {"gen." + k: v for k, v in g.state_dict().items()})


def train(a):
    """--train: see the module docstring."""
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    x = load_images(a.data)
    g, d = Generator(), Discriminator(batchnorm=not a.spectral_norm)
    dcgan_init(g)
    dcgan_init(d)
    if a.spectral_norm:   # after the init, which would write the computed weight
        for i in (0, 2):
            nn.utils.spectral_norm(d.net[i], n_power_iterations=1, eps=1e-12)
    opt_g = torch.optim.Adam(g.parameters(), lr=a.lr, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), lr=a.lr, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    os.makedirs(a.dir, exist_ok=True)
    ones, zeros = torch.ones(a.batch, 1), torch.zeros(a.batch, 1)
    steps, next_snap, t0 = 0, a.snapshot_every, time.monotonic()
    while time.monotonic() - t0 < a.time_budget:
        perm = torch.randperm(x.shape[0])
        for i in range(0, x.shape[0] - a.batch + 1, a.batch):
            if time.monotonic() - t0 >= a.time_budget:
                break
            real = x[perm[i:i + a.batch]]
            fake = g(torch.randn(a.batch, 64))
            loss_d = bce(d(real), ones) + bce(d(fake.detach()), zeros)
            opt_d.zero_grad(set_to_none=True)
            loss_d.backward()
            opt_d.step()
            for p in d.parameters():          # D frozen for the generator's update
                p.requires_grad_(False)
            loss_g = bce(d(fake), ones)
            for p in d.parameters():
                p.requires_grad_(True)
            opt_g.zero_grad(set_to_none=True)
            loss_g.backward()
            opt_g.step()
            steps += 1
            el = time.monotonic() - t0
            if a.snapshot_every > 0 and el >= next_snap:
                save_generator(g, os.path.join(a.dir, f"generator_{next_snap:g}s.safetensors"))
                while next_snap <= el:        # one snapshot per step
                    next_snap += a.snapshot_every
    el = time.monotonic() - t0
    save_generator(g, os.path.join(a.dir, "generator.safetensors"))
    print(f"dcgan_torch: stopped after {steps} steps ({el:.0f} s, "
          f"{steps * a.batch / el:.0f} img/s); wrote {a.dir}/generator.safetensors")
    return 0


def pick(tensors, keys, what, path):
    for k in keys:
        if k in tensors:
            return tensors[k]
    sys.exit(f"{path}: no {what} tensor (looked for {', '.join(keys)}; has {list(tensors)})")


def strip_prefix(state):
    """Our files may carry the prefix 'gen.' (as the checkpoint does)."""
    if all(k.startswith("gen.") for k in state):
        return {k[len("gen."):]: v for k, v in state.items()}
    return state


def verdict(name, ours, theirs, tol):
    diff = (ours - theirs).abs().max().item()
    ok = diff <= tol
    print(f"{name}: max abs diff {diff:.3e} (tolerance {tol:.0e}; images std "
          f"{theirs.std().item():.3f}, range [{theirs.min().item():.3f}, "
          f"{theirs.max().item():.3f}]): {'PASS' if ok else 'FAIL'}")
    return ok


def need(*paths):
    for p in paths:
        if not os.path.exists(p):
            folder = os.path.dirname(p) or "."
            sys.exit(f"{p} not found: train with `make demo` (examples/dcgan) or write a "
                     f"stand-in with `dcgan_load --export {folder}`")


def load_ours(gpath):
    """Our generator file in the PyTorch Generator, strictly, in eval mode."""
    state, _ = read_safetensors(gpath)
    state = strip_prefix(state)
    C, nz = state["net.0.weight"].shape[0] // 49, state["net.0.weight"].shape[1]
    g = Generator(nz, C)
    g.load_state_dict(state, strict=True)   # raises on any missing/unexpected key or shape
    g.eval()
    return g, state, nz, C


class Reshape(nn.Module):
    """nn.Unflatten(1, shape) written as a reshape: torch 1.13's ONNX exporter
    has no symbolic for aten::unflatten."""

    def __init__(self, shape):
        super().__init__()
        self.shape = shape

    def forward(self, x):
        return x.reshape(x.shape[0], *self.shape)


def export_onnx(folder, path):
    gpath = os.path.join(folder, "generator.safetensors")
    need(gpath)
    g, _, nz, C = load_ours(gpath)
    g.net[1] = Reshape((C, 7, 7))   # no parameters: the state dict is unchanged
    torch.onnx.export(g, torch.zeros(1, nz), path, opset_version=17, input_names=["input"],
                      output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    print(f"torch.onnx.export: generator nz={nz} C={C} from {gpath} -> {path} (opset 17)")
    return True


def ours_to_torch(folder, tol):
    gpath = os.path.join(folder, "generator.safetensors")
    zpath = os.path.join(folder, "latents.safetensors")
    need(gpath, zpath)
    g, state, nz, C = load_ours(gpath)
    lat, _ = read_safetensors(zpath)
    z = pick(lat, LATENT_KEYS, "latent", zpath)
    ours = pick(lat, IMAGE_KEYS, "image", zpath).float()
    with torch.no_grad():
        theirs = g(z.float())
    print(f"ours -> torch: {len(state)} state-dict entries loaded with strict=True "
          f"(nz={nz}, C={C}); {z.shape[0]} latents from {zpath}")
    return verdict("ours -> torch", ours, theirs, tol)


def torch_to_ours(loader, tol, seed, n):
    torch.manual_seed(seed)
    g = Generator()                  # torch's default init: larger outputs than DCGAN's
    with torch.no_grad():            # move the running statistics off 0 / 1
        for _ in range(3):
            g(torch.randn(32, 64))
    g.eval()
    z = torch.randn(n, 64)
    with torch.no_grad():
        theirs = g(z)
    with tempfile.TemporaryDirectory() as tmp:
        wpath, zpath, opath = (os.path.join(tmp, f) for f in
                               ("torch_generator.safetensors", "torch_latents.safetensors",
                                "ours.safetensors"))
        write_safetensors(wpath, g.state_dict())   # num_batches_tracked stays int64
        write_safetensors(zpath, {"z": z})
        subprocess.run([loader, "--weights", wpath, "--latents", zpath, "--out", opath],
                       check=True)
        out, _ = read_safetensors(opath)
    print(f"torch -> ours: {len(g.state_dict())} entries of torch's state_dict loaded "
          f"strictly by {loader}; {n} latents")
    return verdict("torch -> ours", out["images"], theirs, tol)


def find_loader():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    for c in ["build/examples/dcgan_load"] + sorted(glob.glob(os.path.join(here, "build*/examples/dcgan_load"))):
        if os.access(c, os.X_OK):
            return c
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="out", help="folder with our generator/latents files")
    ap.add_argument("--loader", default=None, help="path to the dcgan_load program")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--export-onnx", metavar="PATH", default=None,
                    help="only write DIR's generator with torch.onnx.export to PATH")
    ap.add_argument("--train", action="store_true", help="train the DCGAN (see above)")
    ap.add_argument("--time-budget", type=float, default=170.0, help="--train: seconds")
    ap.add_argument("--snapshot-every", type=float, default=0.0, help="--train: seconds")
    ap.add_argument("--threads", type=int, default=2, help="--train: torch threads")
    ap.add_argument("--batch", type=int, default=32, help="--train: batch size")
    ap.add_argument("--lr", type=float, default=4e-4, help="--train: Adam learning rate")
    ap.add_argument("--spectral-norm", action="store_true",
                    help="--train: SN-GAN's discriminator (no BatchNorm, spectral-normed convs)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                    help="--train: folder of train-images-idx3-ubyte.gz")
    a = ap.parse_args()
    if a.export_onnx:
        return 0 if export_onnx(a.dir, a.export_onnx) else 1
    if a.train:
        return train(a)
    loader = a.loader or find_loader()
    if not loader:
        sys.exit("dcgan_load not found: build it (ninja -C build) or pass --loader")
    torch.set_num_threads(1)   # deterministic reductions
    ok = ours_to_torch(a.dir, a.tol)
    ok = torch_to_ours(loader, a.tol, a.seed, a.n) and ok
    print("interchange: " + ("both directions PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
