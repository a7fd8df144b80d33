"""The summary of `make bench-http` (bench/run_report.py) on a recorded run.

data/bench_run_results.txt and data/bench_run_facts.txt are what
bench/run.sh wrote in one short run (BENCH_ROUNDS=1 BENCH_DURATION=0.3
BENCH_IDLE_S=1 BENCH_KEEP=1), with one row changed by hand: zeusd's CPU per
request for GET /time over UDS at 50 connections is 0.00, which is what the
benchmark recorded while it counted the device process alone (the network
process answers /time by itself). The summary divided by that zero and
`make bench-http` exited 1 after its whole run; these tests keep it from
breaking silently again. No daemon is started.
"""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "bench" / "run_report.py"
DATA = Path(__file__).resolve().parent / "data"


def report(tmp_path, results=None):
    """Runs the summary; `results` replaces the recorded results' text."""
    res = DATA / "bench_run_results.txt"
    if results is not None:
        res = tmp_path / "results.txt"
        res.write_text(results)
    return subprocess.run(
        [sys.executable, str(REPORT), str(res),
         str(DATA / "bench_run_facts.txt"), "1", "0.3"],
        capture_output=True, text=True, timeout=60)


def rows(out, first_cell):
    """The markdown rows whose first cell is `first_cell`, as cell lists."""
    found = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            found.append(cells)
    return found


def test_recorded_run_with_zero_cpu(tmp_path):
    p = report(tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    # the zero shows as a zero, and the ratio over it as "-"
    cpu = rows(p.stdout, "CPU µs/req, 50 conns")
    assert cpu == [["CPU µs/req, 50 conns", "0.0", "14.4", "-"]]
    time_uds_50 = [r for r in rows(p.stdout, "GET /time")
                   if r[1] == "UDS" and r[2] == "50"]
    assert len(time_uds_50) == 1 and time_uds_50[0][8] == "0.0"
    # every table came out, down to the targets
    for title in ("### HTTP requests", "### Request logging",
                  "### Memory and idleness", "### Targets"):
        assert title in p.stdout
    # memory figures are the three processes' sums, and say so
    assert "3 for the UDS instance" in p.stdout
    assert "| RSS idle, after startup | 11.7 MiB |" in p.stdout
    # the current targets (issue 34), judged from the recorded figures;
    # none of the superseded ones
    assert rows(p.stdout, "GET /gpu/get_power p50 at 1 conn <= 2.0x "
                "GET /time's") == [["GET /gpu/get_power p50 at 1 conn <= "
                                    "2.0x GET /time's",
                                    "1.78x (27.6 / 15.5 µs)", "met"]]
    assert rows(p.stdout, "GET /gpu/get_power req/s at 50 conns >= 0.6x "
                "nginx's")[0][2] == "NOT MET"
    assert "idle RSS" not in p.stdout and "1.5x nginx" not in p.stdout


def test_recorded_run_errors_fail(tmp_path):
    text = (DATA / "bench_run_results.txt").read_text()
    bad = text.replace("target=/gpu/get_power requests=9901 secs=0.300 "
                       "rps=33003 p50_us=27.6 p99_us=63.3 max_us=378.4 "
                       "non2xx=0", "target=/gpu/get_power requests=9901 "
                       "secs=0.300 rps=33003 p50_us=27.6 p99_us=63.3 "
                       "max_us=378.4 non2xx=3", 1)
    assert bad != text
    p = report(tmp_path, bad)
    assert p.returncode == 1
    assert ("ERRORS: zeusd uds c=1 GET /gpu/get_power: non2xx=3 "
            "transport_errors=0") in p.stdout


def test_zero_nginx_rate_is_no_ratio(tmp_path):
    """A server that answered nothing in a window: "-", not a crash."""
    lines = (DATA / "bench_run_results.txt").read_text().splitlines()
    out = []
    for line in lines:
        if "label=nginx transport=tcp conns=1 " in line and \
                "endpoint=energy" in line:
            line = " ".join("rps=0" if kv.startswith("rps=") else kv
                            for kv in line.split())
        out.append(line)
    p = report(tmp_path, "\n".join(out) + "\n")
    assert p.returncode == 0, p.stderr
    energy_tcp_1 = [r for r in rows(p.stdout, "GET /cpu/get_cumulative_energy")
                    if r[1] == "TCP" and r[2] == "1"]
    assert len(energy_tcp_1) == 1
    assert energy_tcp_1[0][4] == "0" and energy_tcp_1[0][5] == "-"
