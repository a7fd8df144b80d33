#!/usr/bin/env python3
"""bench/run_report.py - the summary of bench/run.sh (`make bench-http`).

    bench/run_report.py RESULTS FACTS ROUNDS DURATION

RESULTS holds one line per load-generator run (bench/loadgen.c's
key=value output plus endpoint=NAME); FACTS holds key=value lines of
memory and idleness figures, each a sum over all of a daemon's processes
(device, network and janitor; procs_* says how many). Prints the markdown
tables of docs/performance.md ("HTTP requests"), ending with the verdicts
on the targets of issue 34 as that section states them; exits 1 when a run
saw errors. A figure that is 0 (a server that used no CPU tick in a window)
prints as 0.0 and any ratio over it as "-", never a division by zero.
tests/integration/test_bench_report.py runs it on a recorded run
(tests/integration/data/bench_run_*.txt).
"""
import statistics
import sys

results, facts, rounds, dur = sys.argv[1:5]
runs = []
for line in open(results):
    runs.append(dict(kv.split("=", 1) for kv in line.split()))
fact = dict(l.strip().split("=", 1) for l in open(facts) if "=" in l)

def ratio(a, b, fmt=".2f", suffix="x"):
    """a / b as text, "-" where b is 0 or either is missing."""
    if not b or a != a or b != b:
        return "-"
    return f"{a / b:{fmt}}{suffix}"


def med(label, endpoint, tr, conns, key):
    v = [float(r[key]) for r in runs
         if r["label"] == label and r["endpoint"] == endpoint
         and r["transport"] == tr and r["conns"] == str(conns) and key in r]
    return statistics.median(v) if v else float("nan")

names = {"time": "GET /time", "power": "GET /gpu/get_power",
         "setpl": "POST /gpu/set_power_limit (block=true)",
         "energy": "GET /cpu/get_cumulative_energy"}
print()
print(f"### HTTP requests: zeusd vs nginx, median of {rounds} rounds "
      f"of {dur} s")
