"""zeusd.exe's named pipe (issue 32, docs/windows.md), run under wine.

Skipped, with the reason, as test_windows.py is (zeushelp.windows_skips:
no wine, no build-win/, the sanitizer run). Linux processes cannot open a
wine pipe, so two mingw tools from tests/win/ do it:

  pipe_proxy.exe   listens on a loopback TCP port and relays each
                   connection to a pipe client of its own: the tests
                   here speak HTTP to it as to TCP, and each of their
                   connections is one pipe client for its whole life
  pipe_client.exe  a native pipe client: a client that never writes,
                   many clients held at once, keep-alive requests

and zeus.exe (libzeus) speaks to the pipe itself (libcurl on a relayed
socket, src/lib/os_win.c).

One wine prefix for the file (wine_env, conftest's fixture); one
pipe-mode zeusd.exe for the tests that do not stop or flood it.
"""
import json
import re
import socket
import subprocess
import time
import uuid
import weakref

import pytest

from zeushelp import (BUILD_WIN, NoAnswer, WINE, WinZeusd, ZEUSD_EXE,
                      assert_ctrl_c_ended_a_stream, check_gpu_requests,
                      check_tokens, first_power_event, needs_zeusd,
                      read_to_eof, run_zeusd_exe, wait_log, windows_skips,
                      winpath)


windows_skips()

PROXY = BUILD_WIN / "pipe_proxy.exe"
CLIENT = BUILD_WIN / "pipe_client.exe"
ZEUS = BUILD_WIN / "zeus.exe"

pytestmark = [needs_zeusd, pytest.mark.skipif(
    not (PROXY.exists() and CLIENT.exists()),
    reason="pipe_proxy.exe / pipe_client.exe not built (make windows)")]

CAP = 40		# ZEUSD_MAX_CONNS_PER_PEER of the shared daemon
DEADLINE_S = 4		# its ZEUSD_REQUEST_TIMEOUT_S


def pipe_name():
    return r"\\.\pipe\zeusd-test-" + uuid.uuid4().hex[:10]


class PipeZeusd(WinZeusd):
    """`wine zeusd.exe serve --simulate` on a pipe of its own (no --mode:
    the named pipe is the default), reached through a pipe_proxy.exe."""

    def __init__(self, env, tmp, args=(), extra=None, pipe=None):
        self.pipe = pipe or pipe_name()
        self.env = env
        self.log_path = tmp / f"zeusd-{self.pipe[-10:]}.log"
        self.log = open(self.log_path, "wb")
        e = dict(env)
        e["ZEUSD_LOG"] = "info"
        e.update(extra or {})
        self.proc = subprocess.Popen(
            [WINE, str(ZEUSD_EXE), "serve", "--simulate", "--pipe-name",
             self.pipe, *args], env=e, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while b" event=listening " not in self.log_path.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"zeusd.exe not ready:\n{self.logs()}")
            time.sleep(0.05)
        self.proxy_log_path = tmp / f"proxy-{self.pipe[-10:]}.log"
        self.proxy_log = open(self.proxy_log_path, "wb")
        self.proxy = subprocess.Popen([WINE, str(PROXY), self.pipe, "0"],
                                      env=env, stdout=subprocess.PIPE,
                                      stderr=self.proxy_log, text=True)
        line = self.proxy.stdout.readline()
        assert line.startswith("port="), line
        self.port = int(line[5:])

    def proxy_logs(self):
        return self.proxy_log_path.read_text(errors="replace")

    def connect(self, timeout=20):
        return socket.create_connection(("127.0.0.1", self.port),
                                        timeout=timeout)

    def client(self, *args, timeout=60):
        p = subprocess.run([WINE, str(CLIENT), args[0], self.pipe,
                            *args[1:]], env=self.env, timeout=timeout,
                           capture_output=True, text=True)
        return p.returncode, dict(
            kv.split("=", 1) for kv in p.stdout.split() if "=" in kv)

    def stop(self, timeout=30):
        rc = super().stop(timeout)
        self.proxy.kill()
        self.proxy.wait()
        self.proxy_log.close()
        return rc


@pytest.fixture(scope="module")
def shared(wine_env, tmp_path_factory):
    d = PipeZeusd(wine_env, tmp_path_factory.mktemp("pipe"), extra={
        "ZEUSD_MAX_CONNS_PER_PEER": str(CAP),
        "ZEUSD_REQUEST_TIMEOUT_S": str(DEADLINE_S)})
    yield d
    rc = d.stop()
    assert rc == 0, f"zeusd.exe exited {rc}:\n{d.logs()}"


# bytes read past the answer read_response returned, per socket: pipelined
# answers may come in one read
_unread = weakref.WeakKeyDictionary()


