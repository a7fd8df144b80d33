"""Black-box tests of the `zeus` tool: measure's contract (exit status,
output as text, JSON and CSV, usage errors and per-subcommand help, the
warning when nothing can be measured) and `zeus daemon ...`, which drives
libzeus's zeusd client against a simulated zeusd over UDS and TCP (reads,
a write, SSE streams, and errors carrying the daemon's message and status,
with the same exit codes for every verb)."""
import csv
import io
import json
import os
import subprocess
import sys

import pytest

from conftest import BUILD, SIM
from zeushelp import as_user

ZEUS = BUILD / "zeus"


def zeus(*args, env=None, timeout=30):
    e = dict(os.environ)
    for k in ("ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT", "ZEUSD_PIPE_NAME",
              "ZEUSD_TOKEN"):
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
    r = zeus("--help")
    assert r.returncode == 0
    assert all(f"usage: zeus {c}" in r.stdout
               for c in ("measure", "gauge", "daemon"))
    for bad in (["bogus"], [], ["measure"], ["measure", "--gpus", "x", "--",
                                            "true"],
                ["measure", "--pushgateway", "http://x", "--", "true"],
                ["gauge", "--job", "j"], ["daemon", "nope"]):
        r = zeus(*bad)
        assert r.returncode == 2, (bad, r.stderr)


@pytest.mark.parametrize("cmd", ["measure", "gauge", "daemon"])
def test_each_subcommand_has_its_own_help(cmd):
    r = zeus(cmd, "--help")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith(f"usage: zeus {cmd} ")
    others = {"measure", "gauge", "daemon"} - {cmd}
    assert not any(f"zeus {o} " in r.stdout for o in others), r.stdout
    # also after other options, and after a daemon verb
    args = [cmd, "--gpus", "0", "--help"] + (["--", "true"]
                                             if cmd == "measure" else [])
    assert zeus(*args).stdout == r.stdout
    if cmd == "daemon":
        assert zeus("daemon", "power", "--help").stdout == r.stdout


@pytest.mark.parametrize("args,msg", [
    (["measure", "--bogus", "--", "true"], "unknown option '--bogus'"),
    (["measure", "--gpus", "x", "--", "true"], "bad value for --gpus: 'x'"),
    (["measure", "--mw", "5", "--", "true"], "unknown option '--mw'"),
    (["measure", "--gpus"], "option '--gpus' needs a value"),
    (["measure", "--json", "--csv", "--", "true"], "--json and --csv"),
    (["measure", "--counter", "1", "--", "true"], "--counter needs"),
    (["measure"], "needs a command"),
    (["gauge", "--job", "j"], "--pushgateway and --job go together"),
    (["gauge", "--pushgateway", "http://x", "--job", "j", "extra"],
     "unexpected argument 'extra'"),
    (["daemon"], "needs a verb"),
    (["daemon", "nope"], "unknown verb 'nope'"),
    (["daemon", "power", "--json"], "unknown option '--json'"),
    (["daemon", "set-power-limit", "--gpus", "0"], "needs --mw"),
    (["daemon", "power", "--socket", "s", "--pipe-name", r"\\.\pipe\z"],
     "--socket, --host-port and --pipe-name exclude each other"),
])
def test_usage_error_is_one_line_and_a_hint(args, msg):
    r = zeus(*args)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith(f"zeus {args[0]}: ") and msg in lines[0]
    assert lines[1] == f"Try 'zeus {args[0]} --help' for more information."


def test_unknown_subcommand_hint():
    r = zeus("bogus")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        "zeus: unknown subcommand 'bogus'",
        "Try 'zeus --help' for more information."]


def shortest(token):
    """Whether a JSON/CSV number is written as briefly as it reads back."""
    v = float(token)
    return token == repr(v) or (v.is_integer() and token == str(int(v)))


def test_measure_json_numbers_are_short(tmp_path):
    env = {"ZEUS_NVML_LIBRARY": str(SIM),
           "ZEUS_RAPL_DIR": str(tmp_path / "none")}
    r = zeus("measure", "--json", "--output", "-", "--", "sleep", "0.2",
             env=env)
    assert r.returncode == 0, r.stderr
    tokens = []

    def keep(t):
        tokens.append(t)
        return float(t)
    out = json.loads(r.stdout, parse_float=keep, parse_int=keep)
    assert tokens and all(shortest(t) for t in tokens), r.stdout
    # joules to the µJ, seconds to the ns
    for v in out["gpu_energy_j"].values():
        assert round(v, 6) == v
    assert round(out["time_s"], 9) == out["time_s"]
    assert out["total_energy_j"] == round(sum(
        out["gpu_energy_j"].values()), 6)
    assert 0.2 <= out["time_s"] < 5


