"""check.py - the checks of tests/hw/nvidia.sh against a running zeusd.

Standard library only (it runs on GPU hosts as they are). Talks HTTP over
zeusd's Unix socket; reads everything; unless --read-only, runs each write
that can be undone and undoes it (power limit and persistence mode back to
what they were, locked clocks reset, in `finally` blocks so a failed check
still restores); times zeusd's get_power and get_cumulative_energy next to
the raw NVML calls measured by nvml_bench. Prints the report; exit status
0 when nothing failed, 1 otherwise.

An operation's outcome is one of: ok; unsupported (a 400 saying the GPU or
the driver does not support it: reported, not a failure); or FAIL with the
status and message.
"""
import argparse
import http.client
import json
import re
import socket
import statistics
import sys
import time


class UnixHTTP(http.client.HTTPConnection):
    """Keep-alive HTTP/1.1 over a Unix socket."""

    def __init__(self, path):
        super().__init__("zeusd", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path)


class Zeusd:
    def __init__(self, path):
        self.conn = UnixHTTP(path)

    def call(self, method, target):
        self.conn.request(method, target)
        r = self.conn.getresponse()
        body = r.read()
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = body.decode(errors="replace")
        return r.status, data

    def get(self, target):
        return self.call("GET", target)

    def post(self, target):
        return self.call("POST", target)


def message(data):
    if isinstance(data, dict):
        if "error" in data:
            return data["error"]
        if "errors" in data:
            return "; ".join(data["errors"].values())
    return str(data)


class Run:
    def __init__(self, z, read_only):
        self.z = z
        self.read_only = read_only
        self.results = []       # (gpu, what, outcome, detail)

    def record(self, gpu, what, status, data, ok=200):
        if status == ok:
            outcome, detail = "ok", ""
        elif status == 400 and "not supported" in message(data):
            outcome, detail = "unsupported", message(data)
        else:
            outcome, detail = "FAIL", f"{status}: {message(data)}"
        self.results.append((gpu, what, outcome, detail))
        return outcome == "ok"

    def check(self, gpu, what, cond, detail=""):
        self.results.append((gpu, what, "ok" if cond else "FAIL",
                             "" if cond else detail))
        return cond

    def read(self, gpu, endpoint):
        status, data = self.z.get(f"/gpu/{endpoint}?gpu_ids={gpu}")
        self.record(gpu, endpoint, status, data)
        if status != 200:
            return None
        return data["power_mw"][str(gpu)] if endpoint == "get_power" \
            else data[str(gpu)]

    def write(self, gpu, endpoint, **params):
        q = "".join(f"&{k}={v}" for k, v in params.items())
        status, data = self.z.post(f"/gpu/{endpoint}?gpu_ids={gpu}"
                                   f"&block=true{q}")
        return self.record(gpu, endpoint, status, data)