def read_response(s):
    """One HTTP response with a Content-Length from a keep-alive socket."""
    data = _unread.pop(s, b"")
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, f"closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    n = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
    while len(body) < n:
        chunk = s.recv(65536)
        assert chunk, "closed inside a body"
        body += chunk
    if len(body) > n:
        _unread[s] = body[n:]
    return int(head.split(b" ", 2)[1]), head, body[:n]


def send_get(s, path):
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())


def test_pipe_is_the_default_and_logs_the_client_pid(shared):
    assert f"event=listening address=pipe:{shared.pipe} " in shared.logs()
    t = shared.json("GET", "/time")
    assert t["timestamp_ms"] > 0
    disc = shared.json("GET", "/discover")
    assert len(disc["gpus"]) == 4 and disc["auth_required"] is False
    # the peer is the pipe client's process (the proxy), as pid=
    assert re.search(r'event=request method=GET path="/discover" '
                     r'status=200 dur_us=\d+ pipe_pid=\d+', shared.logs())


def test_pipe_gpu_requests(shared):
    check_gpu_requests(shared)
    # a web page's request is refused as on TCP
    assert shared.json("GET", "/time", headers={"Origin": "http://e.com"},
                       status=403)


def test_pipe_tokens_as_on_tcp(wine_env, tmp_path):
    daemons = []

    def start(*args):
        daemons.append(PipeZeusd(wine_env, tmp_path, args))
        return daemons[-1]

    try:
        check_tokens(wine_env, tmp_path, start)
    finally:
        for d in daemons:
            assert d.stop() == 0, d.logs()


