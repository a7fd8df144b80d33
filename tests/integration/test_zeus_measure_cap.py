"""`zeus measure --power-limit W [--gpu-clocks MIN:MAX] [--mem-clocks
MIN:MAX] -- COMMAND` (docs/libzeus.md, "Measuring under a power limit"):
GPU settings for one command through zeusd, released afterwards, with
the energy ledger's own figure beside the measurement. Black-box: the
real zeusd (--gpu-leases, --audit-log) on the NVML simulator and the real
`zeus`, run as two real local users (made here with useradd) and as
root.

The ledger's lease spans the measured window (the settings go first, the
release last) and both read the simulator's one counter through zeusd,
so the ledger's joules may exceed the measured by no more than the extra
time at the highest power the GPU may draw, and never fall below them.
"""
import json
import os
import signal
import subprocess

import pytest

from conftest import BUILD
from zeushelp import (Node, Session, WAIT, audit_lines, leases, limit_mw,
                      wait_for)

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root to act as other users")

USERS = ("zeuscap-a", "zeuscap-b")
DEFAULT_MW = 400_000        # the A100 profile's default limit
MAX_W = 400.0               # ... and the most it draws


def test_alice_measures_under_a_limit_while_bob_is_refused(start_public,
                                                           users):
    n = Node(start_public)
    alice, bob = users
    ran, go = n.scratch / "ran", n.scratch / "go"
    p = n.popen(alice, "--gpus", "0", "--json", "--output", "-",
                "--power-limit", "200", "--", "/usr/bin/python3", "-c",
                WAIT, str(ran), str(go))
    wait_for(ran.exists, "the command did not start")
    # while it runs: the limit is alice's, and hers alone
    assert limit_mw(n.d) == 200_000
    (lease,) = [r for r in leases(n.d)["leases"] if r["gpu"] == 0]
    assert lease["user"] == alice and lease["pid"] == p.pid
    b = Session(n.d, bob)
    status, body = b("POST", "/gpu/set_power_limit?gpu_ids=0&"
                     "power_limit_mw=250000&block=true")
    b.close()
    assert status == 409 and alice in body["error"], body
    r = n.run(bob, "--gpus", "0", "--cpus", "none", "--power-limit",
              "250", "--", "/usr/bin/touch", str(n.scratch / "bob-ran"))
    assert r.returncode == 6, r.stderr
    assert f"leased by user {alice}" in r.stderr
    assert "the command was not run" in r.stderr
    assert not (n.scratch / "bob-ran").exists()
    assert limit_mw(n.d) == 200_000
    go.touch()
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    # afterwards the limit is back, and the ledger charged alice
    assert limit_mw(n.d) == DEFAULT_MW
    j = json.loads(out)
    assert j["restored"] is True and j["exit_status"] == 0
    assert j["settings"] == {"power_limit_w": 200, "gpu_clocks_mhz": None,
                             "mem_clocks_mhz": None}
    led = j["ledger"]["0"]
    assert led["energy"] == "ok" and led["reason"] == "release"
    measured = j["gpu_energy_j"]["0"]
    assert j["gpu_avg_w"]["0"] == pytest.approx(measured / j["time_s"],
                                                abs=1e-5)
    extra_s = led["duration_s"] - j["time_s"]
    assert 0 <= extra_s < 1.0, (led, j)
    assert measured - 0.002 <= led["energy_j"] <= \
        measured + MAX_W * extra_s + 0.002, (led, j)
    (ended,) = [x for x in leases(n.d)["ended"] if x["gpu"] == 0]
    assert ended["user"] == alice and ended["reason"] == "release"
    assert ended["energy_j"] == pytest.approx(led["energy_j"], abs=1e-6)
    (line,) = [x for x in audit_lines(n.audit, "lease_end")
               if x["gpu"] == 0]
    assert line["identity"]["user"] == alice
    assert line["energy_j"] == pytest.approx(led["energy_j"], abs=1e-6)
    assert line["settings_restored"] == "power_limit"


def test_text_report_and_cpus(start_public, users):
    n = Node(start_public)
    r = n.run(users[0], "--gpus", "0,1", "--power-limit", "250",
              "--gpu-clocks", "300:900", "--", "sleep", "0.3")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert any(x.startswith("zeus: gpu 1 ") and x.endswith(" W average")
               for x in lines), r.stderr
    assert any(x.startswith("zeus: cpu 0 ") for x in lines), r.stderr
    for g in (0, 1):
        assert (f"zeus: gpu {g} power limit 250 W, GPU clocks 300:900 MHz "
                "(limit was 400 W): restored by zeusd (lease released)"
                ) in lines, r.stderr
        assert any(x.startswith(f"zeus: gpu {g} ledger vs measured: ")
                   for x in lines), r.stderr
    assert limit_mw(n.d, 1) == DEFAULT_MW
    ended = leases(n.d)["ended"]
    assert sorted((x["gpu"], x["settings"]) for x in ended) == [
        (0, ["power_limit", "gpu_clocks"]), (1, ["power_limit", "gpu_clocks"])]


