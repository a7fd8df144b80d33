"""Black-box tests of the daemon's foundation: command line, transports,
routing, the query parser's refusals, shutdown and logging."""
import os
import re
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import STOP_SIGNAL, ZEUSD, Zeusd, linux_only, \
    raw_request, run_zeusd
from zeushelp import as_nobody


# --- command line ---------------------------------------------------------

def test_version():
    r = run_zeusd("--version")
    assert r.returncode == 0
    assert re.fullmatch(r"zeusd \d+\.\d+\.\d+\n", r.stdout)


@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"],
                                  ["token", "--help"],
                                  ["token", "issue", "--help"]])
def test_help(args):
    r = run_zeusd(*args)
    assert r.returncode == 0, r.stderr
    assert "Usage" in r.stdout or "usage" in r.stdout


def test_help_names_every_command_and_scope():
    assert "token verify" in run_zeusd("--help").stdout
    usage = run_zeusd("token", "issue", "--help").stdout
    for scope in ("gpu-control", "gpu-read", "cpu-read", "metrics"):
        assert scope in usage
    serve = run_zeusd("serve", "--help").stdout
    for knob in ("ZEUSD_REQUEST_TIMEOUT_S", "ZEUSD_MAX_CONNS_PER_PEER",
                 "ZEUSD_DEVICE_QUEUE_MAX"):
        assert knob in serve


@pytest.mark.parametrize("args,needle", [
    (["--socket-permissions", "888"], "--socket-permissions"),
    (["--socket-permissions", "17777"], "--socket-permissions"),
    (["--socket-permissions", "-1"], "--socket-permissions"),
    (["--socket-permissions", ""], "--socket-permissions"),
    (["--tcp-bind-address", "localhost:4938"], "--tcp-bind-address"),
    (["--tcp-bind-address", "127.0.0.1"], "--tcp-bind-address"),
    (["--tcp-bind-address", "127.0.0.1:65536"], "--tcp-bind-address"),
    (["--tcp-bind-address", "::1:4938"], "--tcp-bind-address"),
    (["--tcp-bind-address", "[::1]"], "--tcp-bind-address"),
    (["--enable", "gpu-read,gpu-write"], "gpu-write"),
    (["--enable", "gpu-read,,cpu-read"], "--enable"),
    (["--gpu-power-poll-hz", "0"], "--gpu-power-poll-hz"),
    (["--cpu-power-poll-hz", "0"], "--cpu-power-poll-hz"),
    (["--cpu-power-poll-hz", "ten"], "--cpu-power-poll-hz"),
    (["--num-workers", "0"], "--num-workers"),
    (["--mode", "pipe"], "--mode"),
    (["--gpu-backend", "cuda"], "--gpu-backend"),
    (["--no-such-flag"], "--no-such-flag"),
    (["--mode"], "--mode"),
    (["stray"], "stray"),
])
def test_bad_flags_one_clear_line(args, needle):
    r = run_zeusd("serve", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("zeusd: ") and needle in lines[0], lines[0]


def test_unknown_command():
    r = run_zeusd("frobnicate")
    assert r.returncode == 2 and "frobnicate" in r.stderr


def test_bad_log_level():
    r = run_zeusd("serve", "--simulate", env={"ZEUSD_LOG": "loud"})
    assert r.returncode == 1 and "ZEUSD_LOG" in r.stderr


@pytest.mark.parametrize("level", ["DEBUG", "Warn", "error"])
def test_log_level_any_case(start, level):
    d = start("uds", env={"ZEUSD_LOG": level})
    assert d.get("/time").status_code == 200
    assert d.stop() == 0        # every line written before we read them
    logs = d.logs()
    assert ("event=request" in logs) == (level.lower() == "debug")


@pytest.mark.parametrize("knob,value", [
    ("ZEUSD_IDLE_TIMEOUT_S", "0"), ("ZEUSD_REQUEST_TIMEOUT_S", "x"),
    ("ZEUSD_MAX_CONNS_PER_PEER", "-1"), ("ZEUSD_DEVICE_QUEUE_MAX", "0"),
    ("ZEUSD_SSE_KEEPALIVE_MS", "1"), ("ZEUSD_SSE_MAX_UNSENT_MS", "99"),
    ("ZEUSD_LOG", "loud"),
])
def test_config_error_exits_1_before_opening_devices(tmp_path, knob, value):
    log = tmp_path / "sim.log"
    sock = tmp_path / "run" / "s.sock"
    r = run_zeusd("serve", "--simulate", "--socket-path", str(sock),
                  env={knob: value, "ZEUS_SIM_LOG": str(log)})
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and knob in lines[0], r.stderr
    assert not log.exists() or log.read_text() == ""   # NVML never touched
    assert not sock.exists()


def test_amdsmi_without_library_fails_fast(tmp_path):
    # --simulate does not stand in for AMD SMI (test_amd.py does that)
    r = run_zeusd("serve", "--simulate", "--gpu-backend", "amdsmi",
                  "--socket-path", str(tmp_path / "s"),
                  env={"AMDSMI_LIB_DIR": str(tmp_path)})
    assert r.returncode == 1
    assert "cannot load the AMD SMI library" in r.stderr
    assert not (tmp_path / "s").exists()


# --- basic endpoints on both transports -------------------------------------

@linux_only("rapl", "the default --enable has cpu-read")
def test_discover_shape(daemon):
    r = daemon.get("/discover")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert set(body) == {"gpus", "cpus", "enabled_api_groups",
                         "auth_required"}
    assert body["enabled_api_groups"] == ["gpu-control", "gpu-read",
                                          "cpu-read", "metrics"]
    assert body["auth_required"] is False
    assert [g["id"] for g in body["gpus"]] == list(range(len(body["gpus"])))
    for g in body["gpus"]:
        # the upstream daemon's four fields first, unchanged, then what
        # zeusd adds (docs/api.md)
        assert list(g)[:4] == ["id", "name", "pci_address",
                               "cumulative_energy_available"]
        assert set(g) == {"id", "name", "pci_address",
                          "cumulative_energy_available", "uuid",
                          "architecture", "lost", "supports",
                          "power_limit_range_mw", "clock_range_mhz"}
        assert re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]",
                            g["pci_address"])
    for c in body["cpus"]:
        assert set(c) == {"id", "dram_available"}