def test_pipe_keep_alive(shared):
    with shared.connect() as s:
        for path in ("/time", "/gpu/get_power?gpu_ids=3", "/time"):
            send_get(s, path)
            status, head, body = read_response(s)
            assert status == 200 and b"close" not in head.lower(), head
            json.loads(body)
        # pipelined: two requests in one write, two answers in order
        s.sendall(b"GET /time HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /nothere HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(s)[0] == 200
        assert read_response(s)[0] == 404
    rc, out = shared.client("get", "/time", "5")
    assert rc == 0


def test_pipe_many_concurrent_clients_then_the_per_peer_cap(shared):
    # CAP pipe clients of one process (the proxy) open at once ...
    socks = [shared.connect() for _ in range(CAP)]
    try:
        for s in socks:
            send_get(s, "/gpu/get_power?gpu_ids=0")
        assert [read_response(s)[0] for s in socks] == [200] * CAP
        # ... and one more is refused: the peer is the client's process
        with shared.connect() as extra:
            data = b""
            while chunk := extra.recv(65536):
                data += chunk
        assert data.startswith(b"HTTP/1.1 503"), data
        assert b"connections from this peer (limit %d)" % CAP in data
    finally:
        for s in socks:
            s.close()
    wait_log(shared, re.compile(r"event=connection_refused pipe_pid=\d+ "
                                rf"reason=per_peer_limit limit={CAP}\n"),
             timeout=10)
    # the slots come back once the closes went through proxy and relay.
    # Until then a try is refused, and a refusal of a client that already
    # wrote its request can reach it as a close without the 503 (the
    # relay's socket is reset for the unread request, and a reset drops
    # what the socket had not handed over yet: docs/windows.md), so an
    # empty answer counts as one more refusal here.
    deadline = time.monotonic() + 30
    while True:
        try:
            code = shared.request("GET", "/time")[0]
        except NoAnswer:
            code = None
        if code == 200:
            break
        assert code in (None, 503), code
        assert time.monotonic() < deadline, \
            shared.logs()[-2000:] + "\nproxy: " + shared.proxy_logs()[-500:]
        time.sleep(0.2)


def test_pipe_replaces_instances_as_clients_connect(shared):
    # twenty clients connected at once: each found an instance waiting
    rc, out = shared.client("hold", "20", "200")
    assert rc == 0 and out == {"opened": "20", "busy": "0", "other": "0",
                               "after": "200"}, out
    assert "pipe_instance_failed" not in shared.logs()


def test_pipe_client_that_never_writes_is_dropped_at_the_deadline(shared):
    rc, out = shared.client("idle")
    assert rc == 0, out
    # the server closed the pipe at the request deadline, sending nothing
    assert out["bytes"] == "0"
    assert DEADLINE_S * 1000 - 300 <= int(out["closed_after_ms"]) <= \
        DEADLINE_S * 1000 + 3000, out
    ms = DEADLINE_S * 1000
    wait_log(shared, re.compile(r"event=request_deadline_expired "
                                rf"pipe_pid=\d+ timeout_ms={ms}"),
             timeout=10)


def test_pipe_streams(shared):
    with shared.connect() as s:
        first_power_event(s, 2, "x")
        # and the next ones
        data = b""
        while data.count(b"data: ") < 2:
            data += s.recv(65536)
    deadline = time.monotonic() + 10
    while "event=stream_closed kind=gpu" not in shared.logs():
        assert time.monotonic() < deadline, shared.logs()[-2000:]
        time.sleep(0.1)


def test_pipe_bad_sddl_and_name_are_refused_at_startup(wine_env):
    p = run_zeusd_exe(wine_env, "serve", "--simulate", "--pipe-name",
                      pipe_name(), "--pipe-sddl", "D:(A;;GRGW;;;NOSUCH")
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith("zeusd: invalid --pipe-sddl "
                               "'D:(A;;GRGW;;;NOSUCH': not a security "
                               "descriptor in SDDL"), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    for bad in ("zeusd", r"\\.\pipe\a b", r"\\.\pipe\a\b",
                "\\\\.\\pipe\\" + "x" * 249):
        p = run_zeusd_exe(wine_env, "serve", "--pipe-name", bad)
        assert p.returncode == 2, (bad, p.stderr)
        assert p.stderr.startswith(f"zeusd: invalid --pipe-name "
                                   f"'{bad[:64]}'"), p.stderr


def test_pipe_second_zeusd_on_the_same_name_is_refused(wine_env, shared):
    p = run_zeusd_exe(wine_env, "serve", "--simulate", "--pipe-name",
                      shared.pipe)
    assert p.returncode == 1, p.stderr
    assert p.stderr.strip().endswith(
        f"zeusd: cannot create the named pipe {shared.pipe}: another "
        "process already serves it (another zeusd?) (error 231)"), p.stderr
    # the first one still serves
    assert shared.json("GET", "/time")["timestamp_ms"] > 0


def test_pipe_instance_limit_then_ctrl_c_with_clients_connected(
        wine_env, tmp_path):
    d = PipeZeusd(wine_env, tmp_path, extra={"ZEUSD_MAX_CONNS_PER_PEER": "400"})
    try:
        # 254 instances at most: the rest find the pipe busy; zeusd logs,
        # retries every second, and serves again once clients leave
        rc, out = d.client("hold", "256", "1500", timeout=120)
        assert rc == 0 and out == {"opened": "254", "busy": "2",
                                   "other": "0", "after": "200"}, out
        logs = d.logs()
        assert re.search(r"level=warn event=pipe_instance_failed pipe="
                         + re.escape(d.pipe) + r" error=231 "
                         r"instances_max=254 ", logs), logs[-3000:]
        assert "event=pipe_instance_ok" in logs
        # shutdown with pipe clients connected: a stream, an idle
        # keep-alive client, and a client that never wrote
        stream = d.connect()
        first_power_event(stream, 0, "x")
        kept = d.connect()
        send_get(kept, "/time")
        assert read_response(kept)[0] == 200
        silent = d.connect()
        t0 = time.monotonic()
        rc = d.stop()
        took = time.monotonic() - t0
        for s in (stream, kept, silent):
            read_to_eof(s)
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proxy.kill()
    assert_ctrl_c_ended_a_stream(d, rc)
    assert took < 10, took


def run_zeus(env, *args, extra=None, timeout=60):
    e = {k: v for k, v in env.items() if not k.startswith("ZEUSD_")}
    e.update(extra or {})
    return subprocess.run([WINE, str(ZEUS), *args], env=e, timeout=timeout,
                          capture_output=True, text=True)


@pytest.mark.skipif(not ZEUS.exists(), reason="zeus.exe not built")
def test_zeus_measure_and_stream_over_the_pipe(wine_env, shared):
    # ZEUSD_PIPE_NAME: zeus measure reads the GPUs' energy through zeusd
    before = shared.logs().count("path=\"/gpu/get_cumulative_energy\"")
    p = run_zeus(wine_env, "measure", "--", "cmd", "/c", "exit 3",
                 extra={"ZEUSD_PIPE_NAME": shared.pipe})
    assert p.returncode == 3, p.stderr
    for i in range(4):
        assert re.search(rf"^zeus: gpu {i} [\d.]+ J$", p.stderr, re.M), \
            p.stderr
    assert "zeus: total " in p.stderr and "(exit status 3)" in p.stderr
    assert shared.logs().count(
        "path=\"/gpu/get_cumulative_energy\"") >= before + 2
    # --pipe-name, and a stream (SSE) over the pipe
    p = run_zeus(wine_env, "daemon", "stream-gpu", "--count", "3",
                 "--gpus", "1", "--pipe-name", shared.pipe)
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]
    assert len(events) == 3 and all(e["gpu_id"] == 1 and e["power_mw"] > 0
                                    for e in events), p.stdout
    # one of the three transports at a time
    p = run_zeus(wine_env, "daemon", "discover", extra={
        "ZEUSD_PIPE_NAME": shared.pipe, "ZEUSD_HOST_PORT": "127.0.0.1:1"})
    assert p.returncode == 1 and "more than one set?" in p.stderr, p.stderr
    p = run_zeus(wine_env, "daemon", "discover", "--pipe-name", "zeusd")
    assert p.returncode != 0
    assert "pipe name must be \\\\.\\pipe\\NAME" in p.stderr, p.stderr
    # a pipe nobody serves: a transport error naming it
    p = run_zeus(wine_env, "daemon", "discover", "--pipe-name",
                 r"\\.\pipe\nobody-here")
    assert p.returncode == 1
    assert "via \\\\.\\pipe\\nobody-here: Couldn't connect" in p.stderr, \
        p.stderr


