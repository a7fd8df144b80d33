#!/bin/bash
# bench/lease_write_bench.sh - a lease holder's GPU writes, this build
# against another: a non-root user (nobody) takes a lease with one write,
# then BENCH_WRITES blocking set_power_limit writes under it, timed client
# side over the Unix socket; each build's zeusd (--gpu-leases --simulate,
# no journal) fresh in each of BENCH_ROUNDS rounds, the two taking turns
# at going first. Prints each round's median (µs) and the median of them.
# What it shows: what a write under a lease costs beyond the device call
# (the network process's lease claim, its round trip to the device
# process, the warden's decision). Needs root (it acts as nobody).
#   BENCH_BEFORE=DIR  the other build's directory (required)
#   BENCH_BUILD=DIR   this one (default build/)
# `make bench-lease-write BENCH_BEFORE=...` runs it on build/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BENCH_BUILD:-$root/build}
before=${BENCH_BEFORE:?set BENCH_BEFORE to the other build directory}
rounds=${BENCH_ROUNDS:-6}
writes=${BENCH_WRITES:-400}
[ "$(id -u)" = 0 ] || { echo "lease_write_bench.sh: needs root" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zeusd-lwbench.XXXXXX")
chmod 755 "$tmp"
zpid=
cleanup() {
	[ -n "$zpid" ] && kill "$zpid" 2>/dev/null && wait "$zpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

client='
import socket, sys, time
path, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_UNIX); s.connect(path)
def req(target):
    s.sendall(f"POST {target} HTTP/1.1\r\nHost: zeusd\r\nContent-Length: 0\r\n\r\n".encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, body = buf.split(b"\r\n\r\n", 1)
    length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(body) < length:
        body += s.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), head
req("/gpu/set_power_limit?gpu_ids=0&power_limit_mw=190000&block=true")
took = []
for i in range(n):
    t0 = time.perf_counter_ns()
    req(f"/gpu/set_power_limit?gpu_ids=0&power_limit_mw={200000 + (i % 2) * 10000}&block=true")
    took.append((time.perf_counter_ns() - t0) / 1000)
took.sort()
print(f"{took[n // 2]:.1f}")
'

# run NAME BUILD: a fresh zeusd of BUILD, the writes as nobody; appends
# "NAME median" to $results
run() {
	rm -rf "$tmp/run"
	mkdir -p "$tmp/run"
	chmod 755 "$tmp/run"
	"$2/zeusd" serve --simulate --socket-path "$tmp/run/z.sock" \
	    --gpu-leases >"$tmp/zeusd.log" 2>&1 &
	zpid=$!
	for _ in $(seq 100); do
		[ -S "$tmp/run/z.sock" ] && break
		kill -0 "$zpid" 2>/dev/null || break
		sleep 0.05
	done
	if [ ! -S "$tmp/run/z.sock" ]; then
		echo "lease_write_bench.sh: zeusd ($1) did not come up:" >&2
		cat "$tmp/zeusd.log" >&2
		exit 1
	fi
	echo "$1 $(setpriv --reuid=65534 --regid=65534 --clear-groups \
	    /usr/bin/python3 -c "$client" "$tmp/run/z.sock" "$writes")" \
	    >>"$results"
	kill "$zpid"
	wait "$zpid" || true
	zpid=
}

results=$tmp/results.txt
: >"$results"
for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then
		run before "$before"
		run this "$build"
	else
		run this "$build"
		run before "$before"
	fi
done
/usr/bin/python3 - "$results" <<'EOF'
import statistics, sys
rows = {"before": [], "this": []}
for line in open(sys.argv[1]):
    k, v = line.split()
    rows[k].append(float(v))
b, t = statistics.median(rows["before"]), statistics.median(rows["this"])
print("| build | median µs per write, each round | median |")
print("|---|---|---:|")
for k, m in (("before", b), ("this", t)):
    print(f"| {k} | {', '.join(f'{x:.0f}' for x in rows[k])} | {m:.0f} |")
print(f"this build takes {t / b:.2f}x the time of the other")
EOF
