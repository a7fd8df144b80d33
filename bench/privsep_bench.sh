#!/bin/bash
# bench/privsep_bench.sh - `make bench-privsep`: zeusd (two processes)
# against the build before, in one run. It compared with `zeusd
# --no-privsep` (issue 13) until that flag went (issue 43): zeusd is always
# split now, so the "prev" columns are the same figures of a zeusd built
# from an earlier commit (BENCH_PREV_REF, default HEAD~1: a release build
# in a git worktree under $TMPDIR, kept between runs in
# BENCH_PREV_BUILD, default /tmp/zeusd-bench-prev-<commit>), or of the
# binary BENCH_PREV_ZEUSD names. nginx is bench/run.sh's (make bench-http).
#
#   bench/privsep_bench.sh [BUILD_DIR]      (default: build-bench)
#
# Builds a release zeusd (like bench/run.sh), the load generator
# (bench/loadgen.c, `cc -O2`) and the SSE load generator (sse_load), and
# runs both modes on the NVML simulator with 8 GPUs and the 2 simulated RAPL
# packages, over UDS:
#   - GET /gpu/get_power and GET /cpu/get_cumulative_energy: p50/p99 at 1
#     connection (pinned to one core with the load generator, as run.sh
#     does, and unpinned), requests/s at 50 connections, and the server's
#     CPU per request;
#   - streams scenario (a) of stream_bench.sh: 1,000 streams x 8 GPUs x
#     20 Hz, the daemon's CPU (% of one core) over the window;
#   - idleness: wake-ups (voluntary + nonvoluntary context switches of every
#     thread) and CPU over BENCH_IDLE_S seconds without clients, once after
#     startup and once after the request load;
#   - memory: RSS summed, PSS summed (smaps_rollup) and, where pagemap shows
#     page frames (root), the distinct physical pages of the processes
#     together (pages the processes share counted once).
# Every figure of a daemon is the sum over its three processes: the device
# process (the pid started), the network process and the socket janitor
# (its two children). Every measurement runs BENCH_ROUNDS times, the modes
# interleaved and taking turns at going first, and the median is reported:
# the machine is shared, so the figures that mean something are the ratios
# measured side by side. Ends with a markdown table and one verdict per
# target of issue 13 (docs/performance.md, "Privilege separation").
#
# Environment: BENCH_ROUNDS (3), BENCH_DURATION seconds per request run
# (1.5), BENCH_IDLE_S (10), BENCH_STREAM_DURATION seconds per stream window
# (10), BENCH_STREAM_WARMUP (3), BENCH_STREAM_CONNS (1000), BENCH_KEEP=1
# keeps the temporary directory (raw results, logs).
# shellcheck disable=SC2086 # pp[MODE] and ps_ are lists of pids, split on purpose
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${BENCH_BUILD:-$root/build-bench}}
rounds=${BENCH_ROUNDS:-3}
dur=${BENCH_DURATION:-1.5}
idle_s=${BENCH_IDLE_S:-10}
sdur=${BENCH_STREAM_DURATION:-10}
swarm=${BENCH_STREAM_WARMUP:-3}
sconns=${BENCH_STREAM_CONNS:-1000}
warm=0.2
gpus=8
hz=20
modes="privsep prev"

