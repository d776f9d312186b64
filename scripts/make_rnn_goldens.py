#!/usr/bin/python3
"""Writes tests/golden/rnn.safetensors: PyTorch 1.13's nn.RNNCell,
nn.LSTMCell, nn.GRUCell, nn.RNN, nn.LSTM and nn.GRU (one and two layers,
bidirectional, batch_first, unbatched inputs, given and absent initial
states, bias=False, relu, an LSTM projection), which tests/test_rnn.c
compares tapegrad with.

For each dtype T (f32, f64) and case C (the CASES table below; its
configuration is the metadata "C.cfg": "kind input_size hidden_size
num_layers bidirectional batch_first bias relu proj_size batched
has_state", kind one of rnn_cell lstm_cell gru_cell rnn lstm gru):
  T.C.sd.<key>       the module's state dict (torch's init, seeded)
  T.C.x              the input
  T.C.h0, T.C.c0     the initial states (when has_state)
  T.C.gy, T.C.ghn, T.C.gcn   upstream gradients of the output (a cell's
                     h), of h_n and c_n (a layer's; c_n and a cell's c for
                     LSTM)
  T.C.y, T.C.hn, T.C.cn      the forward's results (cells: y = h', cn = c')
  T.C.grad.x, T.C.grad.h0, T.C.grad.c0, T.C.grad.<key>
                     d L / d input, states and every parameter, for
                     L = sum(y gy) + sum(hn ghn) + sum(cn gcn)

For each half dtype T (f16, bf16) and case C, the same entries, with the
state dict, the inputs, the initial states and the upstream gradients in T
(drawn in f64 and rounded to T) and the results and gradients in f64:
torch's f64 forward and backward of those very values (torch 1.13 has no
f16 RNN on the CPU), the exact answer that a T computation approximates.

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_rnn_goldens.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "rnn.safetensors")
SEED = 1913
L, N, IN, H = 4, 3, 5, 4

# name: (kind, num_layers, bidirectional, batch_first, bias, relu, proj_size,
#        batched, has_state)
CASES = {
    "rnn_cell": ("rnn_cell", 1, 0, 0, 1, 0, 0, 1, 1),
    "rnn_cell_relu": ("rnn_cell", 1, 0, 0, 1, 1, 0, 1, 1),
    "rnn_cell_nobias_nostate": ("rnn_cell", 1, 0, 0, 0, 0, 0, 1, 0),
    "rnn_cell_unbatched": ("rnn_cell", 1, 0, 0, 1, 0, 0, 0, 1),
    "lstm_cell": ("lstm_cell", 1, 0, 0, 1, 0, 0, 1, 1),
    "lstm_cell_nostate": ("lstm_cell", 1, 0, 0, 1, 0, 0, 1, 0),
    "lstm_cell_unbatched_nobias": ("lstm_cell", 1, 0, 0, 0, 0, 0, 0, 1),
    "gru_cell": ("gru_cell", 1, 0, 0, 1, 0, 0, 1, 1),
    "gru_cell_nostate": ("gru_cell", 1, 0, 0, 1, 0, 0, 1, 0),
    "gru_cell_unbatched_nobias": ("gru_cell", 1, 0, 0, 0, 0, 0, 0, 1),
    "rnn": ("rnn", 1, 0, 0, 1, 0, 0, 1, 1),
    "rnn_relu_2l_nostate": ("rnn", 2, 0, 0, 1, 1, 0, 1, 0),
    "rnn_bidir_bf": ("rnn", 1, 1, 1, 1, 0, 0, 1, 1),
    "rnn_2l_bidir_unbatched_nobias": ("rnn", 2, 1, 0, 0, 0, 0, 0, 1),
    "lstm": ("lstm", 1, 0, 0, 1, 0, 0, 1, 1),
    "lstm_nostate": ("lstm", 1, 0, 0, 1, 0, 0, 1, 0),
    "lstm_2l_bidir": ("lstm", 2, 1, 0, 1, 0, 0, 1, 1),
    "lstm_2l_bf_nobias": ("lstm", 2, 0, 1, 0, 0, 0, 1, 1),
    "lstm_unbatched_bidir_nostate": ("lstm", 1, 1, 0, 1, 0, 0, 0, 0),
    "lstm_proj_2l_bidir": ("lstm", 2, 1, 0, 1, 0, 2, 1, 1),
    "gru": ("gru", 1, 0, 0, 1, 0, 0, 1, 1),
    "gru_2l_bidir_bf": ("gru", 2, 1, 1, 1, 0, 0, 1, 1),
    "gru_2l_nostate_nobias": ("gru", 2, 0, 0, 0, 0, 0, 1, 0),
    "gru_unbatched": ("gru", 1, 0, 0, 1, 0, 0, 0, 1),
}


def make(cfg):
    kind, layers, bidir, bf, bias, relu, proj, _, _ = cfg
    nn = torch.nn
    act = "relu" if relu else "tanh"
    if kind == "rnn_cell":
        return nn.RNNCell(IN, H, bias=bool(bias), nonlinearity=act)
    if kind == "lstm_cell":
        return nn.LSTMCell(IN, H, bias=bool(bias))
    if kind == "gru_cell":
        return nn.GRUCell(IN, H, bias=bool(bias))
    kw = dict(num_layers=layers, bias=bool(bias), batch_first=bool(bf),
              bidirectional=bool(bidir))
    if kind == "rnn":
        return nn.RNN(IN, H, nonlinearity=act, **kw)
    if kind == "lstm":
        return nn.LSTM(IN, H, proj_size=proj, **kw)
    return nn.GRU(IN, H, **kw)


def randn(shape, gen, dtype, half=None):
    """N(0, 1) drawn in f64, in dtype; with half, rounded to half first."""
    t = torch.randn(shape, generator=gen, dtype=torch.float64)
    return (t.to(half) if half else t).to(dtype)


def stored(t, half):
    """t as the file holds it: in half when given (exact: t is of half's
    values), else as it is."""
    t = t.detach().clone()
    return t.to(half) if half else t


def run_case(name, cfg, tname, dtype, gen, half=None):
    """The entries of case name in dtype; with half (dtype f64), the
    parameters and drawn tensors rounded to half and stored in it."""
    kind, layers, bidir, bf, bias, relu, proj, batched, has_state = cfg
    cell = kind.endswith("_cell")
    lstm = kind.startswith("lstm")
    torch.manual_seed(SEED + len(name))
    m = make(cfg).to(dtype)
    if half:
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(p.to(half).to(dtype))
    pre = f"{tname}.{name}"
    out = [(f"{pre}.sd.{k}", stored(t, half)) for k, t in m.state_dict().items()]
    d = 2 if bidir else 1
    hout = proj if proj else H
    if cell:
        xs = (N, IN) if batched else (IN,)
        hs = (N, H) if batched else (H,)
        cs = hs
    else:
        xs = ((N, L, IN) if bf else (L, N, IN)) if batched else (L, IN)
        hs = (d * layers, N, hout) if batched else (d * layers, hout)
        cs = (d * layers, N, H) if batched else (d * layers, H)
    x = randn(xs, gen, dtype, half).requires_grad_()
    leaves = [("x", x)]
    h0 = c0 = None
    if has_state:   # 0.5 times a value of half is one too
        h0 = (0.5 * randn(hs, gen, dtype, half)).requires_grad_()
        leaves.append(("h0", h0))
        if lstm:
            c0 = (0.5 * randn(cs, gen, dtype, half)).requires_grad_()
            leaves.append(("c0", c0))
    if cell:
        hx = None if h0 is None else ((h0, c0) if lstm else h0)
        r = m(x, hx)
        y, hn, cn = (r[0], None, r[1]) if lstm else (r, None, None)
    else:
        hx = None if h0 is None else ((h0, c0) if lstm else h0)
        y, st = m(x, hx)
        hn, cn = (st[0], st[1]) if lstm else (st, None)
    loss = 0
    for key, t in (("y", y), ("hn", hn), ("cn", cn)):
        if t is None:
            continue
        g = randn(t.shape, gen, dtype, half)
        gname = {"y": "gy", "hn": "ghn", "cn": "gcn"}[key]
        out += [(f"{pre}.{key}", t.detach().clone()), (f"{pre}.{gname}", stored(g, half))]
        loss = loss + (t * g).sum()
    loss.backward()
    out += [(f"{pre}.{k}", stored(t, half)) for k, t in leaves]
    out += [(f"{pre}.grad.{k}", t.grad.clone()) for k, t in leaves]
    out += [(f"{pre}.grad.{k}", p.grad.clone()) for k, p in m.named_parameters()]
    return out


def main():
    gen = torch.Generator().manual_seed(SEED)
    out, meta = [], {"torch": torch.__version__}
    for name, cfg in CASES.items():
        kind, layers, bidir, bf, bias, relu, proj, batched, has_state = cfg
        meta[f"{name}.cfg"] = " ".join(str(v) for v in (kind, IN, H, layers, bidir, bf, bias,
                                                          relu, proj, batched, has_state))
    for tname, dtype in (("f32", torch.float32), ("f64", torch.float64)):
        for name, cfg in CASES.items():
            out += run_case(name, cfg, tname, dtype, gen)
    for tname, half in (("f16", torch.float16), ("bf16", torch.bfloat16)):
        for name, cfg in CASES.items():
            out += run_case(name, cfg, tname, torch.float64, gen, half)
    write_safetensors(OUT, out, meta)


if __name__ == "__main__":
    main()
