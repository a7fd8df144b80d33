"""systemd integration, with systemd's own tools: the units pass
`systemd-analyze verify` and score <= 3.0 in `systemd-analyze security`;
socket activation through `systemd-socket-activate` (Unix socket and TCP);
readiness, status and watchdog over a test NOTIFY_SOCKET; log priorities
for a test JOURNAL_STREAM; SIGHUP reload; signals that must not kill; the
unit restarting zeusd after a SIGUSR2 restart (exit 75)."""
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import jwt
import pytest

from conftest import ROOT, ZEUSD, Zeusd, free_port
from zeushelp import Notify, wait_log

UNITS = ROOT / "packaging" / "systemd"
ANALYZE = shutil.which("systemd-analyze")
ACTIVATE = shutil.which("systemd-socket-activate")
needs_analyze = pytest.mark.skipif(
    ANALYZE is None, reason="systemd-analyze missing (apt-get install systemd)")
needs_activate = pytest.mark.skipif(
    ACTIVATE is None,
    reason="systemd-socket-activate missing (apt-get install systemd)")


# --- units ------------------------------------------------------------------

def unit_copy(tmp_path, name):
    """The unit with ExecStart pointing at the built binary (verify wants
    the executable to exist)."""
    text = (UNITS / name).read_text()
    text = text.replace("/usr/bin/zeusd", str(ZEUSD))
    out = tmp_path / name
    out.write_text(text)
    return out


@needs_analyze
def test_units_verify(tmp_path):
    units = [unit_copy(tmp_path, n) for n in
             ("zeusd.service", "zeusd.socket", "zeusd-tcp.socket")]
    r = subprocess.run([ANALYZE, "verify", "--man=no", *map(str, units)],
                       capture_output=True, text=True, timeout=60,
                       cwd=tmp_path)
    # Lines about our units only: the container's own units are not ours.
    ours = [l for l in (r.stdout + r.stderr).splitlines()
            if "zeusd" in l]
    assert r.returncode == 0 and ours == [], r.stdout + r.stderr


def unit_settings(name):
    """{key: [values]} of a unit file (comments and sections ignored)."""
    out = {}
    for line in (UNITS / name).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            k, _, v = line.partition("=")
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def test_socket_file_survives_service_stop():
    """zeusd.socket (enabled by the package) keeps its socket file in
    /run/zeusd, which zeusd.service names as its RuntimeDirectory=.
    systemd removes a service's runtime directory when the service stops
    or restarts (Restart=on-failure, `systemctl restart zeusd`), and with
    it the socket file: zeusd.socket still listens on a name that no longer
    exists, so every client is locked out until zeusd.socket is restarted.
    The directory must be preserved."""
    svc = unit_settings("zeusd.service")
    sock = unit_settings("zeusd.socket")
    listen = [Path(v) for v in sock.get("ListenStream", [])
              if v.startswith("/")]
    runtime = [Path("/run") / d for v in svc.get("RuntimeDirectory", [])
               for d in v.split()]
    inside = [p for p in listen if any(r in p.parents for r in runtime)]
    assert inside, (listen, runtime)   # the case this test is about
    # "restart" would still remove it on `systemctl stop zeusd`
    assert svc.get("RuntimeDirectoryPreserve", ["no"])[-1] == "yes", \
        svc.get("RuntimeDirectoryPreserve")


def security_score(path):
    r = subprocess.run([ANALYZE, "security", "--offline=true", "--no-pager",
                        str(path)], capture_output=True, text=True,
                       timeout=60)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", r.stdout)
    assert m, r.stdout + r.stderr
    return float(m.group(1)), r.stdout


@needs_analyze
def test_service_exposure_at_most_3(tmp_path):
    score, text = security_score(unit_copy(tmp_path, "zeusd.service"))
    assert score <= 3.0, text


def test_every_hardening_line_has_a_reason():
    """Each setting in [Service] is preceded by a comment (its reason)."""
    lines = (UNITS / "zeusd.service").read_text().splitlines()
    section, prev = None, ""
    for line in lines:
        s = line.strip()
        if s.startswith("["):
            section = s
        elif section == "[Service]" and s and not s.startswith("#"):
            assert prev.startswith("#"), f"no comment above: {s}"
        prev = s if s else prev
    assert "$ZEUSD_ARGS" in "\n".join(lines)
    assert "EnvironmentFile=-/etc/default/zeusd" in lines


# --- notify / watchdog --------------------------------------------------------