tmp=$(mktemp -d /tmp/zeusd-privsep-bench.XXXXXX)
daemons=()
cleanup() {
	local p
	for p in "${daemons[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${daemons[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		echo "kept $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT

# --- build -------------------------------------------------------------------
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" "$root" -Dtests=false --buildtype=release >/dev/null
fi
# the bench programs (sse_load) are built only with -Dbench=true
if ! grep -q "sse_load" "$build/build.ninja" 2>/dev/null; then
	meson configure "$build" -Dbench=true >/dev/null
fi
ninja -C "$build" zeusd libnvml-sim.so sse_load >/dev/null
zeusd=$build/zeusd
# the build before: a binary given, or one built from BENCH_PREV_REF
prev_ref=${BENCH_PREV_REF:-HEAD~1}
if [ -n "${BENCH_PREV_ZEUSD:-}" ]; then
	prev_zeusd=$BENCH_PREV_ZEUSD
	export BENCH_PREV_LABEL=$BENCH_PREV_ZEUSD
else
	prev_commit=$(git -C "$root" rev-parse --short "$prev_ref")
	prev=${BENCH_PREV_BUILD:-/tmp/zeusd-bench-prev-$prev_commit}
	if [ ! -x "$prev/build/zeusd" ]; then
		rm -rf "$prev"
		git -C "$root" worktree add --detach "$prev" "$prev_commit" \
		    >/dev/null 2>&1
		meson setup "$prev/build" "$prev" -Dtests=false \
		    --buildtype=release >/dev/null
		ninja -C "$prev/build" zeusd libnvml-sim.so >/dev/null
	fi
	prev_zeusd=$prev/build/zeusd
	export BENCH_PREV_LABEL="$prev_ref = $prev_commit"
fi
lg=$tmp/loadgen
cc -O2 -std=c17 -D_GNU_SOURCE -Wall -Wextra -o "$lg" "$root/bench/loadgen.c"
need=$((sconns + 64))
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt "$need" ]; then
	echo "bench: hard RLIMIT_NOFILE $(ulimit -Hn) < $need;" \
	    "lower BENCH_STREAM_CONNS or raise the limit" >&2
	exit 1
fi
ulimit -Sn "$(ulimit -Hn)"

# --- helpers -------------------------------------------------------------------
# start_zeusd MODE NAME ARGS...: starts zeusd in the background (this
# shell's child, so cleanup can wait for it); the pid is in $started.
start_zeusd() {
	local mode=$1 name=$2 bin=$zeusd
	shift 2
	[ "$mode" = prev ] && bin=$prev_zeusd
	ZEUS_SIM_GPUS=$gpus ZEUSD_LOG=warn ZEUSD_MAX_CONNS_PER_PEER=0 \
	    "$bin" serve --simulate "$@" >"$tmp/$name.log" 2>&1 &
	started=$!
	daemons+=("$started")
}

# stop_zeusd PID NAME: SIGTERM, and the exit status must be 0.
stop_zeusd() {
	local rc=0
	kill "$1"
	wait "$1" 2>/dev/null || rc=$?
	if [ "$rc" != 0 ]; then
		echo "bench: $2 exited $rc:" >&2
		cat "$tmp/$2.log" >&2
		exit 1
	fi
}

# wait_ready SOCKET PID: until GET /time answers (10 s at most).
wait_ready() {
	for _ in $(seq 100); do
		if "$lg" -u "$1" -b -p /time >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	echo "bench: zeusd did not come up on $1" >&2
	exit 1
}

