"""Exports torch 1.13's nn.RNN / nn.LSTM / nn.GRU holding the state dict
tapegrad saved, with torch.onnx.export at opset 17, and compares its
recurrent nodes with those of tapegrad's export of the same module:

    python3 tests/onnx/torch_rnn.py STATE.safetensors OURS.onnx OUT.onnx KIND SHAPE
                                    [--batch-first] [--states]

KIND is RNN_TANH, RNN_RELU, LSTM or GRU and SHAPE the example input's
("5,2,3"); the sizes, layers, directions and bias come from the state
dict.  Writes torch's model to OUT.onnx and requires the same RNN / LSTM /
GRU nodes in the same order, with the same hidden_size, direction,
activations and linear_before_reset, and their W, R and B inputs holding
the same values (B left out by both without bias).  With --states torch's
graph gives the module's whole result, (output, h_n) or (output, (h_n,
c_n)), as the outputs "output", "h_n" and "c_n", and ours must have
the same outputs.  Exit status 1 on a difference."""
import os
import sys

import onnx
import onnx.numpy_helper
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))
from stfile import read_safetensors  # noqa: E402

RECURRENT = ("RNN", "LSTM", "GRU")


def module(kind, state, batch_first):
    layers = 1 + max(int(k.split("_l")[1].split("_")[0]) for k in state)
    kw = dict(input_size=state["weight_ih_l0"].shape[1],
              hidden_size=state["weight_hh_l0"].shape[1], num_layers=layers,
              bias="bias_ih_l0" in state, batch_first=batch_first,
              bidirectional="weight_ih_l0_reverse" in state)
    if kind.startswith("RNN"):
        m = torch.nn.RNN(nonlinearity="relu" if kind == "RNN_RELU" else "tanh", **kw)
    else:
        m = getattr(torch.nn, kind)(**kw)
    m.load_state_dict(state)
    return m.eval()


class Output(torch.nn.Module):
    """The module's output alone, without its final states."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)[0]


def nodes(model):
    """The recurrent nodes: (op type, attributes, [W, R, B values or None])."""
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    out = []
    for n in model.graph.node:
        if n.op_type not in RECURRENT:
            continue
        attrs = {}
        for a in n.attribute:
            v = onnx.helper.get_attribute_value(a)
            attrs[a.name] = v.decode() if isinstance(v, bytes) else \
                [e.decode() for e in v] if isinstance(v, list) else v
        ins = [inits.get(n.input[i]) if i < len(n.input) and n.input[i] else None
               for i in (1, 2, 3)]
        out.append((n.op_type, attrs, ins))
    return out


def main():
    state_path, ours_path, out_path, kind, shape = sys.argv[1:6]
    batch_first = "--batch-first" in sys.argv[6:]
    states = "--states" in sys.argv[6:]
    state, _ = read_safetensors(state_path)
    m = module(kind, state, batch_first)
    x = torch.zeros([int(d) for d in shape.split(",")])
    outs = ["output"]
    if states:
        outs += ["h_n", "c_n"] if kind == "LSTM" else ["h_n"]
    else:
        m = Output(m)
    torch.onnx.export(m, (x,), out_path, opset_version=17, input_names=["input"],
                      output_names=outs)
    theirs = nodes(onnx.load(out_path))
    ours = nodes(onnx.load(ours_path))
    bad = []
    got = [(o.name, [d.dim_value for d in o.type.tensor_type.shape.dim])
           for o in onnx.load(ours_path).graph.output]
    want = [(o.name, [d.dim_value for d in o.type.tensor_type.shape.dim])
            for o in onnx.load(out_path).graph.output]
    if got != want:
        bad.append(f"outputs {got}, torch's {want}")
    if [n[0] for n in ours] != [n[0] for n in theirs]:
        bad.append(f"nodes {[n[0] for n in ours]}, torch's {[n[0] for n in theirs]}")
    for k, ((op, a, w), (_, ta, tw)) in enumerate(zip(ours, theirs)):
        if a != ta:
            bad.append(f"{op} {k}: attributes {a}, torch's {ta}")
        for name, u, v in zip("WRB", w, tw):
            if (u is None) != (v is None):
                bad.append(f"{op} {k}: {name} {'missing' if u is None else 'present'}, "
                           f"torch's {'missing' if v is None else 'present'}")
            elif u is not None and (u.shape != v.shape or abs(u - v).max() > 0):
                bad.append(f"{op} {k}: {name} differs from torch's")
    for b in bad:
        print("FAIL", b)
    if not bad:
        print(f"ok   {len(ours)} node(s) {[n[0] for n in ours]} as torch's, W R B equal")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
