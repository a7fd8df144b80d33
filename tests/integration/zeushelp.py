"""The helpers the integration test modules share: one definition of each.

Test modules import from here and from conftest (and the non-test helper
modules simutil, rapltree, localusers, slurmnode, routesweep), never from
one another.
"""
import ctypes
import json
import os
import pwd
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BUILD, ROOT, build_sanitizers, free_port


# --- streams: Server-Sent Events read off a raw socket ---

GPU_EVENT = re.compile(
    rb'data: \{"timestamp_ms":(\d+),"gpu_id":(\d+),"power_mw":(\d+)\}')


class Stream:
    """One SSE connection: sends the request, decodes chunked transfer
    encoding, splits events on the blank line (exactly \\n\\n)."""

    def __init__(self, d, target, rcvbuf=None, blocking=True, headers=""):
        if d.mode == "uds":
            self.sock = socket.socket(socket.AF_UNIX)
            if rcvbuf:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF,
                                     rcvbuf)
            self.sock.connect(d.sock)
        else:
            self.sock = socket.socket()
            if rcvbuf:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF,
                                     rcvbuf)
            self.sock.connect((d.host, d.port))
        self.sock.sendall(f"GET {target} HTTP/1.1\r\nHost: zeusd\r\n"
                          f"{headers}\r\n".encode())
        self.raw = b""
        self.head = None
        self.body = b""
        self.events = []        # (arrival monotonic, bytes without \n\n)
        self.marks = []         # per event: (arrival Unix ms, bytes read)
        self.nread = 0
        self.ended = False
        self.closed = False
        self.chunked = True
        if not blocking:
            self.sock.setblocking(False)

    def feed(self, data):
        now = time.monotonic()
        wall_ms = time.time() * 1000
        if not data:
            self.closed = True
            return
        self.nread += len(data)
        self.raw += data
        if self.head is None:
            if b"\r\n\r\n" not in self.raw:
                return
            self.head, _, self.raw = self.raw.partition(b"\r\n\r\n")
            self.chunked = b"chunked" in self.head.lower()
        if not self.chunked:
            self.body += self.raw
            self.raw = b""
        while self.chunked and not self.ended:
            line, sep, rest = self.raw.partition(b"\r\n")
            if not sep:
                break
            size = int(line.split(b";")[0], 16)
            if len(rest) < size + 2:
                break
            if size == 0:
                self.ended = True
            self.body += rest[:size]
            self.raw = rest[size + 2:]
        while b"\n\n" in self.body:
            ev, _, self.body = self.body.partition(b"\n\n")
            self.events.append((now, ev))
            self.marks.append((wall_ms, self.nread))

    @property
    def status(self):
        return int(self.head.split(b" ", 2)[1]) if self.head else None

    def header(self, name):
        for line in self.head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == name.lower().encode():
                return v.strip().decode()
        return None

    def pump(self, seconds):
        """Reads (blocking socket) for `seconds`."""
        deadline = time.monotonic() + seconds
        while not self.closed and not self.ended:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.sock.settimeout(left)
            try:
                self.feed(self.sock.recv(65536))
            except socket.timeout:
                break
        return self

    def data(self):
        return [e for _, e in self.events if e.startswith(b"data: ")]

    def close(self):
        self.sock.close()


# --- zeusd's processes and descriptors, /metrics, tokens, the audit log,
# the daemon's log ---

SYS_PIDFD_GETFD = 438
JANITOR = "zeusd-janitor"


def children(pid):
    """Pids whose parent is pid (from /proc/*/stat: a child forked by any
    thread of pid, not only by its main thread)."""
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


