"""Exports torch 1.13's module holding the state dict tapegrad saved, with
torch.onnx.export at opset 17 on the several inputs of an ONNX export case
(tests/test_onnx_inputs.c), as a case of its own for run.mjs:

    python3 tests/onnx/torch_inputs.py STATE.safetensors NAME WHAT

run in the case folder.  NAME.json lists the inputs (names, shapes, types,
files) and the expected output; WHAT is "mha heads=H [batch_first]
[weights [per_head]]" (the inputs query, key, value, key_padding_mask,
attn_mask by name; with weights the attention weights, averaged or per
head, are the second output, named as NAME.json's "extra_outputs"),
"LSTM" / "GRU" / "RNN_TANH" [batch_first], or for the Transformer family
"tel" (TransformerEncoderLayer), "te" (TransformerEncoder), "tdl"
(TransformerDecoderLayer), "td" (TransformerDecoder) or "tf" (Transformer)
with "heads=H [norm_first] [batch_first] [gelu]"; the sizes, the numbers
of layers and whether a stack has a final norm come from the state dict.
The inputs of the Transformer family are passed by the names NAME.json
gives them, torch's argument names ("src_mask", "memory",
"memory_key_padding_mask"), so that an input left out is None.  Writes NAME_torch.onnx
and NAME_torch.json (NAME.json's inputs, output and tolerances) with a
copy of NAME.out.f32, tapegrad's output, as NAME_torch.out.f32, so that
run.mjs requires torch's graph to give tapegrad's output on the same
inputs.  u8 masks are turned into bool inside the exported module (a Cast
in torch's graph), as torch takes bool masks."""
import json
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from stfile import read_safetensors  # noqa: E402

DTYPES = {"float32": np.float32, "uint8": np.uint8, "int64": np.int64, "int32": np.int32}


class MHA(torch.nn.Module):
    def __init__(self, state, heads, batch_first, names, weights, per_head):
        super().__init__()
        self.names, self.weights, self.per_head = names, weights, per_head
        e = state["out_proj.weight"].shape[0]
        kdim = state["k_proj_weight"].shape[1] if "k_proj_weight" in state else e
        vdim = state["v_proj_weight"].shape[1] if "v_proj_weight" in state else e
        self.m = torch.nn.MultiheadAttention(e, heads, bias="in_proj_bias" in state,
                                             kdim=kdim, vdim=vdim, batch_first=batch_first)
        self.m.load_state_dict(state)

    def forward(self, *xs):
        kw = {}
        for name, x in zip(self.names, xs):
            kw[name] = x.bool() if x.dtype == torch.uint8 else x
        out = self.m(need_weights=self.weights, average_attn_weights=not self.per_head, **kw)
        return out if self.weights else out[0]


def layer_kw(state, prefix, heads, opts):
    """The keyword arguments of a Transformer layer whose keys begin with
    prefix."""
    return dict(d_model=state[prefix + "linear1.weight"].shape[1], nhead=heads,
                dim_feedforward=state[prefix + "linear1.weight"].shape[0], dropout=0.1,
                activation="gelu" if opts.get("gelu") else "relu",
                norm_first=bool(opts.get("norm_first")),
                batch_first=bool(opts.get("batch_first")))


def count(state, prefix):
    """The number of layers of the stack whose keys begin with prefix."""
    return 1 + max(int(k[len(prefix):].split(".")[0]) for k in state if k.startswith(prefix))


def no_fast_path(m):
    """Turns off torch 1.13's eval fast paths (the fused encoder layer and
    nested tensors), which torch.onnx cannot export; the numbers are the
    same."""
    for sub in m.modules():
        if isinstance(sub, torch.nn.TransformerEncoderLayer):
            sub.activation_relu_or_gelu = 0
        if isinstance(sub, torch.nn.TransformerEncoder):
            sub.enable_nested_tensor = False


