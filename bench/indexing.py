#!/usr/bin/python3
"""cumsum along the first and the last dim, gather, index_select, scatter_add,
index_add, topk, argmax and amax: tapegrad (bench/indexing) against PyTorch (Debian's
python3-torch), the same thread count, in one run.

    /usr/bin/python3 bench/indexing.py [--build build-rel] [--threads 2] [--repeat 20]
                                       [--rounds 5] [--only NAME] [--markdown FILE]

Each case is one forward call.  Each measurement is its own process;
PyTorch and tapegrad alternate --rounds times per case, each giving the
median of --repeat calls.  The table gives the median over rounds of each
side and of the per-round ratio PyTorch / tapegrad (> 1: tapegrad is
faster), with the ratio's range over the rounds.  Index values are uniform
over x's extent at dim (not the same draws on both sides).  PyTorch's
children run with OMP_WAIT_POLICY=passive, as bench/compare.py's.
"""
import argparse

from benchlib import (TORCH_DTYPES, add_pair_args, pair_binary, print_table, time_pair, torch_time,
                     torch_threads)

# name, op, dtype, x shape, dim, index length (index_select / index_add; -1: x's extent)
# or k (topk)
CASES = [
    ("cumsum dim 0", "cumsum", "f32", (512, 512), 0, -1),
    ("cumsum dim -1", "cumsum", "f32", (512, 512), -1, -1),
    ("cumsum dim 0", "cumsum", "f32", (2048, 2048), 0, -1),
    ("cumsum dim -1", "cumsum", "f32", (2048, 2048), -1, -1),
    ("cumsum dim 1", "cumsum", "f32", (32, 256, 256), 1, -1),
    ("cumsum dim 0 bf16", "cumsum", "bf16", (512, 512), 0, -1),
    ("gather dim 1", "gather", "f32", (512, 512), 1, -1),
    ("gather dim 0", "gather", "f32", (1024, 1024), 0, -1),
    ("gather dim 1 f16", "gather", "f16", (512, 512), 1, -1),
    ("gather dim 1 bf16", "gather", "bf16", (512, 512), 1, -1),
    ("index_select dim 0", "index_select", "f32", (8192, 256), 0, 4096),
    ("index_select dim 1", "index_select", "f32", (512, 512), 1, 256),
    ("scatter_add dim 1", "scatter_add", "f32", (512, 512), 1, -1),
    ("index_add dim 0", "index_add", "f32", (8192, 256), 0, 4096),
    ("topk k=1 dim 1", "topk", "f32", (256, 4096), 1, 1),
    ("topk k=8 dim 1", "topk", "f32", (256, 4096), 1, 8),
    ("topk k=64 dim 1", "topk", "f32", (256, 4096), 1, 64),
    ("topk k=512 dim 1", "topk", "f32", (256, 4096), 1, 512),
    ("topk k=8 dim 1", "topk", "bf16", (256, 4096), 1, 8),
    ("topk k=64 dim 1", "topk", "bf16", (256, 4096), 1, 64),
    ("argmax dim 1", "argmax", "f32", (256, 4096), 1, -1),
    ("argmax dim 1", "argmax", "f32", (4096, 10), 1, -1),
    ("argmax dim 1", "argmax", "f32", (4096, 100), 1, -1),
    ("argmax dim 0", "argmax", "f32", (4096, 256), 0, -1),
    ("amax dim 1", "amax", "f32", (256, 4096), 1, -1),
]

def torch_child(a):
    """Runs in a child process: times the case in PyTorch, prints JSON."""
    import torch
    torch_threads(torch, a.threads)
    shape = tuple(int(v) for v in a.shape.split(","))
    dtype = getattr(torch, TORCH_DTYPES[a.dtype])
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(*shape, generator=g) * 2 - 1).to(dtype)
    dim = a.dim % len(shape)
    ishape = list(shape)
    select = a.op.startswith("index_")
    if select:
        ishape[dim] = a.len if a.len >= 0 else shape[dim]
        index = torch.randint(0, shape[dim], (ishape[dim],), generator=g)
    else:
        index = torch.randint(0, shape[dim], tuple(ishape), generator=g)
    src = (torch.rand(*ishape, generator=g) * 2 - 1).to(dtype)
    fns = {
        "cumsum": lambda: torch.cumsum(x, dim),
        "gather": lambda: torch.gather(x, dim, index),
        "index_select": lambda: torch.index_select(x, dim, index),
        "scatter_add": lambda: torch.scatter_add(x, dim, index, src),
        "index_add": lambda: torch.index_add(x, dim, index, src),
        "topk": lambda: torch.topk(x, a.len, dim),
        "argmax": lambda: torch.argmax(x, dim),
        "amax": lambda: torch.amax(x, dim),
    }
    fn = fns[a.op]
    torch_time(fn, a.repeat)


def case_args(c):
    name, op, dt, shape, dim, length = c
    return ["--op", op, "--dtype", dt, "--shape", ",".join(map(str, shape)), "--dim", str(dim),
            "--len", str(length)]


def main():
    ap = argparse.ArgumentParser()
    add_pair_args(ap)
    for opt in ("--op", "--dtype", "--shape"):
        ap.add_argument(opt, help=argparse.SUPPRESS)
    for opt in ("--dim", "--len"):
        ap.add_argument(opt, type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_child(a)

    ours = pair_binary(a, "indexing")
    rows = []
    for c in CASES:
        if a.only and a.only not in c[0]:
            continue
        tm, om, rm, lo, hi = time_pair(a, __file__, ours, case_args(c))
        shape = "x".join(map(str, c[3]))
        rows.append((c[0], c[2], shape, tm, om, rm, lo, hi))
        print(f"{c[0]:20s} {c[2]:4s} {shape:12s} torch {tm:8.3f} ms  tapegrad {om:8.3f} ms  "
              f"torch/tapegrad {rm:5.2f}x (rounds {lo:.2f}-{hi:.2f})", flush=True)
    lines = [f"| case | dtype | x | PyTorch ms | tapegrad ms | PyTorch / tapegrad "
             f"(range over {a.rounds} rounds) |",
             "| --- | --- | --- | ---: | ---: | ---: |"]
    for name, dt, shape, tm, om, rm, lo, hi in rows:
        lines.append(f"| {name} | {dt} | {shape} | {tm:.3f} | {om:.3f} | {rm:.2f}x "
                     f"({lo:.2f}-{hi:.2f}) |")
    print_table(lines, a.markdown)


if __name__ == "__main__":
    main()
