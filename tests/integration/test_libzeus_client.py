"""Every call of libzeus's zeusd client (include/zeus/client.h), through
the C program client_calls (tests/integration/client_calls.c), against
simulated daemons: over UDS and TCP, with auth on (whoami, a token without
gpu-control: 403), and with gpu-control and cpu-read disabled (404). The
program checks each answer; this file then checks, through the
simulator's call log (ZEUS_SIM_LOG) and plain HTTP, that the writes reached
the simulated driver with the right values, and only those.

CLIENT_CALLS_WRAPPER (e.g. "valgrind --error-exitcode=9 --leak-check=full
--errors-for-leak-kinds=definite") runs the program under a tool.
"""
import os
import subprocess
import time

import pytest

from conftest import BUILD
from simutil import SimLog
from zeushelp import token

CLIENT_CALLS = BUILD / "client_calls"
GROUPS = ["gpu-control", "gpu-read", "cpu-read"]

# What client_calls writes, per GPU, in order (successful calls only).
RESETS = [("nvmlDeviceResetGpuLockedClocks", []),
          ("nvmlDeviceResetMemoryLockedClocks", [])]
CLOCKS = [("nvmlDeviceSetPersistenceMode", ["1"]),
          ("nvmlDeviceSetPersistenceMode", ["0"]),
          ("nvmlDeviceSetGpuLockedClocks", ["510", "1110"]),
          ("nvmlDeviceSetMemoryLockedClocks", ["520", "1220"])] + RESETS
EXPECTED_WRITES = {
    0: CLOCKS,
    1: [("nvmlDeviceSetPowerManagementLimit", ["250000"]),
        ("nvmlDeviceSetPowerManagementLimit", ["400000"])] + CLOCKS + RESETS,
}


@pytest.fixture
def simlog(tmp_path):
    return SimLog(tmp_path / "sim.log")


def run_calls(d, token=None, sub=None):
    """Runs client_calls against daemon d; returns its stdout."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ZEUSD_", "CLIENT_CALLS_"))}
    if d.mode == "uds":
        env["ZEUSD_SOCK_PATH"] = d.sock
    else:
        env["ZEUSD_HOST_PORT"] = f"{d.host}:{d.port}"
    if token is not None:
        env["ZEUSD_TOKEN"] = token
    if sub is not None:
        env["CLIENT_CALLS_SUB"] = sub
    wrap = os.environ.get("CLIENT_CALLS_WRAPPER", "").split()
    r = subprocess.run([*wrap, str(CLIENT_CALLS)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, \
        f"client_calls failed:\n{r.stdout}\n{r.stderr}\n{d.logs()}"
    assert "all " in r.stdout and "FAIL" not in r.stdout
    # UBSan reports without failing the exit status.
    assert "runtime error" not in r.stderr, r.stderr
    return r.stdout


def writes_by_gpu(simlog):
    """{gpu: [(fn, args)]} of the successful writes, in call order."""
    out = {}
    for c in simlog.calls():
        if c.fn.startswith(("nvmlDeviceSet", "nvmlDeviceReset")) and \
                c.rc == "SUCCESS":
            out.setdefault(c.gpu, []).append((c.fn, c.args))
    return out


@pytest.fixture
def key(tmp_path):
    path = tmp_path / "key"
    path.write_bytes(b"client calls key\n")
    return path


@pytest.mark.skipif(not CLIENT_CALLS.exists(),
                    reason="client_calls not built")
def test_every_call(start, mode, simlog):
    d = start(mode, env={"ZEUS_SIM_LOG": str(simlog.path)})
    out = run_calls(d)
    if mode == "tcp":
        assert "ok whoami without auth: 404" in out
    else:
        assert "ok whoami on the Unix socket: sub 'unix:root'" in out
    assert "ok set_gpu_locked_clocks min > max: 400" in out
    assert writes_by_gpu(simlog) == EXPECTED_WRITES
    # The refused writes never reached the driver, or the driver refused.
    # (The start-up capability probe asks the clock tables' sizes first:
    # INSUFFICIENT_SIZE is the expected answer there.)
    bad = [c for c in simlog.calls() if c.rc != "SUCCESS" and not (
        c.rc == "INSUFFICIENT_SIZE" and c.fn.startswith(
            "nvmlDeviceGetSupported"))]
    assert all(c.fn in ("nvmlDeviceSetPowerManagementLimit",
                        "nvmlDeviceSetGpuLockedClocks") for c in bad), bad
    # The daemon's own view after the run: everything back as it was.
    assert d.get("/gpu/get_persistence_mode").json() == \
        {str(i): {"enabled": False} for i in range(4)}
    assert d.get("/gpu/get_power_limit?gpu_ids=1").json() == \
        {"1": {"power_limit_mw": 400000}}


@pytest.mark.skipif(not CLIENT_CALLS.exists(),
                    reason="client_calls not built")
def test_every_call_with_auth(start, key, simlog):
    d = start("uds", args=["--signing-key-path", str(key)],
              env={"ZEUS_SIM_LOG": str(simlog.path)})
    exp = int(time.time()) + 3600
    out = run_calls(d, token(key, "bob", GROUPS, exp), sub="bob")
    assert "ok whoami: sub 'bob' scopes 0x7 exp set" in out
    assert writes_by_gpu(simlog) == EXPECTED_WRITES


@pytest.mark.skipif(not CLIENT_CALLS.exists(),
                    reason="client_calls not built")
def test_read_only_token_is_refused_writes(start, key, simlog):
    d = start("tcp", args=["--signing-key-path", str(key)],
              env={"ZEUS_SIM_LOG": str(simlog.path)})
    out = run_calls(d, token(key, scopes=["gpu-read", "cpu-read"]),
                    sub="alice")
    assert "ok whoami: sub 'alice' scopes 0x6 exp none" in out
    assert out.count("ok denied ") == 7
    assert writes_by_gpu(simlog) == {}


@pytest.mark.skipif(not CLIENT_CALLS.exists(),
                    reason="client_calls not built")
def test_disabled_groups_are_404(start, simlog):
    d = start("uds", args=["--enable", "gpu-read"],
              env={"ZEUS_SIM_LOG": str(simlog.path)})
    out = run_calls(d)
    assert out.count("ok denied ") == 7
    assert "ok cpu denied energy" in out
    assert "ok cpu stream denied" in out
    assert writes_by_gpu(simlog) == {}