def test_ready_status_watchdog_stopping(tmp_path):
    n = Notify(tmp_path)
    d = Zeusd(tmp_path, env={"NOTIFY_SOCKET": n.path,
                             "WATCHDOG_USEC": "1000000"})
    try:
        n.wait_for(lambda m: "READY=1" in m)
        # READY=1 comes after the socket listens and the devices are open
        assert d._accepts()
        status = n.wait_for(lambda m: m.startswith("STATUS=Serving"))
        assert "unix:" in status and "GPUs" in status
        before = time.monotonic()
        n.wait_for(lambda m: m == "WATCHDOG=1")
        n.drain(2.5)
        pings = n.msgs.count("WATCHDOG=1")
        # every 0.5 s; a loaded 2-core machine may lose a few
        assert pings >= 3, n.msgs
        assert time.monotonic() - before < 15
        d.wait_ready()
        assert d.get("/discover").status_code == 200
        assert d.stop() == 0, d.logs()
        n.wait_for(lambda m: "STOPPING=1" in m)
        assert "watchdog_started" in d.logs()
    finally:
        if d.proc.poll() is None:
            d.stop()
        n.close()


def stop_seconds(d, timeout=30):
    """Seconds from SIGTERM to the daemon's exit (its status checked)."""
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    try:
        rc = d.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        d.proc.kill()
        d.proc.wait()
        raise AssertionError(f"zeusd did not stop in {timeout} s:\n"
                             f"{d.logs()}")
    took = time.monotonic() - t0
    d.stop()
    assert rc == 0, d.logs()
    return took


def test_full_notify_socket_does_not_stall_shutdown(tmp_path):
    """Issue 30, item 7: a NOTIFY_SOCKET nobody reads, its receive queue
    full. The device process's blocking sendto() of STOPPING=1 used to
    hold SIGTERM off for as long as the queue stayed full (more than 8 s
    seen). Now it sends with MSG_DONTWAIT, drops the message and stops as
    fast as with a reader: compared with a baseline measured here, with
    the same notify traffic read by a live receiver, since a fixed bound
    means nothing on a loaded machine."""
    base = []
    for i in range(2):
        sub = tmp_path / f"base{i}"
        sub.mkdir()
        n = Notify(sub)
        d = Zeusd(sub, env={"NOTIFY_SOCKET": n.path})
        try:
            n.wait_for(lambda m: "READY=1" in m)
            d.wait_ready()
            # the receiver keeps reading while the daemon stops
            t = threading.Thread(target=n.drain, args=(5,), daemon=True)
            t.start()
            base.append(stop_seconds(d))
            t.join()
        finally:
            if d.proc.poll() is None:
                d.stop()
            n.close()
    baseline = max(base)

    sub = tmp_path / "full"
    sub.mkdir()
    n = Notify(sub)
    filler = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    filler.setblocking(False)
    queued = 0
    while True:
        try:
            filler.sendto(b"X=%d" % queued, n.path)
            queued += 1
        except BlockingIOError:
            break
    assert queued > 0
    d = Zeusd(sub, env={"NOTIFY_SOCKET": n.path})
    try:
        d.wait_ready()
        took = stop_seconds(d)
        assert "event=notify_failed" in d.logs(), d.logs()
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
        filler.close()
        n.close()
    # as fast as the baseline, with room for a loaded machine's jitter:
    # the stall was unbounded (as long as nobody read)
    assert took < 4 * baseline, (took, base)


def test_abstract_notify_socket_and_no_watchdog_for_other_pid(tmp_path):
    name = f"zeusd-test-{os.getpid()}-{time.monotonic_ns()}"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("\0" + name)
    s.settimeout(15)
    d = Zeusd(tmp_path, env={"NOTIFY_SOCKET": "@" + name,
                             "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"})
    try:
        msgs = [s.recv(4096).decode()]
        while "READY=1" not in msgs[-1]:
            msgs.append(s.recv(4096).decode())
        s.settimeout(1.0)
        try:
            while True:
                msgs.append(s.recv(4096).decode())
        except socket.timeout:
            pass
        assert "WATCHDOG=1" not in msgs, msgs
        d.wait_ready()
        assert d.stop() == 0, d.logs()
    finally:
        if d.proc.poll() is None:
            d.stop()
        s.close()


def test_notify_env_not_inherited_by_override_commands(tmp_path):
    """NOTIFY_SOCKET and LISTEN_* are unset, so children never see them."""
    out = tmp_path / "env.txt"
    ov = tmp_path / "ov.toml"
    ov.write_text('[set_power_limit]\ncommands = ["/bin/sh -c \'env > '
                  f'{out}\'"]\n')
    os.chmod(ov, 0o644)
    n = Notify(tmp_path)
    d = Zeusd(tmp_path, args=["--gpu-command-overrides", str(ov)],
              env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "5000000"})
    try:
        d.wait_ready()
        r = d.post("/gpu/set_power_limit?gpu_ids=0&block=true"
                   "&power_limit_mw=250000")
        assert r.status_code == 200, r.text
        env = out.read_text()
        assert "NOTIFY_SOCKET" not in env and "WATCHDOG_USEC" not in env
        assert d.stop() == 0, d.logs()
    finally:
        if d.proc.poll() is None:
            d.stop()
        n.close()