def test_refused_value_is_4_and_nothing_runs(start_public, users):
    n = Node(start_public)
    mark = n.scratch / "ran"
    r = n.run(users[0], "--gpus", "0", "--power-limit", "50", "--",
              "/usr/bin/touch", str(mark))
    assert r.returncode == 4, r.stderr
    assert "power limit refused" in r.stderr and "HTTP 400" in r.stderr
    assert "Invalid Argument" in r.stderr       # zeusd's message
    assert "nothing was changed; the command was not run" in r.stderr
    assert not mark.exists()
    assert limit_mw(n.d) == DEFAULT_MW


def test_refused_clocks_restore_the_limit(start_public, users):
    n = Node(start_public)
    mark = n.scratch / "ran"
    r = n.run(users[0], "--gpus", "0,1", "--power-limit", "200",
              "--gpu-clocks", "900:300", "--", "/usr/bin/touch", str(mark))
    assert r.returncode == 4, r.stderr
    assert "GPU 0: GPU locked clocks refused" in r.stderr
    assert "what was applied before has been restored" in r.stderr
    assert not mark.exists()
    assert limit_mw(n.d, 0) == DEFAULT_MW and limit_mw(n.d, 1) == DEFAULT_MW
    v = leases(n.d)
    assert v["leases"] == []
    (ended,) = v["ended"]       # GPU 1 was never touched
    assert ended["gpu"] == 0 and ended["reason"] == "release"
    assert ended["settings"] == ["power_limit"]
    lines = [json.loads(x) for x in n.audit.read_text().splitlines()]
    ops = [(x["operation"], x.get("result"), x.get("restore", False))
           for x in lines if x["gpu"] == 0]
    assert ops == [("set_power_limit", "ok", False),
                   ("set_gpu_locked_clocks", "error", False),
                   ("set_power_limit", "ok", True),
                   ("lease_end", None, False)], ops


def test_policy_refusal_is_5(start_public, users):
    alice = users[0]
    base = start_public.base
    (base / "policy.toml").write_text(
        f'[[grant]]\nusers = ["{alice}"]\nscopes = ["gpu-read"]\n\n'
        f'[[grant]]\nusers = ["{alice}"]\nscopes = ["gpu-control"]\n'
        'gpus = [1]\n')
    os.chmod(base / "policy.toml", 0o644)
    n = Node(start_public, ["--policy-file", str(base / "policy.toml")])
    mark = n.scratch / "ran"
    r = n.run(alice, "--gpus", "0", "--cpus", "none", "--power-limit",
              "200", "--", "/usr/bin/touch", str(mark))
    assert r.returncode == 5, r.stderr
    assert "HTTP 403" in r.stderr and "not on GPU 0" in r.stderr, r.stderr
    assert not mark.exists()
    # GPU 1 is hers to set
    r = n.run(alice, "--gpus", "1", "--cpus", "none", "--power-limit",
              "200", "--", "/usr/bin/touch", str(mark))
    assert r.returncode == 0, r.stderr
    assert mark.exists() and limit_mw(n.d, 1) == DEFAULT_MW


def test_sigkill_of_zeus_restores_the_limit(start_public, users):
    n = Node(start_public)
    ran, go = n.scratch / "ran", n.scratch / "go"
    p = n.popen(users[0], "--gpus", "2", "--cpus", "none", "--power-limit",
                "150", "--", "/usr/bin/python3", "-c", WAIT, str(ran),
                str(go))
    try:
        wait_for(ran.exists, "the command did not start")
        assert limit_mw(n.d, 2) == 150_000
        p.send_signal(signal.SIGKILL)
        p.wait()
        wait_for(lambda: limit_mw(n.d, 2) == DEFAULT_MW,
                 "zeusd did not restore the limit", timeout=10)
        # the lease ends after the restore's last command (the clocks),
        # a moment after the limit is back
        wait_for(lambda: [x for x in leases(n.d)["ended"] if x["gpu"] == 2],
                 "the lease did not end", timeout=10)
        (ended,) = [x for x in leases(n.d)["ended"] if x["gpu"] == 2]
        assert ended["reason"] == "process_exit"
        assert ended["pid"] == p.pid and ended["energy"] == "ok"
    finally:
        go.touch()      # the orphaned command ends on its own


