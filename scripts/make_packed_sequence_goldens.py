#!/usr/bin/python3
"""Writes tests/golden/packed_sequence.safetensors: PyTorch 1.13's
torch.nn.utils.rnn.PackedSequence and its functions, which
tests/test_packed_sequence.c compares with tg_pack_padded_sequence,
tg_pad_packed_sequence, tg_pack_sequence and the recurrent forwards over
a packed sequence.

Run with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_packed_sequence_goldens.py

pack_padded_sequence -> pad_packed_sequence, case "pad<i>" (i < the
metadata "pads"), metadata pad<i>.cfg = "batch_first enforce_sorted
total_length padding_value" (total_length -1 for None, padding_value as
%r of a float):
  pad<i>.x, pad<i>.lengths    the padded input and its lengths (i64)
  pad<i>.data, .batch_sizes, .sorted_indices, .unsorted_indices
                              the packed sequence (no indices when
                              enforce_sorted)
  pad<i>.gdata, pad<i>.dx     an upstream gradient of data and x's
                              gradient for it
  pad<i>.y, pad<i>.ylengths   pad_packed_sequence of that packed sequence
  pad<i>.gy, pad<i>.ddata     an upstream gradient of y and the packed
                              data's gradient for it
pack_sequence, case "seq<i>" (i < "seqs"), metadata seq<i>.cfg = "n
enforce_sorted": seq<i>.s<j> the sequences, .data, .batch_sizes,
.sorted_indices, .unsorted_indices, .gdata and .d<j> each sequence's
gradient.
Recurrent layers, for each dtype T (f32, f64) and case C of RNNS
(metadata "C.cfg" = "kind num_layers bidirectional batch_first
enforce_sorted has_state"; input_size 3, hidden_size 4): T.C.sd.<key>
the state dict, T.C.x (L, N, 3) padded input, T.C.lengths, T.C.h0,
T.C.c0 (when has_state), the module called with
pack_padded_sequence(x, lengths, enforce_sorted): T.C.data its output's
data, T.C.hn, T.C.cn, upstream gradients T.C.gdata, T.C.ghn, T.C.gcn and
T.C.grad.x, T.C.grad.h0, T.C.grad.c0, T.C.grad.<key> the gradients of
sum(data gdata) + sum(hn ghn) + sum(cn gcn).
"""
import os
import sys

import torch
from torch.nn.utils.rnn import (PackedSequence, pack_padded_sequence, pack_sequence,
                                pad_packed_sequence)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "packed_sequence.safetensors")
SEED = 6151
F32, F64 = torch.float32, torch.float64

# (shape of x as given, dtype, lengths, batch_first, enforce_sorted,
#  total_length or None, padding_value)
PADS = [
    ((5, 4, 3), F64, (3, 5, 1, 4), False, False, None, 0.0),
    ((4, 5, 3), F64, (3, 5, 1, 4), True, False, None, 0.0),
    ((5, 4, 2), F64, (5, 3, 3, 1), False, True, None, -1.0),
    ((4, 5, 2), F64, (5, 3, 3, 1), True, True, 7, 2.5),
    ((4, 3, 2, 3), F64, (2, 4, 4), False, False, 6, -1.5),
    ((3, 4, 2, 2), F64, (4, 2, 4), True, False, None, 0.0),
    ((3, 3), F64, (1, 2, 3), False, False, 5, 9.0),
    ((6, 3), F32, (2, 3, 2, 3, 1, 2), True, False, 4, -0.0),
    ((1, 1, 2), F32, (1,), False, True, None, 0.0),
]
# ([lengths], trailing dims, enforce_sorted)
SEQS = [
    ((3, 1, 4), (2,), False),
    ((4, 3, 3, 1), (), True),
    ((2, 5), (2, 2), False),
]
L, N, IN, H = 5, 4, 3, 4
# name: (kind, num_layers, bidirectional, batch_first, enforce_sorted,
#        has_state, lengths)
RNNS = {
    "lstm_2l_bidir": ("lstm", 2, 1, 0, 0, 1, (3, 5, 1, 4)),
    "gru_2l_bidir": ("gru", 2, 1, 0, 0, 1, (2, 4, 5, 2)),
    "gru_2l_bidir_bf": ("gru", 2, 1, 1, 0, 0, (4, 1, 5, 3)),
    "lstm_sorted": ("lstm", 1, 0, 0, 1, 0, (5, 4, 4, 2)),
    "rnn_bidir": ("rnn", 1, 1, 0, 0, 1, (1, 3, 5, 2)),
}


def rand(shape, dtype, gen):
    return (torch.rand(shape, generator=gen, dtype=F64) * 2 - 1).to(dtype)


def check_stable_sort(lengths, packed):
    """Ties keep their batch order in torch's sort for these small
    batches; tapegrad's sort promises that order."""
    if packed.sorted_indices is None:
        return
    want = sorted(range(len(lengths)), key=lambda b: (-lengths[b], b))
    assert packed.sorted_indices.tolist() == want, (lengths, packed.sorted_indices)