def test_time(daemon):
    before = int(time.time() * 1000)
    r = daemon.get("/time")
    after = int(time.time() * 1000)
    assert r.status_code == 200
    assert set(r.json()) == {"timestamp_ms"}
    assert before - 5 <= r.json()["timestamp_ms"] <= after + 5


def test_keepalive_reuses_connection(daemon):
    for _ in range(20):
        r = daemon.get("/time")
        assert r.status_code == 200
        assert r.headers.get("connection", "").lower() != "close"


def test_unknown_path_404_json(daemon):
    r = daemon.get("/nope")
    assert r.status_code == 404
    assert "error" in r.json()


def test_whoami_without_auth(daemon):
    """Without auth there is no token to describe: 404 on TCP; on the
    Unix socket the peer's uid (test_policy.py has the details)."""
    r = daemon.get("/auth/whoami")
    if daemon.mode == "tcp":
        assert r.status_code == 404
    else:
        assert r.status_code == 200
        assert (r.json()["uid"], r.json()["sub"]) == (0, "unix:root")


@pytest.mark.parametrize("method,path,allow", [
    ("POST", "/time", "GET"), ("DELETE", "/discover", "GET"),
    ("GET", "/gpu/set_power_limit", "POST"),
    ("PUT", "/gpu/get_power", "GET"),
])
def test_wrong_method_405(daemon, method, path, allow):
    r = daemon.client.request(method, path)
    assert r.status_code == 405
    assert r.headers["allow"] == allow
    assert "error" in r.json()


@pytest.mark.parametrize("path", ["//time", "/./time", "/gpu/../time",
                                  "/time/", "/%74ime", "/x/y/../../time"])
def test_path_spellings_canonicalise(daemon, path):
    status, _, body = raw_request(daemon, path)
    assert status == 200 and b"timestamp_ms" in body


@pytest.mark.parametrize("path", ["/%zz", "/time%00", "/ti%"])
def test_malformed_path_400(daemon, path):
    assert raw_request(daemon, path)[0] == 400


@pytest.mark.parametrize("query,needle", [
    ("bogus=1", "bogus"),
    ("gpu_ids=0&gpu_ids=1", "gpu_ids"),
    ("gpu_ids=", "gpu_ids"),
    ("gpu_ids=0,,1", "gpu_ids"),
    ("gpu_ids=a", "gpu_ids"),
    ("gpu_ids=-1", "gpu_ids"),
    ("gpu_ids=4294967296", "gpu_ids"),
    ("gpu_ids", "gpu_ids"),
    ("gpu_ids=%zz", "gpu_ids"),
])
def test_read_query_refusals(daemon, query, needle):
    r = daemon.get("/gpu/get_power_limit?" + query)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]


