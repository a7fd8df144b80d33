"""The shape of src/ (docs/design.md, "Shape"): each folder includes only
the folders below it, and no include circle exists anywhere. The checker is
scripts/layers.py; it is run on the tree, and on small trees made here to
show that it catches what it is for."""
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
LAYERS = os.path.join(ROOT, "scripts", "layers.py")


def run(src):
    return subprocess.run([sys.executable, LAYERS, src], capture_output=True,
                          text=True, timeout=60)


def write(root, path, text):
    p = root / path
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_tree_has_no_upward_include_and_no_circle():
    r = run(os.path.join(ROOT, "src"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 offences" in r.stdout


def test_checker_catches_an_upward_include(tmp_path):
    write(tmp_path, "common/a.h", "#include \"http/b.h\"\n")
    write(tmp_path, "http/b.h", "\n")
    r = run(str(tmp_path))
    assert r.returncode == 1
    assert "common/a -> http/b" in r.stdout


def test_checker_catches_a_circle_inside_a_folder(tmp_path):
    write(tmp_path, "http/a.c", "#include \"http/b.h\"\n")
    write(tmp_path, "http/a.h", "\n")
    write(tmp_path, "http/b.c", "#include \"a.h\"\n")
    write(tmp_path, "http/b.h", "\n")
    r = run(str(tmp_path))
    assert r.returncode == 1
    assert "include circle among: http/a, http/b" in r.stdout


def test_checker_allows_downward_includes(tmp_path):
    write(tmp_path, "zeusd/m.c", "#include \"api/h.h\"\n#include <stdio.h>\n")
    write(tmp_path, "api/h.h", "#include \"common/e.h\"\n")
    write(tmp_path, "common/e.h", "\n")
    write(tmp_path, "lib/x.c", "#include \"devices/g.h\"\n")
    write(tmp_path, "devices/g.h", "\n")
    r = run(str(tmp_path))
    assert r.returncode == 0, r.stdout


def test_libzeus_does_not_reach_the_daemon(tmp_path):
    write(tmp_path, "lib/x.c", "#include \"node/n.h\"\n")
    write(tmp_path, "node/n.h", "\n")
    r = run(str(tmp_path))
    assert r.returncode == 1
    assert "src/lib may not include src/node" in r.stdout