# --- journal priorities -------------------------------------------------------

def run_logging(tmp_path, journal_matches, extra_env=None):
    log = tmp_path / "stderr.log"
    f = open(log, "wb")
    st = os.fstat(f.fileno())
    ino = st.st_ino if journal_matches else st.st_ino + 1
    env = dict(os.environ, ZEUSD_LOG="debug",
               JOURNAL_STREAM=f"{st.st_dev}:{ino}", **(extra_env or {}))
    port = free_port()
    p = subprocess.Popen([str(ZEUSD), "serve", "--simulate", "--mode", "tcp",
                          "--tcp-bind-address", f"127.0.0.1:{port}"],
                         stdout=f, stderr=f, env=env)
    try:
        deadline = time.monotonic() + 15
        while b"event=listening" not in log.read_bytes():
            assert p.poll() is None and time.monotonic() < deadline, \
                log.read_text()
            time.sleep(0.05)
        httpx.get(f"http://127.0.0.1:{port}/discover", timeout=10)
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(15) == 0, log.read_text()
        f.close()
    return log.read_text().splitlines()


def test_journal_stream_gets_priorities(tmp_path):
    lines = run_logging(tmp_path, True)
    # the network process's lines carry its tag after the priority
    # (zeusd/logrelay.h)
    assert lines and all(re.match(r"<[3467]>(proc=network )?level=", l)
                         for l in lines), lines
    assert any(l.startswith("<6>proc=network level=info") for l in lines)
    assert not any("ts=" in l for l in lines)
    by = {m.group(2): m.group(1) for m in
          (re.match(r"<(\d)>(?:proc=network )?level=(\w+)", l)
           for l in lines)}
    # tcp_without_auth is a warning; listening info; request info/debug
    assert by["warn"] == "4" and by["info"] == "6"
    assert by.get("debug", "7") == "7"
    assert any(l.startswith("<4>level=warn event=tcp_without_auth")
               for l in lines)


def test_other_stderr_keeps_plain_format(tmp_path):
    lines = run_logging(tmp_path, False)
    assert lines and all(l.startswith("ts=") for l in lines), lines


# --- signals and reload -------------------------------------------------------

def sign(key_bytes, sub="alice"):
    return jwt.encode({"sub": sub, "scopes": ["gpu-read"]}, key_bytes,
                      algorithm="HS256")


def whoami(d, tok):
    return d.get("/auth/whoami",
                 headers={"Authorization": f"Bearer {tok}"}).status_code


