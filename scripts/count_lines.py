#!/usr/bin/python3
"""Prints the lines of code of a tapegrad program and of its PyTorch twin:
lines that hold something other than blanks and comments (C: /* */ and //;
Python: # comments and docstrings), and their ratio.

    /usr/bin/python3 scripts/count_lines.py                 # the autoencoder pair
    /usr/bin/python3 scripts/count_lines.py A.c B.py        # any pair
"""
import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAIR = ("examples/autoencoder.c", "examples/autoencoder_torch.py")


def c_lines(text):
    """Line numbers that keep code once comments are removed."""
    keep, i, line, in_block, in_str = set(), 0, 1, False, None
    while i < len(text):
        ch, nxt = text[i], text[i + 1:i + 2]
        if ch == "\n":
            line += 1
        elif in_block:
            if ch == "*" and nxt == "/":
                in_block, i = False, i + 1
        elif in_str:
            keep.add(line)
            if ch == "\\":
                i += 1
            elif ch == in_str:
                in_str = None
        elif ch == "/" and nxt == "*":
            in_block, i = True, i + 1
        elif ch == "/" and nxt == "/":
            while i + 1 < len(text) and text[i + 1] != "\n":
                i += 1
        elif ch in "\"'":
            in_str = ch
            keep.add(line)
        elif not ch.isspace():
            keep.add(line)
        i += 1
    return len(keep)


def py_lines(text):
    doc = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                doc.update(range(first.lineno, first.end_lineno + 1))
    return sum(1 for n, s in enumerate(text.splitlines(), 1)
               if s.strip() and not s.strip().startswith("#") and n not in doc)


def count(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return py_lines(text) if path.endswith(".py") else c_lines(text)


def main():
    paths = sys.argv[1:] or [os.path.join(ROOT, p) for p in PAIR]
    if len(paths) != 2:
        sys.exit("usage: count_lines.py [TAPEGRAD.c PYTORCH.py]")
    a, b = count(paths[0]), count(paths[1])
    for p, n in zip(paths, (a, b)):
        print(f"{n:5d}  {os.path.relpath(p, ROOT)}")
    print(f"ratio {a / b:.2f}")


if __name__ == "__main__":
    main()