def pad_case(i, cfg, gen, out, meta):
    shape, dt, lens, bf, es, total, value = cfg
    p = "pad%d." % i
    x = rand(shape, dt, gen).requires_grad_()
    lengths = torch.tensor(lens, dtype=torch.int64)
    packed = pack_padded_sequence(x, lengths, batch_first=bf, enforce_sorted=es)
    check_stable_sort(lens, packed)
    gdata = rand(packed.data.shape, dt, gen)
    (dx,) = torch.autograd.grad(packed.data, x, gdata)
    leaf = packed.data.detach().clone().requires_grad_()
    again = PackedSequence(leaf, packed.batch_sizes, packed.sorted_indices,
                           packed.unsorted_indices)
    y, ylen = pad_packed_sequence(again, batch_first=bf, padding_value=value,
                                  total_length=total)
    gy = rand(y.shape, dt, gen)
    (ddata,) = torch.autograd.grad(y, leaf, gy)
    out += [(p + "x", x.detach()), (p + "lengths", lengths), (p + "data", packed.data.detach()),
            (p + "batch_sizes", packed.batch_sizes), (p + "gdata", gdata), (p + "dx", dx),
            (p + "y", y.detach()), (p + "ylengths", ylen), (p + "gy", gy),
            (p + "ddata", ddata)]
    if not es:
        out += [(p + "sorted_indices", packed.sorted_indices),
                (p + "unsorted_indices", packed.unsorted_indices)]
    meta[p + "cfg"] = "%d %d %d %r" % (bf, es, -1 if total is None else total, value)


def seq_case(i, cfg, gen, out, meta):
    lens, rest, es = cfg
    p = "seq%d." % i
    seqs = [rand((n,) + rest, F64, gen).requires_grad_() for n in lens]
    packed = pack_sequence(seqs, enforce_sorted=es)
    check_stable_sort(lens, packed)
    gdata = rand(packed.data.shape, F64, gen)
    ds = torch.autograd.grad(packed.data, seqs, gdata)
    out += [(p + "s%d" % j, s.detach()) for j, s in enumerate(seqs)]
    out += [(p + "data", packed.data.detach()), (p + "batch_sizes", packed.batch_sizes),
            (p + "gdata", gdata)]
    out += [(p + "d%d" % j, d) for j, d in enumerate(ds)]
    if not es:
        out += [(p + "sorted_indices", packed.sorted_indices),
                (p + "unsorted_indices", packed.unsorted_indices)]
    meta[p + "cfg"] = "%d %d" % (len(lens), es)


def make(kind, layers, bidir, bf):
    kw = dict(num_layers=layers, batch_first=bool(bf), bidirectional=bool(bidir))
    cls = {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[kind]
    return cls(IN, H, **kw)


def rnn_case(name, cfg, tname, dt, gen, out):
    kind, layers, bidir, bf, es, has_state, lens = cfg
    lstm = kind == "lstm"
    torch.manual_seed(SEED + len(name))
    m = make(kind, layers, bidir, bf).to(dt)
    pre = "%s.%s." % (tname, name)
    out += [(pre + "sd." + k, t.detach().clone()) for k, t in m.state_dict().items()]
    d = 2 if bidir else 1
    x = rand((L, N, IN), dt, gen).requires_grad_()
    lengths = torch.tensor(lens, dtype=torch.int64)
    leaves, hx = [("x", x)], None
    if has_state:
        h0 = (0.5 * rand((d * layers, N, H), dt, gen)).requires_grad_()
        leaves.append(("h0", h0))
        hx = h0
        if lstm:
            c0 = (0.5 * rand((d * layers, N, H), dt, gen)).requires_grad_()
            leaves.append(("c0", c0))
            hx = (h0, c0)
    packed = pack_padded_sequence(x, lengths, enforce_sorted=bool(es))
    po, st = m(packed, hx)
    hn, cn = (st[0], st[1]) if lstm else (st, None)
    loss = 0
    for key, t in (("data", po.data), ("hn", hn), ("cn", cn)):
        if t is None:
            continue
        g = rand(t.shape, dt, gen)
        out += [(pre + key, t.detach().clone()), (pre + "g" + key, g)]
        loss = loss + (t * g).sum()
    loss.backward()
    out.append((pre + "lengths", lengths))
    out += [(pre + k, t.detach().clone()) for k, t in leaves]
    out += [(pre + "grad." + k, t.grad.clone()) for k, t in leaves]
    out += [(pre + "grad." + k, p.grad.clone()) for k, p in m.named_parameters()]


def main():
    gen = torch.Generator().manual_seed(SEED)
    out, meta = [], {"torch": torch.__version__, "pads": str(len(PADS)),
                     "seqs": str(len(SEQS))}
    for i, cfg in enumerate(PADS):
        pad_case(i, cfg, gen, out, meta)
    for i, cfg in enumerate(SEQS):
        seq_case(i, cfg, gen, out, meta)
    for name, cfg in RNNS.items():
        meta[name + ".cfg"] = " ".join(str(v) for v in cfg[:6])
    for tname, dt in (("f32", F32), ("f64", F64)):
        for name, cfg in RNNS.items():
            rnn_case(name, cfg, tname, dt, gen, out)
    write_safetensors(OUT, out, meta)


if __name__ == "__main__":
    main()
