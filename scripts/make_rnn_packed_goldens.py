#!/usr/bin/python3
"""Writes tests/golden/rnn_packed.safetensors: PyTorch 1.13's nn.RNN,
nn.LSTM and nn.GRU over sequences of different lengths,
pack_padded_sequence(x, lengths, batch_first, enforce_sorted=False) ->
module -> pad_packed_sequence(batch_first, total_length=L), which
tests/test_rnn_packed.c compares with tapegrad's forwards with lengths.

Lengths are unsorted; one case has every length below L.  For each dtype
T (f32, f64) and case C (the CASES table below; its configuration is the
metadata "C.cfg": "kind input_size hidden_size num_layers bidirectional
batch_first proj_size has_state", kind one of rnn lstm gru):
  T.C.sd.<key>       the module's state dict (torch's init, seeded)
  T.C.x              the padded input (its padded steps hold random values)
  T.C.lengths        i64 (N), each row's valid steps
  T.C.h0, T.C.c0     the initial states (when has_state)
  T.C.gy, T.C.ghn, T.C.gcn   upstream gradients of the output, h_n, c_n
  T.C.y, T.C.hn, T.C.cn      the results (y zero at the padded steps)
  T.C.grad.x, T.C.grad.h0, T.C.grad.c0, T.C.grad.<key>
                     d L / d input, states and every parameter, for
                     L = sum(y gy) + sum(hn ghn) + sum(cn gcn)

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_rnn_packed_goldens.py
"""
import os
import sys

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "rnn_packed.safetensors")
SEED = 2417
L, N, IN, H = 5, 4, 3, 4

# name: (kind, num_layers, bidirectional, batch_first, proj_size, has_state,
#        lengths)
CASES = {
    "rnn": ("rnn", 1, 0, 0, 0, 1, (3, 5, 1, 4)),
    "rnn_bidir_bf_nostate": ("rnn", 1, 1, 1, 0, 0, (2, 5, 5, 1)),
    "lstm_2l_bidir": ("lstm", 2, 1, 0, 0, 1, (3, 5, 1, 4)),
    "lstm_2l_bidir_bf_short": ("lstm", 2, 1, 1, 0, 1, (2, 4, 1, 3)),
    "lstm_proj_2l_bidir": ("lstm", 2, 1, 0, 2, 1, (4, 1, 5, 2)),
    "lstm_proj_bf_nostate": ("lstm", 1, 0, 1, 3, 0, (1, 3, 5, 2)),
    "gru_2l_bidir": ("gru", 2, 1, 0, 0, 1, (5, 2, 3, 1)),
    "gru_2l_bidir_bf": ("gru", 2, 1, 1, 0, 1, (3, 5, 1, 4)),
}


def make(kind, layers, bidir, bf, proj):
    kw = dict(num_layers=layers, batch_first=bool(bf), bidirectional=bool(bidir))
    if kind == "rnn":
        return torch.nn.RNN(IN, H, **kw)
    if kind == "lstm":
        return torch.nn.LSTM(IN, H, proj_size=proj, **kw)
    return torch.nn.GRU(IN, H, **kw)


def randn(shape, gen, dtype):
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)


def run_case(name, cfg, tname, dtype, gen):
    kind, layers, bidir, bf, proj, has_state, lens = cfg
    lstm = kind == "lstm"
    torch.manual_seed(SEED + len(name))
    m = make(kind, layers, bidir, bf, proj).to(dtype)
    pre = f"{tname}.{name}"
    out = [(f"{pre}.sd.{k}", t.detach().clone()) for k, t in m.state_dict().items()]
    d = 2 if bidir else 1
    hout = proj if proj else H
    x = randn((N, L, IN) if bf else (L, N, IN), gen, dtype).requires_grad_()
    lengths = torch.tensor(lens, dtype=torch.int64)
    out.append((f"{pre}.lengths", lengths.clone()))
    leaves = [("x", x)]
    hx = None
    if has_state:
        h0 = (0.5 * randn((d * layers, N, hout), gen, dtype)).requires_grad_()
        leaves.append(("h0", h0))
        hx = h0
        if lstm:
            c0 = (0.5 * randn((d * layers, N, H), gen, dtype)).requires_grad_()
            leaves.append(("c0", c0))
            hx = (h0, c0)
    packed = pack_padded_sequence(x, lengths, batch_first=bool(bf),
                                  enforce_sorted=False)
    po, st = m(packed, hx)
    y, _ = pad_packed_sequence(po, batch_first=bool(bf), total_length=L)
    hn, cn = (st[0], st[1]) if lstm else (st, None)
    loss = 0
    for key, t in (("y", y), ("hn", hn), ("cn", cn)):
        if t is None:
            continue
        g = randn(t.shape, gen, dtype)
        gname = {"y": "gy", "hn": "ghn", "cn": "gcn"}[key]
        out += [(f"{pre}.{key}", t.detach().clone()), (f"{pre}.{gname}", g)]
        loss = loss + (t * g).sum()
    loss.backward()
    out += [(f"{pre}.{k}", t.detach().clone()) for k, t in leaves]
    out += [(f"{pre}.grad.{k}", t.grad.clone()) for k, t in leaves]
    out += [(f"{pre}.grad.{k}", p.grad.clone()) for k, p in m.named_parameters()]
    return out


def main():
    gen = torch.Generator().manual_seed(SEED)
    out, meta = [], {"torch": torch.__version__}
    for name, cfg in CASES.items():
        kind, layers, bidir, bf, proj, has_state, _ = cfg
        meta[f"{name}.cfg"] = " ".join(str(v) for v in (kind, IN, H, layers, bidir, bf, proj,
                                                          has_state))
    for tname, dtype in (("f32", torch.float32), ("f64", torch.float64)):
        for name, cfg in CASES.items():
            out += run_case(name, cfg, tname, dtype, gen)
    write_safetensors(OUT, out, meta)


if __name__ == "__main__":
    main()
