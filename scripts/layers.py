#!/usr/bin/env python3
"""
layers.py - checks the shape of src/, tools/ and sim/ (docs/design.md,
"Shape"), twice:

- includes: each folder includes only the folders below it (the order in
  LAYERS; BESIDE for libzeus, the Slurm plugin, the zeus tool and the
  simulators), and no include circle exists between files anywhere. A
  file's module is its name without .c/.h (x.c and x.h are one module).
- symbols (with --build DIR): each static library of src/ (and the objects
  of the programs built from tools/, sim/ and the rest of src/) takes, by
  its undefined symbols (`nm`), only what its own folder or the folders its
  includes may reach define: a header can stay clean while a table names a
  function of the layer above, and only the linker sees that.

Prints every offence, each exception it allowed (EXCEPTIONS) and a summary
line per check; exits 1 on any offence. With --graph, prints each folder's
files and arrows as well.

    layers.py [SRC] [--build DIR] [--graph]

Run by the unit suite (tests/unit/meson.build: "layers", with the build
directory) and by the black-box suite (tests/integration/test_layout.py,
includes only).
"""
import os
import re
import subprocess
import sys

# bottom up; a folder may include (and take symbols from) those before it
# and itself. Folders on the same rung (overrides, privsep) may not reach
# each other. os/ holds the platform seams' bodies (*_posix.c, *_win.c);
# their interfaces are common/'s headers (and they use struct zerr), so
# os/ sits just above common/, and nothing of common/ may call into it.
LAYERS = [
    ["common"],
    ["os"],
    ["devices"],
    ["overrides", "privsep"],
    ["node"],
    ["access"],
    ["http"],
    ["api"],
    ["zeusd"],
]
# Beside the daemon: folder -> the highest daemon folder it stands on.
# libzeus (src/lib) on common/, os/ and devices/; the Slurm plugin and the zeus
# tool (tools/) on common/ and libzeus's public interface (its headers in
# include/zeus, its zeus_* functions: PUBLIC); the simulators (sim/) on
# devices/ for the ABI declarations they implement (nvml_api.h,
# amdsmi_api.h), and they link nothing of ours.
BESIDE = {"lib": "devices", "slurm": "common", "tools": "common",
          "sim": "devices"}
# who may use libzeus's public functions, and what they are
PUBLIC = {"lib": re.compile(r"zeus_")}
ON_PUBLIC = {"slurm": ["lib"], "tools": ["lib"]}
# Folders outside src/ that are checked as if they were in it.
OUTSIDE = ["tools", "sim"]

