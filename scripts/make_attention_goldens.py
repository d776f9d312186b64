#!/usr/bin/python3
"""Writes the PyTorch golden file of nn.MultiheadAttention
(tests/test_attention.c): tests/golden/attention.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_attention_goldens.py

Case "case<i>", i < the metadata "cases", each an nn.MultiheadAttention with
random parameters (N(0, 0.3^2), biases included, so every gradient is
non-trivial) and no dropout, run in f32 or f64.  Metadata:
  case<i>.dtype          f32 or f64
  case<i>.cfg            "E H kdim vdim bias add_bias_kv add_zero_attn
                          batch_first self need_weights average" (integers)
  case<i>.params         the state dict's keys, in its order, by commas
Tensors (in the case's dtype, masks u8 or float):
  case<i>.p.<key>        the state dict (load it with prefix "case<i>.p")
  case<i>.q, .k, .v      query, key, value (self: q only, given as all three)
  case<i>.kpm, .am       key_padding_mask (u8 or float) and attn_mask (u8 or
                         float), when the case has them
  case<i>.dkpm           a float key_padding_mask's gradient, when torch
                         gives one (not beside a bool attn_mask)
  case<i>.g, .gw         the gradients of the output and of the weights
  case<i>.y, .w          forward's output and weights (w with need_weights)
  case<i>.dq, .dk, .dv   the inputs' gradients of sum(g y) + sum(gw w)
  case<i>.dp.<key>       the parameters' gradients

Case "tel<i>", i < the metadata "tel_cases": an nn.TransformerEncoderLayer
(d_model 8, nhead 2, dim_feedforward 16, no dropout) with random
parameters, in f32 or f64.  Metadata tel<i>.dtype and tel<i>.cfg
"batch_first norm_first gelu unbatched" (integers), tel<i>.params the
state dict's keys.  Tensors: tel<i>.p.<key> (the state dict), .x (src),
.mask (a float causal src_mask, when given), .kpm (u8 or float
src_key_padding_mask, when given), .g, .y, .dx, .dp.<key> as above, and
.dkpm (a float src_key_padding_mask's gradient, when torch gives one).

The cases with a float key_padding_mask come after all the others (their
indices continue both lists), so the earlier cases keep their numbers.
A float key_padding_mask is never given beside a float attn_mask: torch
1.13 fails on that pair (its masked_fill reads the float mask as bool).
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "attention.safetensors")
SEED = 3517
DTYPES = {"f32": torch.float32, "f64": torch.float64}

# E, H, L, S, N (0: unbatched) and options; masks: kpm (bool), am one of
# None, "bool2", "float2", "bool3", "float3"
BASE = dict(E=8, H=2, L=5, S=5, N=3, kdim=None, vdim=None, bias=True, bias_kv=False,
            zero_attn=False, batch_first=False, self=True, need_weights=True,
            average=True, kpm=False, am=None)
CASES = [
    dict(),
    dict(batch_first=True, average=False),
    dict(self=False, L=4, S=6),
    dict(self=False, L=4, S=6, kdim=5, vdim=3, batch_first=True),
    dict(N=0, kpm=True, am="float3"),
    dict(N=0, self=False, L=3, S=4, kdim=6, vdim=7, am="bool2", average=False),
    dict(kpm=True, am="bool2"),
    dict(self=False, L=4, S=6, am="float2", average=False),
    dict(kpm=True, am="bool3", batch_first=True),
    dict(self=False, L=3, S=4, kpm=True, am="float3"),
    dict(bias_kv=True, kpm=True, am="bool2"),
    dict(zero_attn=True, kpm=True, am="float3", average=False),
    dict(bias_kv=True, zero_attn=True, self=False, L=4, S=6, kdim=5, vdim=3,
         batch_first=True, kpm=True, am="float2"),
    dict(bias=False, self=False, L=4, S=3, H=4),
    dict(need_weights=False, kpm=True, am="bool3"),
    dict(N=0, bias_kv=True, zero_attn=True, need_weights=True, average=False),
]

# a float key_padding_mask: alone (added), beside a bool attn_mask (or-ed)
FKPM_CASES = [
    dict(kpm="float"),
    dict(kpm="float", self=False, L=4, S=6, kdim=5, vdim=3, batch_first=True,
         average=False),
    dict(N=0, kpm="float"),
    dict(kpm="float", am="bool2"),
    dict(kpm="float", am="bool3", batch_first=True),
    dict(kpm="float", bias_kv=True, zero_attn=True, self=False, L=4, S=6),
]


def float_kpm(n, S, dt, zeros):
    """A float key_padding_mask (n, S): randn, -inf at some keys (never key
    0), and with zeros, 0 at about half of them (beside a bool attn_mask
    torch masks the nonzero ones)."""
    kpm = torch.randn(n, S, dtype=torch.float64)
    kpm[torch.rand(n, S) < 0.3] = float("-inf")
    if zeros:
        kpm[torch.rand(n, S) < 0.5] = 0.0
    kpm[:, 0] = torch.randn(n, dtype=torch.float64)
    return kpm.to(dt)


def masks(c, dt):
    """key_padding_mask and attn_mask of case c; no row is all masked."""
    n, h, L, S = max(c["N"], 1), c["H"], c["L"], c["S"]
    kpm = am = None
    if c["kpm"] == "float":
        kpm = float_kpm(n, S, dt, c["am"] is not None and c["am"].startswith("bool"))
        if c["am"] and c["am"].startswith("bool"):
            kpm[:, 1] = 0.0   # key 1 stays visible, as below
        if c["N"] == 0:
            kpm = kpm[0]
        kpm.requires_grad_()
    elif c["kpm"]:
        kpm = torch.rand(n, S) < 0.3
        kpm[:, 0] = False
        if c["N"] == 0:
            kpm = kpm[0]
    if c["am"]:
        shape = (L, S) if c["am"].endswith("2") else (n * h, L, S)
        if c["am"].startswith("bool"):
            am = torch.rand(shape) < 0.3
            am[..., 1] = False   # key 1 stays visible, whatever kpm hides
            if kpm is not None and kpm.dtype == torch.bool:
                kpm[..., 1] = False
        else:
            am = torch.randn(shape, dtype=torch.float64).to(dt)
    return kpm, am


def run_case(c, dt):
    E, H, L, S, N = c["E"], c["H"], c["L"], c["S"], c["N"]
    kdim, vdim = c["kdim"] or E, c["vdim"] or E
    m = nn.MultiheadAttention(E, H, dropout=0.0, bias=c["bias"], add_bias_kv=c["bias_kv"],
                              add_zero_attn=c["zero_attn"], kdim=c["kdim"], vdim=c["vdim"],
                              batch_first=c["batch_first"]).to(dt)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, dtype=torch.float64) * 0.3)

    def shape(length, feat):
        if N == 0:
            return (length, feat)
        return (N, length, feat) if c["batch_first"] else (length, N, feat)

    q = torch.randn(shape(L, E), dtype=torch.float64).to(dt).requires_grad_()
    if c["self"]:
        k = v = q
    else:
        k = torch.randn(shape(S, kdim), dtype=torch.float64).to(dt).requires_grad_()
        v = torch.randn(shape(S, vdim), dtype=torch.float64).to(dt).requires_grad_()
    kpm, am = masks(c, dt)
    y, w = m(q, k, v, key_padding_mask=kpm, need_weights=c["need_weights"], attn_mask=am,
             average_attn_weights=c["average"])
    g = torch.randn(y.shape, dtype=torch.float64).to(dt)
    loss = (g * y).sum()
    out = {"y": y}
    if w is not None:
        gw = torch.randn(w.shape, dtype=torch.float64).to(dt)
        loss = loss + (gw * w).sum()
        out["w"], out["gw"] = w, gw
    loss.backward()
    t = {"q": q}
    if not c["self"]:
        t["k"], t["v"] = k, v
    if kpm is not None:
        t["kpm"] = kpm.to(torch.uint8) if kpm.dtype == torch.bool else kpm
        if kpm.grad is not None:
            t["dkpm"] = kpm.grad
    if am is not None:
        t["am"] = am.to(torch.uint8) if am.dtype == torch.bool else am
    t["g"] = g
    t.update(out)
    t["dq"] = q.grad
    if not c["self"]:
        t["dk"], t["dv"] = k.grad, v.grad
    sd = m.state_dict()
    for key, val in sd.items():
        t["p." + key] = val
    named = dict(m.named_parameters())
    for key in sd:
        t["dp." + key] = named[key].grad
    cfg = [E, H, kdim, vdim, c["bias"], c["bias_kv"], c["zero_attn"], c["batch_first"],
           c["self"], c["need_weights"], c["average"]]
    meta = {"cfg": " ".join(str(int(x)) for x in cfg), "params": ",".join(sd.keys())}
    return t, meta


TEL_CASES = [
    dict(),
    dict(norm_first=True, gelu=True, mask=True),
    dict(batch_first=True, kpm=True, mask=True),
    dict(norm_first=True, batch_first=True, kpm=True),
    dict(unbatched=True, mask=True, gelu=True),
]

FKPM_TEL_CASES = [
    dict(kpm="float"),
    dict(norm_first=True, batch_first=True, kpm="float", gelu=True),
    dict(unbatched=True, kpm="float"),
]


def run_tel(c, dt):
    S, N, E = 5, 3, 8
    m = nn.TransformerEncoderLayer(E, 2, dim_feedforward=16, dropout=0.0,
                                   activation="gelu" if c.get("gelu") else "relu",
                                   batch_first=c.get("batch_first", False),
                                   norm_first=c.get("norm_first", False)).to(dt)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, dtype=torch.float64) * 0.3)
    if c.get("unbatched"):
        shape = (S, E)
    else:
        shape = (N, S, E) if c.get("batch_first") else (S, N, E)
    x = torch.randn(shape, dtype=torch.float64).to(dt).requires_grad_()
    t = {"x": x}
    mask = kpm = None
    if c.get("mask"):
        mask = torch.triu(torch.full((S, S), float("-inf"), dtype=dt), diagonal=1)
        t["mask"] = mask
    if c.get("kpm") == "float":
        kpm = float_kpm(N, S, dt, False)
        if c.get("unbatched"):
            kpm = kpm[0]
        t["kpm"] = kpm.requires_grad_()
    elif c.get("kpm"):
        kpm = torch.rand(N, S) < 0.3
        kpm[:, 0] = False
        t["kpm"] = kpm.to(torch.uint8)
    y = m(x, src_mask=mask, src_key_padding_mask=kpm)
    g = torch.randn(y.shape, dtype=torch.float64).to(dt)
    (g * y).sum().backward()
    t.update(g=g, y=y, dx=x.grad)
    if kpm is not None and kpm.grad is not None:
        t["dkpm"] = kpm.grad
    sd = m.state_dict()
    named = dict(m.named_parameters())
    for key, val in sd.items():
        t["p." + key] = val
        t["dp." + key] = named[key].grad
    cfg = [c.get(k, False) for k in ("batch_first", "norm_first", "gelu", "unbatched")]
    meta = {"cfg": " ".join(str(int(v)) for v in cfg), "params": ",".join(sd.keys())}
    return t, meta


def add_cases(tensors, meta, kind, first, cases, run):
    """Runs cases in f32 then f64 as kind<first>, kind<first + 1>, ...;
    returns the next index."""
    i = first
    for name, dt in DTYPES.items():
        for case in cases:
            t, md = run(case, dt)
            p = "%s%d." % (kind, i)
            for k, v in t.items():
                tensors[p + k] = v.detach().contiguous()
            for k, v in md.items():
                meta[p + k] = v
            meta[p + "dtype"] = name
            i += 1
    return i


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    def mha(c, dt):
        return run_case(dict(BASE, **c), dt)
    n = add_cases(tensors, meta, "case", 0, CASES, mha)
    n_tel = add_cases(tensors, meta, "tel", 0, TEL_CASES, run_tel)
    n = add_cases(tensors, meta, "case", n, FKPM_CASES, mha)
    n_tel = add_cases(tensors, meta, "tel", n_tel, FKPM_TEL_CASES, run_tel)
    meta["cases"], meta["tel_cases"] = str(n), str(n_tel)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
