#!/bin/bash
# bench/journal_bench.sh - what the lease journal (--state-dir) costs a
# write: a non-root user's lease cycle (the write that takes the lease,
# whose record is synced to disk before the GPU changes, and the release,
# whose restore removes it) timed client side over the Unix socket, on a
# zeusd with --gpu-leases and on the same zeusd with --state-dir too,
# interleaved, BENCH_ROUNDS rounds of BENCH_CYCLES cycles each, the two
# taking turns at going first. Prints the medians (µs) of each request,
# the difference, and the difference in each round (the spread the noise
# leaves). Root writes take no lease and never touch the journal: `make
# bench-http`'s write rows do not move. Needs root (it acts as nobody);
# the state directory is on the file system of $TMPDIR (default /tmp),
# whose fsync is what is measured. `make bench-journal` runs it on build/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BENCH_BUILD:-$root/build}
rounds=${BENCH_ROUNDS:-3}
cycles=${BENCH_CYCLES:-200}
[ "$(id -u)" = 0 ] || { echo "journal_bench.sh: needs root" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zeusd-jbench.XXXXXX")
chmod 755 "$tmp"
zpid=
cleanup() {
	[ -n "$zpid" ] && kill "$zpid" 2>/dev/null && wait "$zpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

client='
import json, socket, sys, time
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
take, rel = [], []
for i in range(n):
    t0 = time.perf_counter_ns()
    req(f"/gpu/set_power_limit?gpu_ids=0&power_limit_mw={200000 + (i % 2) * 10000}&block=true")
    t1 = time.perf_counter_ns()
    req("/gpu/release?gpu_ids=0")
    t2 = time.perf_counter_ns()
    take.append((t1 - t0) / 1000); rel.append((t2 - t1) / 1000)
take.sort(); rel.sort()
print(json.dumps({"take": take[n // 2], "release": rel[n // 2]}))
'

# run NAME ARGS...: a fresh zeusd, BENCH_CYCLES lease cycles as nobody;
# appends "NAME ROUND {medians}" to $results. Not run in a subshell, so
# the EXIT trap knows the daemon and stops it should anything fail.
run() {
	local name=$1 line
	shift
	rm -rf "$tmp/run" "$tmp/state"
	mkdir -p "$tmp/run"
	chmod 755 "$tmp/run"
	"$build/zeusd" serve --simulate --socket-path "$tmp/run/z.sock" \
	    --gpu-leases "$@" >"$tmp/zeusd.log" 2>&1 &
	zpid=$!
	for _ in $(seq 100); do
		[ -S "$tmp/run/z.sock" ] && break
		kill -0 "$zpid" 2>/dev/null || break
		sleep 0.05
	done
	if [ ! -S "$tmp/run/z.sock" ]; then
		echo "journal_bench.sh: zeusd ($name) did not come up:" >&2
		cat "$tmp/zeusd.log" >&2
		exit 1
	fi
	line=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
	    /usr/bin/python3 -c "$client" "$tmp/run/z.sock" "$cycles")
	if [ "$name" = with ] && [ ! -d "$tmp/state" ]; then
		echo "journal_bench.sh: zeusd wrote no journal directory" >&2
		exit 1
	fi
	kill "$zpid"
	wait "$zpid" || true
	zpid=
	echo "$name $r $line" >>"$results"
}

# the two daemons take turns at going first
results=$tmp/results.txt
: >"$results"
for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then
		run without
		run with --state-dir "$tmp/state"
	else
		run with --state-dir "$tmp/state"
		run without
	fi
done
/usr/bin/python3 - "$results" <<'EOF'
import json, statistics, sys
rows = {"without": {}, "with": {}}
for line in open(sys.argv[1]):
    k, r, v = line.split(" ", 2)
    rows[k][int(r)] = json.loads(v)
med = {k: {f: statistics.median(x[f] for x in v.values())
           for f in ("take", "release")} for k, v in rows.items()}
print("| request (median µs, %d rounds) | without --state-dir | with | added "
      "| added, each round |" % len(rows["with"]))
print("|---|---:|---:|---:|---|")
for f, name in (("take", "set_power_limit that takes the lease"),
                ("release", "POST /gpu/release (restore)")):
    a, b = med["without"][f], med["with"][f]
    each = ", ".join(f"{rows['with'][r][f] - rows['without'][r][f]:+.0f}"
                     for r in sorted(rows["with"]))
    print(f"| {name} | {a:.0f} | {b:.0f} | {b - a:+.0f} | {each} |")
EOF
