#!/usr/bin/python3
"""Ops over the rows of (N, C): softmax, log_softmax and cross_entropy along the
last dim (all three also over dim 1 of (N, C, d1, d2); cross_entropy also
with label smoothing 0.1 and with probability targets, the softmax of a
second U[-4, 4) tensor), sum and mean of
every element, sum over the last dim, mse_loss, layer_norm over the last dim;
tapegrad (bench/rows) against PyTorch (Debian's python3-torch), the same
thread count, in one run.

    /usr/bin/python3 bench/rows.py [--build build-rel] [--threads 2] [--repeat 20]
                                   [--rounds 5] [--only NAME] [--markdown FILE]

Each case runs forward alone and forward + backward (grad_y fixed, of the
output's shape; x.grad released after each pass, on both sides).  Each measurement is its own
process; PyTorch and tapegrad alternate --rounds times per case and pass,
each giving the median of --repeat passes.  The table gives the median over
rounds of each side and of the per-round ratio PyTorch / tapegrad (> 1:
tapegrad is faster), with the ratio's range over the rounds.  PyTorch's
children run with OMP_WAIT_POLICY=passive, as bench/compare.py's.
"""
from benchlib import fwd_bwd_main, torch_fwd_bwd_child

# name, op, dtype, (N, C) or (N, C, d1, d2)
CASES = [
    ("softmax", "softmax", "f32", (256, 1000)),
    ("log_softmax", "log_softmax", "f32", (256, 1000)),
    ("cross_entropy", "cross_entropy", "f32", (256, 1000)),
    ("cross_entropy", "cross_entropy", "f32", (4096, 10)),
    ("cross_entropy", "cross_entropy", "f64", (4096, 10)),
    ("cross_entropy", "cross_entropy", "f32", (64, 10, 32, 32)),
    ("cross_entropy smooth", "cross_entropy_smooth", "f32", (256, 1000)),
    ("cross_entropy smooth", "cross_entropy_smooth", "f32", (4096, 10)),
    ("cross_entropy smooth", "cross_entropy_smooth", "f32", (64, 10, 32, 32)),
    ("cross_entropy probs", "cross_entropy_probs", "f32", (256, 1000)),
    ("cross_entropy probs", "cross_entropy_probs", "f32", (4096, 10)),
    ("cross_entropy probs", "cross_entropy_probs", "f32", (64, 10, 32, 32)),
    ("softmax spatial", "softmax", "f32", (64, 10, 32, 32)),
    ("log_softmax spatial", "log_softmax", "f32", (64, 10, 32, 32)),
    ("log_softmax", "log_softmax", "f32", (4096, 100)),
    ("sum", "sum", "f32", (256, 1024)),
    ("mean", "mean", "f32", (256, 1024)),
    ("sum dim 1", "sum_dim1", "f32", (256, 1024)),
    ("mse_loss", "mse_loss", "f32", (256, 1024)),
    ("layer_norm", "layer_norm", "f32", (256, 1024)),
]

def make_fns(torch, n, c, dtype, g):
    """The ops by name, with their other operands drawn from g after x."""
    import torch.nn.functional as F
    other = ((torch.rand(n, c, generator=g) * 8 - 4)).to(dtype)
    targets = {}   # by x's shape: k % C at flat index k of (N, d1, ...)
    probs = {}   # by x's shape: softmax over dim 1 of U[-4, 4)

    def target(t):
        if t.shape not in targets:
            shape = (t.shape[0],) + tuple(t.shape[2:])
            targets[t.shape] = (torch.arange(t.numel() // c) % c).reshape(shape)
        return targets[t.shape]
    def prob(t):
        if t.shape not in probs:
            u = (torch.rand(t.shape, generator=g) * 8 - 4).to(dtype)
            probs[t.shape] = torch.softmax(u, 1)
        return probs[t.shape]
    w = (torch.rand(c, generator=g) * 1.5 + 0.5).to(dtype)
    b = (torch.rand(c, generator=g) * 2 - 1).to(dtype)
    return {
        "softmax": lambda t: F.softmax(t, 1),
        "log_softmax": lambda t: F.log_softmax(t, 1),
        "cross_entropy": lambda t: F.cross_entropy(t, target(t)),
        "cross_entropy_smooth":
            lambda t: F.cross_entropy(t, target(t), label_smoothing=0.1),
        "cross_entropy_probs": lambda t: F.cross_entropy(t, prob(t)),
        "sum": lambda t: t.sum(),
        "mean": lambda t: t.mean(),
        "sum_dim1": lambda t: t.sum(1),
        "mse_loss": lambda t: F.mse_loss(t, other),
        "layer_norm": lambda t: F.layer_norm(t, (c,), w, b, 1e-5),
    }


def main():
    fwd_bwd_main(__file__, "rows", CASES, lambda a: torch_fwd_bwd_child(a, make_fns))


if __name__ == "__main__":
    main()