def comm(pid):
    """pid's name (/proc/pid/comm); None once it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


_NO_DEFAULT = object()


def metric(text, name, labels=None, default=_NO_DEFAULT):
    """The value of the series name{labels} (exactly those labels; none:
    the bare series) in a /metrics text; `default` when it is not there,
    else that fails."""
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items())
                   + "}" if labels else "")
    m = re.search(rf"^{re.escape(want)} (\S+)", text, re.M)
    if m is not None:
        return float(m.group(1))
    assert default is not _NO_DEFAULT, f"{want} not in /metrics"
    return default


ALL_SCOPES = ("gpu-control", "gpu-read", "cpu-read", "metrics")


def token(key, sub="alice", scopes=ALL_SCOPES, exp=None, **extra):
    """An HS256 JWT for `sub` with `scopes`, signed with the key in the
    file `key`; `exp` and any `extra` claims when given."""
    import jwt
    claims = {"sub": sub, "scopes": list(scopes), **extra}
    if exp is not None:
        claims["exp"] = exp
    return jwt.encode(claims, Path(key).read_bytes(), algorithm="HS256")


def audit_lines(path, op=None, exclude=None):
    """The audit file's lines, parsed: only those of operation `op` (a
    name), or all but those of operation `exclude`. Fails on any line that
    is not a whole JSON object (a half line, two glued together)."""
    text = Path(path).read_text()
    assert text == "" or text.endswith("\n"), repr(text[-200:])
    out = []
    for ln in text.splitlines():
        try:
            out.append(json.loads(ln))
        except ValueError:
            pytest.fail(f"audit line is not JSON: {ln!r}")
        assert isinstance(out[-1], dict), ln
    return [x for x in out
            if (op is None or x.get("operation") == op) and
            (exclude is None or x.get("operation") != exclude)]


def wait_log(d, needle, count=1, timeout=15):
    """Waits until zeusd `d`'s log holds `needle` (a string; a compiled
    regex: its matches) `count` times; fails at the timeout, or at once
    when zeusd has exited without it. A network process's line is written
    after its event, through the device process (zeusd/logrelay.h)."""
    deadline = time.monotonic() + timeout
    proc = getattr(d, "proc", None)
    while True:
        gone = proc is not None and proc.poll() is not None
        text = d.logs()
        n = len(needle.findall(text)) if isinstance(needle, re.Pattern) \
            else text.count(needle)
        if n >= count:
            return
        assert not gone, f"zeusd exited waiting for {needle}:\n{text}"
        assert time.monotonic() < deadline, f"{needle}:\n{text}"
        time.sleep(0.02)


def network_pid(d, timeout=10):
    """The network process of zeusd `d` (privilege separation,
    docs/design.md), once its sandbox is in place: the listening socket
    accepts (wait_ready) before the network process has dropped, chrooted
    and installed its filter, and a loaded machine can show that window to
    a test that looks at once.

    One rule: the pid the network process logs once it is sandboxed
    (`event=network_process pid=N`, or `network_process_not_dropped` when
    zeusd does not run as root; the last one logged); where `d` has no log
    or logs quieter than info, the device process's one child that is not
    the janitor (a janitor just forked has not named itself yet)."""
    logged = hasattr(d, "logs") and \
        getattr(d, "env", {}).get("ZEUSD_LOG", "debug") in ("debug", "info")
    deadline = time.monotonic() + timeout
    while True:
        if logged:
            pids = re.findall(r" event=network_process(?:_not_dropped)? "
                              r"pid=(\d+) ", d.logs())
            if pids:
                return int(pids[-1])
        else:
            kids = [k for k in children(d.proc.pid) if comm(k) != JANITOR]
            if len(kids) == 1 and comm(kids[0]) is not None:
                return kids[0]
        assert time.monotonic() < deadline, \
            (f"no single network process: {children(d.proc.pid)}\n" +
             (d.logs() if hasattr(d, "logs") else ""))
        time.sleep(0.02)


def device_pid(d):
    """The device process: the pid in its `event=device_process` line."""
    m = re.search(r"event=device_process pid=(\d+)", d.logs())
    assert m, d.logs()
    return int(m.group(1))


def steal(pid, fd):
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        got = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if got < 0:
            raise OSError(ctypes.get_errno(), f"pidfd_getfd {pid} {fd}")
        return got
    finally:
        os.close(pidfd)


def unix_sockets(pid):
    """fd -> (inode, type, state, path) of pid's Unix sockets."""
    table = {}
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        f = line.split()
        table[int(f[6])] = (int(f[4], 16), int(f[5], 16),
                            f[7] if len(f) > 7 else "")
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        m = re.fullmatch(r"socket:\[(\d+)\]", t)
        if m and int(m.group(1)) in table:
            out[int(fd)] = (int(m.group(1)),) + table[int(m.group(1))]
    return out


