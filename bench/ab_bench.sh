#!/bin/bash
# bench/ab_bench.sh - one request against two builds side by side: a
# change against the build before it (docs/performance.md).
#
#   bench/ab_bench.sh BUILD BASE_BUILD
#
# Starts each build's `zeusd serve --simulate` (8 simulated GPUs, 2
# simulated RAPL packages, UDS, split into its processes) afresh for every
# run, the builds taking turns at going first, and runs the load generator
# (bench/loadgen.c) on BENCH_PATH at each of BENCH_CONNS connections for
# BENCH_DURATION seconds, BENCH_ROUNDS times. One-connection runs pin the
# daemon's processes and the load generator to one CPU, as bench/run.sh
# explains. Prints a line per run, then per connection count the medians
# of requests/s, p50 and CPU per request (summed over every process of the
# daemon) of each build and their ratio BUILD / BASE_BUILD. A run with an
# answer other than 2xx fails the benchmark.
#
# Both build directories need zeusd and libnvml-sim.so (a release build:
# `meson setup DIR -Dtests=false --buildtype=release && ninja -C DIR`; the
# base from a worktree of the commit before: `git worktree add`).
#
# Environment: BENCH_ROUNDS (3), BENCH_DURATION (2), BENCH_CONNS ("1 50"),
# BENCH_METHOD (POST), BENCH_PATH
# (/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=true).
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 BUILD BASE_BUILD" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
new=$(cd "$1" && pwd)
base=$(cd "$2" && pwd)
rounds=${BENCH_ROUNDS:-3}
dur=${BENCH_DURATION:-2}
conns_list=${BENCH_CONNS:-"1 50"}
method=${BENCH_METHOD:-POST}
path=${BENCH_PATH:-/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=true}
for b in "$base" "$new"; do
	[ -x "$b/zeusd" ] || { echo "bench: no $b/zeusd" >&2; exit 1; }
done

# shellcheck source=bench/lib_single.sh
. "$root/bench/lib_single.sh"
bench_single_setup ab "$root"

# run ROUND NAME BUILD CONNS: one daemon, one loadgen run, one line
run() {
	local r=$1 name=$2 b=$3 c=$4 sock=$tmp/run/s P=() p line pin=()
	install -d -m 755 "$tmp/run"
	rm -f "$sock"
	ZEUS_SIM_GPUS=8 ZEUSD_LOG=warn ZEUSD_MAX_CONNS_PER_PEER=0 \
	    "$b/zeusd" serve --simulate --socket-path "$sock" \
	    >"$tmp/log" 2>&1 &
	pid=$!
	for _ in $(seq 200); do
		[ -S "$sock" ] && break
		sleep 0.05
	done
	[ -S "$sock" ] || { cat "$tmp/log" >&2; exit 1; }
	sleep 0.5	# the network process and the janitor are up
	for p in $pid $(cat "/proc/$pid/task/$pid/children"); do
		[ "$c" = 1 ] && taskset -a -p -c 0 "$p" >/dev/null
		P+=(-P "$p")
	done
	[ "$c" = 1 ] && pin=(taskset -c 0)
	line=$("${pin[@]}" "$lg" -u "$sock" -c "$c" -d "$dur" -w 0.3 \
	    -m "$method" -p "$path" "${P[@]}")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	grep -q " non2xx=0 " <<<"$line" ||
	    { echo "bench: answers other than 2xx: $line" >&2; exit 1; }
	echo "$r $name $c $(sed -E 's/.* rps=([0-9.]+) p50_us=([0-9.]+) .* server_cpu_us_per_req=([0-9.]+).*/\1 \2 \3/' <<<"$line")" |
	    tee -a "$tmp/results"
}

echo "$method $path"
echo "round build conns rps p50_us cpu_us_per_req" | tee "$tmp/results"
for r in $(seq "$rounds"); do
	for c in $conns_list; do
		if [ $((r % 2)) = 1 ]; then
			run "$r" base "$base" "$c"
			run "$r" new "$new" "$c"
		else
			run "$r" new "$new" "$c"
			run "$r" base "$base" "$c"
		fi
	done
done

python3 - "$tmp/results" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
for c in sorted({int(r[2]) for r in rows}):
    med = {}
    for b in ("base", "new"):
        sel = [r for r in rows if r[1] == b and int(r[2]) == c]
        med[b] = [statistics.median(float(r[i]) for r in sel)
                  for i in (3, 4, 5)]
    (br, bp, bc), (nr, np_, nc) = med["base"], med["new"]
    print(f"{c} conns: req/s {br:,.0f} -> {nr:,.0f} ({nr / br:.2f}x), "
          f"p50 {bp:.0f} -> {np_:.0f} us ({np_ / bp:.2f}x), "
          f"CPU {bc:.1f} -> {nc:.1f} us/req ({nc / bc:.2f}x)")
EOF
