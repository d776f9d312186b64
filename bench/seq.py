#!/usr/bin/python3
"""One training step of a small sequence model (an LSTM, a GRU or pre-norm
Transformer encoder layers between an Embedding and a Linear): tapegrad
(bench/seq) against PyTorch (Debian's python3-torch), the same thread count
and model, in one run.

    /usr/bin/python3 bench/seq.py [--build build-rel] [--threads 2] [--repeat 20]
                                  [--rounds 5] [--only NAME] [--markdown FILE]

A step: zero the gradients, the logits, the mean cross entropy of every
next token, backward, clip the gradients to norm 1, one Adam step, on a
fixed batch of random tokens (bench/seq.c says more).  Each measurement is
its own process; PyTorch and tapegrad alternate --rounds times per case,
each giving the median of --repeat steps after three of warmup.  The table
gives the median over rounds of each side and of the per-round ratio
PyTorch / tapegrad (> 1: tapegrad is faster), with the ratio's range.
PyTorch's children run with OMP_WAIT_POLICY=passive, as bench/pool.py's.

The "eval forward" cases time the Transformer encoder layers' forward
alone instead of a training step, in eval mode and without gradients
(torch.no_grad, where PyTorch takes its fused fast path), on a fixed batch
of normal values, without a mask.  "Decoder ... eval forward" times
pre-norm TransformerDecoderLayers' forward so, over a memory of normal
values of the same shape, under the causal tgt_mask.
"""
import argparse

from benchlib import add_pair_args, pair_binary, print_table, time_pair, torch_time, torch_threads

# name, model, batch, seq, vocab, embed, hidden, layers
CASES = [
    ("LSTM E32 H128 (char_lm)", "lstm", 16, 32, 64, 32, 128, 1),
    ("LSTM E128 H256 2 layers", "lstm", 32, 64, 64, 128, 256, 2),
    ("GRU E32 H128", "gru", 16, 32, 64, 32, 128, 1),
    ("Transformer E64 ff128 (char_lm)", "transformer", 16, 32, 64, 64, 128, 1),
    ("Transformer E128 ff512 2 layers", "transformer", 32, 64, 64, 128, 512, 2),
    ("Transformer E64 ff128 eval forward", "transformer-eval", 32, 64, 64, 64, 128, 1),
    ("Transformer E128 ff512 eval forward", "transformer-eval", 32, 64, 64, 128, 512, 1),
    ("Decoder E64 ff128 eval forward", "decoder-eval", 32, 64, 64, 64, 128, 1),
]


def torch_child(a):
    """Runs in a child process: times the step in PyTorch, prints JSON."""
    import torch
    import torch.nn as nn
    torch_threads(torch, a.threads)
    torch.manual_seed(1)
    b, t, v, e, h, nl = a.batch, a.seq, a.vocab, a.embed, a.hidden, a.layers
    if a.model == "decoder":
        body = nn.ModuleList(nn.TransformerDecoderLayer(e, 4, h, 0.0, batch_first=True,
                                                        norm_first=True) for _ in range(nl))
        return infer_child(a, body)
    embed = nn.Embedding(v, e)
    if a.model == "transformer":
        pos = nn.Embedding(t, e)
        body = nn.ModuleList(nn.TransformerEncoderLayer(e, 4, h, 0.0, batch_first=True,
                                                        norm_first=True) for _ in range(nl))
        head = nn.Linear(e, v)
        mask = torch.triu(torch.full((t, t), float("-inf")), 1)
        positions = torch.arange(t)
    else:
        rnn = nn.LSTM if a.model == "lstm" else nn.GRU
        body = rnn(e, h, nl, batch_first=True)
        head = nn.Linear(h, v)
    model = nn.ModuleList([embed, body, head] + ([pos] if a.model == "transformer" else []))
    if a.infer:
        return infer_child(a, body)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    idx = torch.randint(0, v, (b, t))
    tgt = torch.randint(0, v, (b * t,))

    def step():
        opt.zero_grad()
        x = embed(idx)
        if a.model == "transformer":
            x = x + pos(positions)
            for layer in body:
                x = layer(x, src_mask=mask)
        else:
            x = body(x)[0]
        loss = nn.functional.cross_entropy(head(x).reshape(-1, v), tgt)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    torch_time(step, a.repeat)


def infer_child(a, body):
    """The layers' forward in eval and under torch.no_grad, timed."""
    import torch
    body.eval()
    x = torch.randn(a.batch, a.seq, a.embed)
    mem = torch.randn(a.batch, a.seq, a.embed)
    mask = torch.triu(torch.full((a.seq, a.seq), float("-inf")), 1)

    def step():
        with torch.no_grad():
            y = x
            for layer in body:
                y = layer(y, mem, tgt_mask=mask) if a.model == "decoder" else layer(y)
    torch_time(step, a.repeat)


def case_args(c):
    _, model, b, t, v, e, h, nl = c
    infer = model.endswith("-eval")
    return (["--model", model.split("-")[0], "--batch", str(b), "--seq", str(t),
             "--vocab", str(v), "--embed", str(e), "--hidden", str(h), "--layers", str(nl)]
            + (["--infer"] if infer else []))


def main():
    ap = argparse.ArgumentParser()
    add_pair_args(ap)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    for opt in ("--batch", "--seq", "--vocab", "--embed", "--hidden", "--layers"):
        ap.add_argument(opt, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--infer", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_child(a)

    ours = pair_binary(a, "seq")
    rows = []
    for c in CASES:
        if a.only and a.only not in c[0]:
            continue
        tm, om, rm, lo, hi = time_pair(a, __file__, ours, case_args(c))
        rows.append((c, tm, om, rm, lo, hi))
        print(f"{c[0]:34s} torch {tm:8.3f} ms  tapegrad {om:8.3f} ms  "
              f"torch/tapegrad {rm:5.2f}x (rounds {lo:.2f}-{hi:.2f})", flush=True)
    lines = [f"| step | batch x seq | PyTorch ms | tapegrad ms "
             f"| PyTorch / tapegrad (range over {a.rounds} rounds) |",
             "| --- | --- | ---: | ---: | ---: |"]
    for c, tm, om, rm, lo, hi in rows:
        lines.append(f"| {c[0]} | {c[2]} x {c[3]} | {tm:.2f} | {om:.2f} "
                     f"| {rm:.2f}x ({lo:.2f}-{hi:.2f}) |")
    print_table(lines, a.markdown)


if __name__ == "__main__":
    main()