def test_release_after_zeusd_closed_the_idle_connection(start_public, users):
    """zeusd closes a connection idle for ZEUSD_IDLE_TIMEOUT_S; the lease
    is the process's, so the release on a new connection still ends it."""
    n = Node(start_public, env={"ZEUSD_IDLE_TIMEOUT_S": "1"})
    r = n.run(users[0], "--gpus", "0", "--cpus", "none", "--json",
              "--power-limit", "300", "--", "sleep", "2.5")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stderr)
    assert j["restored"] is True and j["ledger"]["0"]["energy"] == "ok"
    assert j["ledger"]["0"]["duration_s"] >= 2.5
    assert limit_mw(n.d) == DEFAULT_MW


def test_root_restores_by_itself(start):
    """Root takes no lease (nor does any client of a zeusd without
    --gpu-leases): zeus puts back the limit it read and resets the clocks
    it locked."""
    d = start()
    zeus = BUILD / "zeus"
    e = {k: v for k, v in os.environ.items() if not k.startswith("ZEUSD_")}
    e["ZEUSD_SOCK_PATH"] = d.sock
    d.post("/gpu/set_power_limit?gpu_ids=3&power_limit_mw=350000&"
           "block=true")
    r = subprocess.run([str(zeus), "measure", "--gpus", "3", "--cpus",
                        "none", "--csv", "--power-limit", "180",
                        "--mem-clocks", "405:1593", "--", "true"],
                       env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    head, row = r.stderr.splitlines()[:2]
    assert head.endswith(",total_j,exit_status,ledger_gpu3_j")
    assert row.endswith(",0,")      # no ledger figure
    assert limit_mw(d, 3) == 350_000
    r = subprocess.run([str(zeus), "measure", "--gpus", "3", "--cpus",
                        "none", "--power-limit", "180", "--", "true"],
                       env=e, capture_output=True, text=True, timeout=60)
    assert "restored by zeus (root takes no lease)" in r.stderr, r.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_of_zeus_ends_the_command_and_restores(start, tmp_path, sig):
    """A cancelled job (SIGTERM to every process, or to zeus alone) must
    not leave the GPU changed: zeus passes the signal to the command,
    waits for it, gives the limit back itself (root: no lease), reports,
    and exits with the command's status."""
    d = start()
    ran, go = tmp_path / "ran", tmp_path / "go"
    e = {k: v for k, v in os.environ.items() if not k.startswith("ZEUSD_")}
    e["ZEUSD_SOCK_PATH"] = d.sock
    p = subprocess.Popen(
        [str(BUILD / "zeus"), "measure", "--gpus", "1", "--cpus", "none",
         "--json", "--power-limit", "170", "--", "/usr/bin/python3", "-c",
         WAIT, str(ran), str(go)],
        env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the file exists before its pid is written in it
        wait_for(lambda: ran.exists() and ran.read_text().strip(),
                 "the command did not start")
        child = int(ran.read_text())
        assert limit_mw(d, 1) == 170_000
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
    finally:
        go.touch()
    assert p.returncode == 128 + sig, err
    # the command got it (it never saw `go`), and is gone
    assert not os.path.exists(f"/proc/{child}") or \
        open(f"/proc/{child}/stat").read().split()[2] == "Z"
    assert limit_mw(d, 1) == DEFAULT_MW
    j = json.loads(err)
    assert j["exit_status"] == 128 + sig and j["restored"] is True


@pytest.mark.parametrize("args,msg", [
    (["--power-limit", "x"], "bad value for --power-limit: 'x'"),
    (["--power-limit", "0"], "bad value for --power-limit: '0'"),
    (["--gpu-clocks", "300"], "bad value for --gpu-clocks: '300'"),
    (["--mem-clocks", "1:2:3"], "bad value for --mem-clocks: '1:2:3'"),
    (["--power-limit", "200", "--source", "direct"], "not with --source"),
    (["--power-limit", "200", "--gpus", "none"], "not with --gpus none"),
])
def test_usage_errors(args, msg):
    r = subprocess.run([str(BUILD / "zeus"), "measure", *args, "--",
                        "true"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr.splitlines()[0]


def test_unreachable_zeusd_is_1(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith("ZEUSD_")}
    e["ZEUSD_SOCK_PATH"] = str(tmp_path / "none.sock")
    mark = tmp_path / "ran"
    r = subprocess.run([str(BUILD / "zeus"), "measure", "--power-limit",
                        "200", "--", "touch", str(mark)], env=e,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert not mark.exists()
