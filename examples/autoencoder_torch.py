#!/usr/bin/python3
"""The autoencoder of examples/autoencoder.c written in PyTorch, line for line
the same program (options, checks before training, progress lines, outputs),
for docs/from-pytorch.md and scripts/count_lines.py to compare with.

    /usr/bin/python3 examples/autoencoder_torch.py --steps 200 --out out
"""
import argparse
import gzip
import os
import sys
import time
from collections import OrderedDict

import numpy as np
import torch
from PIL import Image
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from stfile import write_safetensors  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_set(data, train):
    name = "train" if train else "t10k"
    for ext in (".gz", ""):
        path = os.path.join(data, f"{name}-images-idx3-ubyte{ext}")
        if os.path.exists(path):
            x = torch.from_numpy(read_idx(path).copy()).float().div(255).unsqueeze(1)
            break
    else:
        sys.exit(f"autoencoder: cannot load the {'training' if train else 'test'} set from {data}")
    if len(x) < 1 or tuple(x.shape[1:]) != (1, 28, 28):
        sys.exit(f"autoencoder: --data {data}: the {'training' if train else 'test'} images are "
                 f"{tuple(x.shape[1:])}: the model takes (1, 28, 28)")
    return x


def stage(transpose, cin, cout, k, act):
    conv = nn.ConvTranspose2d if transpose else nn.Conv2d
    return [conv(cin, cout, k, stride=2, padding=1), act()]


def write_pairs(path, x, y):
    per = min(len(x), 8)
    rows = min(len(x) // per, 4)
    tiles = torch.cat([t[per * r:per * r + per] for r in range(rows) for t in (x, y)])
    grid = torch.zeros(2 * rows * 30 + 2, per * 30 + 2)
    for i, img in enumerate(tiles):
        r, c = divmod(i, per)
        grid[2 + 30 * r:30 + 30 * r, 2 + 30 * c:30 + 30 * c] = img[0]
    Image.fromarray((grid * 255).round().clamp(0, 255).byte().numpy()).save(path)


def main():
    p = argparse.ArgumentParser(prog="autoencoder")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--out", default="out")
    p.add_argument("--data", default=DATA)
    o = p.parse_args()
    train_x, test_x = load_set(o.data, True), load_set(o.data, False)
    if o.batch > len(train_x):
        sys.exit(f"autoencoder: batch {o.batch} is larger than the {len(train_x)} training "
                 "images: no full batch to train on")
    os.makedirs(o.out, exist_ok=True)
    if o.threads > 0:
        torch.set_num_threads(o.threads)
    torch.manual_seed(o.seed)
    model = nn.Sequential(OrderedDict(
        encoder=nn.Sequential(*stage(False, 1, 16, 3, nn.ReLU), *stage(False, 16, 32, 3, nn.ReLU)),
        decoder=nn.Sequential(*stage(True, 32, 16, 4, nn.ReLU), *stage(True, 16, 1, 4, nn.Sigmoid))))
    print(f"autoencoder: {sum(q.numel() for q in model.parameters())} weights, {len(train_x)} "
          f"training images, batch {o.batch}, up to {o.epochs} epochs / {o.seconds:.0f} s")
    opt = torch.optim.Adam(model.parameters(), lr=o.lr)
    step, seen, total, count, t0 = 0, 0, 0.0, 0, time.monotonic()
    last, done = t0, False
    for epoch in range(o.epochs):
        perm = torch.randperm(len(train_x))
        for i in range(0, len(train_x) - o.batch + 1, o.batch):
            x = train_x[perm[i:i + o.batch]]
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.mse_loss(model(x), x)
            loss.backward()
            opt.step()
            step, seen, total, count = step + 1, seen + len(x), total + loss.item(), count + 1
            now = time.monotonic()
            done = (o.steps > 0 and step >= o.steps) or now - t0 >= o.seconds
            if done or now - last >= 2.0:
                print(f"epoch {epoch}  step {step:5d}  mse {total / count:.5f}  "
                      f"{seen / (now - t0):.0f} img/s  {now - t0:.0f} s", flush=True)
                total, count, last = 0.0, 0, now
            if done:
                break
        if done:
            break
    write_safetensors(os.path.join(o.out, "autoencoder_torch.safetensors"),
                      list(model.state_dict().items()))
    model.eval()
    with torch.no_grad():
        x = test_x[:1000]
        y = model(x)
    print(f"test mse on {len(x)} images: {nn.functional.mse_loss(y, x).item():.5f}")
    path = os.path.join(o.out, "autoencoder_torch_pairs.png")
    write_pairs(path, x, y)
    print(f"wrote {path} (rows 1, 3, 5, 7: test inputs; rows 2, 4, 6, 8: reconstructions)")


if __name__ == "__main__":
    main()
