"""Black-box tests of libzeus through the `zeus` tool and the C example.

A real Prometheus Pushgateway (Debian's prometheus-pushgateway) is started
per test on a free loopback port; tests push through libzeus and read the
gateway's /metrics back. Devices are the NVML simulator and fake RAPL trees
(direct source) or a zeusd serving the same simulator library and tree
(zeusd source). Binaries come from ZEUSD_BUILD, as in conftest.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conftest import BUILD, ROOT, SIM, build_sanitizers, free_port
from rapltree import Advancer, RaplTree

ZEUS = BUILD / "zeus"
GATEWAY = "/usr/bin/prometheus-pushgateway"
needs_gateway = pytest.mark.skipif(not os.path.exists(GATEWAY),
                                   reason="prometheus-pushgateway missing")


class Gateway:
    def __init__(self, tmp):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(Path(tmp) / f"gw-{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [GATEWAY, f"--web.listen-address=127.0.0.1:{self.port}",
             "--persistence.file="], stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/-/ready", timeout=1).status_code \
                        == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError("pushgateway did not start")

    def series(self):
        """{(name, frozenset(labels.items())): float} from /metrics."""
        out = {}
        text = httpx.get(self.url + "/metrics", timeout=5).text
        for line in text.splitlines():
            m = re.match(r'^([a-zA-Z_:][\w:]*)\{(.*)\} (\S+)$', line)
            if not m or not m.group(1).startswith(("energy_monitor",
                                                   "power_monitor")):
                continue
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"',
                                     m.group(2)))
            out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
        return out

    def get(self, name, **labels):
        want = {k: str(v) for k, v in labels.items()}
        return {dict(k[1]).get("le", ""): v for k, v in self.series().items()
                if k[0] == name and want.items() <= dict(k[1]).items()}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


@pytest.fixture
def gateway(tmp_path):
    g = Gateway(tmp_path)
    yield g
    g.stop()


@pytest.fixture
def tree(tmp_path):
    t = RaplTree(tmp_path / "rapl", {0: {"dram": True, "cpu": 1000},
                                     1: {"cpu": 0}})
    yield t
    t.close()


def direct_env(tree, **extra):
    e = dict(os.environ)
    for k in ("ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT", "CUDA_VISIBLE_DEVICES"):
        e.pop(k, None)
    e.update(ZEUS_NVML_LIBRARY=str(SIM), ZEUS_RAPL_DIR=str(tree.root))
    e.update(extra)
    return e


def bump_cmd(tree, n, zone, value):
    """A command that sets one counter in place (what the work 'used')."""
    path = tree.path(n, zone)
    code = (f"import os; fd = os.open({str(path)!r}, os.O_WRONLY); "
            f"os.pwrite(fd, b'%020d\\n' % {value}, 0)")
    return [sys.executable, "-c", code]


def zeus(*args, env, timeout=30):
    return subprocess.run([str(ZEUS), *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


@needs_gateway
def test_histogram_series_in_gateway(gateway, tree):
    """Exact buckets, sums and counts; groups per window and instance
    coexist (no push wipes another)."""
    env = direct_env(tree)
    runs = [("w", "a", 1000 + 2_000_000),     # 2 J
            ("w", "b", 1000 + 32_000_000),    # +30 J on top of the last
            ("v", "a", 1000 + 2_032_000_000)]  # +2000 J: above all buckets
    for window, inst, value in runs:
        r = zeus("measure", "--gpus", "none", "--cpus", "0", "--json",
                 "--pushgateway", gateway.url, "--job", "train", "--window",
                 window, "--instance", inst, "--",
                 *bump_cmd(tree, 0, "cpu", value), env=env)
        assert r.returncode == 0, r.stderr
    name = "energy_monitor_cpu_energy_joules"
    w_a = gateway.get(name + "_bucket", window="w", instance="a", index=0,
                      job="train")
    assert w_a == {"10": 1, "50": 1, "100": 1, "500": 1, "1000": 1,
                   "+Inf": 1}
    assert gateway.get(name + "_sum", window="w", instance="a")[""] == 2.0
    w_b = gateway.get(name + "_bucket", window="w", instance="b")
    assert w_b == {"10": 0, "50": 1, "100": 1, "500": 1, "1000": 1,
                   "+Inf": 1}
    assert gateway.get(name + "_sum", window="w", instance="b")[""] == 30.0
    v_a = gateway.get(name + "_bucket", window="v", instance="a")
    assert v_a["1000"] == 0 and v_a["+Inf"] == 1
    assert gateway.get(name + "_count", window="v", instance="a")[""] == 1
    # DRAM of package 0 is observed too (0 J: below the smallest bucket).
    d = gateway.get("energy_monitor_dram_energy_joules_bucket", window="w",
                    instance="a", index=0)
    assert d["5"] == 1
    # The out-of-range value was warned about.
    assert "exceeds the maximum bucket value of 1000" in r.stderr


@needs_gateway
def test_window_names_escaped(gateway, tree):
    env = direct_env(tree)
    for window in ("a/b", "with space", "ünï"):
        r = zeus("measure", "--gpus", "none", "--cpus", "1", "--pushgateway",
                 gateway.url, "--job", "j/x", "--window", window,
                 "--instance", "", "--", "true", env=env)
        assert r.returncode == 0, r.stderr
        c = gateway.get("energy_monitor_cpu_energy_joules_count",
                        window=window, job="j/x", index=1)
        assert c == {"": 1}, (window, gateway.series())


@needs_gateway
@pytest.mark.parametrize("name", [".", ".."])
def test_dot_names_keep_their_group(gateway, tree, name):
    """"." and ".." are path segments an HTTP client folds away
    (/window/.. is the group above): they must reach the gateway as
    values, each push in its own group."""
    env = direct_env(tree)
    r = zeus("measure", "--gpus", "none", "--cpus", "1", "--pushgateway",
             gateway.url, "--job", name, "--window", name,
             "--instance", name, "--", "true", env=env)
    assert r.returncode == 0 and "push failed" not in r.stderr, r.stderr
    c = gateway.get("energy_monitor_cpu_energy_joules_count", window=name,
                    job=name, instance=name, index=1)
    assert c == {"": 1}, gateway.series()


@needs_gateway
def test_counter_grows_and_agrees_with_histogram(gateway, tree):
    env = direct_env(tree)
    cmd = [str(ZEUS), "measure", "--gpus", "none", "--cpus", "0", "--json",
           "--pushgateway", gateway.url, "--job", "c", "--window", "run",
           "--instance", "i", "--counter", "0.2", "--", "sleep", "1.5"]
    name = "energy_monitor_cpu_energy_joules_total"
    with Advancer(tree, {(0, "cpu"): 40, (0, "dram"): 5}):
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        seen = []
        while p.poll() is None:
            v = gateway.get(name, window="run", index=0)
            if v:
                seen.append(v[""])
            time.sleep(0.15)
        out, err = p.communicate()
    assert p.returncode == 0, err
    meas = json.loads(err.strip().splitlines()[-1])
    assert len(seen) >= 3 and seen == sorted(seen) and seen[0] < seen[-1]
    final = gateway.get(name, window="run", index=0)[""]
    assert final == pytest.approx(40 * meas["time_s"], rel=0.1)
    dram = gateway.get("energy_monitor_dram_energy_joules_total",
                       window="run", index=0)[""]
    assert dram == pytest.approx(5 * meas["time_s"], rel=0.15)
    # The histogram of the same window lives in the same group.
    hsum = gateway.get("energy_monitor_cpu_energy_joules_sum", window="run",
                       index=0)[""]
    assert hsum == pytest.approx(meas["cpu_energy_j"]["0"])
    assert final == pytest.approx(hsum, rel=0.05)


@needs_gateway
def test_gauge_pushes_power_and_stops(gateway, tree):
    env = direct_env(tree)
    p = subprocess.Popen([str(ZEUS), "gauge", "--pushgateway", gateway.url,
                          "--job", "g", "--period", "0.2", "--window", "gw"],
                         env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    values = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(values) < 4:
        v = gateway.get("power_monitor_gpu_power_watts", window="gw",
                        index=0)
        if v and (not values or v[""] != values[-1]):
            values.append(v[""])
        time.sleep(0.1)
    assert len(values) >= 2, values     # it keeps updating
    for i in range(4):
        w = gateway.get("power_monitor_gpu_power_watts", window="gw",
                        index=i, job="g")[""]
        assert 1 <= w <= 400
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    p.wait(5)
    assert p.returncode == 0, p.stderr.read()
    assert time.monotonic() - t0 < 1.0


def test_gateway_down_keeps_measurement(tree):
    env = direct_env(tree)
    dead = f"http://127.0.0.1:{free_port()}"
    r = zeus("measure", "--gpus", "0", "--cpus", "0", "--json",
             "--pushgateway", dead, "--job", "j", "--", "sh", "-c",
             "exit 7", env=env)
    assert r.returncode == 7
    meas = json.loads(r.stderr.strip().splitlines()[-1])
    assert meas["exit_status"] == 7
    assert meas["gpu_energy_j"]["0"] >= 0
    assert dead[7:] in meas["push_error"]
    assert "push failed" in r.stderr
    assert said(r.stderr, dead[7:]) == 1, r.stderr


def said(stderr, needle):
    """How many of the tool's own lines mention needle (not the JSON)."""
    return sum(1 for line in stderr.splitlines()
               if line.startswith("zeus measure:") and needle in line)


