#!/bin/bash
# bench/pinned_ab.sh - one path at 1 connection, pinned to one CPU, for two
# builds side by side (a change against the build before it). (It also ran
# both in `--no-privsep` until that flag went, issue 43: zeusd is always
# two processes now.)
#
#   bench/pinned_ab.sh BASE_BUILD_DIR NEW_BUILD_DIR
#
# Each round starts a fresh `zeusd serve --simulate` (8 simulated GPUs, the
# 2 simulated RAPL packages, UDS) per build and mode, the builds and modes
# alternating, pins every thread of every process of it and the load
# generator (bench/loadgen.c, `cc -O2`) to CPU BENCH_CPU, and runs loadgen
# for BENCH_DURATION seconds. One line per run, then the medians of p50 and
# of the daemon's CPU per request and their ratio NEW / BASE per mode.
#
# Both build directories need zeusd and libnvml-sim.so (a release build:
# `meson setup DIR -Dtests=false --buildtype=release && ninja -C DIR`; the
# base from a worktree of the previous commit: `git worktree add`).
#
# Environment: BENCH_ROUNDS (4), BENCH_DURATION (2), BENCH_PATH
# (/gpu/get_power), BENCH_CPU (0).
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 BASE_BUILD_DIR NEW_BUILD_DIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
base=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
rounds=${BENCH_ROUNDS:-4}
dur=${BENCH_DURATION:-2}
path=${BENCH_PATH:-/gpu/get_power}
cpu=${BENCH_CPU:-0}
for b in "$base" "$new"; do
	[ -x "$b/zeusd" ] || { echo "bench: no $b/zeusd" >&2; exit 1; }
done

# shellcheck source=bench/lib_single.sh
. "$root/bench/lib_single.sh"
bench_single_setup pinned-ab "$root"

# run ROUND NAME BUILD MODE: one daemon, one loadgen run; one line of
# results, printed and kept.
run() {
	local r=$1 name=$2 b=$3 m=$4 sock=$tmp/s pids P=() p line
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
	pids="$pid $(cat "/proc/$pid/task/$pid/children")"
	for p in $pids; do
		taskset -a -p -c "$cpu" "$p" >/dev/null
		P+=(-P "$p")
	done
	line=$(taskset -c "$cpu" "$lg" -u "$sock" -c 1 -d "$dur" -w 0.3 \
	    -p "$path" "${P[@]}" -l ab)
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	line="$r $name $m $(sed -E 's/.* p50_us=([0-9.]+) .* server_cpu_us_per_req=([0-9.]+).*/\1 \2/' <<<"$line")"
	echo "$line" | tee -a "$tmp/results"
}

echo "round build mode p50_us cpu_us_per_req" | tee "$tmp/results"
for r in $(seq "$rounds"); do
	run "$r" base "$base" privsep
	run "$r" new "$new" privsep
done

python3 - "$tmp/results" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
med = {}
for b in ("base", "new"):
    for m in ("privsep",):
        sel = [r for r in rows if r[1] == b and r[2] == m]
        med[b, m] = (statistics.median(float(r[3]) for r in sel),
                     statistics.median(float(r[4]) for r in sel))
for m in ("privsep",):
    (bp, bc), (np_, nc) = med["base", m], med["new", m]
    print(f"{m}: p50 {bp:.1f} -> {np_:.1f} us ({np_ / bp:.2f}x), "
          f"CPU {bc:.1f} -> {nc:.1f} us/req ({nc / bc:.2f}x)")
EOF
