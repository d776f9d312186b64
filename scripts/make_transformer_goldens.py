#!/usr/bin/python3
"""Writes the PyTorch golden file of nn.TransformerDecoderLayer,
nn.TransformerEncoder, nn.TransformerDecoder and nn.Transformer
(tests/test_transformer_stack.c): tests/golden/transformer.safetensors.

Run from anywhere with the system interpreter (torch 1.13):
    /usr/bin/python3 scripts/make_transformer_goldens.py

Case "case<i>", i < the metadata "cases": one module (d_model 8, nhead 2,
dim_feedforward 16, dropout 0.1 but in eval mode, so no dropout) whose every
parameter is redrawn from N(0, 0.3^2) (so the stacked layers differ and
every gradient is non-trivial), run in f32 or f64.  Metadata:
  case<i>.kind     tdl (TransformerDecoderLayer), enc (TransformerEncoder),
                   dec (TransformerDecoder) or tf (Transformer)
  case<i>.dtype    f32 or f64
  case<i>.cfg      "batch_first norm_first gelu unbatched norm layers
                    dec_layers" (integers; norm: the stack has a final
                    LayerNorm; layers: the encoder's or the stack's layers)
  case<i>.params   the state dict's keys, in its order, by commas
Tensors (in the case's dtype; masks u8 for torch's bool ones, or float):
  case<i>.p.<key>  the state dict (load it with prefix "case<i>.p")
  case<i>.a, .b    the inputs: tgt and memory (tdl, dec), src (enc), or
                   src and tgt (tf)
  case<i>.src_mask, .tgt_mask, .memory_mask, .src_kpm, .tgt_kpm, .mem_kpm
                   the masks the case gives (kpm: key_padding_mask)
  case<i>.dsrc_kpm, .dtgt_kpm, .dmem_kpm
                   a float key padding mask's gradient, when torch gives
                   one (not beside a bool attn_mask of the same attention)
  case<i>.g        the gradient of the output
  case<i>.y        the output
  case<i>.da, .db  the inputs' gradients of sum(g y)
  case<i>.dp.<key> the parameters' gradients

The cases with float key padding masks come after all the others, so the
earlier cases keep their numbers and values.  A float key padding mask is
never given beside a float attn_mask of the same attention: torch 1.13
fails on that pair (its masked_fill reads the float mask as bool).
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stfile import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "transformer.safetensors")
SEED = 1913
DTYPES = {"f32": torch.float32, "f64": torch.float64}
E, H, FF, S, T, N = 8, 2, 16, 5, 4, 3

# masks: "causal" (tgt_mask from generate_square_subsequent_mask, or the
# src_mask likewise), "bool" (a random bool mask), "float" (randn)
CASES = [
    dict(kind="tdl"),
    dict(kind="tdl", norm_first=True, gelu=True, tgt_mask="causal"),
    dict(kind="tdl", batch_first=True, tgt_mask="causal", tgt_kpm=True, mem_kpm=True),
    dict(kind="tdl", norm_first=True, batch_first=True, memory_mask="float", mem_kpm=True),
    dict(kind="tdl", unbatched=True, tgt_mask="causal", memory_mask="bool", mem_kpm=True),
    dict(kind="enc", norm=True, layers=2),
    dict(kind="enc", norm_first=True, batch_first=True, layers=3, src_mask="causal",
         src_kpm=True),
    dict(kind="enc", unbatched=True, gelu=True, norm=True, layers=2, src_mask="bool"),
    dict(kind="dec", norm=True, layers=2, tgt_mask="causal"),
    dict(kind="dec", batch_first=True, norm_first=True, layers=2, tgt_kpm=True,
         mem_kpm=True, memory_mask="bool"),
    dict(kind="tf", layers=2, dec_layers=1),
    dict(kind="tf", layers=1, dec_layers=2, src_mask="float", tgt_mask="causal",
         memory_mask="bool", src_kpm=True, tgt_kpm=True, mem_kpm=True),
    dict(kind="tf", layers=2, dec_layers=2, batch_first=True, norm_first=True, gelu=True,
         tgt_mask="causal", mem_kpm=True),
    dict(kind="tf", layers=1, dec_layers=1, unbatched=True, tgt_mask="causal",
         src_kpm=True),
]

# float key padding masks (kpm "float"): added, or or-ed beside a bool mask
FKPM_CASES = [
    dict(kind="tdl", tgt_kpm="float", mem_kpm="float"),
    dict(kind="tdl", unbatched=True, norm_first=True, tgt_kpm="float", memory_mask="bool",
         mem_kpm="float"),
    dict(kind="enc", norm=True, layers=2, src_kpm="float"),
    dict(kind="enc", batch_first=True, layers=2, src_mask="bool", src_kpm="float"),
    dict(kind="dec", layers=2, batch_first=True, tgt_kpm="float", mem_kpm="float"),
    dict(kind="tf", layers=2, dec_layers=1, src_kpm="float", tgt_mask="bool",
         tgt_kpm="float", mem_kpm="float"),
]


def layer_kw(c):
    return dict(dim_feedforward=FF, dropout=0.1, activation="gelu" if c.get("gelu") else "relu",
                batch_first=c.get("batch_first", False), norm_first=c.get("norm_first", False))


def make(c, dt):
    kind = c["kind"]
    if kind == "tdl":
        m = nn.TransformerDecoderLayer(E, H, **layer_kw(c))
    elif kind == "enc":
        norm = nn.LayerNorm(E) if c.get("norm") else None
        m = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, **layer_kw(c)), c["layers"],
                                  norm)
    elif kind == "dec":
        norm = nn.LayerNorm(E) if c.get("norm") else None
        m = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, **layer_kw(c)), c["layers"],
                                  norm)
    else:
        m = nn.Transformer(E, H, c["layers"], c["dec_layers"], **layer_kw(c))
    m = m.to(dt)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, dtype=torch.float64) * 0.3)
    m.eval()
    return m


def seq(c, length, dt):
    if c.get("unbatched"):
        shape = (length, E)
    else:
        shape = (N, length, E) if c.get("batch_first") else (length, N, E)
    return torch.randn(shape, dtype=torch.float64).to(dt).requires_grad_()


def attn_mask(kind, rows, cols, dt):
    if kind == "causal":
        return nn.Transformer.generate_square_subsequent_mask(rows).to(dt)
    if kind == "bool":
        m = torch.rand(rows, cols) < 0.3
        m[:, 0] = False   # key 0 stays visible
        return m
    return torch.randn(rows, cols, dtype=torch.float64).to(dt)


def kpm(c, length, kind, dt, zeros):
    """A bool key padding mask, or (kind "float") randn with -inf at some
    keys and, with zeros, 0 at about half of them; key 0 never masked."""
    if kind == "float":
        m = torch.randn(N, length, dtype=torch.float64)
        m[torch.rand(N, length) < 0.3] = float("-inf")
        if zeros:
            m[torch.rand(N, length) < 0.5] = 0.0
        m[:, 0] = 0.0 if zeros else torch.randn(N, dtype=torch.float64)
        m = m.to(dt)
    else:
        m = torch.rand(N, length) < 0.3
        m[:, 0] = False
    m = m[0] if c.get("unbatched") else m
    return m.requires_grad_() if kind == "float" else m


def run_case(c, dt):
    m = make(c, dt)
    kind = c["kind"]
    # the encoder side (src, memory) has S positions, the decoder side T
    if kind == "enc":
        a, b = seq(c, S, dt), None
    elif kind == "tf":
        a, b = seq(c, S, dt), seq(c, T, dt)
    else:
        a, b = seq(c, T, dt), seq(c, S, dt)
    mk = {}
    if c.get("src_mask"):
        mk["src_mask"] = attn_mask(c["src_mask"], S, S, dt)
    if c.get("tgt_mask"):
        mk["tgt_mask"] = attn_mask(c["tgt_mask"], T, T, dt)
    if c.get("memory_mask"):
        mk["memory_mask"] = attn_mask(c["memory_mask"], T, S, dt)
    def bool_beside(name):
        return c.get(name) == "bool"
    if c.get("src_kpm"):
        mk["src_kpm"] = kpm(c, S, c["src_kpm"], dt, bool_beside("src_mask"))
    if c.get("tgt_kpm"):
        mk["tgt_kpm"] = kpm(c, T, c["tgt_kpm"], dt, bool_beside("tgt_mask"))
    if c.get("mem_kpm"):
        mk["mem_kpm"] = kpm(c, S, c["mem_kpm"], dt, bool_beside("memory_mask"))
    g = mk.get
    if kind == "enc":
        y = m(a, mask=g("src_mask"), src_key_padding_mask=g("src_kpm"))
    elif kind == "tf":
        y = m(a, b, src_mask=g("src_mask"), tgt_mask=g("tgt_mask"),
              memory_mask=g("memory_mask"), src_key_padding_mask=g("src_kpm"),
              tgt_key_padding_mask=g("tgt_kpm"), memory_key_padding_mask=g("mem_kpm"))
    else:
        y = m(a, b, tgt_mask=g("tgt_mask"), memory_mask=g("memory_mask"),
              tgt_key_padding_mask=g("tgt_kpm"), memory_key_padding_mask=g("mem_kpm"))
    gy = torch.randn(y.shape, dtype=torch.float64).to(dt)
    (gy * y).sum().backward()
    t = {"a": a}
    if b is not None:
        t["b"] = b
    for k, v in mk.items():
        t[k] = v.to(torch.uint8) if v.dtype == torch.bool else v
        if v.requires_grad and v.grad is not None:
            t["d" + k] = v.grad
    t.update(g=gy, y=y, da=a.grad)
    if b is not None:
        t["db"] = b.grad
    sd = m.state_dict()
    named = dict(m.named_parameters())
    for key, val in sd.items():
        t["p." + key] = val
        t["dp." + key] = named[key].grad
    cfg = [c.get(k, False) for k in ("batch_first", "norm_first", "gelu", "unbatched", "norm")]
    cfg += [c.get("layers", 1), c.get("dec_layers", 0)]
    meta = {"kind": kind, "cfg": " ".join(str(int(v)) for v in cfg),
            "params": ",".join(sd.keys())}
    return t, meta


def main():
    torch.manual_seed(SEED)
    tensors, meta = {}, {}
    i = 0
    for cases in (CASES, FKPM_CASES):
        for name, dt in DTYPES.items():
            for case in cases:
                t, md = run_case(case, dt)
                p = "case%d." % i
                for k, v in t.items():
                    tensors[p + k] = v.detach().contiguous()
                for k, v in md.items():
                    meta[p + k] = v
                meta[p + "dtype"] = name
                i += 1
    meta["cases"] = str(i)
    write_safetensors(OUT, tensors, meta)


if __name__ == "__main__":
    main()
