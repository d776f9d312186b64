#!/usr/bin/python3
"""Writes the PyTorch golden file of nn.MultiheadAttention's eval forward in
bf16 (tests/test_attention_fast_half.c): tests/golden/attention_half.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_attention_half_goldens.py

Case "case<i>", i < the metadata "cases": an nn.MultiheadAttention (no
dropout, biases, random parameters N(0, 0.3^2) rounded to bf16) in bf16,
eval, under torch.no_grad, need_weights=False.  Metadata:
  case<i>.cfg     "E H batch_first self" (integers)
  case<i>.params  the state dict's keys, in its order, by commas
Tensors (bf16; key_padding_mask u8):
  case<i>.p.<key>  the state dict
  case<i>.q        the query; case<i>.kv the key and value (cross only)
  case<i>.kpm      key_padding_mask (N, S), u8, when the case has one
  case<i>.am       a float causal attn_mask (L, L), when the case has one
  case<i>.y        the output
torch 1.13 has no f16 bmm on the CPU, so f16 has no golden here.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "attention_half.safetensors")
SEED = 6113

# E, H, L, S, N, batch_first, self, key padding, causal mask
CASES = [
    dict(E=32, H=4, L=20, S=20, N=3, bf=True, self=True, kpm=True, am=True),
    dict(E=32, H=4, L=20, S=20, N=3, bf=False, self=True, kpm=False, am=True),
    dict(E=64, H=2, L=17, S=29, N=2, bf=True, self=False, kpm=True, am=False),
    dict(E=64, H=8, L=40, S=40, N=2, bf=False, self=True, kpm=True, am=False),
]


def run_case(c):
    dt = torch.bfloat16
    E, H, L, S, N = c["E"], c["H"], c["L"], c["S"], c["N"]
    m = nn.MultiheadAttention(E, H, dropout=0.0, batch_first=c["bf"]).to(dt)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, dtype=torch.float64) * 0.3)
    m.eval()

    def shape(length):
        return (N, length, E) if c["bf"] else (length, N, E)

    q = torch.randn(shape(L), dtype=torch.float64).to(dt)
    kv = q if c["self"] else torch.randn(shape(S), dtype=torch.float64).to(dt)
    kpm = am = None
    if c["kpm"]:
        kpm = torch.rand(N, S) < 0.3
        kpm[:, 0] = False
    if c["am"]:
        am = torch.triu(torch.full((L, L), float("-inf")), 1).to(dt)
    with torch.no_grad():
        y, _ = m(q, kv, kv, key_padding_mask=kpm, need_weights=False, attn_mask=am)
    t = {"q": q}
    if not c["self"]:
        t["kv"] = kv
    if kpm is not None:
        t["kpm"] = kpm.to(torch.uint8)
    if am is not None:
        t["am"] = am
    t["y"] = y
    sd = m.state_dict()
    for key, val in sd.items():
        t["p." + key] = val
    cfg = [E, H, c["bf"], c["self"]]
    meta = {"cfg": " ".join(str(int(x)) for x in cfg), "params": ",".join(sd.keys())}
    return t, meta


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    for i, c in enumerate(CASES):
        t, md = run_case(c)
        for k, v in t.items():
            tensors["case%d.%s" % (i, k)] = v.detach().contiguous()
        for k, v in md.items():
            meta["case%d.%s" % (i, k)] = v
    meta["cases"] = str(len(CASES))
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
