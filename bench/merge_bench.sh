#!/bin/bash
# bench/merge_bench.sh - reads merging (docs/design.md, "Reads merge";
# docs/performance.md): GET /gpu/get_power against a build without it.
#
#   bench/merge_bench.sh BUILD BASE_BUILD
#
# Starts each build's zeusd on the NVML simulator (8 GPUs, 2 simulated RAPL
# packages, UDS; split, as zeusd always is since --no-privsep went, issue
# 43), and runs the load generator
# (bench/loadgen.c) on GET /gpu/get_power at each of CONNS connections, the
# builds taking turns at going first, ROUNDS times (one-connection runs
# pin the daemon's processes and the load generator to one CPU, as
# bench/run.sh explains); prints the median
# requests/s, p50/p99 and CPU per request (summed over all of a daemon's
# processes) per build, mode and connection count. Then one counting run
# per build and mode with the simulator's call log on (COUNT requests at
# the largest CONNS): driver power reads per request, and the daemon's
# merged reads from /metrics.
#
# Environment: ROUNDS (3), DURATION seconds per run (2), CONNS ("1 50"),
# COUNT (20000), KEEP=1 keeps the temporary directory.
# shellcheck disable=SC2086 # lists of pids, split on purpose
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: $0 BUILD BASE_BUILD}" && pwd)
base=$(cd "${2:?usage: $0 BUILD BASE_BUILD}" && pwd)
rounds=${ROUNDS:-3}
dur=${DURATION:-2}
conns_list=${CONNS:-"1 50"}
count=${COUNT:-20000}
path=/gpu/get_power

