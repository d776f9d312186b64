#!/usr/bin/python3
"""The CTC loss (F.ctc_loss, MEAN): tapegrad (bench/ctc) against PyTorch
(Debian's python3-torch), the same thread count, in one run.

    /usr/bin/python3 bench/ctc.py [--build build-rel] [--threads 2] [--repeat 20]
                                  [--rounds 5] [--only NAME] [--markdown FILE]

log_probs (T, N, C) is the log_softmax of U[-1, 1) values, targets (N, S)
padded with label i of sequence n 1 + (7 n + 3 i) % (C - 1), every input
length T and target length S (bench/ctc.c).  Each case runs forward alone
and forward + backward (log_probs.grad released after each pass, on both
sides).  Each measurement is its own process; PyTorch and tapegrad
alternate --rounds times per case and pass, each giving the median of
--repeat passes.  The table gives the median over rounds of each side and
of the per-round ratio PyTorch / tapegrad (> 1: tapegrad is faster), with
the ratio's range over the rounds.  PyTorch's children run with
OMP_WAIT_POLICY=passive, as bench/compare.py's.
"""
import argparse

from benchlib import add_pair_args, pair_binary, print_table, time_pair, torch_time, torch_threads

# name, dtype, (T, N, C, S)
CASES = [
    ("short", "f32", (50, 16, 20, 10)),
    ("speech-like", "f32", (200, 32, 30, 40)),
    ("speech-like", "f64", (200, 32, 30, 40)),
    ("one sequence", "f32", (400, 1, 40, 80)),
]


def torch_child(a):
    """Runs in a child process: times the case in PyTorch, prints JSON."""
    import torch
    import torch.nn.functional as F
    torch_threads(torch, a.threads)
    T, N, C, S = (int(v) for v in a.shape.split(","))
    dtype = {"f32": torch.float32, "f64": torch.float64}[a.dtype]
    x = (torch.rand(T, N, C, generator=torch.Generator().manual_seed(1)) * 2 - 1).to(dtype)
    lp = x.log_softmax(2)
    tg = torch.tensor([[1 + (7 * n + 3 * i) % (C - 1) for i in range(S)] for n in range(N)])
    il, tl = torch.full((N,), T), torch.full((N,), S)
    if a.backward:
        lp.requires_grad_(True)

    def once():
        y = F.ctc_loss(lp, tg, il, tl)
        if a.backward:
            y.backward()
            lp.grad = None
    torch_time(once, a.repeat)


def main():
    ap = argparse.ArgumentParser()
    add_pair_args(ap)
    for opt in ("--dtype", "--shape"):
        ap.add_argument(opt, help=argparse.SUPPRESS)
    ap.add_argument("--backward", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_child(a)
    ours = pair_binary(a, "ctc")
    rows = []
    for name, dt, shape in CASES:
        if a.only and a.only not in name:
            continue
        for bwd in (False, True):
            args = ["--dtype", dt, "--shape", ",".join(map(str, shape))]
            tm, om, rm, lo, hi = time_pair(a, __file__, ours, args + (["--backward"] if bwd else []))
            mode = "fwd+bwd" if bwd else "fwd"
            sh = "(%d, %d, %d), S %d" % shape
            rows.append((name, dt, sh, mode, tm, om, rm, lo, hi))
            print(f"{name:13s} {dt} {sh:20s} {mode:7s} torch {tm:8.3f} ms  tapegrad {om:8.3f} ms"
                  f"  torch/tapegrad {rm:5.2f}x (rounds {lo:.2f}-{hi:.2f})", flush=True)
    lines = [f"| case | dtype | (T, N, C), S | pass | PyTorch ms | tapegrad ms | PyTorch / "
             f"tapegrad (range over {a.rounds} rounds) |",
             "| --- | --- | --- | --- | ---: | ---: | ---: |"]
    for name, dt, sh, mode, tm, om, rm, lo, hi in rows:
        lines.append(f"| {name} | {dt} | {sh} | {mode} | {tm:.3f} | {om:.3f} | {rm:.2f}x "
                     f"({lo:.2f}-{hi:.2f}) |")
    print_table(lines, a.markdown)


if __name__ == "__main__":
    main()
