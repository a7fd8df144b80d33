#!/bin/sh
# metrics_bench.sh - cost of a Prometheus scrape (GET /metrics) against the
# JSON read of the same node (GET /gpu/get_power) and a device-free request
# (GET /time), in one run against one simulated zeusd.
#
#   bench/metrics_bench.sh [BUILD_DIR]        (default: build)
#
# The daemon runs with ZEUS_SIM_GPUS=8 and the two simulated RAPL packages
# (--simulate), over TCP as Prometheus scrapes it. One client on one
# keep-alive connection sends N requests per path back to back (after
# WARMUP), the paths taking turns in ROUNDS rounds, and the script prints
# latency p50/p99/max as the client sees it (Python's http.client, so a few
# tens of µs are the client's own) and the daemon's CPU time per request:
# the sum of /proc/PID/task/*/schedstat (ns, all threads) and utime+stime
# of /proc/PID/stat (clock ticks, a coarse cross-check). The client runs on
# the same machine.
# Environment: N (500), WARMUP (50), ROUNDS (10), GPUS (8), PATHS.
set -eu

BUILD=${1:-build}
N=${N:-500}
WARMUP=${WARMUP:-50}
ROUNDS=${ROUNDS:-10}
GPUS=${GPUS:-8}
PATHS=${PATHS:-"/metrics /gpu/get_power /time"}

if [ ! -x "$BUILD/zeusd" ] || [ ! -e "$BUILD/libnvml-sim.so" ]; then
	echo "metrics_bench: $BUILD/zeusd or libnvml-sim.so missing" \
	    "(ninja -C $BUILD)" >&2
	exit 1
fi

TMP=$(mktemp -d /tmp/metrics_bench.XXXXXX)
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket();
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ZEUS_SIM_GPUS=$GPUS ZEUSD_LOG=warn "$BUILD/zeusd" serve --simulate \
    --mode tcp --tcp-bind-address "127.0.0.1:$PORT" \
    >"$TMP/zeusd.log" 2>&1 &
PID=$!

cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "# $cpu_model, $(nproc) CPUs; ZEUS_SIM_GPUS=$GPUS, 2 packages;" \
    "N=$N in $ROUNDS rounds"
# shellcheck disable=SC2086 # PATHS is a list
/usr/bin/python3 - "$PID" "$PORT" "$N" "$WARMUP" "$ROUNDS" $PATHS <<'EOF'
import glob, http.client, os, sys, time

pid, port, n, warmup, rounds = sys.argv[1], int(sys.argv[2]), \
    int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
paths = sys.argv[6:]
tck = os.sysconf("SC_CLK_TCK")


def cpu():
    """(ticks of utime+stime, ns of runtime over the live threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    ns = 0
    for p in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(p) as f:
                ns += int(f.read().split()[0])
        except OSError:
            pass
    return ticks, ns


deadline = time.monotonic() + 10
while True:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/time")
        c.getresponse().read()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("metrics_bench: zeusd did not start")
        time.sleep(0.05)

print(f"{'path':<16} {'bytes':>6} {'p50_us':>8} {'p99_us':>8} "
      f"{'max_us':>8} {'cpu_us/req':>10} {'(ticks)':>8}")
for path in paths:
    for _ in range(warmup):
        c.request("GET", path)
        c.getresponse().read()
# The paths take turns in rounds so that load from elsewhere on the machine
# falls on all of them alike.
lat = {p: [] for p in paths}
ticks = dict.fromkeys(paths, 0)
ns = dict.fromkeys(paths, 0)
size = {}
per = max(1, n // rounds)
for _ in range(rounds):
    for path in paths:
        t0, ns0 = cpu()
        for _ in range(per):
            s = time.perf_counter_ns()
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            lat[path].append(time.perf_counter_ns() - s)
            if r.status != 200:
                sys.exit(f"metrics_bench: {path}: {r.status} {body[:200]!r}")
        t1, ns1 = cpu()
        ticks[path] += t1 - t0
        ns[path] += ns1 - ns0
        size[path] = len(body)
for path in paths:
    v = sorted(lat[path])
    m = len(v)
    q = lambda p: v[min(m - 1, int(p * m))] / 1e3
    print(f"{path:<16} {size[path]:>6} {q(0.50):>8.0f} {q(0.99):>8.0f} "
          f"{v[-1] / 1e3:>8.0f} {ns[path] / m / 1e3:>10.1f} "
          f"{ticks[path] * 1e6 / tck / m:>8.1f}")
EOF
