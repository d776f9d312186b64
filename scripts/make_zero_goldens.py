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

tests/golden/zero_partition_groups.txt, with param groups (each group's
parameters given as a list of dicts with its own lr), one case per line:
    <world> <n_groups> <n_0> ... : <size_0> ... : <owner_0> ...
The same partition comes out of add_param_group, one group after another
(checked here), and each rank's local optimizer holds the group's lr in
the group's order (checked here too).

tests/golden/zero_params_per_rank.txt, for the cases of both lists (a case
of CASES as one group), one line per case and rank:
    <world> <n_groups> <n_0> ... : <size_0> ... : <rank> : <m_0> <i...> <m_1> <i...> ...
where group g of _partition_parameters()[rank] holds the m_g parameters
<i...> (indices into the groups' parameters in a row) in its order.  Each
rank's local optimizer has all n_groups groups, empty ones included, both
when made with the groups and when they are added one by one (checked
here).
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


GROUP_CASES = [
    (2, [[80, 256, 32], [16, 16, 2]]),
    (2, [[16, 16, 2], [80, 256, 32]]),
    (2, [[5], [12, 3], [7, 7, 1]]),
    (2, [[100], [1, 1, 1, 1]]),
    (3, [[10, 9], [8, 7, 6], [5, 4]]),
    (3, [[1], [30, 4, 4, 4, 4, 4]]),
    (4, [[16, 8], [16, 8, 4], [4, 2, 2, 1]]),
]


def group_owners(rank, world, groups, port, out, per_rank):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    params = [[torch.nn.Parameter(torch.zeros(s)) for s in g] for g in groups]
    flat = [p for g in params for p in g]
    lrs = [0.1 * (k + 1) for k in range(len(groups))]
    zero = ZeroRedundancyOptimizer([{"params": g, "lr": lr} for g, lr in zip(params, lrs)],
                                   optimizer_class=torch.optim.SGD, lr=0.01)
    own = [zero._param_to_rank[p] for p in flat]
    # the same groups added one by one
    added = ZeroRedundancyOptimizer([{"params": [torch.nn.Parameter(torch.zeros(s))
                                                 for s in groups[0]], "lr": lrs[0]}],
                                    optimizer_class=torch.optim.SGD, lr=0.01)
    for g, lr in zip(groups[1:], lrs[1:]):
        added.add_param_group({"params": [torch.nn.Parameter(torch.zeros(s)) for s in g],
                               "lr": lr})
    flat_added = [p for g in added.param_groups for p in g["params"]]
    assert [added._param_to_rank[p] for p in flat_added] == own, "add_param_group differs"
    # each rank's optimizer: every group, its lr, its parameters largest first
    local = zero.optim.param_groups
    assert [g["lr"] for g in local] == lrs, "local lrs"
    for g, lg in zip(params, local):
        mine = [p for p in g if zero._param_to_rank[p] == rank]
        want = sorted(mine, key=lambda t: t.numel(), reverse=True)
        assert [id(p) for p in lg["params"]] == [id(p) for p in want], "local order"
    # _partition_parameters()[rank]: a group for every group, empty ones too
    index = {id(p): i for i, p in enumerate(flat)}
    per_group = [[index[id(p)] for p in g["params"]]
                 for g in zero._partition_parameters()[rank]]
    assert len(per_group) == len(groups), "a group per group"
    assert [[id(p) for p in g["params"]] for g in zero.optim.param_groups] == \
        [[id(flat[i]) for i in g] for g in per_group], "local groups"
    assert len(added.optim.param_groups) == len(groups), "added: a local group per group"
    if rank == 0:
        out.put(own)
    per_rank.put((rank, per_group))
    dist.destroy_process_group()


def run_groups(ctx, world, groups, port):
    """torch's owners and each rank's _partition_parameters()[rank] lists."""
    q, per_rank = ctx.Queue(), ctx.Queue()
    mp.spawn(group_owners, args=(world, groups, port, q, per_rank), nprocs=world, join=True)
    lists = dict(per_rank.get() for _ in range(world))
    return q.get(), [lists[r] for r in range(world)]


def head(world, groups):
    sizes = [s for g in groups for s in g]
    return "%d %d %s : %s" % (world, len(groups), " ".join(str(len(g)) for g in groups),
                              " ".join(map(str, sizes)))


def write(name, lines, what):
    path = os.path.join("tests", "golden", name)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", path, len(lines), what)


def write_groups(ctx):
    lines, ranks = [], []
    cases = GROUP_CASES + [(world, [sizes]) for world, sizes in CASES]
    for k, (world, groups) in enumerate(cases):
        own, lists = run_groups(ctx, world, groups, 29611 + k)
        if k < len(GROUP_CASES):
            lines.append("%s : %s" % (head(world, groups), " ".join(map(str, own))))
        for r, per_group in enumerate(lists):
            body = " ".join("%d%s" % (len(g), "".join(" %d" % i for i in g)) for g in per_group)
            ranks.append("%s : %d : %s" % (head(world, groups), r, body))
    write("zero_partition_groups.txt", lines, "cases")
    write("zero_params_per_rank.txt", ranks, "lines")


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
    write_groups(ctx)


if __name__ == "__main__":
    sys.exit(main())
