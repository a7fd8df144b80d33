"""Fixtures that start the real zeusd binary and talk HTTP to it.

ZEUSD_BUILD names the build directory (default: build). Every daemon runs
with the NVML simulator and simulated RAPL unless a test says otherwise, and
is stopped with SIGTERM (STOP_SIGNAL) at the end of the test; a daemon that
does not exit 0 (a crash, a sanitizer report, a leak) fails the test.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("ZEUSD_BUILD", ROOT / "build"))
ZEUSD = BUILD / "zeusd"
# ZEUSD_WINE=1: the daemon the tests start is the Windows build's zeusd.exe
# (ZEUS_WIN_BUILD, default build-win/) under wine, on TCP only, stopped
# with SIGINT (wine's CTRL_C_EVENT); what is Linux-only is skipped, with
# its reason (linux_only below); docs/windows.md gives the counts. The
# session makes a WINEPREFIX when none is set, and keeps its wineserver
# running throughout (pytest_sessionstart).
WINE_RUN = os.environ.get("ZEUSD_WINE") == "1"
WIN_BUILD = Path(os.environ.get("ZEUS_WIN_BUILD", ROOT / "build-win"))
if WINE_RUN:
    ZEUSD_CMD = [shutil.which("wine") or "wine", str(WIN_BUILD / "zeusd.exe")]
    SIM = WIN_BUILD / "nvml-sim.dll"    # the simulator zeusd.exe can load
else:
    ZEUSD_CMD = [str(ZEUSD)]
    SIM = BUILD / "libnvml-sim.so"
# The signal zeusd stops on, cleanly: SIGTERM; zeusd.exe under wine stops
# on Ctrl-C (SIGINT), while wine ends a process on SIGTERM outright.
STOP_SIGNAL = signal.SIGINT if WINE_RUN else signal.SIGTERM
# The transport of a daemon whose test names none: the Unix socket, or
# TCP for zeusd.exe (a test that names the Unix socket skips under wine).
DEFAULT_MODE = "tcp" if WINE_RUN else "uds"

# What a test that checks Linux-only behaviour depends on, by kind:
# @linux_only(kind[, detail]) on a test or a parametrization skips it
# under ZEUSD_WINE=1 with "Linux-only (kind): reason[; detail]".
LINUX_ONLY = {
    "unix-socket": "the Unix socket (its path, owner, mode, peer "
                   "credentials); zeusd.exe listens on TCP",
    "wrapper": "a wrapper or a preexec function around the zeusd process "
               "(setpriv, another uid)",
    "amdsmi": "AMD GPUs (AMD SMI) are Linux-only; zeusd.exe has NVML only",
    "rapl": "cpu-read (RAPL) is Linux-only: zeusd.exe refuses it and has "
            "no /cpu routes",
    "persistence": "persistence mode as Windows has it: it reads true "
                   "without asking the driver, enabling is a no-op, "
                   "disabling is refused",
    "uid-wording": "a driver's permission error names the uid zeusd runs "
                   "as; zeusd.exe names the user and an administrator",
    "signals": "SIGTERM and SIGHUP: Windows has neither (wine ends "
               "zeusd.exe on them); zeusd.exe stops on Ctrl-C, Ctrl-Break "
               "or a console close, and has no reload",
    "one-process": "the device process's /metrics series of privilege "
                   "separation; zeusd.exe is one process",
    "split-loop": "requests waiting unsuspended on the network process's "
                  "loop (docs/design.md, \"Waiting on the loop\"); "
                  "zeusd.exe is one process whose libmicrohttpd runs its "
                  "own thread, where every deferred request is suspended",
    "proc": "it holds the process_* series against /proc of the serving "
            "process; zeusd.exe reports Windows figures (working set, "
            "handles)",
    "siocoutq": "a stream's socket budget is the kernel's count of unsent "
                "bytes (SIOCOUTQ); Windows has none, so a stream there is "
                "bounded by its event queue alone",
    "systemd": "sd_notify and its watchdog (NOTIFY_SOCKET) are systemd's",
    "overrides-sh": "its override commands are the shell scripts of "
                    "tests/integration/helpers",
    "tcp-owner": "a loopback TCP connection counted as the user owning "
                 "its client's socket (netlink sock_diag); zeusd.exe "
                 "counts all of loopback as one peer",
}


def linux_only(kind, detail=None):
    """A mark for a test, or a parametrization, of Linux-only behaviour."""
    if kind not in LINUX_ONLY:
        raise ValueError(f"linux_only: unknown kind {kind!r}")
    return pytest.mark.linux_only(kind, detail)


def linux_only_reason(kind, detail=None):
    return f"Linux-only ({kind}): {LINUX_ONLY[kind]}" + \
        (f"; {detail}" if detail else "")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "linux_only(kind, detail=None): checks Linux-only "
        "behaviour (conftest.LINUX_ONLY); skipped under ZEUSD_WINE=1")
    config.addinivalue_line(
        "markers", "not_under_wine(reason): behaviour Windows shares, "
        "which wine cannot show within the test's bounds; skipped under "
        "ZEUSD_WINE=1")


def pytest_collection_modifyitems(config, items):
    for item in items:
        reasons = []
        for m in item.iter_markers("linux_only"):
            r = linux_only_reason(*m.args, **m.kwargs)
            if r not in reasons:
                reasons.append(r)
        reasons += [f"Not under wine: {m.args[0]}"
                    for m in item.iter_markers("not_under_wine")]
        if reasons and WINE_RUN:
            item.add_marker(pytest.mark.skip(reason=" | ".join(reasons)))


# what pytest_sessionstart made, for pytest_sessionfinish to undo
_wine_session = {"prefix": None, "server": False}


def pytest_sessionstart(session):
    """Under ZEUSD_WINE=1: a WINEPREFIX made once (when none is set: wine
    makes one on first use, about 15 s), and its wineserver kept running
    for the session (`wineserver -p`) rather than started again, with
    wine's set-up, by the first wine process after each idle gap."""
    if not WINE_RUN:
        return
    os.environ.setdefault("WINEDEBUG", "-all")
    if not os.environ.get("WINEPREFIX"):
        os.environ["WINEPREFIX"] = _wine_session["prefix"] = \
            tempfile.mkdtemp(prefix="zeusd-wine-")
    # Started first, by itself: a wineserver that a test's wine process
    # starts inherits that process's output pipes, and run_zeusd() then
    # waits for it to exit too (3 s after the last wine process ends).
    # 0: started here; 2: one runs already (a lingering one: wait for it).
    for _ in range(2):
        rc = subprocess.run(["wineserver", "-p"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        if rc == 0:
            _wine_session["server"] = True
            break
        try:
            subprocess.run(["wineserver", "-w"], timeout=10)
        except subprocess.TimeoutExpired:
            break       # a persistent one: as good
    subprocess.run([shutil.which("wine") or "wine", "cmd", "/c", "exit"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=300)


def pytest_sessionfinish(session, exitstatus):
    if _wine_session["server"]:
        subprocess.run(["wineserver", "-k"], stderr=subprocess.DEVNULL)
        subprocess.run(["wineserver", "-w"], timeout=60)
    if _wine_session["prefix"]:
        shutil.rmtree(_wine_session["prefix"], ignore_errors=True)


def build_sanitizers():
    """The build's -Db_sanitize value ("address,undefined"), "" if none."""
    info = BUILD / "meson-info" / "intro-buildoptions.json"
    try:
        for o in json.loads(info.read_text()):
            if o["name"] == "b_sanitize" and o["value"] not in ("none", []):
                v = o["value"]
                return ",".join(v) if isinstance(v, list) else v
    except (OSError, ValueError):
        pass
    return ""


def skip_linux_only_args(args):
    """Skips a test whose zeusd arguments ask for AMD SMI or cpu-read."""
    if "amdsmi" in args:
        pytest.skip(linux_only_reason("amdsmi"))
    if any("cpu-read" in a for a in args):
        pytest.skip(linux_only_reason("rapl"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Zeusd:
    """One zeusd process and an httpx client bound to its transport."""

    def __init__(self, tmp, mode=None, args=(), env=None, simulate=True,
                 preexec=None, wrapper=(), tcp_host="127.0.0.1",
                 allowed_hosts=("zeusd", "z")):
        self.tmp = Path(tmp)
        self.mode = mode = mode or DEFAULT_MODE
        self.host = tcp_host
        self.sock = str(self.tmp / "run" / "zeusd.sock")
        self.port = free_port()
        if WINE_RUN:
            skip_linux_only_args(args)
            if mode == "uds":
                pytest.skip(linux_only_reason("unix-socket"))
            if wrapper or preexec:
                pytest.skip(linux_only_reason("wrapper"))
        cmd = list(wrapper) + ZEUSD_CMD + ["serve"]
        if mode == "uds":
            cmd += ["--socket-path", self.sock]
        else:
            h = f"[{tcp_host}]" if ":" in tcp_host else tcp_host
            self.url = f"http://{h}:{self.port}"
            cmd += ["--mode", "tcp", "--tcp-bind-address", f"{h}:{self.port}"]
            # the names the tests' raw requests send in Host (httpx sends
            # the address, which needs no listing)
            if allowed_hosts:
                cmd += ["--tcp-allowed-hosts", ",".join(allowed_hosts)]
        if simulate:
            cmd.append("--simulate")
        cmd += list(args)
        self.env = dict(os.environ)
        self.env.setdefault("ZEUSD_LOG", "debug")
        self.env.update(env or {})
        self.log_path = self.tmp / f"zeusd-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log,
                                     env=self.env, preexec_fn=preexec)
        self.client = None

    def logs(self):
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"zeusd exited {self.proc.returncode}:\n{self.logs()}")
            if self._accepts() and self._serving():
                self.client = self.make_client()
                return self
            time.sleep(0.02)
        raise AssertionError(f"zeusd not ready:\n{self.logs()}")

    def raw_socket(self, timeout=None):
        """A plain socket connected to the daemon (its Unix socket or TCP
        port); `timeout` (seconds, None: blocking) bounds the connect and
        every later call on it."""
        if self.mode != "uds":
            return socket.create_connection((self.host, self.port), timeout)
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(timeout)
        try:
            s.connect(self.sock)
        except OSError:
            s.close()
            raise
        return s

    def _serving(self):
        """The HTTP side is up, not only the socket: the listening socket
        is made before the fork and accepts at once, while the network
        process may still be opening its side of the devices (state a test
        changes right after startup would race with that). Shown by the
        `listening` line, logged at info level; at a quieter level there
        is no sign, and accepting has to do."""
        if self.env.get("ZEUSD_LOG") not in ("debug", "info"):
            return True
        with open(self.log_path, "rb") as f:
            return b" event=listening " in f.read()

    def _accepts(self):
        try:
            self.raw_socket(0.2).close()
            return True
        except OSError:
            return False

    def make_client(self, timeout=10.0):
        if self.mode == "uds":
            return httpx.Client(transport=httpx.HTTPTransport(uds=self.sock),
                                base_url="http://zeusd", timeout=timeout)
        return httpx.Client(base_url=self.url, timeout=timeout)

    def get(self, path, **kw):
        return self.client.get(path, **kw)

    def post(self, path, **kw):
        return self.client.post(path, **kw)

    def stop(self, timeout=15):
        if self.client is not None:
            self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(STOP_SIGNAL)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"zeusd did not stop:\n{self.logs()}")
        self.log.close()
        return self.proc.returncode


@pytest.fixture
def start(tmp_path):
    """start(mode="uds"|"tcp"|None (DEFAULT_MODE), args=[...],
    env={...}) -> ready Zeusd."""
    daemons = []

    def _start(mode=None, args=(), env=None, ready=True, **kw):
        d = Zeusd(tmp_path, mode, args, env, **kw)
        daemons.append(d)
        return d.wait_ready() if ready else d

    yield _start
    for d in daemons:
        rc = d.stop()
        assert rc == 0, f"zeusd exited {rc}:\n{d.logs()}"


@pytest.fixture
def start_public():
    """start_public(args=[...], env={...}, ready=True, **Zeusd's keywords)
    -> a UDS Zeusd whose socket other users can reach: the pytest temporary
    directories are private to root, so it lives in a 0755 directory of its
    own (`start_public.base`, removed at the end)."""
    base = Path(tempfile.mkdtemp(prefix="zeusd-pub-"))
    os.chmod(base, 0o755)
    daemons = []

    def _start(args=(), env=None, ready=True, **kw):
        d = Zeusd(base, "uds", args, env, **kw)
        d.base = base
        d.ready = ready
        daemons.append(d)
        return d.wait_ready() if ready else d

    _start.base = base
    yield _start
    for d in daemons:
        rc = d.stop()
        if d.ready:
            assert rc == 0, f"zeusd exited {rc}:\n{d.logs()}"
    shutil.rmtree(base)


@pytest.fixture
def node(start_public):
    """node(args=[...], policy=TEXT, env={...}, ready=True, mode=0o644) ->
    a Zeusd on a socket every user can reach (start_public) with the node
    policy TEXT (a root-owned file of that mode, in `node.base`)."""
    base = start_public.base

    def _start(args=(), policy=None, env=None, ready=True, mode=0o644):
        a = list(args)
        if policy is not None:
            (base / "policy.toml").write_text(policy)
            os.chmod(base / "policy.toml", mode)
            a += ["--policy-file", str(base / "policy.toml")]
        return start_public(a, env, ready)

    _start.base = base
    return _start


@pytest.fixture(scope="module")
def wine_env(tmp_path_factory):
    """The environment of the Windows tests' wine programs: a wine
    prefix of the module's own, headless (made once, here)."""
    prefix = tmp_path_factory.mktemp("wineprefix")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ZEUS_SIM_", "ZEUSD_")) and k != "DISPLAY"}
    env.update(WINEPREFIX=str(prefix), WINEDEBUG="-all",
               WINEDLLOVERRIDES="mscoree,mshtml=")
    # the prefix is made by the first start; do it once, here
    subprocess.run([shutil.which("wine"), "cmd", "/c", "exit"], env=env,
                   timeout=180, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    yield env
    subprocess.run(["wineserver", "-k"], env=env, timeout=60,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture(params=["uds", "tcp"])
def mode(request):
    return request.param


@pytest.fixture
def daemon(start, mode):
    """A simulated zeusd on each transport."""
    return start(mode)


def run_zeusd(*args, env=None, timeout=10, **kw):
    """Runs zeusd to completion; returns CompletedProcess (text)."""
    e = dict(os.environ)
    e.update(env or {})
    args = list(args)
    if WINE_RUN and args[:1] == ["serve"]:
        skip_linux_only_args(args)
        # zeusd.exe has TCP only: a Unix socket path becomes a free port
        if "--socket-path" in args:
            i = args.index("--socket-path")
            del args[i:i + 2]
        if "--mode" not in args:
            args += ["--mode", "tcp", "--tcp-bind-address",
                     f"127.0.0.1:{free_port()}"]
    return subprocess.run(ZEUSD_CMD + args, capture_output=True,
                          text=True, env=e, timeout=timeout, **kw)


def raw_request(d, target, method="GET", headers=(), timeout=5,
                host="zeusd"):
    """Sends one request with an exact request-target (no client-side
    normalisation) and exactly this Host (None: no Host header), and
    returns (status, headers_text, body_bytes)."""
    s = d.raw_socket(timeout)
    lines = [f"{method} {target} HTTP/1.1",
             *([f"Host: {host}"] if host is not None else []),
             "Connection: close", *headers, "", ""]
    s.sendall("\r\n".join(lines).encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, head.decode(errors="replace"), body


@pytest.fixture(scope="module")
def users(request):
    """The local users the module names in USERS, made for the module and
    removed after it (localusers.py)."""
    from localusers import local_users
    yield from local_users(request.module.USERS)