@pytest.mark.parametrize("counter", [[], ["--counter", "0.1"]])
def test_failed_push_reported_once(tree, counter):
    """The histogram's push at the end, the counter's pushes every 0.1 s
    and its last one all fail against the same group: one line says so."""
    dead = f"http://127.0.0.1:{free_port()}"
    r = zeus("measure", "--gpus", "0", "--cpus", "none", "--pushgateway",
             dead, "--job", "j", *counter, "--", "sleep", "0.5",
             env=direct_env(tree))
    assert r.returncode == 0, r.stderr
    assert said(r.stderr, dead[7:]) == 1, r.stderr
    assert "zeus: time " in r.stderr


@needs_gateway
def test_default_instance_is_the_host_name(gateway, tree):
    """Without --instance, runs on one host share their window's group
    instead of leaving one group per process behind."""
    env = direct_env(tree)
    for _ in range(3):
        r = zeus("measure", "--gpus", "none", "--cpus", "1", "--pushgateway",
                 gateway.url, "--job", "inst", "--window", "w", "--",
                 "true", env=env)
        assert r.returncode == 0, r.stderr
    groups = {dict(k[1]).get("instance") for k in gateway.series()
              if dict(k[1]).get("job") == "inst"}
    assert groups == {socket.gethostname()}
    # the last run replaced the others' series in that one group
    assert gateway.get("energy_monitor_cpu_energy_joules_count",
                       job="inst", window="w", index=1) == {"": 1}
    # and the group can be deleted as docs/libzeus.md says
    host = socket.gethostname()
    httpx.delete(f"{gateway.url}/metrics/job/inst/window/w/instance/{host}",
                 timeout=5).raise_for_status()
    assert not any(dict(k[1]).get("job") == "inst"
                   for k in gateway.series())