@pytest.mark.parametrize("query,needle", [
    ("block=true&power_limit_mw=200000", "gpu_ids"),
    ("gpu_ids=0&power_limit_mw=200000", "block"),
    ("gpu_ids=0&block=true", "power_limit_mw"),
    ("gpu_ids=0&block=yes&power_limit_mw=200000", "block"),
    ("gpu_ids=0&block=True&power_limit_mw=200000", "block"),
    ("gpu_ids=0&block=true&power_limit_mw=-5", "power_limit_mw"),
    ("gpu_ids=0&block=true&power_limit_mw=4294967296", "power_limit_mw"),
    ("gpu_ids=0&block=true&power_limit_mw=2.5e5", "power_limit_mw"),
    ("gpu_ids=0&block=true&power_limit_mw=%20200000", "power_limit_mw"),
    ("gpu_ids=0&block=true&power_limit_mw=1&power_limit_mw=2",
     "power_limit_mw"),
    ("gpu_ids=0&block=true&power_limit_mw=200000&x=1", "x"),
])
def test_write_query_refusals(daemon, query, needle):
    r = daemon.post("/gpu/set_power_limit?" + query)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]


def test_query_on_time_refused(daemon):
    r = daemon.get("/time?x=1")
    assert r.status_code == 400 and "unknown field `x`" in r.json()["error"]


def test_disabled_group_404(start, mode):
    d = start(mode, args=["--enable", "gpu-read"])
    r = d.post("/gpu/set_power_limit?gpu_ids=0&block=true&power_limit_mw=1")
    assert r.status_code == 404
    assert r.json()["error"] == \
        "API group 'gpu-control' is not enabled on this server."
    r = d.get("/cpu/get_power")
    assert r.status_code == 404
    assert "'cpu-read'" in r.json()["error"]
    assert d.get("/discover").json()["enabled_api_groups"] == ["gpu-read"]
    assert d.get("/discover").json()["cpus"] == []


def test_huge_header_refused_and_daemon_survives(daemon):
    """A 100 KB header is refused. The daemon answers as soon as the header
    outgrows its buffer and closes, possibly while the client is still
    writing: the client then sees a broken pipe or a reset instead of the
    status line, which is the same refusal (seen on a loaded machine)."""
    s = daemon.raw_socket(10)
    req = ("GET /time HTTP/1.1\r\nHost: zeusd\r\nX-Big: " + "a" * 100_000 +
           "\r\nConnection: close\r\n\r\n").encode()
    data = b""
    try:
        s.sendall(req)
    except (BrokenPipeError, ConnectionResetError):
        pass
    try:
        while chunk := s.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    s.close()
    if data:
        status = int(data.split(b" ", 2)[1])
        assert status in (400, 413, 414, 431), data[:200]
    assert daemon.get("/time").status_code == 200


def test_request_body_ignored_but_bounded(daemon):
    r = daemon.post("/gpu/reset_locked_clocks?gpu_ids=0&block=true",
                    content=b"x" * 100)
    assert r.status_code == 200
    r = daemon.post("/gpu/reset_locked_clocks?gpu_ids=0&block=true",
                    content=b"x" * 100_000)
    assert r.status_code == 400


def test_request_log_line(daemon):
    daemon.get("/time")
    daemon.get("/nope")
    time.sleep(0.1)
    logs = daemon.logs()
    assert re.search(r'event=request method=GET path="/time" status=200 '
                     r'dur_us=\d+', logs)
    assert re.search(r'path="/nope" status=404', logs)


def test_log_level_filters(start):
    d = start(env={"ZEUSD_LOG": "warn"})
    d.get("/time")
    time.sleep(0.1)
    assert "event=request" not in d.logs()


# --- UDS rules ----------------------------------------------------------------

@linux_only("unix-socket")
def test_uds_parents_created_and_mode(start, tmp_path):
    d = start(args=["--socket-permissions", "600"])
    st = os.stat(d.sock)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600


@linux_only("unix-socket")
def test_uds_owner(start):
    d = start(args=["--socket-uid", "65534", "--socket-gid", "65534"])
    st = os.stat(d.sock)
    assert (st.st_uid, st.st_gid) == (65534, 65534)


@linux_only("unix-socket")
def test_uds_owner_by_name(start):
    import grp
    import pwd
    group = grp.getgrgid(65534).gr_name
    d = start(args=["--socket-uid", pwd.getpwuid(65534).pw_name,
                    "--socket-gid", group])
    st = os.stat(d.sock)
    assert (st.st_uid, st.st_gid) == (65534, 65534)


@linux_only("unix-socket")
@pytest.mark.parametrize("flag", ["--socket-uid", "--socket-gid"])
def test_uds_owner_unknown_name(tmp_path, flag):
    r = run_zeusd("serve", "--simulate", "--socket-path",
                  str(tmp_path / "s.sock"), flag, "no-such-name-zeusd")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "no such" in lines[0]


@linux_only("unix-socket")
def test_uds_refuses_non_socket(tmp_path):
    path = tmp_path / "run" / "zeusd.sock"
    path.parent.mkdir()
    path.write_text("precious")
    r = run_zeusd("serve", "--simulate", "--socket-path", str(path))
    assert r.returncode == 1
    assert "not a socket" in r.stderr
    assert path.read_text() == "precious"


