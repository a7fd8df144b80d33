"""Black-box tests of privilege separation (docs/design.md "Two processes",
docs/security.md): zeusd serve forks into a device process (the PID we
started, root) and a network process (its child) that serves HTTP as an
unprivileged user with no capabilities, no_new_privs and a seccomp filter,
holding no fd of a device, a RAPL counter or the signing key.

Every other black-box file runs against the split daemon too (it is the
default); this one checks the split itself and what happens when either
process dies.
"""
import os
import pwd
import signal
import re
import socket
import stat
import time
from pathlib import Path

import pytest

from conftest import Zeusd, build_sanitizers
from rapltree import RaplTree

NOBODY = pwd.getpwnam("nobody")


def children(pid):
    """Pids whose parent is pid (from /proc/*/stat)."""
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            stat_line = Path(f"/proc/{e}/stat").read_text()
        except OSError:
            continue
        fields = stat_line.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            out.append(int(e))
    return out


def network_pid(d, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = children(d.proc.pid)
        if len(kids) == 1:
            return kids[0]
        time.sleep(0.02)
    raise AssertionError(f"no single network process: {children(d.proc.pid)}"
                         f"\n{d.logs()}")


def status(pid):
    """/proc/pid/status as a dict of its fields (raw strings)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


def fd_targets(pid):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


def gone(pid):
    """True once pid has exited (a zombie counts: it runs no more)."""
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return st.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def refused(path):
    """True when nothing accepts on the Unix socket at path."""
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        return False
    except OSError:
        return True
    finally:
        s.close()


def wait_for(pred, timeout):
    """Polls pred; returns the seconds it took, or None at the timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(0.005)
    return None


@pytest.mark.parametrize("mode", ["uds", "tcp"])
def test_network_process_is_sandboxed(start, mode):
    d = start(mode)
    net = network_pid(d)
    s = status(net)
    uids, gids = s["Uid"].split(), s["Gid"].split()
    assert uids == [str(NOBODY.pw_uid)] * 4, s["Uid"]
    assert gids == [str(NOBODY.pw_gid)] * 4, s["Gid"]
    assert s["Groups"] == "", s["Groups"]
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(s[cap], 16) == 0, (cap, s[cap])
    assert s["NoNewPrivs"] == "1"
    assert s["Seccomp"] == "2"
    # the device process keeps root
    p = status(d.proc.pid)
    assert p["Uid"].split()[0] == "0" and int(p["CapEff"], 16) != 0
    assert d.get("/discover").status_code == 200
    assert "event=network_process " in d.logs()


def test_network_process_has_no_filesystem(start, tmp_path):
    """Its root and working directory are an empty directory that was
    deleted before it became the root, so no path resolves to anything;
    what it must read later it holds as fds (its own /proc/self/stat and
    fd/ for /metrics). Names and groups of peers come from the device
    process, so the policy (by name) and the audit log still see them."""
    d = start("uds")
    net = network_pid(d)
    if "address" in build_sanitizers():
        # LeakSanitizer reads /proc/self/task at exit: no chroot there
        assert "chroot=off" in d.logs()
        assert os.readlink(f"/proc/{net}/root") == "/"
        return
    for link in ("root", "cwd"):
        target = os.readlink(f"/proc/{net}/{link}")
        assert target.startswith("/tmp/zeusd-root."), (link, target)
        assert target.endswith(" (deleted)"), (link, target)
        assert not os.path.exists(target.split(" (deleted)")[0])
    # the device process keeps the real root
    assert os.readlink(f"/proc/{d.proc.pid}/root") == "/"
    fds = fd_targets(net)
    assert "/proc/%d/stat" % net in fds and "/proc/%d/fd" % net in fds, fds
    # nothing else by path but stdio (the test's log file): sockets,
    # pipes and event fds
    files = []
    for fd in os.listdir(f"/proc/{net}/fd"):
        t = os.readlink(f"/proc/{net}/fd/{fd}")
        if int(fd) > 2 and t.startswith("/") and \
                not t.startswith(f"/proc/{net}/"):
            files.append(t)
    assert files == [], fds
    assert "chroot=on" in d.logs()
    # /metrics still reads them after the drop
    m = d.get("/metrics").text
    assert re.search(r"^process_open_fds [1-9]", m, re.M), m
    assert re.search(r"^process_resident_memory_bytes [1-9]", m, re.M), m


def test_network_process_holds_no_device_fd(start, tmp_path):
    RaplTree(tmp_path / "rapl", {0: {"dram": True}, 1: {}})
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    os.chmod(key, 0o600)
    d = start("uds", args=["--rapl-dir", str(tmp_path / "rapl"),
                           "--signing-key-path", str(key)])
    net = network_pid(d)
    mine = fd_targets(net)
    theirs = fd_targets(d.proc.pid)
    rapl = str(tmp_path / "rapl")
    # the device process does hold the counters (the check can fail) ...
    assert any(t.startswith(rapl) for t in theirs), theirs
    # ... the network process none of them, nor the key, nor the driver
    for t in mine:
        assert not t.startswith(rapl), mine
        assert t != str(key), mine
        assert "nvml" not in t and not t.startswith("/dev/nvidia"), mine


@pytest.fixture
def killable(tmp_path):
    """killable() -> a ready UDS Zeusd whose exit status is the test's."""
    daemons = []

    def _start(args=()):
        d = Zeusd(tmp_path, "uds", args)
        daemons.append(d)
        return d.wait_ready()

    yield _start
    for d in daemons:
        if d.proc.poll() is None:
            d.proc.kill()
        d.proc.wait()
        d.log.close()


def test_killing_the_network_process_stops_the_daemon(killable):
    d = killable()
    net = network_pid(d)
    os.kill(net, signal.SIGKILL)
    took = wait_for(lambda: d.proc.poll() is not None, 10)
    assert took is not None, d.logs()
    assert d.proc.returncode == 1, d.logs()
    assert not os.path.exists(d.sock)           # the device process removed it
    assert "event=network_process_died" in d.logs()
    # within a second of the kill, as the issue asks, on a quiet machine;
    # the assertion allows for a loaded CI runner
    assert took < 5, took


def test_killing_the_device_process_stops_the_network_process(killable,
                                                             start):
    d = killable()
    net = network_pid(d)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(10)
    took = wait_for(lambda: gone(net), 10)
    assert took is not None, d.logs()
    assert took < 5, took
    assert "event=device_process_gone" in d.logs()
    # nothing listens any more (the last thread of the process may still
    # be letting go of its files when the leader shows as a zombie, so
    # wait for it); the file itself stays (only root could remove it, and
    # root is gone): the next start replaces it
    assert wait_for(lambda: refused(d.sock), 5) is not None
    d2 = start("uds")
    assert d2.get("/discover").status_code == 200


def test_sigterm_stops_both(start):
    d = start("uds")
    net = network_pid(d)
    assert d.stop() == 0, d.logs()
    assert gone(net)
    logs = d.logs()
    assert "event=stopped status=0" in logs, logs
    assert not os.path.exists(d.sock)


def test_sighup_to_the_network_process_is_ignored(start):
    d = start("uds")
    net = network_pid(d)
    os.kill(net, signal.SIGHUP)
    assert wait_for(lambda: "signal=SIGHUP" in d.logs(), 5) is not None
    assert d.get("/discover").status_code == 200


def test_no_privsep_is_one_process(start):
    d = start("uds", args=["--no-privsep"])
    assert d.get("/discover").status_code == 200
    assert children(d.proc.pid) == []
    assert "event=network_process" not in d.logs()


def test_user_flag(start, tmp_path):
    d = start("uds", args=["--user", "daemon"])
    pw = pwd.getpwnam("daemon")
    assert status(network_pid(d))["Uid"].split()[0] == str(pw.pw_uid)


def test_unknown_user_refused(tmp_path):
    d = Zeusd(tmp_path, "uds", ["--user", "no-such-user-zeusd"])
    assert d.proc.wait(10) == 1
    assert "no-such-user-zeusd" in d.logs()
    assert not os.path.exists(d.sock)


def test_without_root_the_split_still_happens(tmp_path):
    """--simulate as an ordinary user: two processes, no drop (logged),
    the filter still on."""
    base = tmp_path / "pub"
    base.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chown(base, NOBODY.pw_uid, NOBODY.pw_gid)

    def as_nobody():
        os.setgroups([])
        os.setgid(NOBODY.pw_gid)
        os.setuid(NOBODY.pw_uid)

    d = Zeusd(base, "tcp", preexec=as_nobody)
    try:
        d.wait_ready()
        net = network_pid(d)
        s = status(net)
        assert s["Seccomp"] == "2" and s["NoNewPrivs"] == "1"
        assert "event=network_process_not_dropped" in d.logs()
        assert d.get("/gpu/get_power").status_code == 200
    finally:
        assert d.stop() == 0, d.logs()
