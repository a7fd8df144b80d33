#!/bin/bash
# bench/logrelay_bench.sh - what relaying the network process's log lines
# through the device process costs (zeusd/logrelay.c, docs/performance.md).
#
#   bench/logrelay_bench.sh [BUILD_DIR]      (default build-bench/)
#
# A split zeusd writes one access line per request at info level; the
# network process has no log descriptor of its own, so each line goes
# through a pipe to the device process, which writes it. This runs
# GET /time on one keep-alive Unix-socket connection against a fresh
# `zeusd serve --simulate` at ZEUSD_LOG=info (a line per request) and at
# ZEUSD_LOG=warn (none), the two levels taking turns at going first, and
# reports the CPU per request of the device process alone and of the
# network process alone (loadgen -P, utime+stime from /proc), medians over
# the rounds. The device process answers nothing of /time itself, so its
# CPU per request at info minus at warn is the relay's cost; the network
# process's difference is formatting and writing the line.
#
# The build needs zeusd and libnvml-sim.so (a release build: `meson setup
# build-bench -Dtests=false --buildtype=release && ninja -C build-bench`).
# Environment: BENCH_ROUNDS (3), BENCH_DURATION (2).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build-bench}" && pwd)
rounds=${BENCH_ROUNDS:-3}
dur=${BENCH_DURATION:-2}
[ -x "$build/zeusd" ] || { echo "bench: no $build/zeusd" >&2; exit 1; }

# shellcheck source=bench/lib_single.sh
. "$root/bench/lib_single.sh"
bench_single_setup logrelay "$root"

# run ROUND LEVEL: one daemon, two loadgen runs (device, network process)
run() {
	local r=$1 level=$2 sock=$tmp/run/s net dev_cpu net_cpu rps
	install -d -m 755 "$tmp/run"
	rm -f "$sock"
	ZEUS_SIM_GPUS=8 ZEUSD_LOG=$level "$build/zeusd" serve --simulate \
	    --socket-path "$sock" >"$tmp/log" 2>&1 &
	pid=$!
	for _ in $(seq 200); do
		grep -q "event=listening" "$tmp/log" 2>/dev/null && break
		[ "$level" = warn ] && [ -S "$sock" ] && break
		sleep 0.05
	done
	sleep 0.5	# the network process and the janitor are up
	# the network process: the child with the threads (loop, workers,
	# pools); the socket janitor has one
	local c tasks=()
	net=$(read -ra kids <"/proc/$pid/task/$pid/children"
	for c in "${kids[@]}"; do
		tasks=("/proc/$c/task"/*)
		echo "${#tasks[@]} $c"
	done | sort -n | tail -n 1 | cut -d' ' -f2)
	[ -n "$net" ] || { cat "$tmp/log" >&2; exit 1; }
	line=$("$lg" -u "$sock" -c 1 -d "$dur" -w 0.3 -p /time -P "$pid")
	dev_cpu=$(sed -E 's/.* server_cpu_us_per_req=([0-9.]+).*/\1/' <<<"$line")
	rps=$(sed -E 's/.* rps=([0-9.]+) .*/\1/' <<<"$line")
	line=$("$lg" -u "$sock" -c 1 -d "$dur" -w 0.3 -p /time -P "$net")
	net_cpu=$(sed -E 's/.* server_cpu_us_per_req=([0-9.]+).*/\1/' <<<"$line")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	echo "$r $level $rps $dev_cpu $net_cpu" | tee -a "$tmp/results"
}

echo "round level rps device_cpu_us_per_req network_cpu_us_per_req" |
    tee "$tmp/results"
for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then
		run "$r" info
		run "$r" warn
	else
		run "$r" warn
		run "$r" info
	fi
done

python3 - "$tmp/results" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
med = {}
for lv in ("info", "warn"):
    sel = [r for r in rows if r[1] == lv]
    med[lv] = [statistics.median(float(r[i]) for r in sel) for i in (2, 3, 4)]
(irps, idev, inet), (wrps, wdev, wnet) = med["info"], med["warn"]
print(f"requests/s: info {irps:,.0f}, warn {wrps:,.0f} ({irps / wrps:.2f}x)")
print(f"device process CPU per request: info {idev:.2f} us, warn "
      f"{wdev:.2f} us: the relay costs {idev - wdev:.2f} us a line")
print(f"network process CPU per request: info {inet:.2f} us, warn "
      f"{wnet:.2f} us: writing the line costs {inet - wnet:.2f} us")
EOF