# procs MODE PID: the daemon's processes, the pid and its two children,
# the network process and the socket janitor.
procs() {
	local kids
	kids=$(cat /proc/"$2"/task/*/children 2>/dev/null | xargs)
	if [ -z "$kids" ] || [ "$(echo "$kids" | wc -w)" != 2 ]; then
		echo "bench: zeusd $2 ($1) has children '$kids', not the" \
		    "network process and the janitor" >&2
		exit 1
	fi
	echo "$2 $kids"
}

# The figures below are sums over the processes given.
cpu_ticks() {	# utime+stime; fields counted after the last ')'
	local p
	for p in "$@"; do sed 's/.*) //' "/proc/$p/stat"; done |
	    awk '{ s += $12 + $13 } END { printf "%.0f\n", s }'
}
sched_ns() {	# time on CPU, all threads (finer than ticks)
	local p
	for p in "$@"; do cat /proc/"$p"/task/*/schedstat; done |
	    awk '{ s += $1 } END { printf "%.0f\n", s }'
}
wake_snap() {	# "TID SWITCHES" per thread, voluntary or not
	local p t
	for p in "$@"; do
		for t in /proc/"$p"/task/*; do
			awk -v t="${t##*/}" '/^(non)?voluntary_ctxt_switches/ {
			    s += $2 } END { print t, s }' "$t/status"
		done
	done
}
# wake_delta BEFORE AFTER: "SWITCHES THREADS", the switches between the two
# snapshots and the threads they came from (a thread gone or new counts
# from 0).
wake_delta() {
	awk 'NR == FNR { b[$1] = $2; next }
	    $2 > b[$1] { s += $2 - b[$1]; n++ }
	    END { printf "%d %d\n", s, n }' "$1" "$2"
}
threads() {
	local p
	for p in "$@"; do awk '/^Threads:/ { print $2 }' "/proc/$p/status"; done |
	    awk '{ s += $1 } END { printf "%.0f\n", s }'
}
rss_kib() {
	local p
	for p in "$@"; do awk '/^VmRSS:/ { print $2 }' "/proc/$p/status"; done |
	    awk '{ s += $1 } END { printf "%.0f\n", s }'
}
pss_kib() {
	local p
	for p in "$@"; do awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup"; done |
	    awk '{ s += $1 } END { printf "%.0f\n", s }'
}
# Distinct physical pages mapped by any of the processes, in KiB: the
# memory they hold together, a page they share (the binary, libraries,
# copy-on-write pages from before the fork) counted once. Needs page
# frame numbers in /proc/PID/pagemap (CAP_SYS_ADMIN); "-" without them.
union_kib() {
	python3 - "$@" <<'EOF'
import struct, sys
frames, present = set(), 0
for pid in sys.argv[1:]:
    with open(f"/proc/{pid}/maps") as maps, \
         open(f"/proc/{pid}/pagemap", "rb") as pm:
        for line in maps:
            if line.rstrip().endswith("[vsyscall]"):
                continue
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            pm.seek(lo // 4096 * 8)
            for (e,) in struct.iter_unpack("<Q", pm.read((hi - lo) // 4096 * 8)):
                if e >> 63:
                    present += 1
                    frames.add(e & ((1 << 55) - 1))
print("-" if present and frames == {0} else len(frames) * 4)
EOF
}

# mem MODE KEY PIDS...: memory facts.
mem() {
	local mode=$1 key=$2
	shift 2
	{
		echo "$mode ${key}_rss_kib=$(rss_kib "$@")"
		echo "$mode ${key}_pss_kib=$(pss_kib "$@")"
		echo "$mode ${key}_union_kib=$(union_kib "$@")"
	} >>"$facts"
}

# idle_window KEY: both daemons over idle_s seconds, in the same window.
idle_window() {
	local m k=$1 w
	declare -A t0 n0
	for m in $modes; do
		t0[$m]=$(cpu_ticks ${pp[$m]})
		n0[$m]=$(sched_ns ${pp[$m]})
		wake_snap ${pp[$m]} >"$tmp/wake0.$m"
	done
	echo "bench: $idle_s s of idleness ($k)" >&2
	sleep "$idle_s"
	for m in $modes; do
		wake_snap ${pp[$m]} >"$tmp/wake1.$m"
		read -r -a w < <(wake_delta "$tmp/wake0.$m" "$tmp/wake1.$m")
		{
			echo "$m ${k}_ticks_ms=$(( ($(cpu_ticks ${pp[$m]}) - t0[$m]) * 1000 / clk ))"
			echo "$m ${k}_sched_us=$(( ($(sched_ns ${pp[$m]}) - n0[$m]) / 1000 ))"
			echo "$m ${k}_wakeups=${w[0]}"
			echo "$m ${k}_woken_threads=${w[1]}"
		} >>"$facts"
	done
}

clk=$(getconf CLK_TCK)
ncpu=$(nproc)
pin_cpu=$(( ncpu - 1 ))
all_cpus=0-$pin_cpu
results=$tmp/results.txt
streams=$tmp/streams.txt
facts=$tmp/facts.txt
: >"$results"
: >"$streams"
: >"$facts"

# --- the two daemons for requests and idleness ------------------------------------
declare -A pid pp sock
for m in $modes; do
	sock[$m]=$tmp/$m.sock
	start_zeusd "$m" "$m" --socket-path "${sock[$m]}"
	pid[$m]=$started
done
for m in $modes; do
	wait_ready "${sock[$m]}" "${pid[$m]}"
	pp[$m]=$(procs "$m" "${pid[$m]}")
	echo "$m procs=${pp[$m]// /,} threads=$(threads ${pp[$m]})" >>"$facts"
done

sleep 1
for m in $modes; do
	mem "$m" idle ${pp[$m]}
done
idle_window idle

# --- requests ------------------------------------------------------------------------
path_power=/gpu/get_power
path_energy='/cpu/get_cumulative_energy?cpu=true&dram=true'

# run MODE CONNS PATHNAME [unpinned]: one loadgen run, one line of results.
# One-connection runs put the daemon (all threads of all its processes) and
# the load generator on one core unless "unpinned" (run.sh explains why).
run() {
	local m=$1 conns=$2 name=$3 p pin=() line path P=()
	[ "$name" = power ] && path=$path_power || path=$path_energy
	for p in ${pp[$m]}; do P+=(-P "$p"); done
	if [ "$conns" = 1 ] && [ "${4:-}" != unpinned ]; then
		for p in ${pp[$m]}; do
			taskset -a -p -c "$pin_cpu" "$p" >/dev/null
		done
		pin=(taskset -c "$pin_cpu")
	fi
	line=$("${pin[@]}" "$lg" -u "${sock[$m]}" -c "$conns" -d "$dur" \
	    -w "$warm" -p "$path" "${P[@]}" -l "$m")
	if [ ${#pin[@]} -gt 0 ]; then
		for p in ${pp[$m]}; do
			taskset -a -p -c "$all_cpus" "$p" >/dev/null
		done
	fi
	echo "$line endpoint=$name pinned=${4:-pinned} round=$r" >>"$results"
}

# order R: the modes, the first one changing every round.
order() {
	if [ $(( $1 % 2 )) = 1 ]; then echo "privsep prev"; else echo "prev privsep"; fi
}

for r in $(seq "$rounds"); do
	echo "bench: requests, round $r of $rounds" >&2
	for c in 1 50; do
		for e in power energy; do
			for m in $(order "$r"); do
				run "$m" "$c" "$e"
			done
		done
	done
	for e in power energy; do
		for m in $(order "$r"); do
			run "$m" 1 "$e" unpinned
		done
	done
done
for m in $modes; do
	mem "$m" load ${pp[$m]}
done
idle_window idle_after
for m in $modes; do
	stop_zeusd "${pid[$m]}" "$m"
done

# --- streams: scenario (a) of stream_bench.sh ------------------------------------------
# A fresh daemon per run, as stream_bench.sh does.
for r in $(seq "$rounds"); do
	echo "bench: streams, round $r of $rounds" >&2
	for m in $(order "$r"); do
		s=$tmp/$m-streams.sock
		start_zeusd "$m" "$m-streams" --socket-path "$s" \
		    --gpu-power-poll-hz "$hz"
		d=$started
		wait_ready "$s" "$d"
		ps_=$(procs "$m" "$d")
		P=()
		for p in $ps_; do P+=(--pid "$p"); done
		"$build/sse_load" --socket "$s" --path /gpu/stream_power \
		    --conns "$sconns" --devices "$gpus" --hz "$hz" \
		    --duration "$sdur" --warmup "$swarm" "${P[@]}" \
		    >"$tmp/sse.out" 2>"$tmp/sse.err" &
		sl=$!
		# memory in the middle of the window, the streams open
		for _ in $(seq 1200); do
			grep -q 'streams up' "$tmp/sse.err" && break
			kill -0 "$sl" 2>/dev/null || break
			sleep 0.1
		done
		sleep "$(awk -v w="$swarm" -v d="$sdur" 'BEGIN { print w + d / 2 }')"
		mem "$m" streams_r$r $ps_
		if ! wait "$sl"; then
			cat "$tmp/sse.err" "$tmp/$m-streams.log" >&2
			exit 1
		fi
		echo "label=$m round=$r $(cat "$tmp/sse.out")" >>"$streams"
		stop_zeusd "$d" "$m-streams"
	done
done

# --- report ----------------------------------------------------------------------------
python3 - "$results" "$streams" "$facts" "$rounds" "$dur" "$sdur" "$sconns" \
    "$idle_s" <<'EOF'
import os
import statistics
import sys

results, streams, facts = sys.argv[1:4]
rounds, dur, sdur, sconns, idle_s = sys.argv[4:9]
parse = lambda line: dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
runs = [parse(l) for l in open(results)]
sruns = [parse(l) for l in open(streams)]
fact = {"privsep": {}, "prev": {}}
for line in open(facts):
    mode, rest = line.split(" ", 1)
    fact[mode].update(parse(rest))

def vals(rs, mode, key, **sel):
    return [float(r[key]) for r in rs if r["label"] == mode and key in r
            and all(r.get(k) == str(v) for k, v in sel.items())]

def med(rs, mode, key, **sel):
    v = vals(rs, mode, key, **sel)
    return statistics.median(v) if v else float("nan")

def per_round(rs, key, **sel):
    """this build / the build before, per round: the spread the noise leaves."""
    out = []
    for r in sorted({int(x["round"]) for x in rs}):
        a = vals(rs, "privsep", key, round=r, **sel)
        b = vals(rs, "prev", key, round=r, **sel)
        if a and b and b[0]:
            out.append(f"{a[0] / b[0]:.2f}")
    return ", ".join(out)

rows = []
def row(name, p, s, fmt, rounds_s="", ratio=True):
    r = f"{p / s:.2f}x" if ratio and s else "-"
    rows.append(f"| {name} | {p:{fmt}} | {s:{fmt}} | {r} | {rounds_s} |")
    return p / s if s else float("nan")

paths = {"power": "GET /gpu/get_power",
         "energy": "GET /cpu/get_cumulative_energy"}
ratios = {}
for e in ("power", "energy"):
    for pin in ("pinned", "unpinned"):
        for k in ("p50_us", "p99_us"):
            sel = dict(endpoint=e, conns=1, pinned=pin)
            ratios[e, pin, k] = row(
                f"{paths[e]}, 1 conn, {pin}: {k[:3]} µs",
                med(runs, "privsep", k, **sel), med(runs, "prev", k, **sel),
                ",.0f", per_round(runs, k, **sel))
    sel = dict(endpoint=e, conns=1, pinned="pinned")
    row(f"{paths[e]}, 1 conn, pinned: CPU µs/req",
        med(runs, "privsep", "server_cpu_us_per_req", **sel),
        med(runs, "prev", "server_cpu_us_per_req", **sel), ",.1f",
        per_round(runs, "server_cpu_us_per_req", **sel))
    sel = dict(endpoint=e, conns=50)
    ratios[e, "rps"] = row(f"{paths[e]}, 50 conns: req/s",
        med(runs, "privsep", "rps", **sel), med(runs, "prev", "rps", **sel),
        ",.0f", per_round(runs, "rps", **sel))
    row(f"{paths[e]}, 50 conns: CPU µs/req",
        med(runs, "privsep", "server_cpu_us_per_req", **sel),
        med(runs, "prev", "server_cpu_us_per_req", **sel), ",.1f",
        per_round(runs, "server_cpu_us_per_req", **sel))

sn = f"streams (a), {int(sconns):,} x 8 GPUs x 20 Hz"
ratios["streams"] = row(f"{sn}: CPU % of one core",
    med(sruns, "privsep", "cpu_pct"), med(sruns, "prev", "cpu_pct"), ".1f",
    per_round(sruns, "cpu_pct"))
row(f"{sn}: events delivered", med(sruns, "privsep", "delivered"),
    med(sruns, "prev", "delivered"), ".4f", per_round(sruns, "delivered"))
row(f"{sn}: gap p99 ms", med(sruns, "privsep", "gap_p99_ms"),
    med(sruns, "prev", "gap_p99_ms"), ".1f", per_round(sruns, "gap_p99_ms"))
drops = {m: sum(int(r["dropped"]) + int(r["bad_status"]) for r in sruns
                if r["label"] == m) for m in fact}

F = lambda m, k: fact[m].get(k, "-")
ms = lambda v: f"{int(v) / 1000:.1f}"
for key, when in (("idle", "after startup"), ("idle_after", "after load")):
    wk = {m: f"{F(m, key + '_wakeups')} ({F(m, key + '_woken_threads')})"
          for m in fact}
    rows.append(f"| idle {idle_s} s {when}: context switches (threads "
                f"that woke) | {wk['privsep']} | {wk['prev']} | - | |")
    cpu = {m: f"{F(m, key + '_ticks_ms')} / {ms(F(m, key + '_sched_us'))}"
           for m in fact}
    rows.append(f"| idle {idle_s} s {when}: CPU ms (ticks / scheduler) "
                f"| {cpu['privsep']} | {cpu['prev']} | - | |")

mib = lambda v: "-" if v in ("-", "nan") else f"{int(float(v)) / 1024:.1f}"
def stream_mem(m, what):
    v = [F(m, f"streams_r{r}_{what}_kib") for r in range(1, int(rounds) + 1)]
    v = [float(x) for x in v if x != "-"]
    return str(statistics.median(v)) if v else "-"
for m in fact:
    for what in ("rss", "pss", "union"):
        fact[m][f"streams_{what}_kib"] = stream_mem(m, what)
for key, when in (("idle", "idle"), ("load", "after request load"),
                  ("streams", f"{int(sconns):,} streams open")):
    for what, name in (("rss", "RSS summed"), ("pss", "PSS summed"),
                       ("union", "distinct pages")):
        p, s = F("privsep", f"{key}_{what}_kib"), F("prev", f"{key}_{what}_kib")
        r = (f"{float(p) / float(s):.2f}x" if "-" not in (p, s) else "-")
        rows.append(f"| memory {when}: {name}, MiB | {mib(p)} | {mib(s)} "
                    f"| {r} | |")
rows.append(f"| processes (threads) | {F('privsep', 'procs').count(',') + 1} "
            f"({F('privsep', 'threads')}) | {F('prev', 'procs').count(',') + 1} "
            f"({F('prev', 'threads')}) "
            f"| - | |")

print()
print(f"### Privilege separation: zeusd vs the build before "
      f"({os.environ.get('BENCH_PREV_LABEL', 'prev')}), median of "
      f"{rounds} rounds")
print()
print(f"8 simulated GPUs, 2 simulated RAPL packages, UDS; request runs of "
      f"{dur} s, stream windows of {sdur} s. privsep = device process + "
      f"network process + socket janitor, summed.")
print()
print("| figure | this build | build before | ratio | per-round ratios |")
print("|---|---:|---:|---:|---|")
for r in rows:
    print(r)

def verdict(ok):
    return "met" if ok else "NOT MET"
print()
print("### Targets (issue 13)")
print()
for e in ("power", "energy"):
    x = ratios[e, "pinned", "p50_us"]
    u = ratios[e, "unpinned", "p50_us"]
    print(f"- {paths[e]} p50 at 1 conn <= 1.3x: {verdict(x <= 1.3)} "
          f"({x:.2f}x pinned; unpinned {u:.2f}x)")
for e in ("power", "energy"):
    x = ratios[e, "rps"]
    print(f"- {paths[e]} req/s at 50 conns >= 0.8x: {verdict(x >= 0.8)} "
          f"({x:.2f}x)")
x = ratios["streams"]
print(f"- streams (a) CPU <= 1.2x: {verdict(x <= 1.2)} ({x:.2f}x; "
      f"dropped or refused streams: privsep {drops['privsep']}, "
      f"build before {drops['prev']})")
w = {m: (int(F(m, "idle_wakeups")), int(F(m, "idle_after_wakeups")))
     for m in fact}
print(f"- idle, zero wake-ups: {verdict(max(w['privsep']) == 0)} (context "
      f"switches in {idle_s} s, privsep {w['privsep'][0]} after startup and "
      f"{w['privsep'][1]} after load; build before {w['prev'][0]} and "
      f"{w['prev'][1]})")
p_rss = int(F("privsep", "load_rss_kib")) / 1024
p_pss = int(F("privsep", "load_pss_kib")) / 1024
p_uni = F("privsep", "load_union_kib")
uni = f"{int(p_uni) / 1024:.1f} MiB distinct pages" if p_uni != "-" else \
    "distinct pages not readable"
print(f"- the processes together (device, network, janitor) <= 8 MiB "
      f"(after request load): RSS summed "
      f"{verdict(p_rss <= 8)} ({p_rss:.1f} MiB); PSS summed "
      f"{verdict(p_pss <= 8)} ({p_pss:.1f} MiB); {uni}; build before RSS "
      f"{int(F('prev', 'load_rss_kib')) / 1024:.1f} MiB")

bad = [r for r in runs if int(r["non2xx"]) or int(r["transport_errors"])]
if bad:
    print()
    for r in bad:
        print(f"ERRORS: {r['label']} c={r['conns']} {r['target']}: "
              f"non2xx={r['non2xx']} "
              f"transport_errors={r['transport_errors']}")
    sys.exit(1)
EOF
