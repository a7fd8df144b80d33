"""GPU leases and namespaces.

Pid namespaces (issue 30, item 8d): a client whose
process zeusd's pid namespace cannot see (zeusd in a container, the
client outside it) reads as pid 0 through SO_PEERCRED. Such a process
cannot be told apart from another one, named or watched by number, so it
cannot take a lease: with --gpu-leases its writes are refused (403) and
the GPU is untouched. Root never leases and is not refused. Black-box: the
real binary started in a new pid namespace (unshare), clients outside.

Network namespaces: a container given zeusd's socket file (its own
network namespace, the host's pids) is served as any client. Its
connection's socket belongs to its namespace, where the device process's
unix_diag look-up (is this connection still open?) cannot see it: every
write from such a client read as from a closed connection and was
refused, 403 (found under a real systemd, test_systemd_boot.py).
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import Zeusd
from simutil import SimLog
from zeushelp import CLIENT, Session, as_user, children, limit_mw, wait_until

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) for a pid namespace")

SET_PL = "nvmlDeviceSetPowerManagementLimit"
LIMIT = "/gpu/set_power_limit?gpu_ids=0&block=true&power_limit_mw={mw}"


def post(d, target, uid=None):
    pre = [] if uid is None else as_user(uid)
    out = subprocess.run(pre + [sys.executable, "-c", CLIENT, d.sock,
                                "POST", target], capture_output=True,
                         text=True, timeout=20, check=True).stdout
    status, _, body = out.partition("\n")
    return int(status), body.strip()


def test_client_outside_pid_namespace_cannot_lease():
    base = Path(tempfile.mkdtemp(prefix="zeusd-pidns-"))
    os.chmod(base, 0o755)
    sim = SimLog(base / "sim.log")
    d = Zeusd(base, "uds", ["--gpu-leases"],
              env={"ZEUS_SIM_LOG": str(sim.path)},
              wrapper=["unshare", "--pid", "--fork", "--mount-proc"])
    try:
        d.wait_ready()
        mark = sim.mark()
        st, body = post(d, LIMIT.format(mw=200000), uid=65534)
        assert st == 403, body
        assert "pid namespace" in body, body
        time.sleep(0.2)
        assert sim.calls(SET_PL, since=mark) == [], "the GPU was changed"
        assert "event=gpu_lease_taken" not in d.logs()
        # root: never leases, never refused
        st, body = post(d, LIMIT.format(mw=210000))
        assert st == 200, body
        assert sim.wait_for(SET_PL, since=mark)
    finally:
        # unshare --fork does not pass SIGTERM on: stop zeusd itself
        for pid in children(d.proc.pid):
            os.kill(pid, signal.SIGTERM)
        rc = d.stop()
        shutil.rmtree(base, ignore_errors=True)
    assert rc == 0, d.logs()


def test_a_client_in_another_network_namespace_writes_and_leases(
        start_public):
    """Root and a user, each in a network namespace of its own (unshare
    --net, as a container with the socket file bound in): both write; the
    user's write takes a lease, which ends with its process."""
    d = start_public(["--gpu-leases"])
    default = limit_mw(d, 1)
    out = subprocess.run(["unshare", "--net", sys.executable, "-c", CLIENT,
                          d.sock, "POST", LIMIT.format(mw=205000)],
                         capture_output=True, text=True, timeout=20,
                         check=True).stdout
    assert out.startswith("200\n"), out
    assert limit_mw(d, 0) == 205000
    job = Session(d, "nobody", prefix=["unshare", "--net"])
    try:
        st, body = job("POST", "/gpu/set_power_limit?gpu_ids=1&block=true"
                       "&power_limit_mw=215000")
        assert st == 200, body
        assert limit_mw(d, 1) == 215000
        assert "event=gpu_lease_taken gpu=1" in d.logs()
    finally:
        job.close()
    assert wait_until(lambda: limit_mw(d, 1) == default, 15), d.logs()
