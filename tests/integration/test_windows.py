"""The Windows cross build (make windows, docs/windows.md), run under wine.

Skipped, with the reason, unless wine is installed and build-win/ (or
ZEUS_WIN_BUILD) holds the cross-built programs. Not part of make check /
scripts/check.sh yet (issue 31). Everything runs headless: WINEDEBUG=-all,
no DISPLAY, a WINEPREFIX of its own in a temporary folder (made once per
session: wine's first start takes about 15 s).

What runs:
  nvml_probe.exe  the daemon's own NVML backend (src/devices/nvml.c over
                  dynlib_win.c and nvml_os_win.c) loading nvml-sim.dll:
                  enumerate, read power/energy/limits, set a power limit
  nvml-sim.dll    the simulator's Windows platform file (sim_os_win.c):
                  profiles, fault rules from the environment and from a
                  control file, the call log
  deps_probe.exe  the static Windows builds of libmicrohttpd, jansson,
                  nettle and pcre2 serving HTTP on 127.0.0.1, asked from
                  Linux
  spawn_probe.exe the overrides' spawn.h on Windows (spawn_win.c):
                  CreateProcess with quoted argv, bounded capture, the
                  timeout, and a Job object that takes the command's
                  children with it (at the timeout, and when its parent
                  dies)
  zeusd.exe       the daemon's one-process Windows wiring (main_win.c)
                  with --simulate on nvml-sim.dll, over TCP: reads,
                  writes, a stream, /metrics, tokens, persistence mode
                  as on Windows, the startup refusals, a help that
                  lists only the flags Windows has (the Linux-only ones
                  usage errors), and a clean stop on Ctrl-C (wine turns
                  SIGINT into CTRL_C_EVENT)
  zeus.exe        the zeus tool on libzeus (libcurl with Schannel): help,
                  zeus measure over NVML directly (nvml-sim.dll) running a
                  command whose argv must survive Windows quoting, and zeus
                  daemon talking TCP to the Linux zeusd (when built)
"""
import json
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import free_port
from zeushelp import (BUILD_WIN, WINE, WinZeusd, ZEUSD_EXE,
                      assert_ctrl_c_ended_a_stream, check_gpu_requests,
                      check_tokens, first_power_event, needs_zeusd,
                      read_to_eof, run_wine_exe, run_zeusd_exe,
                      windows_skips,
                      winpath)

ROOT = Path(__file__).resolve().parents[2]
SIM = BUILD_WIN / "nvml-sim.dll"
PROBE = BUILD_WIN / "nvml_probe.exe"
DEPS = BUILD_WIN / "deps_probe.exe"
ZEUS = BUILD_WIN / "zeus.exe"
ECHO = BUILD_WIN / "argv_echo.exe"
SPAWN = BUILD_WIN / "spawn_probe.exe"
HANG = BUILD_WIN / "hang.exe"
DLL = BUILD_WIN / "zeus.dll"
DLL_PROBE = BUILD_WIN / "dll_probe.exe"

windows_skips()


def run_probe(env, *args, extra=None, timeout=60):
    e = dict(env)
    e.update(extra or {})
    # nvml_probe.exe prints a line before every non-zero exit: one that
    # printed nothing is wine failing to run it (run_wine_exe)
    p = run_wine_exe(PROBE, e, *args, timeout=timeout)
    fields = []
    for line in p.stdout.splitlines():
        d = {}
        for part in _split(line):
            k, _, v = part.partition("=")
            d[k] = v.strip('"')
        fields.append(d)
    return p, fields


def _split(line):
    """key=value words; a double-quoted value may hold spaces."""
    out, cur, quoted = [], "", False
    for ch in line:
        if ch == '"':
            quoted = not quoted
        if ch == " " and not quoted:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


def gpus(fields):
    return [f for f in fields if "gpu" in f and "name" in f]


