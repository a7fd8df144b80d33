#!/bin/bash
# bench/pipe_bench.sh - zeusd.exe's named pipe against its TCP, under wine,
# side by side in one run (docs/windows.md).
#
# Starts two `zeusd.exe serve --simulate` in one wine prefix, one on a
# named pipe and one on TCP 127.0.0.1, and drives both with the same
# native client (build-win/pipe_client.exe bench: each thread one
# keep-alive connection asking GET PATH in a loop, latency per request),
# interleaved, $PIPE_BENCH_ROUNDS rounds. Prints each run and, per
# transport, the median requests/s and p50, then the pipe/TCP ratios.
# The machine is shared: the ratios measured side by side are what means
# something, not the absolute figures.
#
# Environment: PIPE_BENCH_ROUNDS (3), PIPE_BENCH_SECONDS per run (3),
# PIPE_BENCH_THREADS (1 and 4: "1 4"), PIPE_BENCH_PATH (/time),
# ZEUS_WIN_BUILD (build-win), WINEPREFIX (a temporary one).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
win=${ZEUS_WIN_BUILD:-$root/build-win}
rounds=${PIPE_BENCH_ROUNDS:-3}
secs=${PIPE_BENCH_SECONDS:-3}
threads=${PIPE_BENCH_THREADS:-1 4}
path=${PIPE_BENCH_PATH:-/time}
for f in zeusd.exe pipe_client.exe nvml-sim.dll; do
	[ -f "$win/$f" ] || { echo "no $win/$f (make windows)" >&2; exit 1; }
done
command -v wine >/dev/null || { echo "wine is not installed" >&2; exit 1; }

tmp=$(mktemp -d)
export WINEDEBUG=-all
export WINEPREFIX=${WINEPREFIX:-$tmp/prefix}
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
wine cmd /c exit >/dev/null 2>&1

pipe='\\.\pipe\zeusd-bench-'$$
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); '\
's.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ZEUSD_LOG=warn wine "$win/zeusd.exe" serve --simulate --pipe-name "$pipe" \
    >"$tmp/pipe.log" 2>&1 &
pids+=($!)
ZEUSD_LOG=warn wine "$win/zeusd.exe" serve --simulate --mode tcp \
    --tcp-bind-address "127.0.0.1:$port" >"$tmp/tcp.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	wine "$win/pipe_client.exe" get "$pipe" /time 1 2>/dev/null |
	    grep -q status=200 && break
	sleep 0.2
done

echo "# zeusd.exe under wine: GET $path, ${secs}s per run, $rounds rounds"
for t in $threads; do
	for r in $(seq "$rounds"); do
		for target in "pipe:$pipe" "tcp:127.0.0.1:$port"; do
			out=$(wine "$win/pipe_client.exe" bench "$target" "$path" \
			    "$secs" "$t")
			kind=${target%%:*}
			echo "threads=$t round=$r transport=$kind $out"
			echo "$t $kind $out" >>"$tmp/results"
		done
	done
done
/usr/bin/python3 - "$tmp/results" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    t, kind, *kv = line.split()
    d = dict(x.split("=", 1) for x in kv)
    runs.setdefault((int(t), kind), []).append(d)
print("\n| threads | transport | requests/s | p50 µs | p99 µs |")
print("|---|---|---|---|---|")
med = {}
for (t, kind), ds in sorted(runs.items()):
    m = {k: statistics.median(float(d[k]) for d in ds)
         for k in ("rps", "p50_us", "p99_us")}
    med[(t, kind)] = m
    print(f"| {t} | {kind} | {m['rps']:.0f} | {m['p50_us']:.0f} | "
          f"{m['p99_us']:.0f} |")
print()
for t in sorted({t for t, _ in med}):
    p, c = med.get((t, "pipe")), med.get((t, "tcp"))
    if p and c:
        print(f"threads={t}: pipe/tcp requests/s {p['rps'] / c['rps']:.2f}, "
              f"p50 {p['p50_us'] / c['p50_us']:.2f}")
EOF