def limit_checks(run, gpu, info):
    """Power limit: to the default, to a lower value, back as found."""
    limit = run.read(gpu, "get_power_limit")
    if limit is None:
        return None
    orig = limit["power_limit_mw"]
    rng = info["power_limit_range_mw"]
    lo, hi = rng["min"] or orig, rng["max"] or orig
    default = rng["default"] or orig
    lower = max(lo, min(hi, default - default // 10))
    try:
        for value in (default, lower):
            if run.write(gpu, "set_power_limit", power_limit_mw=value):
                got = run.read(gpu, "get_power_limit")
                run.check(gpu, f"power limit reads back {value} mW",
                          got is not None and
                          got["power_limit_mw"] == value, str(got))
    finally:
        run.write(gpu, "set_power_limit", power_limit_mw=orig)
    got = run.read(gpu, "get_power_limit")
    run.check(gpu, "power limit restored", got is not None and
              got["power_limit_mw"] == orig, str(got))
    return orig


def persistence_checks(run, gpu):
    mode = run.read(gpu, "get_persistence_mode")
    if mode is None:
        return None
    orig = mode["enabled"]
    flip = "false" if orig else "true"
    try:
        if run.write(gpu, "set_persistence_mode", enabled=flip):
            got = run.read(gpu, "get_persistence_mode")
            run.check(gpu, "persistence mode reads back", got is not None
                      and got["enabled"] == (not orig), str(got))
    finally:
        run.write(gpu, "set_persistence_mode",
                  enabled="true" if orig else "false")
    got = run.read(gpu, "get_persistence_mode")
    run.check(gpu, "persistence mode restored",
              got is not None and got["enabled"] == orig, str(got))
    return orig


def clock_checks(run, gpu, info):
    """Locks each domain to its whole range (nothing really constrained),
    then resets: locked clocks cannot be read back, so reset is the only
    safe end state."""
    rng = info["clock_range_mhz"]
    gpu_lo, gpu_hi = rng["gpu"]["min"] or 210, rng["gpu"]["max"] or 1410
    mem_hi = rng["mem"]["max"] or 1593
    try:
        if run.write(gpu, "set_gpu_locked_clocks", min_clock_mhz=gpu_lo,
                     max_clock_mhz=gpu_hi):
            run.write(gpu, "reset_gpu_locked_clocks")
        if run.write(gpu, "set_mem_locked_clocks", min_clock_mhz=mem_hi,
                     max_clock_mhz=mem_hi):
            run.write(gpu, "reset_mem_locked_clocks")
    finally:
        run.write(gpu, "reset_locked_clocks")


def latency(z, target, n):
    """Client-side time of n calls on one keep-alive connection, in us."""
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        status, _ = z.get(target)
        t.append((time.perf_counter() - t0) * 1e6)
        if status != 200:
            return None
    t.sort()
    return {"median": statistics.median(t), "p99": t[(len(t) * 99) // 100]}


def fmt(lat):
    if lat is None:
        return "n/a"
    def num(v):
        return f"{v:.1f}" if v < 10 else f"{v:.0f}"
    return f"{num(lat['median'])} / {num(lat['p99'])}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--raw", required=True)
    ap.add_argument("--zeusd-log", required=True)
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--library", default="libnvidia-ml.so.1")
    ap.add_argument("--read-only", action="store_true")
    ap.add_argument("--report")
    a = ap.parse_args()

    raw = json.load(open(a.raw))
    z = Zeusd(a.socket)
    run = Run(z, a.read_only)
    t_start = time.monotonic()

    status, disc = z.get("/discover")
    if status != 200:
        print(f"FAIL: /discover answered {status}: {disc}")
        return 1
    gpus = disc["gpus"]
    log = open(a.zeusd_log, errors="replace").read()
    m = re.search(r'event=nvml_features_missing symbols="([^"]*)"', log)
    missing = m.group(1).split() if m else []

    for endpoint in ("get_power", "get_cumulative_energy", "get_power_limit",
                     "get_power_limit_constraints", "get_persistence_mode"):
        status, data = z.get(f"/gpu/{endpoint}")
        run.record("all", endpoint, status, data)
    status, text = z.get("/metrics")
    run.check("all", "/metrics", status == 200 and
              "zeusd_gpu_info{" in str(text), str(status))

    restored = {}
    for g in gpus:
        i = g["id"]
        if g["lost"]:
            run.check(i, "GPU present", False, "zeusd reports it lost")
            continue
        if a.read_only:
            continue
        restored[i] = {"power_limit_mw": limit_checks(run, i, g),
                       "persistence": persistence_checks(run, i)}
        clock_checks(run, i, g)

    lat = {}
    for g in gpus:
        i = g["id"]
        lat[i] = {
            "get_power": latency(z, f"/gpu/get_power?gpu_ids={i}",
                                 a.iterations),
            "get_cumulative_energy":
                latency(z, f"/gpu/get_cumulative_energy?gpu_ids={i}",
                        a.iterations)
                if g["cumulative_energy_available"] and
                "nvmlDeviceGetTotalEnergyConsumption" not in missing
                else None}
    took = time.monotonic() - t_start

    # --- the report ---------------------------------------------------------
    out = []
    out.append("zeusd GPU acceptance run (tests/hw/nvidia.sh)")
    out.append(f"driver {raw['driver']}, NVML {raw['nvml']}, "
               f"library {a.library}")
    out.append("NVML entry points missing: " +
               (" ".join(missing) if missing else "none"))
    for g in gpus:
        s = g["supports"]
        r = g["power_limit_range_mw"]
        c = g["clock_range_mhz"]
        out.append(f"GPU {g['id']}: {g['name'] or '?'}  {g['uuid']}  "
                   f"{g['architecture']}  {g['pci_address'] or '?'}  "
                   f"energy={'yes' if g['cumulative_energy_available'] else 'no'}"
                   f"  lost={'yes' if g['lost'] else 'no'}")
        out.append("  supports: " + (" ".join(k for k, v in s.items() if v)
                                     or "none"))
        out.append(f"  power limit {r['min']}-{r['max']} mW (default "
                   f"{r['default']}); clocks gpu {c['gpu']['min']}-"
                   f"{c['gpu']['max']} MHz, mem {c['mem']['min']}-"
                   f"{c['mem']['max']} MHz")
    out.append("operations (each GPU's worst outcome per check):")
    rank = {"ok": 0, "unsupported": 1, "FAIL": 2}
    worst = {}
    for gpu, what, outcome, detail in run.results:
        k = (str(gpu), what)
        if k not in worst or rank[outcome] > rank[worst[k][0]]:
            worst[k] = (outcome, detail)
    for gpu in dict.fromkeys(k[0] for k in worst):
        by = {o: [(w, d) for (g, w), (o2, d) in worst.items()
                  if g == gpu and o2 == o] for o in rank}
        out.append(f"  GPU {gpu}: ok: " +
                   (", ".join(w for w, _ in by["ok"]) or "none"))
        for o in ("unsupported", "FAIL"):
            for w, d in by[o]:
                out.append(f"  GPU {gpu}: {o}: {w} ({d})")
    out.append(f"latency in us, median / p99 of {a.iterations} calls "
               "(zeusd: HTTP over its Unix socket, client side):")
    rawgpu = {g["index"]: g for g in raw["gpus"]}
    for g in gpus:
        i = g["id"]
        rg = rawgpu.get(i, {})
        power_raw = rg.get("power_instant_us") or rg.get("power_usage_us")
        which = "instant field" if rg.get("power_instant_us") else "average"
        out.append(f"  GPU {i} get_power: zeusd {fmt(lat[i]['get_power'])}"
                   f"  raw NVML {fmt(power_raw)} ({which})")
        out.append(f"  GPU {i} get_cumulative_energy: zeusd "
                   f"{fmt(lat[i]['get_cumulative_energy'])}  raw NVML "
                   f"{fmt(rg.get('energy_us'))}")
    if a.read_only:
        out.append("writes: skipped (--read-only)")
    else:
        for i, st in restored.items():
            out.append(f"  GPU {i} left as found: power limit "
                       f"{st['power_limit_mw']} mW, persistence "
                       f"{'on' if st['persistence'] else 'off'}, locked "
                       "clocks reset")
    n = {k: sum(1 for r in run.results if r[2] == k)
         for k in ("ok", "unsupported", "FAIL")}
    verdict = "PASS" if n["FAIL"] == 0 else "FAIL"
    out.append(f"result: {verdict} ({n['ok']} ok, {n['unsupported']} "
               f"unsupported, {n['FAIL']} failed) in {took:.1f} s")
    print("\n".join(out))
    if a.report:
        with open(a.report, "w") as f:
            json.dump({"driver": raw["driver"], "nvml": raw["nvml"],
                       "missing": missing, "gpus": gpus,
                       "results": [list(r) for r in run.results],
                       "latency_us": {str(k): v for k, v in lat.items()},
                       "raw": raw, "verdict": verdict}, f, indent=1)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
