#!/usr/bin/env python3
"""Writes a text file as C string constants: embed_text.py IN OUT NAME gives
OUT with `static const char *const NAME[] = {"line 1\\n", ..., NULL};`, one
string per line (ISO C compilers need only support strings of 4095 bytes).
For the HTML page of src/io/viz_html.c, kept as a real HTML file."""
import sys


def main():
    src, out, name = sys.argv[1:4]
    with open(src, encoding="utf-8") as f:
        text = f.read()
    lines = []
    for line in text.splitlines(keepends=True):
        esc = line.replace("\\", "\\\\").replace("?", "\\?").replace('"', '\\"').replace("\n", "\\n")
        lines.append('    "' + esc + '"')
    with open(out, "w", encoding="utf-8") as f:
        f.write("/* Generated from %s by scripts/embed_text.py: edit that file. */\n"
                % src.rsplit("/", 1)[-1])
        f.write("static const char *const %s[] = {\n%s\n    NULL,\n};\n"
                % (name, ",\n".join(lines) + ("," if lines else "")))


if __name__ == "__main__":
    main()
