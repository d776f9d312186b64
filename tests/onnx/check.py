"""Validates every ONNX file of a folder with onnx's checker (full_check:
shape inference too) and, where <name>.json lists "initializers", that the
file's initializer names are exactly those; where it maps
"initializer_types" (name -> TensorProto data type, "UINT8"), that those
initializers have those types; where it maps "initializer_values" (name ->
list of numbers), that those initializers hold those values; where it lists
"ops", that the graph's nodes have exactly those op types, in order; where
it maps "attributes" (op type -> {attribute: value}), that every node of
that type has those attribute values (ints, an int or a string).

    python3 tests/onnx/check.py DIR

Prints one line per file; exit status 1 if any file fails."""
import glob
import json
import os
import sys

import onnx
import onnx.numpy_helper


def attr_value(a):
    """An attribute's value as JSON writes it: a string, a number or a list
    (of numbers or strings)."""
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (int, float)):
        return v
    return [e.decode() if isinstance(e, bytes) else e for e in v]


def check_graph(model, meta):
    """The "initializer_values", "ops" and "attributes" of meta."""
    inits = {t.name: t for t in model.graph.initializer}
    for name, want in meta.get("initializer_values", {}).items():
        if name not in inits:
            raise ValueError(f"no initializer {name}")
        got = onnx.numpy_helper.to_array(inits[name]).flatten().tolist()
        if got != want:
            raise ValueError(f"initializer {name} holds {got}, expected {want}")
    ops = [n.op_type for n in model.graph.node]
    if "ops" in meta and ops != meta["ops"]:
        raise ValueError(f"nodes {ops}, expected {meta['ops']}")
    for op, attrs in meta.get("attributes", {}).items():
        nodes = [n for n in model.graph.node if n.op_type == op]
        if not nodes:
            raise ValueError(f"no {op} node")
        for n in nodes:
            got = {a.name: attr_value(a) for a in n.attribute}
            for k, want in attrs.items():
                if got.get(k) != want:
                    raise ValueError(f"{n.name}: {k}={got.get(k)}, expected {want}")


def check(path):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    meta = os.path.splitext(path)[0] + ".json"
    if os.path.exists(meta):
        want = json.load(open(meta)).get("initializers")
        got = sorted(t.name for t in model.graph.initializer)
        if want is not None and got != sorted(want):
            raise ValueError(f"initializers {got}, expected {sorted(want)}")
        types = {t.name: onnx.TensorProto.DataType.Name(t.data_type)
                 for t in model.graph.initializer}
        for name, dt in json.load(open(meta)).get("initializer_types", {}).items():
            if types.get(name) != dt:
                raise ValueError(f"initializer {name} is {types.get(name)}, expected {dt}")
        check_graph(model, json.load(open(meta)))
    ops = sorted({n.op_type for n in model.graph.node})
    return f"opset {model.opset_import[0].version}, nodes {','.join(ops)}"


def main():
    paths = sorted(glob.glob(os.path.join(sys.argv[1], "*.onnx")))
    if not paths:
        print("no .onnx files in", sys.argv[1])
        return 1
    bad = 0
    for p in paths:
        try:
            print(f"ok   {os.path.basename(p)}: {check(p)}")
        except Exception as e:  # the checker raises several exception types
            bad += 1
            print(f"FAIL {os.path.basename(p)}: {e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