@needs_gateway
def test_wrong_gateway_url_is_reported(gateway, tree):
    r = zeus("measure", "--gpus", "none", "--cpus", "0", "--json",
             "--pushgateway", gateway.url + "/nope", "--job", "j", "--",
             "true", env=direct_env(tree))
    assert r.returncode == 0
    meas = json.loads(r.stderr.strip().splitlines()[-1])
    assert "HTTP 404" in meas["push_error"]
    assert "0" in meas["cpu_energy_j"]


def test_gateway_password_is_not_printed(tree):
    """A Pushgateway behind basic auth is reached as http://user:pass@host;
    messages name the gateway without its password."""
    env = direct_env(tree)
    port = free_port()
    url = f"http://alice:s3cret@127.0.0.1:{port}"
    r = zeus("measure", "--gpus", "0", "--cpus", "none", "--json",
             "--pushgateway", url, "--job", "j", "--", "true", env=env)
    assert r.returncode == 0, r.stderr
    meas = json.loads(r.stderr.strip().splitlines()[-1])
    assert f"127.0.0.1:{port}" in meas["push_error"]
    assert "s3cret" not in r.stderr, r.stderr
    p = subprocess.Popen([str(ZEUS), "gauge", "--pushgateway", url, "--job",
                          "g", "--period", "0.2"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(0.7)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=5)
    assert p.returncode == 0, err
    assert f"127.0.0.1:{port}" in err and "s3cret" not in err, err


def test_gauge_with_dead_gateway_stops_cleanly(tree):
    env = direct_env(tree)
    p = subprocess.Popen([str(ZEUS), "gauge", "--pushgateway",
                          f"http://127.0.0.1:{free_port()}", "--job", "g",
                          "--period", "0.2"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(0.7)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=5)
    assert p.returncode == 0, err
    assert time.monotonic() - t0 < 1.5
    assert "push of window 'gauge' failed" in err


def test_zeusd_and_direct_sources_agree(start, tree):
    """The same window measured through zeusd and directly, nested: the
    outer (zeusd) window holds the inner (direct) one plus the inner
    process's start-up, a few ms. CPU and DRAM agree to the joule. GPU 3 has no energy counter on both
    sides, so both integrate its sampled power."""
    faults = "fail nvmlDeviceGetTotalEnergyConsumption 3 NOT_SUPPORTED"
    d = start(args=["--nvml-library", str(SIM), "--rapl-dir",
                    str(tree.root)], simulate=False,
              env={"ZEUS_SIM_FAULTS": faults})
    env = direct_env(tree, ZEUSD_SOCK_PATH=d.sock, ZEUS_SIM_FAULTS=faults)
    out_z, out_d = tree.root.parent / "z.json", tree.root.parent / "d.json"
    with Advancer(tree, {(0, "cpu"): 60, (0, "dram"): 8, (1, "cpu"): 30}):
        r = zeus("measure", "--source", "zeusd", "--json", "--output",
                 str(out_z), "--", str(ZEUS), "measure", "--source",
                 "direct", "--json", "--output", str(out_d), "--", "sleep",
                 "1", env=env)
    assert r.returncode == 0, r.stderr
    z, di = json.loads(out_z.read_text()), json.loads(out_d.read_text())
    slack = z["time_s"] - di["time_s"]
    assert 0 <= slack < 0.2, (z, di)
    assert set(z["gpu_energy_j"]) == set(di["gpu_energy_j"]) == \
        {"0", "1", "2", "3"}
    # Each process's simulator integrates its counter in 50 ms midpoint
    # steps from its own last read, so the two counters may disagree by up
    # to one step of power (<= 400 W) at each end, on top of the slack.
    for k in z["gpu_energy_j"]:
        assert z["gpu_energy_j"][k] == pytest.approx(
            di["gpu_energy_j"][k], abs=400 * (slack + 0.1) + 1), k
    for kind, watts in (("cpu_energy_j", {"0": 60, "1": 30}),
                        ("dram_energy_j", {"0": 8})):
        assert set(z[kind]) == set(di[kind]) == set(watts)
        for k, w in watts.items():
            assert z[kind][k] == pytest.approx(di[kind][k],
                                               abs=w * slack + 0.5)
            assert di[kind][k] == pytest.approx(w * di["time_s"], rel=0.05)


def sanitize_flags():
    """-fsanitize=... when ZEUSD_BUILD is a sanitizer build."""
    v = build_sanitizers()
    return f"-fsanitize={v}" if v else ""


def test_example_builds_against_installed_pkg_config(tmp_path, tree):
    if shutil.which("pkg-config") is None or shutil.which("cc") is None:
        pytest.skip("no pkg-config or cc")
    dest = tmp_path / "dest"
    r = subprocess.run(["meson", "install", "-C", str(BUILD), "--no-rebuild",
                        "--destdir", str(dest)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    pcs = list(dest.rglob("zeus.pc"))
    assert len(pcs) == 1
    libdir = pcs[0].parent.parent
    work = tmp_path / "ex"
    shutil.copytree(ROOT / "examples", work)
    env = dict(os.environ, PKG_CONFIG_PATH=str(pcs[0].parent),
               PKG_CONFIG_SYSROOT_DIR=str(dest),
               CFLAGS=f"-O1 -Wall -Wextra -Werror {sanitize_flags()}")
    r = subprocess.run(["make", "-C", str(work)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "zeus"],
                           env=env, capture_output=True, text=True).stdout
    assert str(dest) in flags       # it used the staged install
    run_env = direct_env(tree, LD_LIBRARY_PATH=str(libdir))
    r = subprocess.run([str(work / "energy_window")], env=run_env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^gpu 3: \d+\.\d+ J$", r.stdout, re.M), r.stdout
    assert re.search(r"^dram 0: ", r.stdout, re.M)
