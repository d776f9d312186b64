#!/usr/bin/env python3
"""Checks that the library's public calls run the public ops they are made of
on the library's behalf, so that a caller's open scope (tapegrad/scope.h)
captures the call's result and nothing else.

    python3 scripts/check_scopes.py

The rule.  A public op hands its result to the innermost scope when it is
called at library depth 0 (tg__scope_capture).  A public function that runs
another public op itself must raise the depth around it (tg__lib_enter /
tg__lib_leave): otherwise the scope captures that intermediate tensor too, the
function releases it (or hands it out as its own result, which the scope
captures once more), and tg_scope_end releases it a second time.

How it checks, from the sources alone (src/**/*.c, comments and strings
removed, macros that define functions written out): every
function definition (a static one belongs to its file) and the calls in it.
A function *captures* when it calls tg__scope_capture, or when it has no
tg__lib_enter and passes one of its own `tg_tensor **` result parameters to
a capturing call (a wrapper, which hands the scope that one result).
Starting at every public function (a TG_API prototype in include/tapegrad)
and every function that calls tg__scope_capture, it follows the calls of
each function without tg__lib_enter into the functions defined in src/,
across files, and lists each call to a capturing function whose result is
not the caller's own result parameter.  Calls through pointers (a module's
vtable) are not followed; their callers (tg_module_forward, the engine)
bracket them.  Exit status 1 when anything is listed.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAPTURE, ENTER = "tg__scope_capture", "tg__lib_enter"
# Calls that are not C functions or never reach an op.
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "_Alignof", "defined",
            "_Generic", "_Static_assert"}


def strip(src):
    """src without comments, string and character literals (kept as "")."""
    pat = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pat.sub(lambda m: '""' if m.group(0)[0] in "\"'" else " ", src)


DEF_RE = re.compile(r"^[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(((?:[^;{}()]|\([^()]*\))*)\)\s*\{",
                    re.M)
MACRO_RE = re.compile(r"^#\s*define\s+(\w+)\(([\w\s,]+)\)((?:[^\n]*\\\n)+[^\n]*)", re.M)


def invocations(src, name):
    """The argument lists of the lines that start with `name(`, each split
    at its top-level commas (an invocation may span lines)."""
    for m in re.finditer(r"^" + name + r"\(", src, re.M):
        i, depth, args, cur = m.end(), 1, [], ""
        while i < len(src) and depth:
            ch = src[i]
            depth += ch in "([{"
            depth -= ch in ")]}"
            if depth and ch == "," and depth == 1:
                args.append(cur.strip())
                cur = ""
            elif depth:
                cur += ch
            i += 1
        yield args + [cur.strip()]


def expand(src):
    """src with the functions its macros define (`#define M(k)
    int tg_##k(...) {...}`, then lines `M(eq)`; several parameters alike)
    written out after it."""
    extra = []
    for m in MACRO_RE.finditer(src):
        name, body = m.group(1), m.group(3).replace("\\\n", "\n")
        params = [p.strip() for p in m.group(2).split(",")]
        if "{" not in body:
            continue
        for args in invocations(src, name):
            if len(args) != len(params):
                continue
            text = body
            for param, arg in zip(params, args):
                text = re.sub(r"(?<!#)#\s*" + param + r"\b(?!\s*#)", '""', text)   # a string
                text = re.sub(r"\b" + param + r"\b", arg, text)
            text = re.sub(r"\s*##\s*", "", text)
            extra.append("\n".join(line.strip() for line in text.split("\n")))
    return src + "\n" + "\n".join(extra) + "\n"


class Func:
    def __init__(self, file, name, body, outs, static):
        self.file, self.name, self.body, self.outs = file, name, body, outs
        self.key = (file, name) if static else (None, name)
        self.bracketed = ENTER in body


def definitions():
    """(file, name) for static functions and (None, name) for the others ->
    Func, for every function defined in src/**/*.c."""
    defs = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "src", "**", "*.c"), recursive=True)):
        src, file = expand(strip(open(path).read())), os.path.relpath(path, ROOT)
        for m in DEF_RE.finditer(src):
            name, i, depth = m.group(1), m.end(), 1
            if name in KEYWORDS:
                continue
            while depth and i < len(src):
                depth += {"{": 1, "}": -1}.get(src[i], 0)
                i += 1
            outs = set(re.findall(r"tg_tensor\s*\*\s*\*\s*(\w+)", m.group(2)))
            static = re.match(r"\s*static\b", m.group(0)) is not None
            f = Func(file, name, src[m.end():i - 1], outs, static)
            defs.setdefault(f.key, f)
    return defs


def public_names():
    src = "".join(strip(open(h).read())
                  for h in sorted(glob.glob(os.path.join(ROOT, "include/tapegrad/*.h"))))
    return set(re.findall(r"TG_API\s+[^;(]*?\b(tg_\w+)\s*\(", src))


def calls(f, defs):
    """(the call's match, the Func it calls or None) for each call in f."""
    out = []
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", f.body):
        if m.group(1) in KEYWORDS:
            continue
        out.append((m, defs.get((f.file, m.group(1))) or defs.get((None, m.group(1)))))
    return out


def arguments(body, m):
    """The top-level argument texts of the call m."""
    args, i, depth, cur = [], m.end(), 0, ""
    while i < len(body):
        ch = body[i]
        if depth == 0 and ch in ",)":
            args.append(cur.strip())
            cur = ""
            if ch == ")":
                break
        else:
            depth += {"(": 1, ")": -1}.get(ch, 0)
            cur += ch
        i += 1
    return args


def hands_out(f, m):
    """True when the call m writes its result into one of f's own result
    parameters (a `tg_tensor **` parameter of f is passed on as it is): f hands
    that tensor out as its own result."""
    return any(a in f.outs for a in arguments(f.body, m))


def capturing(defs):
    cap = {k for k, f in defs.items() if any(m.group(1) == CAPTURE for m, _ in calls(f, defs))}
    changed = True
    while changed:
        changed = False
        for k, f in defs.items():
            if k in cap or f.bracketed:
                continue
            if any(g and g.key in cap and hands_out(f, m) for m, g in calls(f, defs)):
                cap.add(k)
                changed = True
    return cap


def check():
    defs, public = definitions(), public_names()
    cap = capturing(defs)
    for name in public:
        if (None, name) not in defs:
            raise SystemExit(f"check_scopes: no definition of the public {name} found in src/")
    # Public functions, and the functions that hand a result to the scope.
    roots = [defs[(None, n)] for n in sorted(public)]
    roots += [f for f in defs.values()
              if f.name not in public and any(m.group(1) == CAPTURE for m, _ in calls(f, defs))]
    found = {}
    for f0 in roots:
        seen, todo = set(), [(f0, (f0.name,))]
        while todo:
            f, path = todo.pop()
            if f.key in seen or f.bracketed:
                continue
            seen.add(f.key)
            for m, g in calls(f, defs):
                if g is None or g is f or g.name == CAPTURE:
                    continue
                if g.key in cap and not hands_out(f, m):
                    found.setdefault((f.file, f.name, g.name), path)
                if g.name not in public:
                    todo.append((g, path + (g.name,)))
    return found


def main():
    found = check()
    for (file, name, callee), path in sorted(found.items()):
        via = " (from " + " -> ".join(path) + ")" if len(path) > 1 else ""
        print(f"{file}: {name} calls {callee} outside tg__lib_enter/leave{via}")
    print(f"check_scopes: {len(found)} calls of capturing functions outside the library's depth")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