def test_measure_csv(tmp_path):
    env = {"ZEUS_NVML_LIBRARY": str(SIM),
           "ZEUS_RAPL_DIR": str(tmp_path / "none")}
    r = zeus("measure", "--csv", "--gpus", "1,3", "--window", 'a,"b',
             "--output", "-", "--", "sh", "-c", "exit 3", env=env)
    assert r.returncode == 3, r.stderr
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == ["window", "time_s", "gpu1_j", "gpu3_j", "total_j",
                       "exit_status"]
    assert len(rows) == 2 and rows[1][0] == 'a,"b' and rows[1][-1] == "3"
    assert all(shortest(t) for t in rows[1][1:])
    assert float(rows[1][4]) == pytest.approx(float(rows[1][2]) +
                                              float(rows[1][3]), abs=1e-6)


def test_nothing_to_measure_is_said(tmp_path):
    env = {"ZEUS_NVML_LIBRARY": str(tmp_path / "no-nvml.so"),
           "ZEUS_RAPL_DIR": str(tmp_path / "no-rapl")}
    r = zeus("measure", "--", "sh", "-c", "exit 5", env=env)
    assert r.returncode == 5
    assert "zeus measure: warning: nothing to measure" in r.stderr
    assert "no-nvml.so" in r.stderr and "no-rapl" in r.stderr
    assert "zeus: time " in r.stderr
    # asked for nothing: no warning
    r = zeus("measure", "--gpus", "none", "--cpus", "none", "--", "true",
             env=env)
    assert r.returncode == 0 and "nothing to measure" not in r.stderr


def test_nothing_to_measure_from_zeusd(start):
    d = start(args=["--enable", "gpu-control"])
    r = zeus("measure", "--socket", d.sock, "--", "true")
    assert r.returncode == 0, r.stderr
    assert "nothing to measure: the zeusd lists no GPU" in r.stderr


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
    assert r.returncode == 1
    assert r.stderr.startswith("zeus measure: ") and \
        "GPU 9 does not exist" in r.stderr


def test_daemon_reads(daemon):
    r = zeus("daemon", "discover", *conn(daemon))
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    want = daemon.get("/discover").json()
    # `zeus daemon discover` shows the upstream fields of each GPU
    up = ("id", "name", "pci_address", "cumulative_energy_available")
    assert got["gpus"] == [{k: g[k] for k in up} for g in want["gpus"]]
    assert got["cpus"] == want["cpus"]
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


@pytest.mark.parametrize("verb", ["power", "energy", "stream-gpu",
                                  "set-power-limit"])
def test_daemon_4xx_exits_4_for_every_verb(daemon, verb):
    extra = ["--mw", "250000"] if verb == "set-power-limit" else \
        ["--count", "1"] if verb == "stream-gpu" else []
    r = zeus("daemon", verb, "--gpus", "9", *extra, *conn(daemon))
    assert r.returncode == 4, r.stderr
    assert r.stderr.startswith(f"zeus daemon: {verb}: ")
    assert "HTTP 400" in r.stderr and "Unknown GPU index 9" in r.stderr


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


def test_pipe_name_is_windows_only_and_one_transport_at_a_time(tmp_path):
    r = zeus("daemon", "discover", "--pipe-name", r"\\.\pipe\zeusd")
    assert r.returncode == 1
    assert "named pipes exist only on Windows" in r.stderr, r.stderr
    r = zeus("daemon", "discover", env={"ZEUSD_PIPE_NAME": r"\\.\pipe\z"})
    assert "named pipes exist only on Windows" in r.stderr, r.stderr
    r = zeus("daemon", "discover", env={
        "ZEUSD_SOCK_PATH": str(tmp_path / "s"), "ZEUSD_PIPE_NAME": "p"})
    assert r.returncode == 1 and "more than one set?" in r.stderr, r.stderr


def test_token_is_sent(start, tmp_path):
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    d = start(args=["--signing-key-path", str(key)])
    r = zeus("daemon", "energy", *conn(d))
    assert r.returncode == 4 and "HTTP 401" in r.stderr
    tok = subprocess.run([str(BUILD / "zeusd"), "token", "issue",
                          "--signing-key-path", str(key), "--user", "alice",
                          "--scope", "gpu-read,cpu-read", "--expires", "1h"],
                         capture_output=True, text=True).stdout.strip()
    r = zeus("daemon", "energy", *conn(d), env={"ZEUSD_TOKEN": tok})
    assert r.returncode == 0, r.stderr
    r = zeus("daemon", "set-power-limit", "--gpus", "0", "--mw", "300000",
             "--token", tok, *conn(d))
    assert r.returncode == 4 and "HTTP 403" in r.stderr