def test_probe_reads_and_writes_through_the_simulator(wine_env):
    p, fields = run_probe(wine_env, winpath(SIM))
    assert p.returncode == 0, p.stdout + p.stderr
    assert fields[0] == {"backend": "nvml", "count": "4"}
    g = gpus(fields)
    assert [x["gpu"] for x in g] == ["0", "1", "2", "3"]
    for x in g:
        assert x["name"] == "NVIDIA A100-SXM4-80GB"
        assert x["arch"] == "ampere"
        assert 0 < int(x["power_mw"]) <= 400000
        assert (x["min_mw"], x["max_mw"]) == ("100000", "400000")
        assert int(x["energy_mj"]) > 0
    last = fields[-1]
    assert last["set_limit_mw"] == last["read_back_mw"] == "250000"
    assert last["restored_mw"] == "400000"
    # the backend's own log lines went to stderr, key=value
    assert "event=nvml_gpu gpu=3" in p.stderr


def test_profiles_and_gpu_count_come_from_the_environment(wine_env):
    p, fields = run_probe(wine_env, winpath(SIM), extra={
        "ZEUS_SIM_PROFILE": "h100,p100", "ZEUS_SIM_GPUS": "3"})
    assert p.returncode == 0, p.stdout + p.stderr
    g = gpus(fields)
    assert [x["name"] for x in g] == [
        "NVIDIA H100 80GB HBM3", "Tesla P100-PCIE-16GB",
        "NVIDIA H100 80GB HBM3"]
    # a P100 has no energy counter
    assert g[1]["energy_mj"] == "-" and g[0]["energy_mj"] != "-"
    assert fields[-1]["read_back_mw"] == "450000"


def test_a_write_the_driver_refuses_is_403_naming_an_administrator(wine_env):
    p, fields = run_probe(wine_env, winpath(SIM), "denied", extra={
        "ZEUS_SIM_FAULTS":
            "fail nvmlDeviceSetPowerManagementLimit * NO_PERMISSION"})
    assert p.returncode == 0, p.stdout + p.stderr
    last = fields[-1]
    assert last["status"] == "403"
    assert "lets only an administrator change this setting" in \
        last["write_error"]
    assert "zeusd runs as user " in last["write_error"]


def test_control_file_rules_and_call_log(wine_env, tmp_path):
    control = tmp_path / "control"
    control.write_text(
        "# the simulator re-reads this file when it changes\n"
        "fail nvmlDeviceSetPowerManagementLimit 0 NO_PERMISSION\n")
    log = tmp_path / "calls.log"
    extra = {"ZEUS_SIM_CONTROL": winpath(control),
             "ZEUS_SIM_LOG": winpath(log)}
    p, fields = run_probe(wine_env, winpath(SIM), "denied", extra=extra)
    assert p.returncode == 0, p.stdout + p.stderr
    assert fields[-1]["status"] == "403"
    lines = log.read_text().splitlines()
    sets = [ln for ln in lines
            if " nvmlDeviceSetPowerManagementLimit " in ln]
    assert len(sets) == 1 and " 0 " in sets[0] and "rc=NO_PERMISSION" in \
        sets[0], sets
    assert any(" nvmlInit_v2 " in ln for ln in lines)
    # the rule lifted: the write (and the probe's restoring write) go
    # through, and are appended
    control.write_text("fail nvmlDeviceSetPowerManagementLimit 0 SUCCESS\n")
    p, fields = run_probe(wine_env, winpath(SIM), extra=extra)
    assert p.returncode == 0, p.stdout + p.stderr
    assert fields[-1]["read_back_mw"] == "250000"
    sets = [ln for ln in log.read_text().splitlines()
            if " nvmlDeviceSetPowerManagementLimit " in ln]
    assert len(sets) == 3 and "rc=SUCCESS" in sets[1] and \
        "rc=SUCCESS" in sets[2], sets


