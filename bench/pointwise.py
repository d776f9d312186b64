#!/usr/bin/python3
"""Element-wise gelu, sigmoid, tanh, silu, exp and relu of (N, C): tapegrad
(bench/pointwise) against PyTorch (Debian's python3-torch), the same thread
count, in one run.

    /usr/bin/python3 bench/pointwise.py [--build build-rel] [--threads 2] [--repeat 20]
                                        [--rounds 5] [--only NAME] [--markdown FILE]

Each case runs forward alone and forward + backward (grad_y fixed, x.grad
released after each pass, on both sides).  Each measurement is its own
process; PyTorch and tapegrad alternate --rounds times per case and pass,
each giving the median of --repeat passes.  The table gives the median over
rounds of each side and of the per-round ratio PyTorch / tapegrad (> 1:
tapegrad is faster), with the ratio's range over the rounds.  PyTorch's
children run with OMP_WAIT_POLICY=passive, as bench/compare.py's.
"""
from benchlib import fwd_bwd_main, torch_time

# name, op, dtype, (N, C)
CASES = [(op, op, "f32", (256, 1024))
         for op in ("gelu", "sigmoid", "tanh", "silu", "exp", "relu")]

DTYPES = {"f32": "float32", "f64": "float64", "bf16": "bfloat16", "f16": "float16"}


def torch_child(a):
    """Runs in a child process: times the case in PyTorch, prints JSON."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    n, c = (int(v) for v in a.shape.split(","))
    dtype = getattr(torch, DTYPES[a.dtype])
    g = torch.Generator().manual_seed(1)
    x = ((torch.rand(n, c, generator=g) * 8 - 4)).to(dtype)
    fns = {"gelu": F.gelu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
           "silu": F.silu, "exp": torch.exp, "relu": torch.relu}
    fn = fns[a.op]
    gy = None
    if a.backward:
        x.requires_grad_(True)
        gy = (torch.rand(n, c, generator=g) * 2 - 1).to(dtype)

    def once():
        y = fn(x)
        if a.backward:
            y.backward(gy)
            x.grad = None
    torch_time(once, a.repeat)


def main():
    fwd_bwd_main(__file__, "pointwise", CASES, torch_child)


if __name__ == "__main__":
    main()
