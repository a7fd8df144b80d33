#!/usr/bin/env python3
"""wine_ab_bench.py - two zeusd.exe builds side by side under wine
(docs/windows.md, "The same two halves, in one process"): each started in
turn with --simulate on TCP (keep-alive, one request at a time), timed
over GET /gpu/get_power and a blocking POST /gpu/set_power_limit, the
builds taking turns at going first. Prints the medians (µs, client side),
their ratio and each round's ratio as markdown rows. Under wine a request
costs about 1.5 ms, mostly wine's own socket path, so only a large change
of zeusd.exe's cost can show.

    bench/wine_ab_bench.py BEFORE_BUILD_WIN AFTER_BUILD_WIN [ROUNDS]
"""
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time

PORT = 4940
READS, WRITES = 2000, 1000


def start(build):
    p = subprocess.Popen(["wine", os.path.join(build, "zeusd.exe"), "serve",
                          "--simulate", "--mode", "tcp",
                          "--tcp-bind-address", f"127.0.0.1:{PORT}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
            c.request("GET", "/time")
            c.getresponse().read()
            return p, c
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise SystemExit(f"{build}/zeusd.exe did not start")


def timed(c, method, path, n):
    t = []
    for i in range(n):
        t0 = time.perf_counter()
        c.request(method, path(i))
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"{method} {path(i)}: {r.status}")
        t.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(t)


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    builds = {"before": sys.argv[1], "after": sys.argv[2]}
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    os.environ.setdefault("WINEDEBUG", "-all")
    os.environ.setdefault("WINEPREFIX", tempfile.mkdtemp(prefix="wine-ab-"))
    res = {b: {"read": [], "write": []} for b in builds}
    read = lambda i: "/gpu/get_power?gpu_ids=0"          # noqa: E731
    write = lambda i: ("/gpu/set_power_limit?gpu_ids=0&block=true"  # noqa
                       f"&power_limit_mw={200000 + (i % 2) * 1000}")
    for rnd in range(rounds):
        order = list(builds) if rnd % 2 == 0 else list(builds)[::-1]
        for b in order:
            p, c = start(builds[b])
            timed(c, "GET", read, 200)                  # warm-up
            res[b]["read"].append(timed(c, "GET", read, READS))
            res[b]["write"].append(timed(c, "POST", write, WRITES))
            c.close()
            p.terminate()
            p.wait()
            time.sleep(1)
    print("| request (median µs) | before | after | ratio | per round |")
    print("|---|---:|---:|---:|---|")
    for k, name in (("read", "GET /gpu/get_power"),
                    ("write", "POST /gpu/set_power_limit, block=true")):
        b = statistics.median(res["before"][k])
        a = statistics.median(res["after"][k])
        per = ", ".join(f"{y / x:.2f}" for x, y in
                        zip(res["before"][k], res["after"][k]))
        print(f"| {name} | {b:.0f} | {a:.0f} | {a / b:.2f}x | {per} |")


if __name__ == "__main__":
    main()