def peers(pid):
    """inode -> peer inode of pid's Unix sockets (ss, from sock_diag)."""
    out = subprocess.run(["ss", "-xanp"], capture_output=True, text=True,
                         check=True).stdout
    m = {}
    for line in out.splitlines():
        if f"pid={pid}," not in line:
            continue
        f = line.split()
        try:
            m[int(f[5])] = int(f[7])
        except (IndexError, ValueError):
            continue
    return m


# --- sd_notify: the socket a service manager listens on ---

class Notify:
    """A NOTIFY_SOCKET receiver: AF_UNIX datagrams, as systemd's."""

    def __init__(self, tmp_path):
        self.path = str(tmp_path / "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.msgs = []

    def wait_for(self, pred, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in self.msgs:
                if pred(m):
                    return m
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                self.msgs.append(self.sock.recv(4096).decode())
            except socket.timeout:
                break
        for m in self.msgs:
            if pred(m):
                return m
        raise AssertionError(f"not received; got {self.msgs}")

    def drain(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                self.msgs.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass

    def close(self):
        self.sock.close()


# --- acting as another user (setpriv) ---

CLIENT = r"""
import json, socket, sys
path, method, target = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX)
s.connect(path)
s.sendall(f"{method} {target} HTTP/1.1\r\nHost: z\r\nConnection: close\r\n"
          f"Content-Length: 0\r\n\r\n".encode())
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
head, _, body = data.partition(b"\r\n\r\n")
print(head.split()[1].decode())
print(body.decode())
"""


NOBODY = pwd.getpwnam("nobody")


def as_user(uid, gid=None, groups=()):
    """The argv prefix that runs a command as uid:gid (gid None: the
    number uid) holding exactly `groups` (setpriv: [] clears them, None
    takes the user database's, else --groups)."""
    g = "--init-groups" if groups is None else \
        "--clear-groups" if not groups else \
        f"--groups={','.join(str(x) for x in groups)}"
    return ["setpriv", f"--reuid={uid}",
            f"--regid={uid if gid is None else gid}", g]


def as_nobody():
    """as_user for nobody (its own uid and gid, no groups)."""
    return as_user(NOBODY.pw_uid, NOBODY.pw_gid)


def run_as(uid, *cmd, gid=None, env=None, timeout=60, check=False):
    """CompletedProcess (text, output captured) of `cmd` run as uid:gid
    with no supplementary groups."""
    return subprocess.run(as_user(uid, gid) + [str(c) for c in cmd],
                          env=env, capture_output=True, text=True,
                          timeout=timeout, check=check)


def request_as(d, uid, gid, method, target, groups=()):
    """(status, body) of one request made by a process running as uid:gid
    holding `groups` (as as_user has them)."""
    out = subprocess.run(
        as_user(uid, gid, groups) +
        [sys.executable, "-c", CLIENT, d.sock, method, target],
        capture_output=True, text=True, timeout=20, check=True).stdout
    status, _, body = out.partition("\n")
    return int(status), body.strip()


# --- leases: one client connection of a user ---

# A client that keeps one connection and runs the requests it reads on
# stdin ("METHOD TARGET [HEADER: VALUE]" lines), printing one JSON line
# per answer: the connection's process is the one a lease watches.
SESSION = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
def more():
    chunk = s.recv(65536)
    if not chunk:       # zeusd closed it: say so, do not spin
        sys.exit("zeusd closed the connection")
    return chunk
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    method, target, *extra = line.rstrip("\n").split(" ", 2)
    extra = "".join(f"{h}\r\n" for h in extra)
    s.sendall(f"{method} {target} HTTP/1.1\r\nHost: z\r\n{extra}"
              f"Content-Length: 0\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += more()
    head, _, body = data.partition(b"\r\n\r\n")
    n = 0
    for h in head.split(b"\r\n")[1:]:
        k, _, v = h.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(body) < n:
        body += more()
    print(json.dumps({"status": int(head.split()[1]),
                      "body": body.decode()}), flush=True)
"""


class Session:
    """A client process of `user` with one connection to zeusd."""

    def __init__(self, d, user, prefix=()):
        """`prefix`: an argv prefix to run it under (nsenter into the
        namespaces of a zeusd that runs in its own)."""
        pw = pwd.getpwnam(user)
        self.p = subprocess.Popen(
            list(prefix) + as_user(pw.pw_uid, pw.pw_gid, None) +
            ["/usr/bin/python3", "-c", SESSION, d.sock],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert json.loads(self.p.stdout.readline())["ready"]

    def __call__(self, method, target, header=None):
        """`header`: one more request header line ("Name: value")."""
        extra = f" {header}" if header is not None else ""
        self.p.stdin.write(f"{method} {target}{extra}\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        assert line, "the session ended"
        r = json.loads(line)
        return r["status"], json.loads(r["body"]) if r["body"] else None

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=20)


def limit_mw(d, gpu=0):
    r = d.get(f"/gpu/get_power_limit?gpu_ids={gpu}")
    assert r.status_code == 200, r.text
    return r.json()[str(gpu)]["power_limit_mw"]


def leases(d):
    r = d.get("/gpu/leases")
    assert r.status_code == 200, r.text
    return r.json()


# --- zeus measure against a daemon every user can reach ---

class Node:
    """A zeusd every user can reach, with the zeus binary and a scratch
    directory (0777) beside it: the build tree may not be readable by
    the test users."""

    def __init__(self, start_public, args=(), env=None):
        base = start_public.base
        self.audit = base / "audit.jsonl"
        self.d = start_public(["--gpu-leases", "--audit-log",
                               str(self.audit)] + list(args), env)
        self.zeus = base / "zeus"
        if not self.zeus.exists():
            shutil.copy(BUILD / "zeus", self.zeus)
            os.chmod(self.zeus, 0o755)
        self.scratch = base / "scratch"
        self.scratch.mkdir(exist_ok=True)
        os.chmod(self.scratch, 0o777)

    def argv(self, user, *args):
        pre = []
        if user is not None:
            pw = pwd.getpwnam(user)
            pre = as_user(pw.pw_uid, pw.pw_gid, None)
        return pre + [str(self.zeus), "measure", *args]

    def env(self):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("ZEUSD_", "CUDA_VISIBLE"))}
        e["ZEUSD_SOCK_PATH"] = self.d.sock
        return e

    def run(self, user, *args, timeout=60):
        return subprocess.run(self.argv(user, *args), env=self.env(),
                              capture_output=True, text=True,
                              timeout=timeout)

    def popen(self, user, *args):
        return subprocess.Popen(self.argv(user, *args), env=self.env(),
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


def wait_for(pred, what, timeout=20):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


# A command that says it runs (a file) and waits for the test's go-ahead.
WAIT = ("import os, sys, time\n"
        "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "while not os.path.exists(sys.argv[2]):\n"
        "    time.sleep(0.01)\n")


# --- the Windows build under wine (docs/windows.md) ---

BUILD_WIN = Path(os.environ.get("ZEUS_WIN_BUILD", ROOT / "build-win"))


WINE = shutil.which("wine")


ZEUSD_EXE = BUILD_WIN / "zeusd.exe"


def windows_skips():
    """The module-level skips of the Windows test modules (at import)."""
    if WINE is None:
        pytest.skip("wine is not installed (scripts/win-deps.sh tools)",
                    allow_module_level=True)
    if not ((BUILD_WIN / "nvml-sim.dll").exists() and
            (BUILD_WIN / "nvml_probe.exe").exists()):
        pytest.skip(f"no Windows build in {BUILD_WIN} (make windows)",
                    allow_module_level=True)
    if build_sanitizers():
        # the Windows binaries are the same in both of make check's runs
        pytest.skip("the Windows tests run once, with the plain build",
                    allow_module_level=True)


def winpath(p):
    """A Linux path as wine's programs see it (drive Z: is /)."""
    return "Z:" + str(p).replace("/", "\\")


needs_zeusd = pytest.mark.skipif(
    not ZEUSD_EXE.exists(), reason="zeusd.exe not built (-Dwin_deps=false)")


class NoAnswer(AssertionError):
    """A connection that ended before any byte of an answer came."""


class WinZeusd:
    """`wine zeusd.exe serve --simulate --mode tcp` on 127.0.0.1."""

    def __init__(self, env, tmp, args=()):
        # wine failing silently (wine_failed_silently): started again
        # once, on a fresh port
        for _ in range(2):
            if self._start(env, tmp, args):
                return
            self.log.close()
        raise AssertionError(f"zeusd.exe exited {self.proc.returncode} "
                             f"twice, having logged nothing")

    def _start(self, env, tmp, args):
        """True once listening; False if zeusd.exe exited having logged
        nothing; AssertionError otherwise."""
        self.port = free_port()
        self.log_path = Path(tmp) / f"zeusd-{self.port}.log"
        self.log = open(self.log_path, "wb")
        e = dict(env)
        e["ZEUSD_LOG"] = "info"
        self.proc = subprocess.Popen(
            [WINE, str(ZEUSD_EXE), "serve", "--simulate", "--mode", "tcp",
             "--tcp-bind-address", f"127.0.0.1:{self.port}", *args],
            env=e, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while b" event=listening " not in self.log_path.read_bytes():
            if self.proc.poll() is not None and wine_failed_silently(
                    self.proc.returncode, self.logs()):
                return False
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"zeusd.exe not ready (exit "
                                     f"{self.proc.returncode}):\n"
                                     f"{self.logs()}")
            time.sleep(0.05)
        return True

    def logs(self):
        return self.log_path.read_text(errors="replace")

    def request(self, method, path, headers=None, timeout=20):
        """(status, headers, body bytes) of one request."""
        h = {"Host": f"127.0.0.1:{self.port}", "Connection": "close"}
        h.update(headers or {})
        with socket.create_connection(("127.0.0.1", self.port),
                                      timeout=timeout) as s:
            s.sendall((f"{method} {path} HTTP/1.1\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n").encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        if not data:
            raise NoAnswer(f"{method} {path}: the connection closed "
                           "without an answer")
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split(b" ", 2)[1]), head.decode(), body

    def json(self, method, path, status=200, **kw):
        code, head, body = self.request(method, path, **kw)
        assert code == status, (code, body)
        return json.loads(body) if body else None

    def stop(self, timeout=30):
        """Ctrl-C (SIGINT, which wine delivers as CTRL_C_EVENT)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"zeusd.exe did not stop:\n{self.logs()}")
        self.log.close()
        return self.proc.returncode


def wine_failed_silently(returncode, output):
    """zeusd.exe (and nvml_probe.exe) never exits non-zero without a line
    of output, so such an exit that printed nothing at all is wine failing
    to run it (seen in CI on a loaded machine: exit 1, no output, and the
    same command passing when run again; zeusd.exe on 2026-12-05, sixth
    session, nvml_probe.exe on the eighth). Its callers run it again,
    once."""
    return returncode != 0 and not output


def run_wine_exe(exe, env, *args, timeout=60):
    """A Windows program of ours that prints a line on every failure, run
    to its end under wine (again once, if wine failed silently)."""
    for _ in range(2):
        p = subprocess.run([WINE, str(exe), *args], env=env,
                           timeout=timeout, capture_output=True, text=True)
        if not wine_failed_silently(p.returncode, p.stdout + p.stderr):
            return p
    return p


def run_zeusd_exe(env, *args, timeout=60):
    """zeusd.exe run to its end under wine (run_wine_exe)."""
    return run_wine_exe(ZEUSD_EXE, env, *args, timeout=timeout)


def check_gpu_requests(d):
    """Platform-independent GPU reads, writes and their errors, asked of
    a zeusd.exe `d` (over TCP here, over the pipe in
    test_windows_pipe.py)."""
    power = d.json("GET", "/gpu/get_power?gpu_ids=0,2")
    assert sorted(power["power_mw"]) == ["0", "2"]
    assert all(v > 0 for v in power["power_mw"].values())
    energy = d.json("GET", "/gpu/get_cumulative_energy?gpu_ids=1")
    assert energy["1"]["energy_mj"] > 0
    lim = d.json("GET", "/gpu/get_power_limit_constraints?gpu_ids=0")
    assert lim["0"] == {"min_power_limit_mw": 100000,
                        "max_power_limit_mw": 400000}
    assert d.json("POST", "/gpu/set_power_limit?gpu_ids=0,1&"
                  "power_limit_mw=250000&block=true") is None
    assert d.json("GET", "/gpu/get_power_limit?gpu_ids=0,1") == {
        "0": {"power_limit_mw": 250000}, "1": {"power_limit_mw": 250000}}
    assert d.json("POST", "/gpu/set_gpu_locked_clocks?gpu_ids=3&"
                  "min_clock_mhz=500&max_clock_mhz=1000&block=false") is None
    assert d.json("POST", "/gpu/reset_locked_clocks?gpu_ids=3&block=true") \
        is None
    # the shared query parser and limits
    err = d.json("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=1&"
                 "block=true", status=400)
    assert "GPU 0" in err["errors"]["0"]
    assert d.json("GET", "/gpu/get_power?gpu_ids=9", status=400)
    assert "unknown field" in d.json(
        "GET", "/gpu/get_power?bogus=1", status=400)["error"]
    assert d.json("GET", "/nothere", status=404)


def first_power_event(s, gpu, host):
    """Opens GPU `gpu`'s power stream on socket `s`; checks and returns
    its first event."""
    s.sendall(f"GET /gpu/stream_power?gpu_ids={gpu} HTTP/1.1\r\n"
              f"Host: {host}\r\n\r\n".encode())
    data = b""
    while b"\n\n" not in data.partition(b"\r\n\r\n")[2]:
        data += s.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"text/event-stream" in head
    # chunked: the first event is in the first chunk
    event = json.loads(body[body.index(b"data: ") + 6:
                            body.index(b"\n\n")])
    assert event["gpu_id"] == gpu and event["power_mw"] > 0
    return event


def read_to_eof(s):
    """Reads `s` until the other end closes it (10 s at most), closes it."""
    s.settimeout(10)
    while s.recv(65536):
        pass
    s.close()


def assert_ctrl_c_ended_a_stream(d, rc):
    """zeusd.exe `d` stopped by Ctrl-C (exit status `rc`) ended one
    stream on its way out."""
    logs = d.logs()
    assert rc == 0, logs[-3000:]
    assert "event=stopping event=ctrl_c" in logs
    assert "event=streams_ending subscribers=1" in logs
    assert "event=stopped" in logs


def check_tokens(wine_env, tmp_path, start):
    """Tokens of `zeusd.exe token issue` against a zeusd.exe that
    start(*args) starts with a signing key (TCP here, the pipe in
    test_windows_pipe.py): 401 without, the scopes, a bad signature."""
    key = tmp_path / "key"
    key.write_bytes(b"a signing key\n")
    def issue(scope):
        p = run_zeusd_exe(wine_env, "token", "issue", "--signing-key-path",
                          winpath(key), "--user", "alice", "--scope", scope,
                          "--expires", "1h")
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()
    read = issue("gpu-read")
    d = start("--signing-key-path", winpath(key))
    assert d.json("GET", "/discover")["auth_required"] is True
    code, head, _ = d.request("GET", "/gpu/get_power")
    assert code == 401 and 'WWW-Authenticate: Bearer realm="zeusd"' in head
    auth = {"Authorization": f"Bearer {read}"}
    assert d.json("GET", "/gpu/get_power", headers=auth)["power_mw"]
    me = d.json("GET", "/auth/whoami", headers=auth)
    assert me["sub"] == "alice" and me["scopes"] == ["gpu-read"]
    err = d.json("POST", "/gpu/set_power_limit?gpu_ids=0&"
                 "power_limit_mw=200000&block=true", headers=auth, status=403)
    assert "gpu-control" in err["error"]
    bad = {"Authorization": f"Bearer {read[:-2]}xx"}
    assert d.json("GET", "/gpu/get_power", headers=bad, status=401)


def wait_until(pred, timeout=10.0, step=0.005):
    """Polls pred() until it is true (True) or `timeout` s pass (False)."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


# --- the lease journal's and the ledger's rig (--state-dir) ---

# The simulator's state file (sim/nvml_state.c, docs/simulator.md): a
# 48-byte header, then a 64-byte record per GPU whose sixth uint32 is the
# power limit in mW.
STATE_HEADER, STATE_RECORD, LIMIT_AT = 48, 64, 20


def gpu_limit_mw(path, gpu):
    """The power limit GPU `gpu` is at, from the simulator's state file
    (the file is written under an fcntl lock, a record at a time, so a
    reader in another process sees whole writes)."""
    data = Path(path).read_bytes()
    return struct.unpack_from("=I", data, STATE_HEADER + STATE_RECORD * gpu +
                              LIMIT_AT)[0]


class StateRig:
    """zeusd with --gpu-leases, an audit log (unless audit=False) and a
    state directory (unless journal=False), on simulated GPUs whose
    settings and counters outlive it (ZEUS_SIM_STATE), as real ones do."""

    def __init__(self, start_public):
        self.start_public = start_public
        self.base = start_public.base
        self.state = self.base / "state"
        self.gpus = self.base / "gpus.state"
        self.audit = self.base / "audit.jsonl"
        self.d = None

    def start(self, extra=(), env=None, audit=True, journal=True):
        args = ["--gpu-leases"]
        if audit:
            args += ["--audit-log", str(self.audit)]
        if journal:
            args += ["--state-dir", str(self.state)]
        self.d = self.start_public(
            args + list(extra),
            {"ZEUS_SIM_STATE": str(self.gpus), **(env or {})})
        return self.d

    def stop(self, how):
        """Ends the running zeusd: "kill" (SIGKILL of the device process,
        a crash: its network process and janitor follow), "usr2" (a
        planned restart) or "term" (a stop). Its exit status."""
        d = self.d
        d.client.close()
        kids = children(d.proc.pid)
        d.proc.send_signal({"kill": signal.SIGKILL, "usr2": signal.SIGUSR2,
                            "term": signal.SIGTERM}[how])
        rc = d.proc.wait(timeout=60)
        d.ready = False         # the fixture expects no clean exit
        for k in kids:
            wait_until(lambda: not Path(f"/proc/{k}").exists(), 10)
        wait_until(lambda: not os.path.exists(d.sock), 10)
        return rc

    def crash(self):
        return self.stop("kill")

    def journal(self, gpu=0):
        return self.state / f"gpu-{gpu}.lease"

    def ledger(self):
        return self.state / "ledger"


def boot_id():
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def lease_series(d, user, gpu=0):
    """(the user's lease joules, the GPU's unleased joules) as /metrics
    says them; None for a series it does not show."""
    r = d.get("/metrics")
    assert r.status_code == 200
    lease = unleased = None
    for line in r.text.splitlines():
        if line.startswith("zeusd_gpu_lease_energy_joules_total{"
                           f'index="{gpu}",user="{user}"}}'):
            lease = float(line.split()[-1])
        if line.startswith("zeusd_gpu_unleased_energy_joules_total{"
                           f'index="{gpu}"}}'):
            unleased = float(line.split()[-1])
    return lease, unleased
