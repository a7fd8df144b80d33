"""Black-box tests of the `zeus` tool: measure's contract (exit status,
output, usage errors) and `zeus daemon ...`, which drives libzeus's zeusd
client against a simulated zeusd over UDS and TCP (reads, a write, SSE
streams, and errors carrying the daemon's message and status)."""
import json
import os
import subprocess

import pytest

from conftest import BUILD

ZEUS = BUILD / "zeus"


def zeus(*args, env=None, timeout=30):
    e = dict(os.environ)
    for k in ("ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT", "ZEUSD_TOKEN"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([str(ZEUS), *args], env=e, capture_output=True,
                          text=True, timeout=timeout)


def conn(d):
    return ["--socket", d.sock] if d.mode == "uds" else \
        ["--host-port", f"127.0.0.1:{d.port}"]


def test_version_and_usage():
    r = zeus("--version")
    assert r.returncode == 0 and r.stdout.startswith("zeus ")
    assert zeus("--help").returncode == 0
    for bad in (["bogus"], ["measure"], ["measure", "--gpus", "x", "--",
                                         "true"],
                ["measure", "--pushgateway", "http://x", "--", "true"],
                ["gauge", "--job", "j"], ["daemon", "nope"]):
        r = zeus(*bad)
        assert r.returncode == 2, (bad, r.stderr)


def test_measure_passes_exit_status_through(daemon):
    env = {"ZEUSD_SOCK_PATH": daemon.sock} if daemon.mode == "uds" else \
        {"ZEUSD_HOST_PORT": f"127.0.0.1:{daemon.port}"}
    r = zeus("measure", "--", "sh", "-c", "exit 42", env=env)
    assert r.returncode == 42
    assert "zeus: time " in r.stderr and "zeus: gpu 3 " in r.stderr
    assert "zeus: cpu 1 " in r.stderr and "zeus: dram 0 " in r.stderr
    r = zeus("measure", "--gpus", "1,2", "--cpus", "none", "--json",
             "--output", "-", "--", "sh", "-c", "kill -TERM $$", env=env)
    assert r.returncode == 128 + 15
    out = json.loads(r.stdout)
    assert set(out["gpu_energy_j"]) == {"1", "2"} and out["cpu_energy_j"] == {}
    r = zeus("measure", "--", "/nonexistent/cmd", env=env)
    assert r.returncode == 127
    r = zeus("measure", "--gpus", "9", "--", "true", env=env)
    assert r.returncode == 1 and "GPU 9 does not exist" in r.stderr


def test_daemon_reads(daemon):
    r = zeus("daemon", "discover", *conn(daemon))
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    want = daemon.get("/discover").json()
    assert got["gpus"] == want["gpus"] and got["cpus"] == want["cpus"]
    r = zeus("daemon", "energy", "--gpus", "0,2", *conn(daemon))
    assert r.returncode == 0, r.stderr
    e = json.loads(r.stdout)
    assert set(e["gpu_energy_mj"]) == {"0", "2"}
    assert e["gpu_energy_mj"]["2"] >= 3 * 3.6e9
    assert e["cpu_energy"]["1"]["dram_energy_uj"] is None
    assert e["cpu_energy"]["0"]["cpu_energy_uj"] > 0
    r = zeus("daemon", "power", "--cpus", "0", *conn(daemon))
    p = json.loads(r.stdout)
    assert set(p["gpu_power_mw"]) == {"0", "1", "2", "3"}
    assert p["cpu_power"]["0"]["cpu_mw"] > 0


def test_daemon_write_and_error(daemon):
    r = zeus("daemon", "set-power-limit", "--gpus", "1", "--mw", "250000",
             *conn(daemon))
    assert r.returncode == 0, r.stderr
    assert daemon.get("/gpu/get_power_limit?gpu_ids=1").json() == \
        {"1": {"power_limit_mw": 250000}}
    # Outside the constraints: the daemon's message and status come back.
    r = zeus("daemon", "set-power-limit", "--gpus", "1", "--mw", "5",
             *conn(daemon))
    assert r.returncode == 4
    assert "HTTP 400" in r.stderr and "Invalid Argument" in r.stderr
    r = zeus("daemon", "energy", "--gpus", "17", *conn(daemon))
    assert r.returncode == 1 and "HTTP 400" in r.stderr


def test_daemon_streams(daemon):
    r = zeus("daemon", "stream-gpu", "--gpus", "0,3", "--count", "6",
             *conn(daemon))
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 6
    assert {x["gpu_id"] for x in lines} == {0, 3}
    assert all(x["power_mw"] > 0 for x in lines)
    r = zeus("daemon", "stream-cpu", "--count", "3", *conn(daemon))
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 3 and all(x["cpu_mw"] > 0 for x in lines)
    r = zeus("daemon", "stream-gpu", "--gpus", "9", "--count", "1",
             *conn(daemon))
    assert r.returncode == 4 and "HTTP 400" in r.stderr


def test_daemon_unreachable(tmp_path):
    r = zeus("daemon", "discover", "--socket", str(tmp_path / "none.sock"))
    assert r.returncode == 1 and "none.sock" in r.stderr
    r = zeus("daemon", "discover")
    assert r.returncode == 1 and "ZEUSD_SOCK_PATH" in r.stderr


def test_token_is_sent(start, tmp_path):
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    d = start(args=["--signing-key-path", str(key)])
    r = zeus("daemon", "energy", *conn(d))
    assert r.returncode == 1 and "HTTP 401" in r.stderr
    tok = subprocess.run([str(BUILD / "zeusd"), "token", "issue",
                          "--signing-key-path", str(key), "--user", "alice",
                          "--scope", "gpu-read,cpu-read", "--expires", "1h"],
                         capture_output=True, text=True).stdout.strip()
    r = zeus("daemon", "energy", *conn(d), env={"ZEUSD_TOKEN": tok})
    assert r.returncode == 0, r.stderr
    r = zeus("daemon", "set-power-limit", "--gpus", "0", "--mw", "300000",
             "--token", tok, *conn(d))
    assert r.returncode == 4 and "HTTP 403" in r.stderr