@pytest.mark.skipif(not ZEUS.exists(), reason="zeus.exe not built")
def test_zeus_uses_the_default_pipe_when_nothing_is_set(wine_env, tmp_path):
    # nothing set, no zeusd: zeus measure reads NVML directly (none here)
    p = run_zeus(wine_env, "daemon", "discover")
    assert p.returncode == 1
    assert "set ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT or ZEUSD_PIPE_NAME" \
        in p.stderr, p.stderr
    d = PipeZeusd(wine_env, tmp_path, pipe=r"\\.\pipe\zeusd")
    try:
        p = run_zeus(wine_env, "daemon", "discover")
        assert p.returncode == 0, p.stderr
        assert len(json.loads(p.stdout)["gpus"]) == 4
        p = run_zeus(wine_env, "measure", "--", "cmd", "/c", "exit 0")
        assert p.returncode == 0, p.stderr
        assert "zeus: gpu 3 " in p.stderr
        assert 'path="/gpu/get_cumulative_energy"' in d.logs()
    finally:
        rc = d.stop()
    assert rc == 0, d.logs()


def sc(env, *args):
    p = subprocess.run([WINE, "sc", *args], env=env, timeout=60,
                       capture_output=True, text=True)
    return p.returncode, dict(
        (k.strip(), v.split()[0] if v.split() else "")
        for k, _, v in (line.partition(":") for line in p.stdout.splitlines())
        if v)


def sc_wait(env, name, state, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        rc, q = sc(env, "query", name)
        if q.get("STATE") == state or time.monotonic() > deadline:
            return q
        time.sleep(0.2)


def test_zeusd_runs_as_a_service_under_wines_scm(wine_env):
    name = "zeusd" + uuid.uuid4().hex[:8]
    pipe = pipe_name()
    rc, _ = sc(wine_env, "create", name, "binPath=",
               f"{winpath(ZEUSD_EXE)} serve --simulate --pipe-name {pipe}")
    assert rc == 0
    proxy = None
    try:
        rc, q = sc(wine_env, "start", name)
        # START_PENDING with zeusd's wait hint, then RUNNING (a zeusd that
        # is quick may be RUNNING already when sc reads the state back)
        assert rc == 0 and (q["STATE"], q["WAIT_HINT"]) in (
            ("2", "0x7530"), ("4", "0x0")), q
        assert sc_wait(wine_env, name, "4")["STATE"] == "4"
        proxy = subprocess.Popen([WINE, str(PROXY), pipe, "0"], env=wine_env,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)
        port = int(proxy.stdout.readline()[5:])
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        first_power_event(s, 0, "x")
        # the stop control ends the stream, as Ctrl-C does, then STOPPED 0
        rc, q = sc(wine_env, "stop", name)
        assert rc == 0 and q["STATE"] == "3", q
        read_to_eof(s)
        q = sc_wait(wine_env, name, "1")
        assert q["STATE"] == "1" and q["WIN32_EXIT_CODE"] == "0" and \
            q["SERVICE_EXIT_CODE"] == "0", q
    finally:
        if proxy is not None:
            proxy.kill()
            proxy.wait()
        sc(wine_env, "stop", name)
        sc(wine_env, "delete", name)
    # a service that cannot start reports zeusd's exit status
    rc, _ = sc(wine_env, "create", name, "binPath=",
               f"{winpath(ZEUSD_EXE)} serve --pipe-sddl D:(bogus")
    try:
        sc(wine_env, "start", name)
        q = sc_wait(wine_env, name, "1")
        assert q["STATE"] == "1" and q["WIN32_EXIT_CODE"] == "1066" and \
            q["SERVICE_EXIT_CODE"] == "1", q
    finally:
        sc(wine_env, "delete", name)