def test_sighup_reloads_signing_key(start, tmp_path):
    key = tmp_path / "key"
    key.write_bytes(b"first key\n")
    os.chmod(key, 0o600)
    d = start(args=["--signing-key-path", str(key)])
    old = sign(b"first key\n")
    assert whoami(d, old) == 200
    # a good new key: tokens of the new key work, the old key's do not
    key.write_bytes(b"second key\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_log(d, "event=signing_key_reloaded")
    assert "changed=true" in d.logs()
    new = sign(b"second key\n")
    assert whoami(d, new) == 200
    assert whoami(d, old) == 401
    # a bad file (empty, then missing) keeps the key in force
    for bad in ("empty", "missing"):
        if bad == "empty":
            key.write_bytes(b"")
        else:
            key.unlink()
        d.proc.send_signal(signal.SIGHUP)
        wait_log(d, "event=reload_failed", 1 if bad == "empty" else 2)
        assert whoami(d, new) == 200
        assert whoami(d, old) == 401
    warn = [l for l in d.logs().splitlines() if "event=reload_failed" in l]
    assert all("level=warn" in l and str(key) in l for l in warn), warn
    assert "is empty" in warn[0]


def test_sighup_reloads_overrides(start, tmp_path):
    rec = tmp_path / "rec"
    ov = tmp_path / "ov.toml"
    ov.write_text(f'[set_power_limit]\ncommands = ["/bin/sh -c \'echo a >> '
                  f'{rec}\'"]\n')
    os.chmod(ov, 0o644)
    d = start(args=["--gpu-command-overrides", str(ov)])

    def set_limit():
        return d.post("/gpu/set_power_limit?gpu_ids=0&block=true"
                      "&power_limit_mw=250000").status_code

    assert set_limit() == 200 and rec.read_text() == "a\n"
    ov.write_text(f'[set_power_limit]\ncommands = ["/bin/sh -c \'echo b >> '
                  f'{rec}\'"]\n[set_persistence_mode]\ncommands = '
                  '["/bin/true"]\n')
    d.proc.send_signal(signal.SIGHUP)
    wait_log(d, "event=overrides_reloaded")
    assert 'added="set_persistence_mode"' in d.logs()
    assert set_limit() == 200 and rec.read_text() == "a\nb\n"
    ov.write_text('[set_power_limit]\ncommands = ["x {bogus}"]\n')
    d.proc.send_signal(signal.SIGHUP)
    wait_log(d, "event=reload_failed")
    line = [l for l in d.logs().splitlines() if "reload_failed" in l][0]
    assert "level=warn" in line and str(ov) in line and "bogus" in line
    assert set_limit() == 200 and rec.read_text() == "a\nb\nb\n"


def test_usr1_pipe_hup_do_not_kill(start):
    """SIGUSR2 is no longer among them: it restarts zeusd (exit 75,
    test_restart_handover.py)."""
    d = start()
    for sig in (signal.SIGUSR1, signal.SIGPIPE, signal.SIGHUP):
        d.proc.send_signal(sig)
    wait_log(d, "event=reloaded")
    wait_log(d, "event=signal_ignored signal=SIGUSR1")
    assert d.proc.poll() is None
    assert d.get("/discover").status_code == 200
    assert os.path.exists(d.sock)


def test_sigusr2_restart_is_restarted():
    """zeusd's stop on SIGUSR2 exits 75 (ZEUSD_EXIT_RESTART): the unit
    restarts on it whatever Restart= says, and does not count it as a
    failure."""
    svc = unit_settings("zeusd.service")
    assert "75" in svc["RestartForceExitStatus"][-1].split(), svc
    assert "75" in svc["SuccessExitStatus"][-1].split(), svc
    assert "75" not in " ".join(svc.get("RestartPreventExitStatus", []))


# --- socket activation --------------------------------------------------------

def activated(tmp_path, listen, args, env=None):
    log = open(tmp_path / f"act-{time.monotonic_ns()}.log", "wb")
    e = dict(os.environ, ZEUSD_LOG="debug", **(env or {}))
    p = subprocess.Popen([ACTIVATE, "-l", listen, str(ZEUSD), "serve",
                          "--simulate", *args], stdout=log, stderr=log,
                         env=e)
    return p, log


def stop_activated(p, log):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(15)
    else:
        rc = p.returncode
    log.close()
    return rc, Path(log.name).read_text(errors="replace")


@needs_activate
def test_socket_activation_unix(tmp_path):
    path = str(tmp_path / "act.sock")
    # the flags name another path: the passed socket wins
    p, log = activated(tmp_path, path,
                       ["--socket-path", str(tmp_path / "unused.sock")])
    try:
        c = httpx.Client(transport=httpx.HTTPTransport(uds=path, retries=5),
                         base_url="http://zeusd", timeout=15)
        deadline = time.monotonic() + 15
        while True:
            try:
                r = c.get("/discover")
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert r.status_code == 200
        c.close()
    finally:
        rc, text = stop_activated(p, log)
    assert rc == 0, text
    assert "event=socket_activated" in text and f"unix:{path}" in text
    assert not os.path.exists(tmp_path / "unused.sock")
    # the socket file is the .socket unit's: zeusd leaves it in place
    assert os.path.exists(path)


@needs_activate
def test_socket_activation_tcp(tmp_path):
    port = free_port()
    p, log = activated(tmp_path, f"127.0.0.1:{port}",
                       ["--mode", "tcp", "--tcp-bind-address",
                        f"127.0.0.1:{free_port()}"])
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/discover", timeout=15)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert r.status_code == 200
    finally:
        rc, text = stop_activated(p, log)
    assert rc == 0, text
    assert f"tcp:127.0.0.1:{port}" in text


@needs_activate
@pytest.mark.parametrize("listen,args,family", [
    ("unix", ["--mode", "tcp"], "AF_UNIX"),
    ("tcp", [], "AF_INET"),
])
def test_socket_activation_family_mismatch(tmp_path, listen, args, family):
    addr = (str(tmp_path / "m.sock") if listen == "unix"
            else f"127.0.0.1:{free_port()}")
    p, log = activated(tmp_path, addr, args)
    try:
        # systemd-socket-activate may wait for a first connection
        deadline = time.monotonic() + 15
        while p.poll() is None and time.monotonic() < deadline:
            try:
                if listen == "unix":
                    s = socket.socket(socket.AF_UNIX)
                    s.settimeout(0.5)
                    s.connect(addr)
                else:
                    h, port = addr.rsplit(":", 1)
                    s = socket.create_connection((h, int(port)), 0.5)
                s.close()
            except OSError:
                pass
            time.sleep(0.1)
        rc = p.wait(5)
    finally:
        _, text = stop_activated(p, log)
    assert rc != 0, text
    assert f"is {family} but zeusd runs with --mode" in text, text


def test_listen_pid_of_another_process_is_ignored(start):
    d = start(env={"LISTEN_PID": "1", "LISTEN_FDS": "1"})
    assert d.get("/discover").status_code == 200
    assert "socket_activated" not in d.logs()
