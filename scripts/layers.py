#!/usr/bin/env python3
"""
layers.py - checks the shape of src/: each folder includes only the folders
below it (the order in LAYERS, docs/design.md "Shape"), and no include
circle exists between files anywhere in the tree. A file's module is its
name without .c/.h (x.c and x.h are one module). Prints every offence and
exits 1; with --graph, prints each folder's files and arrows as well.

Run by the unit suite (tests/unit/meson.build: "layers").
"""
import os
import re
import sys

# bottom up; a folder may include those before it (and itself). Folders on
# the same rung (overrides, privsep) may not include each other.
LAYERS = [
    ["common"],
    ["devices"],
    ["overrides", "privsep"],
    ["node"],
    ["access"],
    ["http"],
    ["api"],
    ["zeusd"],
]
# libzeus stands beside the daemon, on common/ and devices/ only; the Slurm
# plugin (on libzeus's public headers) on common/ only
BESIDE = {"lib": 1, "slurm": 0}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def rung(folder):
    for i, names in enumerate(LAYERS):
        if folder in names:
            return i
    if folder in BESIDE:
        return None
    raise SystemExit(f"layers.py: folder src/{folder} is in no layer")


def modules(src):
    """{module 'folder/name': set of modules it includes}"""
    deps = {}
    for folder in sorted(os.listdir(src)):
        d = os.path.join(src, folder)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if not f.endswith((".c", ".h")):
                continue
            mod = f"{folder}/{f.rsplit('.', 1)[0]}"
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                text = fh.read()
            out = deps.setdefault(mod, set())
            for inc in INCLUDE.findall(text):
                if "/" not in inc:
                    inc = f"{folder}/{inc}"
                if not os.path.exists(os.path.join(src, inc)):
                    continue  # a system or generated header
                target = inc.rsplit(".", 1)[0]
                if target != mod:
                    out.add(target)
    return deps


def upward(deps):
    bad = []
    for mod, targets in deps.items():
        f = mod.split("/")[0]
        for t in sorted(targets):
            g = t.split("/")[0]
            if f == g:
                continue
            if f in BESIDE:
                ok = rung(g) is not None and rung(g) <= BESIDE[f]
            elif g in BESIDE:
                ok = False
            else:
                ok = rung(g) < rung(f)
            if not ok:
                bad.append(f"{mod} -> {t}: src/{f} may not include src/{g}")
    return bad


def circles(deps):
    """every strongly connected set of more than one module (Tarjan)"""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(deps.get(v, ())):
            if w not in deps:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(deps):
        if v not in index:
            visit(v)
    return found


def main(argv):
    src = argv[1] if len(argv) > 1 and not argv[1].startswith("-") else \
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    deps = modules(src)
    bad = upward(deps)
    for c in circles(deps):
        bad.append("include circle among: " + ", ".join(c))
    if "--graph" in argv:
        for folder in sorted({m.split("/")[0] for m in deps}):
            mods = [m for m in deps if m.split("/")[0] == folder]
            files = [f for f in os.listdir(os.path.join(src, folder))
                     if f.endswith((".c", ".h"))]
            arrows = sum(len(deps[m]) for m in mods)
            print(f"src/{folder}: {len(files)} files, {len(mods)} modules, "
                  f"{arrows} arrows")
    for line in bad:
        print(line)
    n = sum(len(t) for t in deps.values())
    print(f"layers: {len(deps)} modules, {n} arrows, {len(bad)} offences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