def test_read_only_probe_writes_nothing(wine_env, tmp_path):
    log = tmp_path / "calls.log"
    p, fields = run_probe(wine_env, winpath(SIM), "read",
                          extra={"ZEUS_SIM_LOG": winpath(log)})
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(gpus(fields)) == 4
    assert " nvmlDeviceSet" not in log.read_text()


def test_a_missing_library_is_one_clear_error(wine_env):
    p, fields = run_probe(wine_env, "nothere.dll")
    assert p.returncode == 1
    assert fields[0]["open_error"].startswith(
        "cannot load NVML library 'nothere.dll': ")


def get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n"
                  "Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.decode().split("\r\n")[0], json.loads(body)


@pytest.mark.skipif(not DEPS.exists(),
                    reason="deps_probe.exe not built (-Dwin_deps=false)")
def test_static_libraries_serve_http_under_wine(wine_env):
    port = free_port()
    proc = subprocess.Popen([WINE, str(DEPS), str(port)], env=wine_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, body = get(port, "/gpu/0/power")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert status == "HTTP/1.1 200 OK"
        # HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog")
        assert body["hmac_sha256"] == ("f7bc83f430538424b13298e6aa6fb143"
                                       "ef4d59a14946175997479dbc2d1a3cd8")
        assert body["gpu_path"] is True and body["method"] == "GET"
        assert body["mhd"] == "0.9.75"
        assert get(port, "/discover")[1]["gpu_path"] is False
        get(port, "/quit")
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


needs_zeus = pytest.mark.skipif(
    not (ZEUS.exists() and ECHO.exists()),
    reason="zeus.exe not built (-Dwin_deps=false)")


def run_zeus(env, *args, extra=None, timeout=60):
    e = dict(env)
    e.update(extra or {})
    return subprocess.run([WINE, str(ZEUS), *args], env=e, timeout=timeout,
                          capture_output=True, text=True)


@needs_zeus
def test_zeus_help_version_and_usage_errors(wine_env):
    p = run_zeus(wine_env, "--help")
    assert p.returncode == 0, p.stderr
    assert "usage: zeus measure [options] -- COMMAND..." in p.stdout
    p = run_zeus(wine_env, "--version")
    assert p.returncode == 0 and "0.1.0" in p.stdout + p.stderr
    p = run_zeus(wine_env, "measure", "--bogus")
    assert p.returncode == 2
    assert p.stderr.startswith("zeus measure: ")


# each must come back as one argument, unchanged
HOSTILE_ARGS = ["plain", "two words", "", 'say "hi"', "C:\\dir with space\\",
                "back\\\\\"slash", "tab\there", "&|<>^%PATH%", "trailing\\"]


@needs_zeus
def test_zeus_measure_runs_the_command_with_argv_intact(wine_env, tmp_path):
    out = tmp_path / "m.json"
    p = run_zeus(wine_env, "measure", "--json", "--output", winpath(out),
                 "--", winpath(ECHO), *HOSTILE_ARGS,
                 extra={"ZEUS_NVML_LIBRARY": winpath(SIM),
                        "ZEUS_ECHO_EXIT": "7"})
    # the command's status is zeus's
    assert p.returncode == 7, p.stdout + p.stderr
    got = [bytes.fromhex(ln[4:]).decode()
           for ln in p.stdout.splitlines() if ln.startswith("arg=")]
    assert got == HOSTILE_ARGS
    m = json.loads(out.read_text())
    # four simulated GPUs read through the daemon's NVML backend; no RAPL
    assert sorted(m["gpu_energy_j"]) == ["0", "1", "2", "3"], m
    assert all(j > 0 for j in m["gpu_energy_j"].values()), m
    assert m["cpu_energy_j"] == {} and m["dram_energy_j"] == {}
    assert m["exit_status"] == 7 and m["time_s"] > 0


@needs_zeus
def test_zeus_measure_of_a_missing_command_is_127(wine_env):
    p = run_zeus(wine_env, "measure", "--", "no-such-program.exe",
                 extra={"ZEUS_NVML_LIBRARY": winpath(SIM)})
    assert p.returncode == 127, p.stdout + p.stderr
    assert "cannot run 'no-such-program.exe'" in p.stderr


@needs_zeus
def test_zeus_daemon_talks_tcp_to_a_linux_zeusd(wine_env, start):
    from conftest import ZEUSD
    if not ZEUSD.exists():
        pytest.skip(f"no Linux zeusd at {ZEUSD} (ZEUSD_BUILD)")
    d = start("tcp")
    p = run_zeus(wine_env, "daemon", "discover", "--host-port",
                 f"127.0.0.1:{d.port}")
    assert p.returncode == 0, p.stderr
    disc = json.loads(p.stdout)
    assert len(disc["gpus"]) == len(d.client.get("/discover").json()["gpus"])
    p = run_zeus(wine_env, "daemon", "power", "--gpus", "0",
                 "--host-port", f"127.0.0.1:{d.port}")
    assert p.returncode == 0, p.stderr
    assert int(json.loads(p.stdout)["gpu_power_mw"]["0"]) > 0, p.stdout
    # a 4xx from zeusd is exit 4
    p = run_zeus(wine_env, "daemon", "power", "--gpus", "99",
                 "--host-port", f"127.0.0.1:{d.port}")
    assert p.returncode == 4, p.stdout + p.stderr


@pytest.mark.skipif(not (DLL.exists() and DLL_PROBE.exists()),
                    reason="zeus.dll not built (-Dwin_deps=false)")
def test_zeus_dll_loads_and_exports_only_the_api(wine_env):
    p = subprocess.run([WINE, str(DLL_PROBE)], env=wine_env, timeout=60,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "version=0.1.0 env_configured=0"
    e = dict(wine_env, ZEUSD_HOST_PORT="127.0.0.1:1")
    p = subprocess.run([WINE, str(DLL_PROBE)], env=e, timeout=60,
                       capture_output=True, text=True)
    assert p.stdout.strip() == "version=0.1.0 env_configured=1"
    objdump = shutil.which("x86_64-w64-mingw32-objdump")
    if objdump is None:
        return
    out = subprocess.run([objdump, "-p", str(DLL)], capture_output=True,
                         text=True, check=True).stdout
    table = out.split("[Ordinal/Name Pointer] Table", 1)[1]
    names = [ln.split("]", 1)[1].strip() for ln in table.splitlines()
             if ln.strip().startswith("[")]
    assert names and all(n.startswith("zeus_") for n in names), names
    # the same API as the Linux libzeus.so, when one is built
    from conftest import BUILD
    so = BUILD / "src" / "lib" / "libzeus.so"
    if so.exists() and shutil.which("nm"):
        nm = subprocess.run(["nm", "-D", "--defined-only", str(so)],
                            capture_output=True, text=True).stdout
        linux = sorted(ln.split()[-1] for ln in nm.splitlines()
                       if " T " in ln)
        assert sorted(names) == linux


def run_spawn(env, timeout_ms, *argv):
    p = subprocess.run([WINE, str(SPAWN), str(timeout_ms), *argv], env=env,
                       timeout=120, capture_output=True, text=True)
    head, _, out = p.stdout.partition("--stdout--\n")
    return p, dict(part.partition("=")[::2] for part in _split(
        head.strip())), out


def hang_processes():
    """Linux pids of this build's hang.exe processes still running."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"spawn_probe" in cmd:
            continue
        if b"hang.exe" in cmd and (winpath(BUILD_WIN).encode() in cmd or
                                   str(BUILD_WIN).encode() in cmd):
            found.append(int(d.name))
    return found


needs_spawn = pytest.mark.skipif(not (SPAWN.exists() and HANG.exists()),
                                 reason="spawn_probe.exe not built")


@needs_spawn
def test_spawn_keeps_hostile_argv_as_arguments(wine_env):
    p, r, out = run_spawn(wine_env, 10000, winpath(ECHO), *HOSTILE_ARGS)
    assert p.returncode == 0, p.stdout + p.stderr
    assert r["status"] == "exited" and r["code"] == "0", r
    got = [bytes.fromhex(ln.strip()[4:]).decode()
           for ln in out.splitlines() if ln.startswith("arg=")]
    assert got == HOSTILE_ARGS


@needs_spawn
def test_spawn_bounds_the_capture_and_reports_a_missing_program(wine_env):
    p, r, out = run_spawn(wine_env, 10000, winpath(HANG), "spew", "100000")
    assert r["status"] == "exited", r
    assert r["out_total"] == "100000" and r["truncated"] == "1"
    assert len(out) == 64 * 1024
    p, r, _ = run_spawn(wine_env, 10000, "no-such-program.exe")
    assert r["status"] == "exec_failed"
    assert r["describe"].strip('"') == \
        "could not be executed: No such file or directory"


@needs_spawn
def test_spawn_timeout_kills_the_command_and_its_child(wine_env, tmp_path):
    pids = tmp_path / "pids"
    p, r, _ = run_spawn(wine_env, 1500, winpath(HANG), "child",
                        winpath(pids))
    assert r["status"] == "timed_out", r
    assert r["describe"].strip('"') == "timed out after 1500 ms"
    assert 1500 <= int(r["ms"]) < 10000
    # the command had started its child, and the job took both
    assert len(pids.read_text().split()) == 2
    deadline = time.monotonic() + 10
    while hang_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hang_processes() == []


@needs_spawn
def test_spawn_job_dies_with_its_parent(wine_env, tmp_path):
    """zeusd killed outright (no cleanup code runs): the job's handle
    closes and KILL_ON_JOB_CLOSE ends the command and its child."""
    pids = tmp_path / "pids"
    proc = subprocess.Popen([WINE, str(SPAWN), "0", winpath(HANG),
                             "child", winpath(pids)], env=wine_env,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and len(pids.read_text().split()) == 2):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        assert len(hang_processes()) == 2
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while hang_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hang_processes() == []


def test_programs_need_only_system_dlls():
    objdump = shutil.which("x86_64-w64-mingw32-objdump")
    if objdump is None:
        pytest.skip("x86_64-w64-mingw32-objdump missing")
    system = {"kernel32.dll", "msvcrt.dll", "advapi32.dll", "ws2_32.dll",
              "user32.dll", "bcrypt.dll", "crypt32.dll", "secur32.dll",
              "iphlpapi.dll", "wldap32.dll", "normaliz.dll", "shell32.dll",
              "zeus.dll"}
    for f in [SIM, PROBE, DEPS, ZEUS, ECHO, DLL, DLL_PROBE, SPAWN, HANG,
              ZEUSD_EXE]:
        if not f.exists():
            continue
        out = subprocess.run([objdump, "-p", str(f)], capture_output=True,
                             text=True, check=True).stdout
        dlls = {ln.split(":", 1)[1].strip().lower()
                for ln in out.splitlines() if "DLL Name:" in ln}
        assert dlls <= system, (f.name, dlls - system)


# ---- zeusd.exe ---------------------------------------------------------------


@pytest.fixture
def win_zeusd(wine_env, tmp_path):
    daemons = []

    def _start(*args):
        d = WinZeusd(wine_env, tmp_path, args)
        daemons.append(d)
        return d

    yield _start
    for d in daemons:
        rc = d.stop()
        assert rc == 0, f"zeusd.exe exited {rc}:\n{d.logs()}"


@needs_zeusd
def test_zeusd_exe_serves_time_and_discover(win_zeusd):
    d = win_zeusd()
    t = d.json("GET", "/time")["timestamp_ms"]
    assert abs(t - time.time() * 1000) < 60000
    disc = d.json("GET", "/discover")
    assert [g["id"] for g in disc["gpus"]] == [0, 1, 2, 3]
    assert disc["gpus"][0]["pci_address"] == "0000:01:00.0"
    assert disc["cpus"] == []
    # upstream's Windows default (gpu-control,gpu-read) and our metrics
    assert disc["enabled_api_groups"] == ["gpu-control", "gpu-read",
                                          "metrics"]
    assert disc["auth_required"] is False
    assert "event=tcp_without_auth" in d.logs()
    assert "nvml-sim.dll" in d.logs()
    # the same halves as Linux, in one process: 4 GPUs' workers and 8
    # more callers of the boundary table (docs/windows.md)
    assert "event=device_half calls=12 " in d.logs()


@needs_zeusd
def test_zeusd_exe_takes_the_node_name_as_host(win_zeusd):
    # As on Linux: on TCP the node's own name (the computer's DNS name,
    # which wine takes from the Linux host name, and its first label) is a
    # Host zeusd.exe accepts unconfigured; another name is 421 (DNS
    # rebinding).
    d = win_zeusd()
    name = socket.gethostname().split(".")[0]
    for host in (name, f"{name}:{d.port}", name.upper()):
        code, _, body = d.request("GET", "/time", headers={"Host": host})
        assert code == 200, (host, body)
    code, _, _ = d.request("GET", "/time",
                           headers={"Host": f"not-{name}.invalid"})
    assert code == 421


@needs_zeusd
def test_zeusd_exe_gpu_reads_and_writes(win_zeusd):
    check_gpu_requests(win_zeusd())


@needs_zeusd
def test_zeusd_exe_persistence_mode_is_windows(win_zeusd):
    d = win_zeusd()
    assert d.json("GET", "/gpu/get_persistence_mode") == {
        str(i): {"enabled": True} for i in range(4)}
    err = d.json("POST", "/gpu/set_persistence_mode?gpu_ids=0&enabled=false"
                 "&block=true", status=400)
    assert err == {"errors": {
        "0": "Persistence mode cannot be disabled on this platform."}}
    for _ in range(2):
        assert d.json("POST", "/gpu/set_persistence_mode?gpu_ids=0,1&"
                      "enabled=true&block=true") is None
    assert d.logs().count("event=persistence_mode_fixed") == 1


@needs_zeusd
def test_zeusd_exe_streams_power_and_ends_streams_on_ctrl_c(wine_env,
                                                             tmp_path):
    d = WinZeusd(wine_env, tmp_path)
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=20)
        first_power_event(s, 1, f"127.0.0.1:{d.port}")
        rc = d.stop()
        # the stream was ended by zeusd: the socket reaches end of file
        read_to_eof(s)
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
    assert_ctrl_c_ended_a_stream(d, rc)


@needs_zeusd
def test_zeusd_exe_metrics(win_zeusd):
    d = win_zeusd()
    code, head, body = d.request("GET", "/metrics")
    assert code == 200 and "text/plain" in head
    text = body.decode()
    assert 'zeusd_gpu_info{index="3"' in text
    assert "zeusd_gpu_power_limit_watts" in text or "power_limit" in text
    # the process figures come from procstat_win.c
    assert "process_cpu_seconds_total" in text
    assert "process_open_fds" in text


@needs_zeusd
def test_zeusd_exe_tokens(wine_env, win_zeusd, tmp_path):
    check_tokens(wine_env, tmp_path, win_zeusd)


@needs_zeusd
@pytest.mark.parametrize("args,status,message", [
    (("--pipe-name", "zeusd"), 2, "invalid --pipe-name 'zeusd': expected "
     "\\\\.\\pipe\\NAME"),
    (("--pipe-sddl", "D:(bogus"), 1, "invalid --pipe-sddl 'D:(bogus': not "
     "a security descriptor in SDDL"),
    (("--mode", "uds"), 2, "expected named-pipe or tcp"),
    (("--mode", "tcp", "--enable", "gpu-read,cpu-read"), 1,
     "API group 'cpu-read' is only supported on Linux. Remove it from "
     "--enable"),
    (("--socket-path", "x"), 2, "--socket-path is not available on Windows"),
    (("--socket-permissions", "600"), 2,
     "--socket-permissions is not available on Windows"),
    (("--socket-uid", "0"), 2, "--socket-uid is not available on Windows"),
    (("--socket-gid", "users"), 2,
     "--socket-gid is not available on Windows"),
    (("--mode", "tcp", "--gpu-leases"), 2,
     "--gpu-leases is only supported on Linux"),
    (("--mode", "tcp", "--policy-file", "p.toml"), 2,
     "--policy-file is only supported on Linux"),
    (("--mode", "tcp", "--gpu-backend", "amdsmi"), 1,
     "AMD GPUs (AMD SMI) are supported on Linux only"),
])
def test_zeusd_exe_refuses_at_startup(wine_env, args, status, message):
    p = run_zeusd_exe(wine_env, "serve", "--simulate", *args)
    assert p.returncode == status, p.stderr
    assert p.stderr.startswith("zeusd: ") and message in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


@needs_zeusd
def test_zeusd_exe_help_names_the_windows_flags(wine_env):
    p = run_zeusd_exe(wine_env, "serve", "--help")
    assert p.returncode == 0
    assert "--mode named-pipe|tcp" in p.stdout
    assert "--socket-path" not in p.stdout
    assert "gpu-control,gpu-read,metrics" in p.stdout
    assert run_zeusd_exe(wine_env, "--version").stdout.startswith("zeusd ")


# The flags of the Linux-only features (node policy, GPU leases and their
# journal, the audit log, the network user, RAPL), with a value where one
# is needed:
# zeusd.exe neither lists nor takes them. The Unix socket's flags are
# Linux-only too, with their own message (test_zeusd_exe_refuses_at_startup).
LINUX_ONLY_FLAGS = {
    "--policy-file": "p.toml", "--audit-log": "audit.log",
    "--audit-required": None, "--gpu-leases": None,
    "--restore-on-shutdown": None, "--user": "zeusd",
    "--rapl-dir": "rapl", "--state-dir": "/var/lib/zeusd",
}
SOCKET_FLAGS = {"--socket-path", "--socket-permissions", "--socket-uid",
                "--socket-gid"}
PIPE_FLAGS = {"--pipe-name", "--pipe-sddl"}


def help_flags(text):
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))


@needs_zeusd
def test_zeusd_exe_help_lists_only_the_windows_flags(wine_env):
    from conftest import ZEUSD
    if not ZEUSD.exists():
        pytest.skip(f"no Linux zeusd at {ZEUSD} (ZEUSD_BUILD)")
    linux = subprocess.run([str(ZEUSD), "serve", "--help"], timeout=10,
                           capture_output=True, text=True, check=True).stdout
    p = run_zeusd_exe(wine_env, "serve", "--help")
    assert p.returncode == 0, p.stderr
    # Linux lists them, so this test sees what a listing of them looks like
    assert set(LINUX_ONLY_FLAGS) | SOCKET_FLAGS <= help_flags(linux)
    assert help_flags(p.stdout) == \
        help_flags(linux) - set(LINUX_ONLY_FLAGS) - SOCKET_FLAGS | PIPE_FLAGS
    # and nothing in the lines of the flags both have names what Windows
    # lacks: CPUs to simulate, AMD GPUs
    assert "simulated GPUs and CPUs" in linux and "amdsmi" in linux
    assert "use simulated GPUs (" in p.stdout
    assert "CPUs" not in p.stdout and "amdsmi" not in p.stdout
    top = run_zeusd_exe(wine_env, "--help")
    assert top.returncode == 0 and "control GPU energy settings" in top.stdout


@needs_zeusd
def test_zeusd_exe_refuses_each_linux_only_flag(wine_env):
    # one wine process a flag, all at once; --enable cpu-read is refused
    # at startup (exit 1), after the command line, so a flag taken
    # fails here at once instead of serving
    procs = {}
    for flag, value in LINUX_ONLY_FLAGS.items():
        procs[flag] = subprocess.Popen(
            [WINE, str(ZEUSD_EXE), "serve", "--simulate", "--mode", "tcp",
             "--tcp-bind-address", "127.0.0.1:1", flag,
             *([value] if value else []), "--enable", "gpu-read,cpu-read"],
            env=wine_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
    seen = {}
    for flag, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        seen[flag] = (proc.returncode, out, err)
    want = {flag: (2, "", f"zeusd: {flag} is only supported on Linux "
                   "(docs/windows.md)\n") for flag in LINUX_ONLY_FLAGS}
    assert seen == want


@needs_zeusd
def test_zeusd_exe_refuses_a_key_others_may_write(wine_env, tmp_path):
    # wine gives a file the DACL of its Unix mode: 0666 lets Everyone
    # (S-1-1-0) write it, which wfile_win.c's check refuses
    key = tmp_path / "key"
    key.write_bytes(b"k\n")
    key.chmod(0o666)
    p = run_zeusd_exe(wine_env, "serve", "--simulate", "--mode", "tcp",
                      "--tcp-bind-address", f"127.0.0.1:{free_port()}",
                      "--signing-key-path", winpath(key))
    assert p.returncode == 1, p.stderr
    assert "may be written by S-1-1-0" in p.stderr.strip().splitlines()[-1]


@needs_zeusd
def test_zeusd_exe_runs_overrides_with_createprocess(win_zeusd, tmp_path):
    echo = str(ECHO).replace("/", "\\\\")
    ov = tmp_path / "overrides.toml"
    ov.write_text(
        "[set_power_limit]\n"
        f"commands = [\"'Z:{echo}' {{gpu_id}} '{{power_limit_w}} W'\"]\n"
        "[reset_locked_clocks]\n"
        "commands = [\"'Z:\\\\nothere\\\\missing.exe' {gpu_id}\"]\n")
    ov.chmod(0o600)
    d = win_zeusd("--gpu-command-overrides", winpath(ov))
    before = d.json("GET", "/gpu/get_power_limit?gpu_ids=2")
    assert d.json("POST", "/gpu/set_power_limit?gpu_ids=2&"
                  "power_limit_mw=150000&block=true") is None
    # the command ran instead of NVML: the simulator's limit is unchanged
    assert d.json("GET", "/gpu/get_power_limit?gpu_ids=2") == before
    err = d.json("POST", "/gpu/reset_locked_clocks?gpu_ids=1&block=true",
                 status=500)
    assert "missing.exe" in err["errors"]["1"]
    assert "overrides=2" in d.logs()


@needs_zeusd
def test_zeusd_exe_answers_a_running_write_before_it_stops(wine_env,
                                                           tmp_path):
    env = dict(wine_env)
    env["ZEUS_SIM_FAULTS"] = "delay nvmlDeviceSetPowerManagementLimit 1 1500"
    d = WinZeusd(env, tmp_path)
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=20)
        s.sendall(f"POST /gpu/set_power_limit?gpu_ids=1&block=true&"
                  f"power_limit_mw=200000 HTTP/1.1\r\nHost: 127.0.0.1:"
                  f"{d.port}\r\n\r\n".encode())
        time.sleep(0.5)		# the write is running (1.5 s)
        d.proc.send_signal(signal.SIGINT)
        data = b""
        while b"\r\n\r\n" not in data and (chunk := s.recv(65536)):
            data += chunk
        s.close()
        rc = d.proc.wait(30)
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
    assert data.startswith(b"HTTP/1.1 200 "), data
    assert rc == 0, d.logs()
    logs = d.logs()
    # the write was still running when Ctrl-C came (the injected delay)
    line = next(ln for ln in logs.splitlines()
                if 'path="/gpu/set_power_limit"' in ln)
    assert int(line.split("dur_us=")[1].split()[0]) >= 1_000_000, line
    assert logs.index("event=stopping event=ctrl_c") < logs.index(line)