class Family(torch.nn.Module):
    """TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer,
    TransformerDecoder or Transformer, called with the graph inputs by
    name."""

    def __init__(self, kind, state, heads, opts, names):
        super().__init__()
        nn = torch.nn
        if kind == "tf":
            kw = layer_kw(state, "encoder.layers.0.", heads, opts)
            self.m = nn.Transformer(num_encoder_layers=count(state, "encoder.layers."),
                                    num_decoder_layers=count(state, "decoder.layers."), **kw)
        elif kind == "tel":
            self.m = nn.TransformerEncoderLayer(**layer_kw(state, "", heads, opts))
        elif kind == "tdl":
            self.m = nn.TransformerDecoderLayer(**layer_kw(state, "", heads, opts))
        else:
            kw = layer_kw(state, "layers.0.", heads, opts)
            norm = nn.LayerNorm(kw["d_model"]) if "norm.weight" in state else None
            n = count(state, "layers.")
            if kind == "te":
                self.m = nn.TransformerEncoder(nn.TransformerEncoderLayer(**kw), n, norm,
                                               enable_nested_tensor=False)
            else:
                self.m = nn.TransformerDecoder(nn.TransformerDecoderLayer(**kw), n, norm)
        self.m.load_state_dict(state)
        no_fast_path(self.m)
        self.names = names

    def forward(self, *xs):
        kw = {}
        for name, x in zip(self.names, xs):
            kw[name] = x.bool() if x.dtype == torch.uint8 else x
        return self.m(**kw)


class Recurrent(torch.nn.Module):
    def __init__(self, state, kind, batch_first):
        super().__init__()
        layers = 1 + max(int(k.split("_l")[1].split("_")[0]) for k in state)
        kw = dict(input_size=state["weight_ih_l0"].shape[1],
                  hidden_size=state["weight_hh_l0"].shape[1], num_layers=layers,
                  bias="bias_ih_l0" in state, batch_first=batch_first,
                  bidirectional="weight_ih_l0_reverse" in state)
        if kind.startswith("RNN"):
            self.m = torch.nn.RNN(nonlinearity="relu" if kind == "RNN_RELU" else "tanh", **kw)
        else:
            self.m = getattr(torch.nn, kind)(**kw)
        self.m.load_state_dict(state)
        self.lstm = kind == "LSTM"

    def forward(self, x, h0, c0=None):
        return self.m(x, (h0, c0) if self.lstm else h0)[0]


def module(what, state, names):
    words = what.split()
    opts = {w.split("=")[0]: (w.split("=")[1] if "=" in w else True) for w in words[1:]}
    bf = bool(opts.get("batch_first"))
    if words[0] == "mha":
        return MHA(state, int(opts["heads"]), bf, names, bool(opts.get("weights")),
                   bool(opts.get("per_head")))
    if words[0] in ("tel", "te", "tdl", "td", "tf"):
        return Family(words[0], state, int(opts["heads"]), opts, names)
    return Recurrent(state, words[0], bf)


def main():
    state_path, name, what = sys.argv[1:4]
    state, _ = read_safetensors(state_path)
    case = json.load(open(name + ".json"))
    xs = [torch.from_numpy(np.fromfile(i["file"], dtype=DTYPES[i["type"]])
                           .reshape(i["shape"])) for i in case["inputs"]]
    m = module(what, state, [i["name"] for i in case["inputs"]]).eval()
    with torch.no_grad():
        torch.onnx.export(m, tuple(xs), name + "_torch.onnx", opset_version=17,
                          input_names=[i["name"] for i in case["inputs"]],
                          output_names=["output"] + [e["name"] for e in
                                                     case.get("extra_outputs", [])])
    keep = {k: case[k] for k in ("inputs", "output_shape", "rtol", "atol", "extra_outputs")
            if k in case}
    json.dump(keep, open(name + "_torch.json", "w"))
    shutil.copyfile(name + ".out.f32", name + "_torch.out.f32")
    print(f"ok   {name}_torch.onnx written by torch.onnx.export ({what})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
