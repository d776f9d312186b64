"""Exports torch 1.13's module holding the state dict tapegrad saved, with
torch.onnx.export at opset 17 on the several inputs of an ONNX export case
(tests/test_onnx_inputs.c), as a case of its own for run.mjs:

    python3 tests/onnx/torch_inputs.py STATE.safetensors NAME WHAT

run in the case folder.  NAME.json lists the inputs (names, shapes, types,
files) and the expected output; WHAT is "mha heads=H [batch_first]",
"tel heads=H [norm_first] [batch_first]" or "LSTM" / "GRU" / "RNN_TANH"
[batch_first]; the sizes come from the state dict.  Writes NAME_torch.onnx
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
    def __init__(self, state, heads, batch_first):
        super().__init__()
        e = state["out_proj.weight"].shape[0]
        kdim = state["k_proj_weight"].shape[1] if "k_proj_weight" in state else e
        vdim = state["v_proj_weight"].shape[1] if "v_proj_weight" in state else e
        self.m = torch.nn.MultiheadAttention(e, heads, bias="in_proj_bias" in state,
                                             kdim=kdim, vdim=vdim, batch_first=batch_first)
        self.m.load_state_dict(state)

    def forward(self, q, k, v):
        return self.m(q, k, v, need_weights=False)[0]


class Encoder(torch.nn.Module):
    def __init__(self, state, heads, norm_first, batch_first):
        super().__init__()
        d = state["linear1.weight"].shape[1]
        self.m = torch.nn.TransformerEncoderLayer(
            d, heads, dim_feedforward=state["linear1.weight"].shape[0], dropout=0.1,
            norm_first=norm_first, batch_first=batch_first)
        self.m.load_state_dict(state)

    def forward(self, src, mask=None, kpm=None):
        if mask is not None and mask.dtype == torch.uint8:
            mask = mask.bool()
        if kpm is not None:
            kpm = kpm.bool()
        return self.m(src, src_mask=mask, src_key_padding_mask=kpm)


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


def module(what, state):
    words = what.split()
    opts = {w.split("=")[0]: (w.split("=")[1] if "=" in w else True) for w in words[1:]}
    bf = bool(opts.get("batch_first"))
    if words[0] == "mha":
        return MHA(state, int(opts["heads"]), bf)
    if words[0] == "tel":
        return Encoder(state, int(opts["heads"]), bool(opts.get("norm_first")), bf)
    return Recurrent(state, words[0], bf)


def main():
    state_path, name, what = sys.argv[1:4]
    state, _ = read_safetensors(state_path)
    case = json.load(open(name + ".json"))
    xs = [torch.from_numpy(np.fromfile(i["file"], dtype=DTYPES[i["type"]])
                           .reshape(i["shape"])) for i in case["inputs"]]
    m = module(what, state).eval()
    with torch.no_grad():
        torch.onnx.export(m, tuple(xs), name + "_torch.onnx", opset_version=17,
                          input_names=[i["name"] for i in case["inputs"]],
                          output_names=["output"])
    keep = {k: case[k] for k in ("inputs", "output_shape", "rtol", "atol")}
    json.dump(keep, open(name + "_torch.json", "w"))
    shutil.copyfile(name + ".out.f32", name + "_torch.out.f32")
    print(f"ok   {name}_torch.onnx written by torch.onnx.export ({what})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