print()
print("| request | transport | conns | zeusd req/s | nginx req/s | ratio "
      "| zeusd p50 / p99 µs | nginx p50 / p99 µs | zeusd CPU µs/req "
      "| nginx CPU µs/req |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for e in ("time", "power", "setpl", "energy"):
    for tr in ("uds", "tcp"):
        for c in (1, 50):
            z = lambda k: med("zeusd", e, tr, c, k)
            n = lambda k: med("nginx", e, tr, c, k)
            print(f"| {names[e]} | {tr.upper()} | {c} | {z('rps'):,.0f} "
                  f"| {n('rps'):,.0f} | {ratio(z('rps'), n('rps'))} "
                  f"| {z('p50_us'):.0f} / {z('p99_us'):.0f} "
                  f"| {n('p50_us'):.0f} / {n('p99_us'):.0f} "
                  f"| {z('server_cpu_us_per_req'):.1f} "
                  f"| {n('server_cpu_us_per_req'):.1f} |")

print()
print("One-connection rows run pinned to one core (server and load "
      "generator); unpinned, over UDS:")
print()
print("| request | zeusd p50 / p99 µs | nginx p50 / p99 µs | zeusd req/s "
      "| nginx req/s |")
print("|---|---:|---:|---:|---:|")
for e in ("time", "power"):
    z = lambda k: med("zeusd", e + "-unpinned", "uds", 1, k)
    n = lambda k: med("nginx", e + "-unpinned", "uds", 1, k)
    print(f"| {names[e]} | {z('p50_us'):.0f} / {z('p99_us'):.0f} "
          f"| {n('p50_us'):.0f} / {n('p99_us'):.0f} | {z('rps'):,.0f} "
          f"| {n('rps'):,.0f} |")

print()
print("### GET /cpu/get_cumulative_energy against GET /time (zeusd, UDS)")
print()
print("| figure | /time | /cpu/get_cumulative_energy | ratio |")
print("|---|---:|---:|---:|")
for label, c, k in (("p50 µs, 1 conn", 1, "p50_us"),
                    ("p99 µs, 1 conn", 1, "p99_us"),
                    ("req/s, 50 conns", 50, "rps"),
                    ("CPU µs/req, 50 conns", 50, "server_cpu_us_per_req")):
    t = med("zeusd", "time", "uds", c, k)
    en = med("zeusd", "energy", "uds", c, k)
    f = ",.0f" if k == "rps" else ",.1f"
    print(f"| {label} | {t:{f}} | {en:{f}} | {ratio(en, t)} |")

print()
print("### Request logging (GET /time over UDS, info vs warn level)")
print()
print("| conns | warn req/s | info req/s | ratio | warn CPU µs/req "
      "| info CPU µs/req |")
print("|---:|---:|---:|---:|---:|---:|")
for c in (1, 50):
    w = lambda k: med("zeusd", "time-paired", "uds", c, k)
    i = lambda k: med("zeusd-info", "time", "uds", c, k)
    print(f"| {c} | {w('rps'):,.0f} | {i('rps'):,.0f} "
          f"| {ratio(i('rps'), w('rps'))} | {w('server_cpu_us_per_req'):.1f} "
          f"| {i('server_cpu_us_per_req'):.1f} |")

kib = lambda k: int(fact[k]) / 1024
idle_s = fact["idle_s"]
# how many processes each figure sums (older facts files lack procs_*)
n = lambda k: fact.get(k, "1")
print()
print(f"### Memory and idleness (8 simulated GPUs, 2 RAPL packages)")
print()
print(f"Each figure is summed over all of the daemon's processes: "
      f"{n('procs_uds')} for the UDS instance (device, network, janitor), "
      f"{n('procs_tcp')} over TCP (no janitor).")
print()
print("| figure | value |")
print("|---|---:|")
print(f"| RSS idle, after startup | {kib('rss_idle_kib'):.1f} MiB |")
print(f"| of which anonymous / PSS, idle | {kib('anon_idle_kib'):.1f} "
      f"/ {kib('pss_idle_kib'):.1f} MiB |")
print(f"| RSS after load (UDS / TCP instance) | {kib('rss_load_kib'):.1f} "
      f"/ {kib('rss_load_tcp_kib'):.1f} MiB |")
print(f"| anonymous after load (UDS instance) "
      f"| {kib('anon_load_kib'):.1f} MiB |")
print(f"| RSS idle, `--enable gpu-control,gpu-read` "
      f"| {kib('rss_idle_gpuonly_kib'):.1f} MiB |")
print(f"| CPU over {idle_s} s idle, all groups (utime+stime / scheduler) "
      f"| {fact['idle_ticks_ms']} ms / {int(fact['idle_sched_us']) / 1000:.1f}"
      f" ms, {fact['idle_wakeups']} wake-ups |")
print(f"| CPU over {idle_s} s idle, `--enable gpu-control,gpu-read` "
      f"| {fact['idle_gpuonly_ticks_ms']} ms / "
      f"{int(fact['idle_gpuonly_sched_us']) / 1000:.1f} ms, "
      f"{fact['idle_gpuonly_wakeups']} wake-ups |")

def verdict(ok):
    return "met" if ok else "NOT MET"

def quot(a, b):
    """a / b, NaN where b is 0 (a verdict on NaN is NOT MET)."""
    return a / b if b else float("nan")

# The targets of issue 34, as docs/performance.md ("HTTP requests") states
# them, all over UDS: at one connection (pinned) a device read's p50 against
# zeusd's own GET /time p50 in the same run; at 50 connections zeusd's
# requests/s against nginx's for the same request. The last target,
# nothing worse than the build before, needs a second build: not judged here.
print()
print("### Targets (issue 34)")
print()
print("UDS. One connection: the read's p50 over zeusd's own GET /time p50 "
      "(both pinned). 50 connections: zeusd's requests/s over nginx's.")
print()
print("| target | measured | |")
print("|---|---:|---|")
t_p50 = med("zeusd", "time", "uds", 1, "p50_us")
for e in ("power", "energy"):
    p50 = med("zeusd", e, "uds", 1, "p50_us")
    x = quot(p50, t_p50)
    print(f"| {names[e]} p50 at 1 conn <= 2.0x GET /time's "
          f"| {ratio(p50, t_p50)} ({p50:.1f} / {t_p50:.1f} µs) "
          f"| {verdict(x <= 2.0)} |")
for e, floor in (("power", 0.6), ("energy", 0.6), ("setpl", 0.5)):
    z, n_ = (med(who, e, "uds", 50, "rps") for who in ("zeusd", "nginx"))
    x = quot(z, n_)
    print(f"| {names[e]} req/s at 50 conns >= {floor}x nginx's "
          f"| {ratio(z, n_)} | {verdict(x >= floor)} |")
print()
print("Not judged here: nothing worse than the build before (run "
      "`BENCH_BUILD=<its build> bench/run.sh` beside this one, or "
      "bench/ab_bench.sh).")

bad = [r for r in runs if int(r["non2xx"]) or int(r["transport_errors"])]
if bad:
    print()
    for r in bad:
        print(f"ERRORS: {r['label']} {r['transport']} c={r['conns']} "
              f"{r['method']} {r['target']}: non2xx={r['non2xx']} "
              f"transport_errors={r['transport_errors']}")
    sys.exit(1)