tmp=$(mktemp -d /tmp/zeusd-merge-bench.XXXXXX)
daemons=()
cleanup() {
	local p
	for p in "${daemons[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${daemons[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	if [ "${KEEP:-0}" = 1 ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

lg=$tmp/loadgen
cc -O2 -std=c17 -D_GNU_SOURCE -Wall -Wextra -o "$lg" "$root/bench/loadgen.c"

# start NAME BUILD_DIR MODE [ENV=VALUE...]: the pid in $started
start() {
	local name=$1 b=$2 mode=$3
	shift 3
	env ZEUS_SIM_GPUS=8 ZEUSD_LOG=warn ZEUSD_MAX_CONNS_PER_PEER=0 "$@" \
	    "$b/zeusd" serve --simulate \
	    --socket-path "$tmp/$name.sock" >"$tmp/$name.log" 2>&1 &
	started=$!
	daemons+=("$started")
	for _ in $(seq 100); do
		"$lg" -u "$tmp/$name.sock" -b -p /time >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "bench: $name did not come up" >&2
	cat "$tmp/$name.log" >&2
	exit 1
}

stop() {
	kill "$1"
	wait "$1" 2>/dev/null || { echo "bench: zeusd $1 failed" >&2; exit 1; }
}

# procs PID: the pid and all its descendants
procs() {
	local all=$1 todo=$1 p kids
	while [ -n "$todo" ]; do
		kids=
		for p in $todo; do
			kids="$kids $(cat /proc/"$p"/task/*/children 2>/dev/null || true)"
		done
		todo=$(echo "$kids" | xargs)
		if [ -n "$todo" ]; then all="$all $todo"; fi
	done
	echo "$all"
}

pin_cpu=$(( $(nproc) - 1 ))
results=$tmp/results.txt
: >"$results"
declare -A pid pp
for b in build base; do
	for m in privsep; do
		[ $b = build ] && dir=$build || dir=$base
		start "$b-$m" "$dir" "$m"
		pid[$b-$m]=$started
		pp[$b-$m]=$(procs "$started")
	done
done

for r in $(seq "$rounds"); do
	echo "bench: round $r of $rounds" >&2
	[ $((r % 2)) = 1 ] && order="build base" || order="base build"
	for c in $conns_list; do
		for m in privsep; do
			for b in $order; do
				P=()
				pin=()
				for p in ${pp[$b-$m]}; do P+=(-P "$p"); done
				if [ "$c" = 1 ]; then
					for p in ${pp[$b-$m]}; do
						taskset -a -p -c "$pin_cpu" "$p" >/dev/null
					done
					pin=(taskset -c "$pin_cpu")
				fi
				line=$("${pin[@]}" "$lg" -u "$tmp/$b-$m.sock" -c "$c" \
				    -d "$dur" -w 0.2 -p "$path" "${P[@]}" -l "$b-$m")
				if [ "$c" = 1 ]; then
					for p in ${pp[$b-$m]}; do
						taskset -a -p -c "0-$pin_cpu" "$p" >/dev/null
					done
				fi
				echo "$line round=$r" >>"$results"
			done
		done
	done
done
for k in "${!pid[@]}"; do
	stop "${pid[$k]}"
done
daemons=()

# counting runs: the simulator logs every call
counts=$tmp/counts.txt
: >"$counts"
c=${conns_list##* }
for b in build base; do
	for m in privsep; do
		[ $b = build ] && dir=$build || dir=$base
		start "$b-$m-count" "$dir" "$m" ZEUS_SIM_LOG="$tmp/$b-$m.simlog"
		before=$(grep -c ' nvmlDeviceGetFieldValues ' "$tmp/$b-$m.simlog" || true)
		line=$("$lg" -u "$tmp/$b-$m-count.sock" -c "$c" -n "$count" \
		    -w 0 -p "$path" -l "$b-$m")
		after=$(grep -c ' nvmlDeviceGetFieldValues ' "$tmp/$b-$m.simlog" || true)
		merged=$("$lg" -u "$tmp/$b-$m-count.sock" -b -p /metrics |
		    awk '/^zeusd_device_commands_merged_total\{device="gpu"/ { s += $2 }
		        END { print s + 0 }')
		echo "$line reads=$((after - before)) merged=$merged" >>"$counts"
		stop "$started"
		daemons=()
	done
done

python3 - "$results" "$counts" "$conns_list" <<'EOF'
import statistics
import sys

parse = lambda l: dict(kv.split("=", 1) for kv in l.split() if "=" in kv)
runs = [parse(l) for l in open(sys.argv[1])]
counts = [parse(l) for l in open(sys.argv[2])]
conns = sys.argv[3].split()

def med(label, c, key):
    v = [float(r[key]) for r in runs
         if r["label"] == label and r["conns"] == c and key in r]
    return statistics.median(v) if v else float("nan")

print()
print("| mode | conns | req/s merged / base | ratio | p50 µs | p99 µs "
      "| CPU µs/req |")
print("|---|---:|---:|---:|---:|---:|---:|")
for m in ("privsep",):
    for c in conns:
        a = lambda k: med(f"build-{m}", c, k)
        b = lambda k: med(f"base-{m}", c, k)
        ratio = a("rps") / b("rps") if b("rps") else float("nan")
        print(f"| {m} | {c} | {a('rps'):,.0f} / {b('rps'):,.0f} "
              f"| {ratio:.2f}x | {a('p50_us'):.0f} / {b('p50_us'):.0f} "
              f"| {a('p99_us'):.0f} / {b('p99_us'):.0f} "
              f"| {a('server_cpu_us_per_req'):.1f} / "
              f"{b('server_cpu_us_per_req'):.1f} |")
print()
print("| build | mode | requests | driver power reads | per request "
      "| merged reads |")
print("|---|---|---:|---:|---:|---:|")
for r in counts:
    b, m = r["label"].split("-")
    n = int(r["requests"])
    print(f"| {b} | {m} | {n:,} | {int(r['reads']):,} "
          f"| {int(r['reads']) / n:.2f} | {int(r['merged']):,} |")
bad = [r for r in runs + counts if int(r["non2xx"]) or
       int(r["transport_errors"])]
if bad:
    for r in bad:
        print(f"ERRORS: {r['label']} c={r['conns']}: non2xx={r['non2xx']} "
              f"transport_errors={r['transport_errors']}")
    sys.exit(1)
EOF