# Symbols a library may take against the order, each with its reason.
# Printed on every run; keep it empty or short.
EXCEPTIONS = {
    # (taking folder, defining folder, symbol): "why",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def rung(folder):
    for i, names in enumerate(LAYERS):
        if folder in names:
            return i
    if folder in BESIDE:
        return None
    raise SystemExit(f"layers.py: folder {named(folder)} is in no layer")


def allowed(f, g, sym=None):
    """may folder f include (sym None) or take sym from folder g?"""
    if f == g:
        return True
    if f in BESIDE:
        if g in ON_PUBLIC.get(f, ()):
            # the public headers live in include/, not src/: an include of
            # src/lib is private; a symbol must be a public one
            return sym is not None and bool(PUBLIC[g].match(sym))
        return rung(g) is not None and rung(g) <= rung(BESIDE[f])
    if g in BESIDE:
        return False
    return rung(g) < rung(f)


def named(folder):
    """how a folder is named in messages: src/common, tools"""
    return folder if folder in OUTSIDE else f"src/{folder}"


def folders(src):
    """{folder name: its directory}: src/'s folders, and tools/ and sim/
    where they stand next to src/"""
    out = {}
    for name in sorted(os.listdir(src)):
        d = os.path.join(src, name)
        if os.path.isdir(d):
            out[name] = d
    for name in OUTSIDE:
        d = os.path.join(src, "..", name)
        if name not in out and os.path.isdir(d):
            out[name] = os.path.normpath(d)
    return out


def modules(dirs):
    """{module 'folder/name': set of modules it includes}"""
    deps = {}
    for folder, d in dirs.items():
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
                g, rest = inc.split("/", 1)
                if g not in dirs or \
                        not os.path.exists(os.path.join(dirs[g], rest)):
                    continue  # a system, public or generated header
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
            if not allowed(f, g):
                bad.append(f"{mod} -> {t}: {named(f)} may not include "
                           f"{named(g)}")
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


# --- symbols -----------------------------------------------------------------

def nm(path):
    """[(object, symbol, type)] of a .o or .a, global symbols only"""
    r = subprocess.run(["nm", "-g", "-P", "-A", path], capture_output=True,
                       text=True, check=True)
    out = []
    for line in r.stdout.splitlines():
        where, _, rest = line.rpartition(": ")
        parts = rest.split()
        if len(parts) < 2:
            continue
        m = re.match(r".*\[(.*)\]$", where)
        out.append((m.group(1) if m else where, parts[0], parts[1]))
    return out


def units(build, dirs):
    """[(unit, folder, object, source)]: the objects to check. A static
    library's members are its folder's own sources (libzeus.a's members
    taken from common/ and devices/ are checked in their own libraries); a
    program's or shared module's loose objects are named by meson after
    their source's path from the meson.build that built them."""
    root = os.path.dirname(os.path.normpath(dirs["common"]))
    root = os.path.dirname(root)
    sources = {}
    for folder, d in dirs.items():
        for f in os.listdir(d):
            if f.endswith(".c"):
                sources[os.path.join(d, f)] = folder
    out, seen = [], set()
    archives, loose = [], []
    for top, subdirs, files in os.walk(build):
        subdirs.sort()
        rel = os.path.relpath(top, build)
        for f in sorted(files):
            if f.endswith(".a") and rel.split(os.sep)[0] == "src":
                archives.append((rel, f))
            elif f.endswith(".o") and top.endswith(".p") and \
                    not top.endswith(".a.p"):
                loose.append((rel, f))
    for rel, f in archives:
        folder = rel.split(os.sep)[1] if len(rel.split(os.sep)) > 1 else ""
        if folder not in dirs:
            continue
        path = os.path.join(build, rel, f)
        for obj in sorted({o for o, _, _ in nm_cache(path)}):
            src = os.path.join(dirs[folder], os.path.basename(obj)[:-2])
            if src in sources:
                out.append((f, folder, (path, obj), src))
                seen.add(src)
    for rel, f in loose:
        target_dir = os.path.join(root, os.path.dirname(rel))
        unit = os.path.basename(rel)[:-2]
        for src, folder in sources.items():
            name = os.path.relpath(src, target_dir).replace(os.sep, "_")
            if name + ".o" == f and src not in seen:
                out.append((unit, folder, (os.path.join(build, rel, f),
                                           None), src))
                seen.add(src)
    return out


_NM = {}


def nm_cache(path):
    if path not in _NM:
        _NM[path] = nm(path)
    return _NM[path]


def symbols(build, dirs):
    """(offences, exceptions used, {unit: count}, units checked)"""
    us = units(build, dirs)
    owner = {}
    for unit, folder, (path, obj), src in us:
        for o, sym, t in nm_cache(path):
            if (obj is None or o == obj) and t not in "Uwv":
                owner.setdefault(sym, set()).add(folder)
    bad, excused, per_unit = [], [], {}
    for unit, folder, (path, obj), src in us:
        per_unit.setdefault(unit, 0)
        for o, sym, t in nm_cache(path):
            if (obj is not None and o != obj) or t != "U":
                continue
            by = owner.get(sym, set())
            if not by or folder in by or any(allowed(folder, g, sym)
                                             for g in by):
                continue
            for g in sorted(by):
                if (folder, g, sym) in EXCEPTIONS:
                    excused.append((unit, folder, g, sym))
                    continue
                per_unit[unit] += 1
                bad.append(f"{unit}: {named(folder)}/"
                           f"{os.path.basename(src)} takes {sym} from "
                           f"{named(g)}")
    return bad, excused, per_unit, us


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("-")]
    build = None
    if "--build" in argv:
        build = argv[argv.index("--build") + 1]
        args = [a for a in args if a != build]
    src = args[0] if args else \
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    dirs = folders(src)
    deps = modules(dirs)
    bad = upward(deps)
    for c in circles(deps):
        bad.append("include circle among: " + ", ".join(c))
    if "--graph" in argv:
        for folder in sorted({m.split("/")[0] for m in deps}):
            mods = [m for m in deps if m.split("/")[0] == folder]
            files = [f for f in os.listdir(dirs[folder])
                     if f.endswith((".c", ".h"))]
            arrows = sum(len(deps[m]) for m in mods)
            print(f"{named(folder)}: {len(files)} files, {len(mods)} modules, "
                  f"{arrows} arrows")
    for line in bad:
        print(line)
    n = sum(len(t) for t in deps.values())
    print(f"layers: {len(deps)} modules, {n} arrows, {len(bad)} offences")
    status = 1 if bad else 0
    if build is not None:
        sbad, excused, per_unit, us = symbols(build, dirs)
        if not us:
            print(f"layers: no objects of ours under {build}")
            return 1
        for line in sbad:
            print(line)
        for unit, f, g, sym in excused:
            print(f"{unit}: {named(f)} takes {sym} from {named(g)}: "
                  f"exception: "
                  f"{EXCEPTIONS[(f, g, sym)]}")
        taken = ", ".join(f"{u} {c}" for u, c in sorted(per_unit.items())
                          if c)
        print(f"layers: {len(per_unit)} libraries and programs, "
              f"{len(us)} objects, {len(sbad)} symbols taken against the "
              f"order{' (' + taken + ')' if taken else ''}, "
              f"{len(excused)} exceptions")
        if sbad:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
