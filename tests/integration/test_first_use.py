"""A shared node's first user (issue 45, item 1): on a node whose policy
grants each user some GPUs, `zeus measure -- CMD` measures what the node
lets that user read, says once on stderr what it left out and why, and
runs the command. It used to ask zeusd for every GPU and stop with `HTTP
403 ... not on GPU 1` (exit 1, the command never ran), and a user without
cpu-read got a 403 for the CPUs even with `--gpus 0`. Devices named
explicitly and not readable stay an error before the command runs.

zeusd says what a caller may use in GET /auth/whoami's "devices"
(docs/api.md); libzeus's monitor with a zeusd source reads it once.
"""
import json
import os

import pytest

from conftest import BUILD, linux_only
from zeushelp import request_as, run_as

ZEUS = BUILD / "zeus"
NOBODY = 65534
DAEMON = 1

POLICY = """
[[grant]]
users = ["nobody"]
scopes = ["gpu-read"]
gpus = [0]

[[grant]]
users = [1]
scopes = ["gpu-read", "cpu-read"]
gpus = [1, 2]
"""

def client_env(extra=None):
    """This environment less zeusd's own settings, and `extra`."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("ZEUSD_")}
    e.update(extra or {})
    return e


def measure(d, uid, *args):
    return run_as(uid, ZEUS, "measure", "--json", *args,
                  env=client_env({"ZEUSD_SOCK_PATH": d.sock}))


@pytest.fixture
def node(start_public):
    base = start_public.base
    (base / "policy.toml").write_text(POLICY)
    os.chmod(base / "policy.toml", 0o644)
    return start_public(["--policy-file", str(base / "policy.toml")])


@pytest.fixture
def marker(start_public):
    """A path every user may create: the command ran when it exists."""
    w = start_public.base / "w"
    w.mkdir()
    os.chmod(w, 0o777)
    return w / "ran"


def whoami(d, uid):
    status, body = request_as(d, uid, uid, "GET", "/auth/whoami")
    assert status == 200, body
    return json.loads(body)


@linux_only("unix-socket")
def test_whoami_says_which_devices(node):
    assert whoami(node, NOBODY)["devices"] == {
        "gpu-read": [0], "gpu-control": [], "cpu-read": []}
    assert whoami(node, DAEMON)["devices"] == {
        "gpu-read": [1, 2], "gpu-control": [], "cpu-read": [0, 1]}
    assert whoami(node, 0)["devices"] == {
        "gpu-read": [0, 1, 2, 3], "gpu-control": [0, 1, 2, 3],
        "cpu-read": [0, 1]}


def report(r):
    """The JSON report (the last stderr line) and the lines before it."""
    lines = r.stderr.strip().splitlines()
    return json.loads(lines[-1]), lines[:-1]


@linux_only("unix-socket")
def test_measure_what_the_node_lets_each_user_read(node, marker):
    r = measure(node, NOBODY, "--", "touch", marker)
    assert r.returncode == 0, r.stderr
    assert marker.exists()
    rep, notes = report(r)
    assert list(rep["gpu_energy_j"]) == ["0"], rep
    assert rep["cpu_energy_j"] == {}, rep
    assert sum("left out GPU 1, 2, 3" in n for n in notes) == 1, notes
    assert sum("left out CPU 0, 1" in n for n in notes) == 1, notes

    r = measure(node, DAEMON, "--", "true")
    assert r.returncode == 0, r.stderr
    rep, notes = report(r)
    assert list(rep["gpu_energy_j"]) == ["1", "2"], rep
    assert list(rep["cpu_energy_j"]) == ["0", "1"], rep
    assert sum("left out GPU 0, 3" in n for n in notes) == 1, notes
    assert not any("CPU" in n for n in notes), notes


@linux_only("unix-socket")
def test_named_devices_not_readable_stop_before_the_command(node, marker):
    for args, said in [(["--gpus", "1"], "GPU 1: zeusd's node policy"),
                       (["--gpus", "0", "--cpus", "0"],
                        "CPU 0: zeusd's node policy")]:
        r = measure(node, NOBODY, *args, "--", "touch", marker)
        assert r.returncode == 1, r.stderr
        assert said in r.stderr, r.stderr
        assert not marker.exists()
    # named and granted: measured, nothing left out is said
    r = measure(node, NOBODY, "--gpus", "0", "--cpus", "none", "--",
                "true")
    assert r.returncode == 0, r.stderr
    rep, notes = report(r)
    assert list(rep["gpu_energy_j"]) == ["0"] and notes == [], r.stderr
