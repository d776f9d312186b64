#!/usr/bin/python3
"""Element-wise gelu, sigmoid, tanh, silu, exp and relu of (N, C): tapegrad
(bench/rows) against PyTorch (Debian's python3-torch), the same thread
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
from benchlib import fwd_bwd_main, torch_fwd_bwd_child

# name, op, dtype, (N, C)
CASES = [(op, op, "f32", (256, 1024))
         for op in ("gelu", "sigmoid", "tanh", "silu", "exp", "relu")]

def make_fns(torch, n, c, dtype, g):
    """The ops by name."""
    import torch.nn.functional as F
    return {"gelu": F.gelu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
            "silu": F.silu, "exp": torch.exp, "relu": torch.relu}


def main():
    fwd_bwd_main(__file__, "rows", CASES, lambda a: torch_fwd_bwd_child(a, make_fns))


if __name__ == "__main__":
    main()