# Run by the measured command: looks for a connection to the zeusd socket
# among its inherited descriptors and, through each, asks zeusd to change
# a power limit. Prints one JSON line: the descriptors and the statuses.
INHERITED = r"""
import json, os, socket, sys
path, target = sys.argv[1:3]
found, statuses = [], []
for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
    try:
        s = socket.socket(fileno=os.dup(fd))
    except OSError:
        continue
    try:
        peer = s.getpeername() if s.family == socket.AF_UNIX else None
    except OSError:
        peer = None
    # zeusd binds through a directory descriptor: the peer's name is
    # "/proc/self/fd/N/<name>", not the path clients connect to.
    if peer and os.path.basename(peer) == os.path.basename(path):
        found.append(fd)
        s.settimeout(10)
        s.sendall(f"POST {target} HTTP/1.1\r\nHost: z\r\n"
                  "Connection: close\r\nContent-Length: 0\r\n\r\n".encode())
        data = b""
        while b"\r\n" not in data:
            b = s.recv(4096)
            if not b:
                break
            data += b
        statuses.append(int(data.split()[1]) if data else 0)
    s.close()
print(json.dumps({"fds": found, "statuses": statuses}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to nobody")
def test_measured_command_does_not_inherit_the_zeusd_connection(
        start_public):
    """Root measures a command that drops to nobody (setpriv, su, a job
    launcher). zeusd knows a Unix-socket peer by the credentials of the
    process that connected, so a kept-alive connection libzeus opened as
    root and leaked into the command would let nobody act as root: here,
    set a power limit the node policy refuses it."""
    base = start_public.base
    (base / "policy.toml").write_text(
        '[[grant]]\nusers = ["nobody"]\nscopes = ["gpu-read"]\n')
    os.chmod(base / "policy.toml", 0o644)
    d = start_public(["--policy-file", str(base / "policy.toml")])
    before = d.get("/gpu/get_power_limit?gpu_ids=0").json()
    target = "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true"
    drop = as_user(65534)
    # nobody's own connection is refused
    own = subprocess.run([*drop, sys.executable, "-c",
                          "import socket,sys; s=socket.socket(socket.AF_UNIX);"
                          "s.connect(sys.argv[1]); s.sendall(("
                          "'POST ' + sys.argv[2] + ' HTTP/1.1\\r\\nHost: z\\r\\n"
                          "Connection: close\\r\\nContent-Length: 0\\r\\n\\r\\n'"
                          ").encode()); print(s.recv(64).split()[1].decode())",
                          d.sock, target], capture_output=True, text=True,
                         timeout=20)
    assert own.stdout.strip() == "403", own.stderr
    r = zeus("measure", "--socket", d.sock, "--gpus", "0", "--cpus", "none",
             "--", *drop, sys.executable, "-c", INHERITED, d.sock, target)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.splitlines()[-1])
    assert got == {"fds": [], "statuses": []}, got
    assert d.get("/gpu/get_power_limit?gpu_ids=0").json() == before
    assert "zeus: gpu 0 " in r.stderr


def test_zeusd_requests_bypass_proxies(start, tmp_path):
    """http_proxy and ALL_PROXY are common on cluster nodes (to reach the
    internet) and rarely exempt 127.0.0.1. Requests to zeusd must not go
    through them: the proxy would get the bearer token (a gpu-control
    token for another host's operator) and could answer for zeusd."""
    import socket
    import threading
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    d = start("tcp", args=["--signing-key-path", str(key)])
    tok = subprocess.run([str(BUILD / "zeusd"), "token", "issue",
                          "--signing-key-path", str(key), "--user", "alice",
                          "--scope", "gpu-read,cpu-read", "--expires", "1h"],
                         capture_output=True, text=True).stdout.strip()
    proxy = socket.socket()
    proxy.bind(("127.0.0.1", 0))
    proxy.listen(8)
    proxy.settimeout(0.2)
    seen = []
    done = threading.Event()

    def serve():
        while not done.is_set():
            try:
                c, _ = proxy.accept()
            except OSError:
                continue
            c.settimeout(2)
            try:
                seen.append(c.recv(65536))
            except OSError:
                pass
            c.close()

    t = threading.Thread(target=serve)
    t.start()
    purl = f"http://127.0.0.1:{proxy.getsockname()[1]}"
    try:
        for verb in (["energy"], ["stream-gpu", "--count", "1"]):
            r = zeus("daemon", *verb, *conn(d),
                     env={"ZEUSD_TOKEN": tok, "http_proxy": purl,
                          "ALL_PROXY": purl, "all_proxy": purl})
            assert r.returncode == 0, r.stderr
    finally:
        done.set()
        t.join()
        proxy.close()
    assert seen == []


def test_peer_text_cannot_reach_the_terminal_raw(tmp_path):
    """Whatever answers on the socket (or as a Pushgateway) chooses the
    text of its errors, and the tool prints it to a terminal: control
    characters (escape sequences that retitle or clear the terminal,
    rewrite earlier lines, or fake a line of output) are shown as '?'."""
    import socket
    import threading
    path = str(tmp_path / "evil.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(4)
    srv.settimeout(10)
    evil = "\x1b]0;pwned\x07\x1b[2J\rzeus daemon: ok\nfake line\x7f"
    body = json.dumps({"error": evil}).encode()

    def serve():
        try:
            c, _ = srv.accept()
        except OSError:
            return
        c.recv(65536)
        c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n%s" % (len(body), body))
        c.close()

    t = threading.Thread(target=serve)
    t.start()
    try:
        r = zeus("daemon", "discover", "--socket", path)
    finally:
        t.join()
        srv.close()
    assert r.returncode == 4, r.stderr
    assert "pwned" in r.stderr and "fake line" in r.stderr
    assert not any(ord(ch) < 0x20 and ch != "\n" or ord(ch) == 0x7f
                   for ch in r.stderr), repr(r.stderr)
    assert r.stderr.count("\n") == 1, repr(r.stderr)
