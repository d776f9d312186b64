#!/usr/bin/python3
"""Writes the golden partitions of tapegrad's ZeroRedundancyOptimizer.

Run from the repository root with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_zero_goldens.py

For each case, torch.distributed.optim.ZeroRedundancyOptimizer is built over
parameters of the listed sizes in a job of `world` ranks (processes started
by torch.multiprocessing, gloo backend on localhost), and the rank that owns
each parameter is read from its _param_to_rank.

tests/golden/zero_partition.txt, one case per line:
    <world> <n> <size_0> ... <size_{n-1}> : <owner_0> ... <owner_{n-1}>
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.optim import ZeroRedundancyOptimizer

CASES = [
    (2, [12, 5]),
    (2, [5, 12]),
    (2, [80, 16, 256, 16, 32, 2]),
    (2, [7, 7, 7, 7, 7]),
    (2, [1, 2, 3, 4, 5, 6, 7, 8]),
    (2, [100, 1, 1, 1, 1, 1]),
    (2, [3]),
    (3, [10, 9, 8, 7, 6, 5, 4]),
    (3, [4, 4, 4, 4, 4, 30]),
    (4, [16, 16, 8, 8, 4, 4, 2, 2, 1]),
    (4, [2, 1]),
]


def owners(rank, world, sizes, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    params = [torch.nn.Parameter(torch.zeros(s)) for s in sizes]
    zero = ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.SGD, lr=0.1)
    if rank == 0:
        out.put([zero._param_to_rank[p] for p in params])
    dist.destroy_process_group()


def main():
    ctx = mp.get_context("spawn")
    lines = []
    for k, (world, sizes) in enumerate(CASES):
        q = ctx.Queue()
        mp.spawn(owners, args=(world, sizes, 29511 + k, q), nprocs=world, join=True)
        own = q.get()
        lines.append("%d %d %s : %s" % (world, len(sizes), " ".join(map(str, sizes)),
                                        " ".join(map(str, own))))
    path = os.path.join("tests", "golden", "zero_partition.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", path, len(lines), "cases")


if __name__ == "__main__":
    sys.exit(main())
