"""zeusd stays up whatever API groups it serves and whatever devices it has.

`--enable cpu-read` alone and one GET /cpu/stream_power killed the network
process (SIGSEGV: a stream sample noted GPU state on a node without a GPU
backend), and zeusd exited 1. That class, a route reaching code whose
devices or group the daemon was not started with, is closed here by
starting zeusd with every non-empty set of API groups (15), with and
without --gpu-leases, and sending every route (routesweep.py: reads,
writes, leases, /metrics, both streams held open a moment); after each
route the daemon must still answer, and it must stop with status 0 (the
fixtures check that). The same with zero GPUs and with zero CPUs.

Under --gpu-leases the sweep runs a second time as nobody, an ordinary
user, so writes take leases (root takes none) and /gpu/release ends them.
"""
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import linux_only
from routesweep import sweep
from zeushelp import as_user

GROUPS = ["gpu-control", "gpu-read", "cpu-read", "metrics"]
SETS = [",".join(c) for n in range(1, len(GROUPS) + 1)
        for c in itertools.combinations(GROUPS, n)]
HERE = Path(__file__).resolve().parent


def sweep_as_nobody(d):
    subprocess.run([*as_user(65534), sys.executable,
                    str(HERE / "routesweep.py"), d.sock],
                   check=True, timeout=60)


def run(start_public, args, env=None, leases_taken=False):
    d = start_public(args=args, env=env)
    sweep(d.sock)
    if "--gpu-leases" in args:
        sweep_as_nobody(d)
        sweep(d.sock)   # root again, after another user's leases
    logs = d.logs()
    assert "network_process_died" not in logs
    if leases_taken:    # the sweep did reach the lease code
        assert "event=gpu_lease_taken gpu=0 uid=65534" in logs
        assert "event=gpu_lease_release gpu=0 uid=65534" in logs


@linux_only("unix-socket")
@pytest.mark.parametrize("leases", [False, True], ids=["plain", "leases"])
@pytest.mark.parametrize("groups", SETS)
def test_every_route_every_group_set(start_public, groups, leases):
    run(start_public, ["--enable", groups] +
        (["--gpu-leases"] if leases else []),
        leases_taken=leases and "gpu-control" in groups)


@linux_only("unix-socket")
@pytest.mark.parametrize("leases", [False, True], ids=["plain", "leases"])
def test_every_route_without_gpus(start_public, leases):
    run(start_public, ["--gpu-leases"] if leases else [],
        env={"ZEUS_SIM_GPUS": "0"})


@linux_only("unix-socket")
@pytest.mark.parametrize("leases", [False, True], ids=["plain", "leases"])
def test_every_route_without_cpus(start_public, leases):
    """An empty powercap tree: cpu-read served over zero packages."""
    empty = Path(start_public.base) / "no-rapl"
    empty.mkdir(exist_ok=True)
    run(start_public, ["--rapl-dir", str(empty)] +
        (["--gpu-leases"] if leases else []), leases_taken=leases)


@linux_only("rapl")
def test_cpu_stream_alone_over_tcp(start):
    """The finding itself, as the Zeus client's PowerStreamingClient does
    it: cpu-read alone, a CPU stream over TCP."""
    d = start("tcp", args=["--enable", "cpu-read"])
    sweep((d.host, d.port))
    assert "network_process_died" not in d.logs()