@linux_only("unix-socket")
def test_uds_refuses_live_daemon(start, tmp_path):
    d = start()
    r = run_zeusd("serve", "--simulate", "--socket-path", d.sock)
    assert r.returncode == 1
    assert "already listening" in r.stderr
    assert d.get("/time").status_code == 200


@linux_only("unix-socket")
def test_uds_stale_socket_reused(start, tmp_path):
    path = tmp_path / "run" / "zeusd.sock"
    path.parent.mkdir()
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()                       # file stays, nobody listens
    d = start()
    assert d.get("/time").status_code == 200
    assert "event=stale_socket_removed" in d.logs()


@linux_only("unix-socket")
def test_clean_shutdown_removes_socket(tmp_path):
    d = Zeusd(tmp_path).wait_ready()
    assert os.path.exists(d.sock)
    assert d.stop() == 0
    assert not os.path.exists(d.sock)
    assert "event=stopped" in d.logs()


@pytest.mark.parametrize("sig", [
    signal.SIGINT,
    pytest.param(signal.SIGTERM, marks=linux_only("signals"))])
def test_signals_exit_zero(tmp_path, sig):
    d = Zeusd(tmp_path).wait_ready()
    d.proc.send_signal(sig)
    assert d.proc.wait(10) == 0
    assert not os.path.exists(d.sock)


def test_shutdown_lets_inflight_request_finish(tmp_path):
    ctl = tmp_path / "sim.ctl"
    ctl.write_text("delay nvmlDeviceGetPowerManagementLimit 0 1000\n")
    d = Zeusd(tmp_path, env={"ZEUS_SIM_CONTROL": str(ctl)}).wait_ready()
    result = {}

    def slow():
        result["r"] = d.make_client().get("/gpu/get_power_limit?gpu_ids=0")

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.3)
    d.proc.send_signal(STOP_SIGNAL)
    t.join(10)
    assert result["r"].status_code == 200
    assert "0" in result["r"].json()
    assert d.proc.wait(10) == 0


# --- TCP ----------------------------------------------------------------------

def test_tcp_ipv6(start):
    d = start("tcp", tcp_host="::1")
    assert d.get("/time").status_code == 200
    assert f"address=tcp:[::1]:{d.port}" in d.logs()


def test_tcp_without_key_warns(start):
    d = start("tcp")
    assert "event=tcp_without_auth" in d.logs()


def test_tcp_port_in_use(start):
    d = start("tcp")
    r = run_zeusd("serve", "--simulate", "--mode", "tcp",
                  "--tcp-bind-address", f"127.0.0.1:{d.port}")
    assert r.returncode == 1 and "cannot bind" in r.stderr


# --- privileges ---------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to nobody")
@pytest.mark.parametrize("enable,group", [
    ("gpu-read,cpu-read", "cpu-read"),
    ("gpu-control", "gpu-control"),
])
def test_root_only_group_refused_without_root(enable, group):
    tmp = tempfile.mkdtemp(prefix="zeusd-nobody-", dir="/tmp")
    os.chmod(tmp, 0o777)
    r = subprocess.run(as_nobody() + [
        str(ZEUSD), "serve", "--socket-path", tmp + "/s.sock",
        "--enable", enable], capture_output=True, text=True, timeout=10)
    assert r.returncode == 1
    assert f"'{group}' needs root" in r.stderr
    assert not os.path.exists(tmp + "/s.sock")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to nobody")
def test_gpu_read_allowed_without_root():
    tmp = tempfile.mkdtemp(prefix="zeusd-nobody-", dir="/tmp")
    os.chmod(tmp, 0o777)
    d = Zeusd(tmp, args=["--enable", "gpu-read"], simulate=False,
              wrapper=as_nobody(),
              env={"ZEUSD_LOG": "info"})
    try:
        d.wait_ready()
        assert d.get("/discover").json()["enabled_api_groups"] == \
            ["gpu-read"]
    finally:
        assert d.stop() == 0


# --- idle connections -----------------------------------------------------------

def test_idle_connection_dropped(start, mode):
    d = start(mode, env={"ZEUSD_IDLE_TIMEOUT_S": "1"})
    s = d.raw_socket(10)
    t0 = time.monotonic()
    assert s.recv(1) == b""             # the daemon closed it
    assert 0.5 < time.monotonic() - t0 < 5
    s.close()
    assert d.get("/time").status_code == 200


@pytest.mark.parametrize("value", ["0", "abc", "-1", "100000"])
def test_bad_idle_timeout_refused(tmp_path, value):
    r = run_zeusd("serve", "--simulate", "--socket-path",
                  str(tmp_path / "s.sock"),
                  env={"ZEUSD_IDLE_TIMEOUT_S": value})
    assert r.returncode == 1
    assert "ZEUSD_IDLE_TIMEOUT_S" in r.stderr
